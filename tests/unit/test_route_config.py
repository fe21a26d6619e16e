"""PixivFlow's `delivery` block loads unchanged (issue 11; DESIGN §7, §12; pixivflow-delivery note §1, §4).

The example block is the note's §4, copied into tests/contract/pixivflow/example-delivery.json.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest
import yaml

from pixivflow.cli import main
from pixivflow.config import parse_config
from pixivflow.route_kinds.gateway_webhook import GatewayWebhookRoute
from pixivflow.route_kinds.http_multipart import HttpMultipartRoute
from pixivflow.route_kinds.json_webhook import WebhookRoute
from pixivflow.domain.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = json.loads((ROOT / "tests" / "contract" / "pixivflow" / "example-delivery.json").read_text())
DEMO = yaml.safe_load((ROOT / "events" / "demo" / "config.yaml").read_text())
SCHEDULE = {"id": "bot1-daily", "cron": "0 10 * * *", "timezone": "Asia/Shanghai", "targetIds": ["bot1-novel-botefuku"]}


def pixivflow_document() -> dict:
    """What an operator copies over: the note's delivery + targets blocks, a schedule, a pixiv block."""
    doc = copy.deepcopy(EXAMPLE)
    doc["schedules"] = [SCHEDULE]
    doc["pixiv"] = {"refreshToken": "${PIXIV_REFRESH_TOKEN}"}
    return doc


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return str(info.value)


class Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def config_log():
    handler = Capture()
    log = logging.getLogger("pixivflow.config")
    log.addHandler(handler)
    yield handler.records
    log.removeHandler(handler)


def test_the_note_example_block_with_a_schedule_passes_config_check_unchanged(tmp_path, capsys):
    path = tmp_path / "pixivflow.json"
    path.write_text(json.dumps(pixivflow_document(), ensure_ascii=False))
    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert {k: summary[k] for k in ("ok", "errors", "schedules", "targets", "routes")} == {
        "ok": True, "errors": [], "schedules": ["bot1-daily"], "targets": ["bot1-novel-botefuku"],
        "routes": ["bot1-submit", "qq-main"]}
    assert any("retryDelayMs" in w for w in summary["warnings"])
    warned = " ".join(summary["warnings"])
    assert "the outbox's own budget applies: 12 attempts" in warned and err == ""  # accepted, not acted on
    assert "richNovelPreview" not in warned  # TelePress previews are supported (issue 23)


def test_example_routes_parse_into_their_families():
    config = parse_config(pixivflow_document())
    submit, gateway = config.route("bot1-submit"), config.route("qq-main")
    assert isinstance(submit, HttpMultipartRoute) and isinstance(gateway, GatewayWebhookRoute)
    assert submit.url == "${TELEPOST_API_BASE_URL}/api/bot1/v1/submissions"  # expanded at send time only
    assert submit.headers == {"Authorization": "Bearer ${TELEPOST_BOT1_SUBMIT_TOKEN}"}
    assert (submit.maxAttempts, submit.timeoutMs, submit.arrayFormat, submit.autoIdempotencyKey) == (3, 30_000, "comma", True)
    assert submit.attempt_budget == 12  # PixivFlow's outbox owns the retries, whatever maxAttempts says (issue 23)
    assert (submit.fileField, submit.previewFileField) == ("files", "previews")
    assert (gateway.token, gateway.signingSecret, gateway.mediaTransport) == ("${QQ_GATEWAY_TOKEN}",
                                                                             "${QQ_GATEWAY_SIGNING_SECRET}", "reference")
    assert gateway.maxAttempts == gateway.attempt_budget == 12
    assert (config.delivery.outboxRetryBaseMs, config.delivery.outboxRetryMaxMs) == (300_000, 21_600_000)
    assert config.delivery.deleteAfterDelivery is True
    assert config.targets[0].routes() == ["bot1-submit", "qq-main"]
    assert config.source.kind == "pixiv"  # the pixiv block selects the Pixiv source


def test_a_missing_source_still_fails_without_a_pixiv_block():
    doc = pixivflow_document()
    del doc["pixiv"]
    assert "source: Field required" in error_of(doc)


def test_our_kind_webhook_route_keeps_loading_as_before():
    config = parse_config(DEMO | {"source": {"kind": "catalog", "path": "catalog.json"}})
    route = config.route("review")
    assert isinstance(route, WebhookRoute) and route.kind == "webhook" and route.maxAttempts == 12
    three = copy.deepcopy(DEMO)
    three["delivery"]["targets"]["review"]["maxAttempts"] = 3
    three_route = parse_config(three | {"source": {"kind": "catalog", "path": "catalog.json"}}).route("review")
    assert three_route.attempt_budget == 3 and not any("maxAttempts" in w for w in parse_config(
        three | {"source": {"kind": "catalog", "path": "catalog.json"}}).warnings)  # DESIGN §12: ours keeps its meaning
    bad = copy.deepcopy(DEMO)
    bad["delivery"]["targets"]["review"]["url"] = "${NOT_FOR_US}/review"
    assert "delivery.targets.review.url: must be an http(s) URL" in error_of(bad)  # no ${VAR} on our route


