"""Loading a PixivFlow config as PixivFlow would (issue 22; real-configs note §9): JSON as JSON,
YAML as YAML, unknown keys warned about with a hint (never refused), the legacy ``scheduler``
block, and the Pixiv credentials' ``${VAR}``, overrides and placeholder token."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import pytest
import yaml

from pixivflow.adapters.pixiv import build_source
from pixivflow.adapters.pixiv.secrets import SecretResolver
from pixivflow.cli import main
from pixivflow.config import load_config, parse_config, parse_text
from pixivflow.domain.errors import SourceConfigurationError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pixivflow_configs"
T0 = 1_790_000_000_000
REAL_TOKEN = "real-refresh-token-abcdefghijklmnop"


def production() -> dict:
    return json.loads((FIXTURES / "production.json").read_text(encoding="utf-8"))


# -- JSON is JSON ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ""])
def test_a_json_config_keeps_an_escaped_emoji_as_the_emoji(tmp_path, suffix):
    text = json.dumps(production())  # ensure_ascii: "📅" is written as "\ud83d\udcc5"
    assert "\\ud83d\\udcc5" in text
    path = tmp_path / f"config{suffix}"
    path.write_text(text, encoding="utf-8")
    note = load_config(str(path)).route("bot1-submit").fields["note"]
    assert note.startswith("📅 {{rankingDate}}")
    note.encode("utf-8")  # a lone surrogate would raise here, and in every multipart send


def test_yaml_would_have_split_the_emoji_into_lone_surrogates():
    """Why the JSON parser is used: PyYAML reads the same text differently."""
    text = json.dumps({"x": "📅"})
    assert json.loads(text)["x"] == "📅"
    assert yaml.safe_load(text)["x"] == "\ud83d\udcc5"


def test_a_yaml_config_is_parsed_as_yaml(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text("pixiv:\n  refreshToken: ${T}\ntargets:\n  - id: cats\n    tag: cat  # a YAML comment\n")
    assert load_config(str(path)).target("cats").tag == "cat"


def test_a_json_file_that_is_not_json_is_an_error_saying_so(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("pixiv:\n  refreshToken: x\n")
    with pytest.raises(Exception) as info:
        load_config(str(path))
    assert str(info.value).startswith("invalid configuration: not JSON")


# -- unknown keys: a warning with a hint, never a refusal ---------------------------------------------


def test_unknown_keys_warn_with_a_did_you_mean_hint_and_change_nothing():
    data = {"pixiv": {"refreshToken": "${T}", "userAgen": "x"}, "schedule": [],
            "storage": {"databasPath": "./x.db"},
            "targets": [{"id": "cats", "tag": "cat", "excludeAi": True, "topicDiscovery": {"includeR-18": True}}]}
    config = parse_config(data)
    assert config.warnings == (
        "schedule: unknown key; ignored (did you mean 'schedules'?)",
        "targets[0].excludeAi: unknown key; ignored (did you mean 'excludeAI'?)",
        "targets[0].topicDiscovery.includeR-18: unknown key; ignored (did you mean 'includeR18'?)",
        "pixiv.userAgen: unknown key; ignored (did you mean 'userAgent'?)",
        "storage.databasPath: unknown key; ignored (did you mean 'databasePath'?)",
    )
    target = config.target("cats")
    assert target.excludeAI is False and target.topicDiscovery.includeR18 is False


def test_a_key_like_nothing_known_warns_without_a_hint():
    config = parse_config({"pixiv": {"refreshToken": "${T}"}, "targets": [{"id": "a", "tag": "x", "zzz": 1}]})
    assert config.warnings == ("targets[0].zzz: unknown key; ignored",)


def test_underscore_keys_are_comments_and_warn_about_nothing():
    config = parse_config({"_comment": "x", "pixiv": {"refreshToken": "${T}", "_note": 1},
                           "targets": [{"id": "a", "tag": "x", "_why": "y"}]})
    assert config.warnings == ()


# -- the legacy scheduler block ----------------------------------------------------------------------


def test_an_enabled_legacy_scheduler_without_schedules_is_plan_default():
    config = parse_config({"pixiv": {"refreshToken": "${T}"}, "targets": [{"id": "a", "tag": "x"}, {"tag": "y"}],
                           "scheduler": {"enabled": True, "cron": "0 8 * * *"}})
    (plan,) = config.schedules
    assert (plan.id, plan.name, plan.enabled, plan.cron, plan.timezone) == (
        "default", "Default", True, "0 8 * * *", "Asia/Shanghai")
    assert [t.label for t in config.targets_for(plan)] == ["a", "y"]
    assert config.warnings == ("scheduler: the legacy block is plan 'default' (enabled); write it under schedules instead",)


def test_a_legacy_scheduler_beside_schedules_even_empty_is_ignored_with_a_warning():
    config = parse_config({"pixiv": {"refreshToken": "${T}"}, "schedules": [],
                           "scheduler": {"enabled": True, "cron": "0 8 * * *"}})
    assert config.schedules == []
    assert config.warnings == ("scheduler: the legacy block is ignored because schedules is present",)


# -- Pixiv credentials: ${VAR}, PixivFlow's overrides, the placeholder token -----------------------------


class OAuth:
    """A loopback-free fake of the token endpoint (httpx.MockTransport): records each form."""

    def __init__(self) -> None:
        self.forms: list[dict[str, str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            self.forms.append({k: v[0] for k, v in parse_qs(request.content.decode()).items()})
            return httpx.Response(200, json={"access_token": "at", "expires_in": 3600, "refresh_token": self.forms[-1]["refresh_token"]})
        return httpx.Response(200, json={"illust": {"id": 5, "title": "t", "type": "illust", "page_count": 1,
                                                    "tags": [], "user": {"id": 1, "name": "u"},
                                                    "create_date": "2026-11-29T10:00:00+09:00",
                                                    "meta_single_page": {"original_image_url": "https://i.pximg.net/a.png"},
                                                    "image_urls": {}, "x_restrict": 0}})


class FakeSsm:
    def __init__(self, params: dict[str, str]) -> None:
        self.params = params
        self.asked: list[str] = []

    def get_parameter(self, Name, WithDecryption):  # noqa: N803 - boto3's spelling
        self.asked.append(Name)
        if Name not in self.params:
            error = Exception("not found")
            error.response = {"Error": {"Code": "ParameterNotFound"}}
            raise error
        return {"Parameter": {"Value": self.params[Name]}}


def grant(pixiv: dict, env: dict[str, str], ssm: dict[str, str] | None = None) -> dict[str, str]:
    oauth = OAuth()
    config = parse_config({"pixiv": pixiv, "network": {"requestPacingMs": 0}, "download": {"requestDelay": 0}})
    resolver = SecretResolver("/pf" if ssm is not None else "", env=env, ssm=FakeSsm(ssm or {}))
    source = build_source(config, now_ms=lambda: T0, uniform=lambda: 0.0, sleep=lambda s: None, resolver=resolver,
                          env=env, transport=httpx.MockTransport(oauth))
    source.get_work("illustration", "5")
    return oauth.forms[0]


def test_client_id_and_secret_references_are_resolved_never_sent_literally():
    form = grant({"clientId": "${PIXIV_CLIENT_ID_REF}", "clientSecret": "${CS}", "refreshToken": "${RT}"},
                 env={"PIXIV_CLIENT_ID_REF": "cid-from-env", "RT": REAL_TOKEN}, ssm={"/pf/CS": "secret-from-ssm"})
    assert (form["client_id"], form["client_secret"], form["refresh_token"]) == (
        "cid-from-env", "secret-from-ssm", REAL_TOKEN)


def test_pixivflows_environment_overrides_win_over_the_config():
    form = grant({"clientId": "${PIXIV_CLIENT_ID}", "clientSecret": "literal", "refreshToken": "${RT}"},
                 env={"PIXIV_CLIENT_ID": "override-id", "PIXIV_CLIENT_SECRET": "override-secret",
                      "PIXIV_REFRESH_TOKEN": REAL_TOKEN, "RT": "other-token-0123456789"})
    assert (form["client_id"], form["client_secret"], form["refresh_token"]) == (
        "override-id", "override-secret", REAL_TOKEN)


@pytest.mark.parametrize("placeholder", ["YOUR_REFRESH_TOKEN", "", "short"])
def test_a_placeholder_refresh_token_gives_way_to_pixiv_refresh_token(placeholder):
    form = grant({"refreshToken": placeholder}, env={"PIXIV_REFRESH_TOKEN": REAL_TOKEN})
    assert form["refresh_token"] == REAL_TOKEN


@pytest.mark.parametrize("placeholder", ["YOUR_REFRESH_TOKEN", "", "short"])
def test_a_placeholder_refresh_token_gives_way_to_the_token_stored_in_ssm(placeholder):
    form = grant({"refreshToken": placeholder}, env={}, ssm={"/pf/PIXIV_REFRESH_TOKEN": REAL_TOKEN})
    assert form["refresh_token"] == REAL_TOKEN


def test_a_placeholder_with_no_token_anywhere_is_a_configuration_error_naming_the_key():
    with pytest.raises(SourceConfigurationError) as info:
        grant({"refreshToken": "YOUR_REFRESH_TOKEN"}, env={}, ssm={})
    assert str(info.value) == ("configuration_error: pixiv.refreshToken: a placeholder, and neither the environment "
                               "variable PIXIV_REFRESH_TOKEN nor /pf/PIXIV_REFRESH_TOKEN holds a token")


def test_config_check_warns_when_it_cannot_tell_and_names_no_value(tmp_path, monkeypatch, capsys):
    for name in ("PIXIV_REFRESH_TOKEN", "PIXIV_CLIENT_ID", "PIXIV_CLIENT_SECRET", "PIXIV_DEVICE_TOKEN",
                 "ROUTE_SECRETS_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIXIV_CLIENT_SECRET", "set-here-0123456789")
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"pixiv": {"clientId": "${PIXIV_CLIENT_ID}", "clientSecret": "${PIXIV_CLIENT_SECRET}",
                                          "deviceToken": "${PIXIV_DEVICE_TOKEN}", "refreshToken": "YOUR_REFRESH_TOKEN"},
                                "targets": [{"id": "a", "tag": "x"}]}))
    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["warnings"] == [
        "pixiv.clientId: ${PIXIV_CLIENT_ID} not set here; read from SSM below RouteSecretsPath at the first request "
        "(not checked)",
        "pixiv.refreshToken: a placeholder; PIXIV_REFRESH_TOKEN is not set here, so the token must be in SSM below "
        "RouteSecretsPath (not checked); without it every cell ends configuration_error",
        "pixiv.deviceToken: ${PIXIV_DEVICE_TOKEN} not set here; read from SSM below RouteSecretsPath at the first "
        "request (not checked)",
    ]
    assert "set-here" not in out.out + out.err


def test_parse_text_without_a_syntax_takes_json_first_then_yaml():
    assert parse_text('{"pixiv": {"refreshToken": "${T}"}, "targets": [{"id": "a", "tag": "\\ud83d\\udcc5"}]}'
                      ).target("a").tag == "📅"
    assert parse_text("pixiv: {refreshToken: '${T}'}\ntargets: [{id: a, tag: x}]\n").target("a").tag == "x"
