"""PixivFlow's example delivery routes on the embedded runtime (pixivflow-delivery note §2, §3): the
note's example block (tests/contract/pixivflow/example-delivery.json) on the demo config, the loopback
``receiver`` fixture that plays TelePost's submission API, a messaging gateway and the outcome
endpoints, and ``start`` a runtime whose morning-tokyo fire was accepted."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import ms
from pixivflow import aws
from support.route_receiver import Receiver

EXAMPLE = json.loads((Path(__file__).resolve().parents[1] / "contract" / "pixivflow" / "example-delivery.json").read_text())
FIRE = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo
SLOT = "morning-tokyo@2026-12-01T0800"
SUBMIT = "/api/bot1/v1/submissions"
HEALTH = "/api/bot1/v1/health"
SCHEDULE_OUTCOMES = "/api/bot1/v1/schedule/outcomes"
REFETCH_OUTCOMES = "/api/bot1/v1/refetch/outcomes"
GATEWAY = "/pixivflow/deliver"
TOKEN = "telepost-bot1-token-value"
GATEWAY_TOKEN = "qq-gateway-token-value"
SIGNING = "qq-signing-secret-value"
RID = "6f1c1d2e-3b4a-4c5d-8e9f-0a1b2c3d4e5f"

CAT = {"id": 424242, "type": "illust", "title": "The only cat", "tags": [{"name": "cats"}, {"name": "cute"}],
       "user": {"id": 1, "name": "solo-artist"}, "create_date": "2026-11-01T00:00:00+09:00",
       "total_bookmarks": 1285, "total_view": 12345, "x_restrict": 1, "page_count": 2}
CATALOG = {"illusts": [CAT, {**CAT, "id": 515151, "title": "Second cat", "x_restrict": 0, "page_count": 1,
                             "create_date": "2026-10-01T00:00:00+09:00"}],
           "novels": [], "ranking": {}}


@pytest.fixture
def receiver(monkeypatch):
    with Receiver() as r:
        monkeypatch.setenv("TELEPOST_API_BASE_URL", r.base)
        monkeypatch.setenv("TELEPOST_BOT1_SUBMIT_TOKEN", TOKEN)
        monkeypatch.setenv("QQ_GATEWAY_TOKEN", GATEWAY_TOKEN)
        monkeypatch.setenv("QQ_GATEWAY_SIGNING_SECRET", SIGNING)
        monkeypatch.delenv("ROUTE_SECRETS_PATH", raising=False)
        yield r


def routes_config(receiver, *, routes=("bot1-submit",), multipart=None, gateway=None, delivery=None, targets=("cats",),
                  cat=None):
    """The demo config with the note's two routes (the gateway re-pointed at the receiver)."""

    def mutate(cfg):
        block = copy.deepcopy(EXAMPLE["delivery"])
        block["targets"]["qq-main"]["url"] = receiver.base + GATEWAY
        block["targets"]["bot1-submit"].update(multipart or {})
        block["targets"]["qq-main"].update(gateway or {})
        block.update(delivery or {})
        block.update({"outboxRetryBaseMs": 30_000, "outboxRetryMaxMs": 3_600_000})
        cfg["delivery"] = block
        cfg["schedules"][0]["targetIds"] = list(targets)
        for t in cfg["targets"]:
            t["delivery"] = {"targets": list(routes)}
            if t["id"] == "cats":
                # The test catalogue's newest cat is R-18 (x_restrict 1: the "restriction" placeholder
                # family); the selection rules pass R-18 over unless the target allows it.
                t.update({"r18": True, **(cat or {})})

    return mutate


def start(make_runtime, receiver, **kwargs):
    overrides = kwargs.pop("overrides", None)
    catalog = kwargs.pop("catalog", CATALOG)
    rt = make_runtime(FIRE, mutate=routes_config(receiver, **kwargs), catalog=catalog, overrides=overrides)
    assert rt.fire("morning-tokyo", iso=FIRE)["disposition"] == "accepted"
    return rt


LATE = "late-tokyo@2026-12-01T0805"  # a second occurrence, five minutes after SLOT
LATE_FIRE = "2026-11-30T23:05:00Z"


def two_occurrences(make_runtime, receiver, *, routes=("bot1-submit", "qq-main")):  # noqa: F811
    """Two slots fired (SLOT and LATE), each with one ``cats`` cell on ``routes``: the setting of a
    work two occurrences' cells compete for."""
    base = routes_config(receiver, routes=routes)

    def mutate(cfg):
        base(cfg)
        cfg["schedules"].append({"id": "late-tokyo", "cron": "5 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["cats"]})

    rt = make_runtime(FIRE, mutate=mutate, catalog=CATALOG)
    assert rt.fire("morning-tokyo", iso=FIRE)["disposition"] == "accepted"
    rt.clock.advance(ms(LATE_FIRE) - ms(FIRE))
    assert rt.fire("late-tokyo", iso=LATE_FIRE)["disposition"] == "accepted"
    return rt


def state(rt, slot=SLOT):
    return rt.wiring.ledger.load(slot)


def intents(rt, slot=SLOT, target="cats"):
    return {i.route: i for i in state(rt, slot).intents_for(target)}


def bucket_files(rt, prefix):
    """The work's stored files: every object under its prefix (issue 25: there is no manifest)."""
    s3 = aws.client("s3")
    listed = s3.list_objects_v2(Bucket=rt.env["ARTIFACT_BUCKET"], Prefix=prefix + "/").get("Contents", [])
    return {o["Key"].rsplit("/", 1)[-1]: s3.get_object(Bucket=rt.env["ARTIFACT_BUCKET"], Key=o["Key"])["Body"].read()
            for o in listed}