def test_a_route_with_both_type_and_kind_is_refused_naming_its_path():
    doc = pixivflow_document()
    doc["delivery"]["targets"]["qq-main"]["kind"] = "webhook"
    assert error_of(doc) == ("invalid configuration: delivery.targets.qq-main: declares both type ('webhook') and kind "
                             "('webhook'); a route is either PixivFlow's (type) or this project's (kind)")


@pytest.mark.parametrize("mutate,path", [
    (lambda r: r["bot1-submit"].update(type="sms"), "delivery.targets.bot1-submit.type: unsupported route type 'sms'"),
    (lambda r: r["bot1-submit"].update(url="ftp://x"), "delivery.targets.bot1-submit.url: must be an http(s) URL"),
    (lambda r: r["bot1-submit"].update(arrayFormat="csv"), "delivery.targets.bot1-submit.arrayFormat:"),
    (lambda r: r["bot1-submit"].update(timeoutMs=300_000), "delivery.targets.bot1-submit.timeoutMs:"),
    (lambda r: r["bot1-submit"].update(maxAttempts=0), "delivery.targets.bot1-submit.maxAttempts:"),
    (lambda r: r["bot1-submit"].update(method="PATCH"), "delivery.targets.bot1-submit.method:"),
    (lambda r: r["qq-main"].update(mediaTransport="inline"), "delivery.targets.qq-main.mediaTransport:"),
    (lambda r: r["qq-main"].pop("url"), "delivery.targets.qq-main.url: Field required"),
])
def test_a_wrong_field_names_its_path(mutate, path):
    doc = pixivflow_document()
    mutate(doc["delivery"]["targets"])
    assert path in error_of(doc)


def test_backoff_max_must_not_be_below_base():
    doc = pixivflow_document()
    doc["delivery"]["outboxRetryMaxMs"] = 1000
    assert "delivery.outboxRetryMaxMs: must be >= outboxRetryBaseMs" in error_of(doc)


def test_underscore_keys_are_comments_at_every_depth():
    doc = pixivflow_document()
    doc["_comment"] = "top"
    doc["delivery"]["_note"] = {"anything": object.__name__}
    doc["delivery"]["targets"]["bot1-submit"]["_why"] = "route comment"
    doc["delivery"]["targets"]["bot1-submit"]["fields"]["_draft"] = "{{title}}"
    doc["targets"][0]["_disabled_tag"] = 12
    doc["schedules"][0]["_cron_was"] = "0 9 * * *"
    doc["delivery"]["targets"]["_old-route"] = {"type": "telegram"}  # would be refused (no botToken…) if it were read
    config = parse_config(doc)
    assert "_draft" not in config.route("bot1-submit").fields
    assert sorted(config.delivery.targets) == ["bot1-submit", "qq-main"]
    assert "_why" not in (config.route("bot1-submit").model_extra or {})


def test_deprecated_keys_are_accepted_ignored_and_warned_about_once(config_log):
    doc = pixivflow_document()
    doc["delivery"]["targets"]["bot1-submit"]["success"] = {"statusCodes": [200]}
    doc["delivery"]["targets"]["qq-main"]["retryDelayMs"] = 1000
    config = parse_config(doc)
    # One finding per key, on config.warnings: the runtime logs them once per load (config.warning,
    # at cold start) and `pixivflow config check` prints them.
    for key in ("delivery.targets.bot1-submit.success", "delivery.targets.bot1-submit.retryDelayMs",
                "delivery.targets.bot1-submit.maxAttempts", "delivery.targets.qq-main.retryDelayMs"):
        assert sum(w.startswith(key + ":") for w in config.warnings) == 1, key
    # The outbox's own budget applies to httpMultipart rows (issue 23): maxAttempts 3 would
    # dead-letter a submission after about 1.5 minutes of a TelePost outage.
    assert config.route("bot1-submit").attempt_budget == 12
    assert "outboxRetryBaseMs 300000 ms up to outboxRetryMaxMs 21600000 ms" in next(
        w for w in config.warnings if w.startswith("delivery.targets.bot1-submit.maxAttempts:"))


def test_a_clean_config_logs_nothing(config_log):
    doc = pixivflow_document()
    del doc["delivery"]["targets"]["bot1-submit"]["retryDelayMs"]
    del doc["delivery"]["targets"]["bot1-submit"]["maxAttempts"]
    assert parse_config(doc).warnings == () and config_log == []


def test_fan_out_names_are_trimmed_and_deduplicated_and_must_exist():
    doc = pixivflow_document()
    doc["targets"][0]["delivery"] = {"targets": [" qq-main ", "bot1-submit", "qq-main"], "target": "ignored"}
    assert parse_config(doc).targets[0].routes() == ["qq-main", "bot1-submit"]
    doc["targets"][0]["delivery"] = {"target": "bot1-submit", "fields": {"note": "{{title}}"}}
    config = parse_config(doc)
    assert config.targets[0].routes() == ["bot1-submit"] and config.targets[0].delivery.fields == {"note": "{{title}}"}
    doc["targets"][0]["delivery"] = {"targets": ["nowhere"]}
    assert "targets[0].delivery: unknown route 'nowhere'" in error_of(doc)
