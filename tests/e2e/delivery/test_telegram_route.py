"""PixivFlow's Telegram review route end to end (issue 23; pixivflow-real-configs note §6).

A scheduled fire goes through the real trigger, execute and deliver handlers (embedded runtime
on moto) to the loopback fakes of ``pixivflow.local.route_fakes``: the Bot API (reached through
``TELEGRAM_API_BASE``, as PixivFlow's own variable says) and the review control plane. The
route is ``pixivflow.production.json``'s ``bot1-review``, its ``${VAR}``s from the environment.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging

import pytest

from support.builders import published
from support.delivery import drive

from pixivflow.local.route_fakes import FakeControlPlane, FakeTelegram

PRODUCTION = published("pixivflow.production.json")
FIRE = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo
SLOT = "morning-tokyo@2026-12-01T0800"
BOT_TOKEN = "7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
CP_SECRET = "control-plane-callback-secret"
CHAT = "-1004318193445"

CAT = {"id": 777001, "type": "illust", "title": "Twenty-three cats", "tags": [{"name": "cats"}, {"name": "many"}],
       "user": {"id": 1, "name": "artist"}, "create_date": "2026-11-29T12:00:00+09:00",
       "total_bookmarks": 2345, "total_view": 45678, "x_restrict": 0, "page_count": 23}


def review_id(target="cats", work_type="illustration", work_id="777001", prefix="rv"):
    return f"{prefix}_" + hashlib.sha1(f"{target}|{work_type}|{work_id}".encode()).hexdigest()[:16]


@pytest.fixture
def fakes(monkeypatch):
    with FakeTelegram() as telegram, FakeControlPlane(token=CP_SECRET) as cp:
        monkeypatch.setenv("TELEGRAM_API_BASE", telegram.base)
        monkeypatch.setenv("TELEGRAM_BOT1_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("CONTROL_PLANE_URL", cp.base)
        monkeypatch.setenv("CONTROL_PLANE_CALLBACK_SECRET", CP_SECRET)
        monkeypatch.delenv("ROUTE_SECRETS_PATH", raising=False)
        yield telegram, cp


def telegram_config(route: dict | None = None):
    def mutate(cfg):
        cfg["delivery"] = copy.deepcopy(PRODUCTION["delivery"])
        cfg["delivery"]["targets"]["bot1-review"].update(route or {})
        cfg["delivery"].update({"outboxRetryBaseMs": 30_000, "outboxRetryMaxMs": 3_600_000})
        cfg["schedules"][0]["targetIds"] = ["cats"]
        for t in cfg["targets"]:
            t["delivery"] = {"target": "bot1-review"}
    return mutate


def start(make_runtime, *, route=None, work=None):
    catalog = {"illusts": [{**CAT, **(work or {})}], "novels": [], "ranking": {}}
    rt = make_runtime(FIRE, mutate=telegram_config(route), catalog=catalog)
    assert rt.fire("morning-tokyo", iso=FIRE)["disposition"] == "accepted"
    return rt


def intent(rt):
    (row,) = rt.wiring.ledger.load(SLOT).intents_for("cats")
    return row


def test_23_pages_go_as_10_10_3_with_the_caption_on_the_last_then_one_card_and_one_record(make_runtime, fakes):
    telegram, cp = fakes
    rt = start(make_runtime)
    rt.settle()
    rid = review_id()
    calls = telegram.sent()
    assert [c.method for c in calls] == ["sendMediaGroup", "sendMediaGroup", "sendMediaGroup", "sendMessage"]
    groups = [c.media for c in calls[:3]]
    assert [len(g) for g in groups] == [10, 10, 3]
    assert all(m["type"] == "photo" for g in groups for m in g)
    captions = [(i, j) for i, g in enumerate(groups) for j, m in enumerate(g) if "caption" in m]
    assert captions == [(2, 2)]  # only the last item of the last block
    caption = groups[2][2]["caption"]
    assert caption.splitlines()[0] == "Twenty-three cats" and "⭐ 2.3k · 👁 4.6w" in caption
    assert caption.endswith("🔗 https://www.pixiv.net/artworks/777001")
    assert all(c.fields["chat_id"] == CHAT and c.token == BOT_TOKEN for c in calls)
    # every page went, in order, each as its own attach:// part
    assert sum(len(c.files) for c in calls[:3]) == 23
    card = calls[3]
    assert card.fields["text"].startswith(f"🧾 审核 {rid}\n")
    assert json.loads(card.fields["reply_markup"]) == {"inline_keyboard": [[
        {"text": "✅ 发布", "callback_data": f"review:{rid}:approve"},
        {"text": "❌ 拒绝", "callback_data": f"review:{rid}:reject"}]]}
    # one pre-flight, one record
    assert [r.method for r in cp.requests] == ["GET", "POST"]
    assert cp.requests[0].path == f"/control/reviews/{rid}"
    assert all(r.headers["authorization"] == f"Bearer {CP_SECRET}" for r in cp.requests)
    (record,) = cp.reviews.values()
    media_ids = [i for c in calls[:3] for i in c.message_ids]
    assert (record["review_id"], record["bot_id"], record["chat_id"], record["publish_chat_id"], record["status"]) == (
        rid, "bot1", CHAT, "@xgdShare", "pending")
    assert record["media_message_ids"] == media_ids and len(media_ids) == 23
    assert record["control_message_id"] == card.message_ids[0]
    assert len(record["file_ids"]) == 23 and record["media_group_id"]
    assert (record["slot_id"], record["target_id"], record["work_id"]) == (SLOT, "cats", "777001")
    row = intent(rt)
    assert (row.status, row.outbox_status, row.remote_id, row.remote_status, row.attempts) == (
        "delivered", "done", rid, "in_review", 1)
    assert rt.wiring.ledger.load(SLOT).cells["cats"].status == "submitted"


def test_11_pages_go_as_10_and_1(make_runtime, fakes):
    telegram, _ = fakes
    start(make_runtime, work={"page_count": 11}).settle()
    calls = telegram.sent()
    assert [c.method for c in calls] == ["sendMediaGroup", "sendPhoto", "sendMessage"]
    assert len(calls[0].media) == 10 and all("caption" not in m for m in calls[0].media)
    assert calls[1].fields["caption"].startswith("Twenty-three cats") and "photo" in calls[1].files


def test_a_429_with_retry_after_37_is_the_next_attempt_37_s_later(make_runtime, fakes):
    telegram, cp = fakes
    telegram.script("sendMediaGroup", {"error_code": 429, "description": "Too Many Requests: retry after 37",
                                       "parameters": {"retry_after": 37}})
    rt = start(make_runtime, work={"page_count": 2})
    rt.pump()
    row = intent(rt)
    assert (row.outbox_status, row.attempts) == ("retry_wait", 1)
    assert row.next_attempt_at - row.updated_at == 37_000
    assert row.sending_at is None and row.send_progress is None and not row.began_posting  # nothing posted, nothing unknown
    assert cp.reviews == {}
    drive(rt)
    assert [c.method for c in telegram.calls] == ["sendMediaGroup", "sendMediaGroup", "sendMessage"]
    assert [c.ok for c in telegram.calls] == [False, True, True]
    row = intent(rt)
    assert (row.status, row.attempts) == ("delivered", 2)


def test_a_429_on_the_second_block_resumes_after_the_first_without_posting_it_again(make_runtime, fakes):
    telegram, cp = fakes
    telegram.script("sendMediaGroup", "ok", {"error_code": 429, "description": "Too Many Requests: retry after 5",
                                             "parameters": {"retry_after": 5}})
    rt = start(make_runtime)
    rt.pump()
    row = intent(rt)
    assert row.outbox_status == "retry_wait" and row.next_attempt_at - row.updated_at == 5_000
    assert len(row.send_progress["blocks"]) == 1 and row.sending_at is None
    drive(rt)
    groups = [c for c in telegram.sent("sendMediaGroup")]
    assert [len(c.media) for c in groups] == [10, 10, 3]  # the first block once, then the rest
    (record_doc,) = cp.reviews.values()
    assert record_doc["media_message_ids"] == [i for c in groups for i in c.message_ids]
    assert intent(rt).status == "delivered"


@pytest.mark.parametrize("status", ["pending", "uncertain"])
def test_a_pre_flight_hit_posts_nothing_and_acks_idempotent_replay(make_runtime, fakes, status):
    # An uncertain review (perhaps in the chat) is never posted again by a new row either: only
    # an operator's redrive re-sends it. And it is no delivery: the row ends dead and uncertain
    # (make sim found a cell reported submitted on another slot's uncertain review).
    telegram, cp = fakes
    cp.reviews[review_id()] = {"review_id": review_id(), "bot_id": "bot1", "chat_id": CHAT, "status": status}
    rt = start(make_runtime)
    rt.settle()
    assert telegram.requests == []
    assert [r.method for r in cp.requests] == ["GET"]
    row = intent(rt)
    assert row.sending_at is None  # the marker is written only before a first post
    if status == "pending":
        assert (row.status, row.ack_kind, row.remote_status, row.remote_id) == (
            "delivered", "idempotent_replay", "review_exists", review_id())
        return
    assert (row.status, row.outbox_status, row.remote_status, row.remote_id) == ("failed", "dead", "uncertain", review_id())
    assert "recorded uncertain" in row.last_error and "outbox redrive" in row.last_error
    assert rt.wiring.ledger.load(SLOT).cells["cats"].status == "failed"
    assert cp.reviews[review_id()]["status"] == "uncertain"  # left as the operator will find it


class Crash(BaseException):
    """The deliver invocation dies here (no except, no finally of ours runs)."""


def test_a_crash_between_the_media_and_the_record_is_uncertain_and_never_double_posts(make_runtime, fakes, logs):
    telegram, cp = fakes

    def die_after_the_card(call):
        if call.method == "sendMessage":
            telegram.on_call = None
            raise_in_deliver.append(True)

    raise_in_deliver: list[bool] = []
    telegram.on_call = die_after_the_card
    rt = start(make_runtime, work={"page_count": 3})
    from pixivflow.adapters.routes import telegram as adapter

    original = adapter._Attempt.record

    def record(self, status, error=None):
        if raise_in_deliver and status == "pending":
            raise_in_deliver.clear()
            raise Crash()
        return original(self, status, error)

    adapter._Attempt.record = record
    try:
        with pytest.raises(Crash):
            rt.pump()
        row = intent(rt)
        assert row.outbox_status == "processing" and row.sending_at is not None
        drive(rt)  # the claim expires; the sweep re-drives the row
    finally:
        adapter._Attempt.record = original
    posted = telegram.sent()
    assert [c.method for c in posted] == ["sendMediaGroup", "sendMessage"]  # once, never again
    (record_doc,) = cp.reviews.values()
    assert record_doc["status"] == "uncertain" and "began posting" in record_doc["error"]
    row = intent(rt)
    assert (row.status, row.outbox_status, row.remote_status) == ("failed", "dead", "uncertain")
    assert "pixivflow outbox redrive" in row.last_error and review_id() in row.last_error
    cell = rt.wiring.ledger.load(SLOT).cells["cats"]
    assert cell.status == "failed" and cell.terminal_reason_code == "delivery_abandoned"
    # maybe in the chat: the work stays reserved on the route, no later slot selects it again
    assert rt.wiring.ledger.work_owners("bot1-review", "illustration", ["777001"]) == {"777001": f"{SLOT}#cats"}


def test_the_control_plane_down_after_the_posts_retries_the_record_only(make_runtime, fakes):
    telegram, cp = fakes
    cp.fail_records.extend([503])
    rt = start(make_runtime, work={"page_count": 2})
    drive(rt)
    assert [c.method for c in telegram.sent()] == ["sendMediaGroup", "sendMessage"]  # posted once
    (record_doc,) = cp.reviews.values()
    assert record_doc["status"] == "pending" and len(record_doc["media_message_ids"]) == 2
    row = intent(rt)
    assert (row.status, row.attempts) == ("delivered", 2)


@pytest.mark.parametrize("chat_set,code", [("blocked", 403), ("missing", 400)])
def test_a_blocked_bot_or_a_missing_chat_is_a_permanent_failure_naming_the_chat(make_runtime, fakes, chat_set, code):
    telegram, cp = fakes
    getattr(telegram, chat_set).add(CHAT)
    rt = start(make_runtime, work={"page_count": 1})
    rt.settle()
    row = intent(rt)
    assert (row.status, row.outbox_status, row.attempts) == ("failed", "dead", 1)
    assert CHAT in row.last_error and f"{code}" in row.last_error
    assert cp.reviews == {} and len(telegram.calls) == 1


def test_the_bot_token_never_reaches_a_log_line_or_an_error(make_runtime, fakes, logs, caplog):
    telegram, _ = fakes
    telegram.script("sendPhoto", {"error_code": 400, "description": "Bad Request: wrong file identifier"})
    caplog.set_level(logging.DEBUG)
    rt = start(make_runtime, work={"page_count": 1})
    rt.settle()
    row = intent(rt)
    assert row.outbox_status == "dead"
    _, raw = logs()
    texts = [raw, caplog.text, json.dumps(logs.all()), row.last_error or ""]
    assert any("/bot" in t for t in [caplog.text]), "httpx logged its request lines (the filter had something to do)"
    secret_half = BOT_TOKEN.split(":", 1)[1]
    for text in texts:
        assert BOT_TOKEN not in text and secret_half not in text


def test_a_redrive_re_sends_an_uncertain_review_on_purpose(make_runtime, fakes):
    from support.cli import pixivflow

    telegram, cp = fakes
    telegram.script("sendPhoto", {"error_code": 502, "description": "Bad Gateway"})
    rt = start(make_runtime, work={"page_count": 1})
    rt.settle()
    row = intent(rt)
    assert (row.outbox_status, row.remote_status) == ("dead", "uncertain")
    assert cp.reviews[review_id()]["status"] == "uncertain"
    drive(rt)
    assert len(telegram.calls) == 1  # dead: nothing re-sends it by itself
    run = pixivflow("outbox", "redrive", row.idempotency_key, now=rt.clock.now_ms())
    assert run.code == 0, run.err
    drive(rt)
    assert [c.method for c in telegram.sent()] == ["sendPhoto", "sendMessage"]
    assert cp.reviews[review_id()]["status"] == "pending"
    row = intent(rt)
    assert (row.status, row.remote_status, row.redrive_count) == ("delivered", "in_review", 1)
    # the occurrence's outcome stays as it ended; the row records the operator's re-send
    assert rt.wiring.ledger.load(SLOT).cells["cats"].status == "failed"


def test_a_missing_variable_is_a_configuration_error_naming_it(make_runtime, fakes, monkeypatch):
    monkeypatch.delenv("TELEGRAM_BOT1_TOKEN")
    rt = start(make_runtime, work={"page_count": 1})
    rt.settle()
    row = intent(rt)
    assert row.outbox_status == "dead" and "TELEGRAM_BOT1_TOKEN" in row.last_error and "configuration" in row.last_error
    assert fakes[0].requests == []

