"""The five configs PixivFlow's TelePost deployment publishes load unchanged (issue 22; the
real-configs note §9, §11). The copies under ``tests/fixtures/pixivflow_configs/`` are verbatim.

``pixivflow config check`` of each, with its ``${VAR}``s set, is ok and lists exactly the
warnings below: the one grouped warning naming the keys that mean nothing on Lambda, the legacy
``scheduler`` block, PixivFlow's deprecated route keys, and what the shadow config (no routes)
will and will not do."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pixivflow.cli import main
from pixivflow.config import load_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pixivflow_configs"
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
WHY = ("files are S3 objects kept storage.cacheRetentionDays by the bucket's lifecycle rules, the process and its trigger server are Lambda "
       "invocations behind EventBridge Scheduler and API Gateway, concurrency is the execute queue's, a cell's "
       "retries are the ledger's, the log level is the stack's LogLevel parameter")


def meaningless(*keys: str) -> str:
    return f"{', '.join(keys)}: PixivFlow keys with no meaning on Lambda; accepted and ignored ({WHY})"


LEGACY_IGNORED = "scheduler: the legacy block is ignored because schedules is present"
RUNTIME_KEYS = ("schedulerRuntime.catchUpMissedRuns", "schedulerRuntime.watchConfig", "schedulerRuntime.reloadDebounceMs",
                "schedulerRuntime.queueLimit")
DOWNLOAD_KEYS = ("download.concurrency", "download.dynamicConcurrency", "download.minConcurrency", "download.maxRetries",
                 "download.retryDelay", "download.timeout")
STORAGE_ALL = ("storage.databasePath", "storage.downloadDirectory", "storage.illustrationDirectory",
               "storage.novelDirectory")


def deprecated(route: str, *keys: str) -> list[str]:
    """PixivFlow's route keys the outbox's own budget replaces (h-routes' warning, issue 23)."""
    return [f"delivery.targets.{route}.{k}: deprecated by PixivFlow; accepted and ignored (the outbox's own budget "
            "applies: 12 attempts, backoff from outboxRetryBaseMs 30000 ms up to outboxRetryMaxMs 21600000 ms)"
            for k in keys]


def shadow_notify(i: int) -> str:
    return (f"targets[{i}].noMatchPolicy.notify: the target's primary route has no notificationUrl; no no-match "
            "notice is sent")


def dry_run(i: int) -> str:
    return (f"targets[{i}].delivery: storageMode cache with no delivery route: DRY RUN (selects and stores each work "
            "and records what it would deliver; posts nothing, sends no notification)")


EXPECTED = {
    "production.json": [
        LEGACY_IGNORED,
        *deprecated("bot1-submit", "maxAttempts", "retryDelayMs"), *deprecated("bot2-submit", "maxAttempts", "retryDelayMs"),
        meaningless("logLevel",
                    "initialDelay", *RUNTIME_KEYS, "schedulerRuntime.exitWhenIdle", "schedulerRuntime.idleGraceMs",
                    "schedulerRuntime.maxLifetimeMs",
                    "schedulerRuntime.trigger.port", "schedulerRuntime.trigger.host", *DOWNLOAD_KEYS,
                    "download.maxFallbackStages", "storage.databasePath", "storage.downloadDirectory"),
    ],
    "fly-two-bots.example.json": [
        LEGACY_IGNORED,
        *deprecated("telepost-bot1", "success", "maxAttempts", "retryDelayMs"),
        *deprecated("telepost-bot2", "success", "maxAttempts", "retryDelayMs"),
        meaningless("logLevel", "initialDelay",
                    *RUNTIME_KEYS, "schedulerRuntime.trigger.enabled", "schedulerRuntime.trigger.port",
                    "schedulerRuntime.trigger.host", *DOWNLOAD_KEYS, *STORAGE_ALL, "storage.cacheMaxSizeMB"),
    ],
    "standalone.example.json": [
        "scheduler: the legacy block is plan 'default' (disabled: it never fires unless PIXIV_SCHEDULER_ENABLED=true); "
        "write it under schedules instead",
        meaningless("logLevel", "initialDelay", *DOWNLOAD_KEYS, *STORAGE_ALL),
    ],
    "pixivflow.shadow.json": [
        LEGACY_IGNORED,
        *(shadow_notify(i) for i in range(4)), *(dry_run(i) for i in range(4)),
        meaningless("logLevel", "initialDelay",
                    *RUNTIME_KEYS, *DOWNLOAD_KEYS, *STORAGE_ALL, "storage.cacheMaxSizeMB"),
    ],
    "pixivflow.production.json": [
        LEGACY_IGNORED,
        *deprecated("bot1-review", "maxAttempts", "retryDelayMs"), *deprecated("bot2-review", "maxAttempts", "retryDelayMs"),
        meaningless("logLevel", "initialDelay", *RUNTIME_KEYS,
                    *DOWNLOAD_KEYS, *STORAGE_ALL),
    ],
}
IDS = {
    "production.json": ["bot1-illust-botefuku", "bot1-novel-botefuku", "bot2-illust-marunomi", "bot2-novel-marunomi"],
    "fly-two-bots.example.json": ["bot1-illust-topic-a", "bot1-novel-topic-a", "bot2-illust-topic-b", "bot2-novel-topic-b"],
    "pixivflow.shadow.json": ["bot1-illust-botefuku", "bot1-novel-botefuku", "bot2-illust-marunomi", "bot2-novel-marunomi"],
    "pixivflow.production.json": ["bot1-illust-botefuku", "bot1-novel-botefuku", "bot2-illust-marunomi",
                                  "bot2-novel-marunomi"],
}


def set_references(monkeypatch, path: Path) -> None:
    """Every ``${VAR}`` the file names, set (a dummy, never a real secret); the placeholder-token
    configs also get PixivFlow's PIXIV_REFRESH_TOKEN, as their README asks."""
    monkeypatch.delenv("ROUTE_SECRETS_PATH", raising=False)
    for name in set(REFERENCE.findall(path.read_text(encoding="utf-8"))) | {"PIXIV_REFRESH_TOKEN"}:
        monkeypatch.setenv(name, f"value-of-{name.lower()}-0123456789")


def check(capsys, path: Path) -> tuple[int, dict, list[str]]:
    code = main(["config", "check", "--config", str(path), "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err.splitlines()


@pytest.mark.parametrize("name", [
    "production.json", "fly-two-bots.example.json", "standalone.example.json", "pixivflow.shadow.json",
    "pixivflow.production.json",
])
def test_config_check_of_each_published_config_is_ok_with_exactly_its_warnings(monkeypatch, capsys, name):
    path = FIXTURES / name
    set_references(monkeypatch, path)
    code, summary, err = check(capsys, path)
    assert summary["errors"] == [] and summary["ok"] is True and code == 0
    assert summary["warnings"] == EXPECTED[name]
    assert err == []  # with --json the document is the whole answer
    if name in IDS:
        assert summary["targets"] == IDS[name]


def test_standalone_id_less_targets_get_pixivflows_labels_and_derived_ids(monkeypatch, capsys):
    path = FIXTURES / "standalone.example.json"
    set_references(monkeypatch, path)
    code, summary, _ = check(capsys, path)
    assert code == 0
    ranking, novel = summary["targets"]
    assert re.fullmatch(r"t-[0-9a-f]{16}", ranking) and re.fullmatch(r"t-[0-9a-f]{16}", novel) and ranking != novel
    assert summary["labels"] == {ranking: "西瓜肚", novel: "西瓜肚"}  # filterTag, then tag (note §9 getTargetLabel)
    assert summary["schedules"] == ["default"]
    config = load_config(str(path))
    plan = config.schedule("default")
    assert (plan.enabled, plan.cron, plan.timezone, plan.name, plan.targetIds) == (
        False, "0 3 * * *", "Asia/Shanghai", "Default", None)
    # A plan without targetIds selects every target, id-less ones included.
    assert [t.id for t in config.targets_for(plan)] == [ranking, novel]
    assert [t.configured_id for t in config.targets] == ["", ""]


def test_a_derived_id_survives_reordering_and_edits_of_how_much_or_when(tmp_path):
    data = json.loads((FIXTURES / "standalone.example.json").read_text(encoding="utf-8"))
    first = load_config(str(_write(tmp_path / "a.json", data)))
    data["targets"].reverse()
    data["targets"][0]["limit"] = 9
    data["targets"].append({"type": "illustration", "tag": "cat"})
    second = load_config(str(_write(tmp_path / "b.json", data)))
    assert [t.id for t in second.targets][:2] == [t.id for t in reversed(first.targets)]
    assert second.targets[2].label == "cat" and second.targets[2].id not in {t.id for t in first.targets}


def test_two_id_less_targets_that_select_the_same_are_refused_naming_both(tmp_path, capsys):
    data = {"pixiv": {"refreshToken": "${T}"}, "targets": [{"tag": "cat", "limit": 1}, {"tag": "cat", "limit": 5}]}
    code, summary, _ = check(capsys, _write(tmp_path / "dup.json", data))
    assert code == 1
    assert summary["errors"] == ["targets[1]: selects what targets[0] selects (an id-less target's id is derived from "
                                 "type, mode, topic, tag, filterTag, rankingMode and the pinned ids); give one of them an id"]


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")  # json.dumps escapes non-ASCII: \\ud83d\\udcc5
    return path


@pytest.mark.parametrize("value, enabled", [("true", True), ("TRUE", True), ("True", True), ("false", False),
                                            ("yes", False), ("1", False), ("", False)])
def test_pixiv_scheduler_enabled_switches_the_legacy_plan_as_pixivflow_does(monkeypatch, value, enabled):
    """PixivFlow's PIXIV_SCHEDULER_ENABLED: enabled exactly when the value is ``true`` in any case;
    an empty value counts as unset (the config's own ``enabled: false`` stays)."""
    monkeypatch.setenv("PIXIV_SCHEDULER_ENABLED", value)
    plan = load_config(str(FIXTURES / "standalone.example.json")).schedule("default")
    assert (plan.enabled, plan.cron, plan.timezone) == (enabled, "0 3 * * *", "Asia/Shanghai")


def test_pixiv_scheduler_enabled_false_turns_an_enabled_legacy_block_off_and_blank_changes_nothing(monkeypatch, tmp_path):
    data = {"pixiv": {"refreshToken": "${T}"}, "scheduler": {"enabled": True, "cron": "0 9 * * *"},
            "targets": [{"id": "cats", "tag": "cat"}]}
    path = _write(tmp_path / "on.json", data)
    assert load_config(str(path)).schedule("default").enabled is True
    monkeypatch.setenv("PIXIV_SCHEDULER_ENABLED", "  ")  # blank: unset (PixivFlow would read it as false)
    assert load_config(str(path)).schedule("default").enabled is True
    monkeypatch.setenv("PIXIV_SCHEDULER_ENABLED", "false")
    assert load_config(str(path)).schedule("default").enabled is False


def test_pixiv_scheduler_enabled_without_a_scheduler_block_gives_pixivflows_default_plan(monkeypatch, tmp_path):
    path = _write(tmp_path / "bare.json", {"pixiv": {"refreshToken": "${T}"}, "targets": [{"id": "cats", "tag": "cat"}]})
    assert load_config(str(path)).schedules == []
    monkeypatch.setenv("PIXIV_SCHEDULER_ENABLED", "true")
    (plan,) = load_config(str(path)).schedules
    assert (plan.id, plan.enabled, plan.cron, plan.timezone, plan.targetIds) == ("default", True, "0 3 * * *",
                                                                                "Asia/Shanghai", None)


def test_pixiv_scheduler_enabled_changes_nothing_beside_schedules(monkeypatch, capsys):
    path = FIXTURES / "production.json"
    set_references(monkeypatch, path)
    before = [(s.id, s.enabled) for s in load_config(str(path)).schedules]
    monkeypatch.setenv("PIXIV_SCHEDULER_ENABLED", "true")
    assert [(s.id, s.enabled) for s in load_config(str(path)).schedules] == before
    code, summary, _ = check(capsys, path)
    assert code == 0 and LEGACY_IGNORED in summary["warnings"]


def test_config_check_says_the_switch_turned_the_legacy_plan_on(monkeypatch, capsys):
    path = FIXTURES / "standalone.example.json"
    set_references(monkeypatch, path)
    monkeypatch.setenv("PIXIV_SCHEDULER_ENABLED", "true")
    code, summary, _ = check(capsys, path)
    assert code == 0
    assert summary["warnings"][0] == ("scheduler: the legacy block is plan 'default' (enabled); write it under "
                                      "schedules instead")
