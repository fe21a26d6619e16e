"""The route keys of the published configs load (issue 23): PixivFlow's ``type: telegram`` review
route, a novel target's ``delivery.richNovelPreview``, and a route-less cache target as a dry run.

The configs are copies of the five published ones (tests/fixtures/pixivflow_configs/); the
keys the selection issue owns (languageFilter and friends) are removed here so these tests see
only the routes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pixivflow.config import RichNovelPreview, parse_config
from pixivflow.route_kinds.telegram import TelegramRoute
from pixivflow.domain.errors import ConfigError

PUBLISHED = Path(__file__).resolve().parents[1] / "fixtures" / "pixivflow_configs"


def published(name: str) -> dict:
    doc = json.loads((PUBLISHED / name).read_text(encoding="utf-8"))
    for target in doc["targets"]:
        target.pop("languageFilter", None)  # issue 22's key, not this file's subject
    return doc


def error_of(doc: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    return str(info.value)


def test_the_telegram_review_routes_of_pixivflow_production_load():
    config = parse_config(published("pixivflow.production.json"))
    bot1 = config.route("bot1-review")
    assert isinstance(bot1, TelegramRoute) and bot1.route_type == "telegram"
    assert (bot1.botId, bot1.botToken, bot1.chatId, bot1.publishChatId) == (
        "bot1", "${TELEGRAM_BOT1_TOKEN}", "-1004318193445", "@xgdShare")
    assert (bot1.controlPlaneUrl, bot1.controlPlaneToken) == ("${CONTROL_PLANE_URL}/control",
                                                              "${CONTROL_PLANE_CALLBACK_SECRET}")
    assert bot1.reviewIdPrefix == "rv" and bot1.publishThreadId is None
    assert bot1.caption.startswith("{{title}}\n📅 {{rankingDate}}")
    # maxAttempts 3 / retryDelayMs 3000 are PixivFlow's legacy keys: the outbox budget applies.
    assert bot1.maxAttempts == 3 and bot1.attempt_budget == 12
    assert sum("bot1-review.maxAttempts: deprecated" in w and "12 attempts" in w for w in config.warnings) == 1
    assert [t.routes() for t in config.targets] == [["bot1-review"], ["bot1-review"], ["bot2-review"], ["bot2-review"]]


@pytest.mark.parametrize("key,value,message", [
    ("botToken", "not-a-token", "delivery.targets.bot1-review.botToken: must be a Telegram bot token"),
    ("botToken", "12345:short", "delivery.targets.bot1-review.botToken: must be a Telegram bot token"),
    ("controlPlaneUrl", "ftp://cp", "delivery.targets.bot1-review.controlPlaneUrl: must be an http(s) URL"),
    ("chatId", "", "delivery.targets.bot1-review.chatId: must be a chat id"),
    ("publishThreadId", -1, "delivery.targets.bot1-review.publishThreadId:"),
    ("reviewIdPrefix", "has space", "delivery.targets.bot1-review.reviewIdPrefix:"),
])
def test_a_bad_telegram_key_names_its_path(key, value, message):
    doc = published("pixivflow.production.json")
    doc["delivery"]["targets"]["bot1-review"][key] = value
    assert message in error_of(doc)


@pytest.mark.parametrize("key", ["botId", "botToken", "chatId", "publishChatId", "controlPlaneUrl", "controlPlaneToken"])
def test_every_required_telegram_key_is_required(key):
    doc = published("pixivflow.production.json")
    del doc["delivery"]["targets"]["bot1-review"][key]
    assert f"delivery.targets.bot1-review.{key}: Field required" in error_of(doc)


def test_a_literal_bot_token_is_accepted_and_never_echoed_when_wrong():
    doc = published("pixivflow.production.json")
    doc["delivery"]["targets"]["bot1-review"]["botToken"] = "123456:" + "A" * 35
    assert parse_config(doc).route("bot1-review").botToken.startswith("123456:")
    doc["delivery"]["targets"]["bot1-review"]["botToken"] = "123456:SECRET-but-short"
    assert "SECRET" not in error_of(doc)


def test_rich_novel_preview_of_production_loads_on_its_novel_targets():
    config = parse_config(published("production.json"))
    preview = config.targets[1].delivery.richNovelPreview
    assert isinstance(preview, RichNovelPreview)
    assert (preview.url, preview.headers, preview.field) == (
        "http://telepress-publish.flycast/publish/rich-novel", {"Authorization": "Bearer ${TELEPRESS_API_KEY}"},
        "novel_preview_url")
    assert preview.timeoutMs == 60_000 and preview.effective_timeout_ms == 30_000
    assert not any("richNovelPreview" in w for w in config.warnings)  # supported, nothing to warn about
    assert config.targets[0].delivery.richNovelPreview is None


def test_rich_novel_preview_rules():
    doc = published("production.json")
    preview = doc["targets"][1]["delivery"]["richNovelPreview"]
    preview["url"] = "${TELEPRESS_URL}/publish"  # PixivFlow: no ${VAR} exemption for this URL
    assert "targets[1].delivery.richNovelPreview.url: must be an http(s) URL" in error_of(doc)
    doc = published("production.json")
    del doc["targets"][1]["delivery"]["richNovelPreview"]["url"]
    assert "targets[1].delivery.richNovelPreview.url: Field required" in error_of(doc)
    doc = published("production.json")
    doc["targets"][0]["delivery"]["richNovelPreview"] = copy.deepcopy(preview) | {"url": "http://tp/x"}
    doc["targets"][1]["delivery"]["richNovelPreview"]["timeoutMs"] = 45_000
    warnings = parse_config(doc).warnings
    assert "targets[0].delivery.richNovelPreview: only novels get a TelePress preview; ignored" in warnings
    assert any(w.startswith("targets[1].delivery.richNovelPreview.timeoutMs: 45000 is above 30000") for w in warnings)


def test_the_shadow_config_is_a_dry_run_and_says_so():
    config = parse_config(published("pixivflow.shadow.json"))
    assert config.delivery.targets == {}
    assert all(t.dry_run and t.routes() == [] for t in config.targets)
    assert sum("DRY RUN" in w for w in config.warnings) == 4


def test_the_other_published_routes_keep_the_outbox_budget():
    for name in ("production.json", "fly-two-bots.example.json"):
        config = parse_config(published(name))
        assert {r.attempt_budget for r in config.delivery.targets.values()} == {12}, name
    fly = parse_config(published("fly-two-bots.example.json"))
    assert fly.delivery.deleteAfterDelivery is False
    assert sum(".success: deprecated" in w for w in fly.warnings) == 2
