"""PixivFlow's delivery routes end to end (issue 11; pixivflow-delivery note §2, §3; spec §10).

A scheduled fire goes through the real trigger, execute and deliver handlers (embedded runtime
on moto: the artifacts really sit in the moto S3 bucket) to a loopback receiver that plays
TelePost's submission API, a messaging gateway and the outcome endpoints. Multipart bodies are
parsed by the standard library's MIME parser. The routes are the note's example block, copied
into tests/contract/pixivflow/example-delivery.json; their ``${VAR}`` references resolve from
the environment (or SSM) at send time.
"""

# ruff: noqa: F811 - receiver, a parameter of most tests here, is the fixture imported from support.example_routes
from __future__ import annotations

import base64
import hashlib
import hmac

from pixivflow import aws
import pytest

from conftest import JOBS_TOKEN, OUTCOME_MESSAGE, ms
from support.delivery import drive
from support.example_routes import (  # noqa: F401 - receiver: the fixture
    CAT, CATALOG, EXAMPLE, FIRE, GATEWAY, GATEWAY_TOKEN, HEALTH, REFETCH_OUTCOMES, RID, SCHEDULE_OUTCOMES, SIGNING, SLOT,
    SUBMIT, TOKEN, bucket_files, intents, receiver, routes_config, start, state,
)

from pixivflow.adapters.catalog_source import artifact_bytes, preview_bytes
from pixivflow.adapters.secret_store import SecretStore


# -- httpMultipart: the request on the wire (note §2.2) -------------------------------------------


def test_multipart_submission_carries_the_stored_files_the_fields_and_one_key(make_runtime, receiver):
    rt = start(make_runtime, receiver, delivery={"deleteAfterDelivery": False})
    rt.settle()
    (post,) = receiver.at(SUBMIT, "POST")
    i = intents(rt)["bot1-submit"]
    # readiness first, then exactly one submission; then the slot's summary (probed the same way)
    assert [r.method + " " + r.path for r in receiver.requests] == [
        f"GET {HEALTH}", f"POST {SUBMIT}", f"GET {HEALTH}", f"POST {SCHEDULE_OUTCOMES}"]
    assert post.headers["authorization"] == f"Bearer {TOKEN}"
    assert post.headers["content-type"].startswith("multipart/form-data; boundary=pixivflow-")
    assert int(post.headers["content-length"]) == len(post.raw)
    assert "idempotency-key" not in post.headers  # the key travels only as the form field
    parts = post.parts()
    # files first (one part per page), then their previews one-to-one (issue 23), then the text fields
    assert [p.name for p in parts[:4]] == ["files", "files", "previews", "previews"]
    assert all(p.filename is None for p in parts[4:])
    stored = bucket_files(rt, f"{SLOT}/cats/{i.work_id}")
    assert [(f.filename, f.content_type) for f in post.files()] == [(f"{i.work_id}_p0.png", "application/octet-stream"),
                                                                    (f"{i.work_id}_p1.png", "application/octet-stream")]
    assert [f.data for f in post.files()] == [stored[f"{i.work_id}_p0.png"], stored[f"{i.work_id}_p1.png"]]
    assert [f.data for f in post.files()] == [artifact_bytes(i.work_id, 0), artifact_bytes(i.work_id, 1)]
    assert [(f.filename, f.data) for f in post.files("previews")] == [
        (f"{i.work_id}_p{n}.png.preview.jpg", preview_bytes(i.work_id, n)) for n in (0, 1)]
    assert [f.data for f in post.files("previews")] == [stored[f"{i.work_id}_p{n}.png.preview.jpg"] for n in (0, 1)]
    fields = post.fields()
    assert fields["idempotency_key"] == [i.idempotency_key]
    assert set(fields) == set(EXAMPLE["delivery"]["targets"]["bot1-submit"]["fields"])
    # the ACK: TelePost's envelope, parsed with the default hints
    cell = state(rt).cells["cats"]
    assert cell.status == "submitted" and state(rt).slot.status == "success"
    assert (i.status, i.remote_id, i.attempts) == ("delivered", "rv-1", 1)


FAMILIES = {
    "work": ({"t": "{{title}}|{{pixivId}}|{{type}}|{{author}}|{{workTags}}|{{publishedDate}}", "l": "{{link}}"},
             {"t": ["The only cat|424242|illustration|solo-artist|cats,cute|2026-11-01"],
              "l": ["https://www.pixiv.net/artworks/424242"]}),
    "target": ({"t": "{{targetId}}|{{tag}}|{{topic}}|{{topicTag}}"}, {"t": ["cats|cats||cats"]}),
    "restriction": ({"t": "{{spoiler}}|{{xRestrict}}|{{xRestrictLabel}}|{{xRestrictTag}}"}, {"t": ["true|1|R-18|R18"]}),
    "counts": ({"t": "{{bookmarkCount}}|{{viewCount}}"}, {"t": ["1.3k|1.2w"]}),
    "slot": ({"t": "{{scheduleId}}|{{slotId}}|{{slotName}}|{{slotDate}}|{{executionId}}|{{occurrenceAt}}|{{triggerSource}}"},
             {"t": [f"morning-tokyo|{SLOT}|08:00|2026-12-01|{SLOT}|2026-11-30T23:00:00.000Z|cron"]}),
    "keys": ({"t": "{{refetchRequestId}}", "idempotency_key": "{{idempotencyKey}}"},
             {"t": [""], "idempotency_key": [f"pixivflow:bot1-submit:illustration:424242:{SLOT}:cats"]}),
    # workId is PixivFlow's newer alias; a search target's rankingDate is yesterday in Japan
    # (08:00 JST on 2026-12-01 -> 2026-11-30; real-configs note §8).
    "unknown_and_missing": ({"t": "{{workId}}|{{slot}}|{{rankingDate}}|{{language}}|{{ nope }}", "n": 7, "b": False},
                            {"t": ["424242|{{slot}}|2026-11-30||{{ nope }}"], "n": ["7"], "b": ["false"]}),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_multipart_fields_render_each_placeholder_family(make_runtime, receiver, family):
    fields, expected = FAMILIES[family]
    rt = start(make_runtime, receiver, multipart={"fields": fields}, cat={"limit": 1})
    rt.settle()
    (post,) = receiver.at(SUBMIT, "POST")
    got = post.fields()
    for name, values in expected.items():
        assert got[name] == values, (name, got[name])
    assert len(got["idempotency_key"]) == 1  # added once when the route declares none


@pytest.mark.parametrize("fmt,expected,title", [
    ("comma", [("tags", "cats,cute,{{nope}}")], "The only cat"),
    ("repeat", [("tags", "cats"), ("tags", "cute"), ("tags", "{{nope}}")], "The only cat"),
    ("json", [("tags", '["cats", "cute", "{{nope}}"]')], '["The only cat"]'),  # scalars are wrapped too
])
def test_multipart_array_format_and_target_field_overrides(make_runtime, receiver, fmt, expected, title):
    rt = start(make_runtime, receiver, multipart={"arrayFormat": fmt, "fields": {"tags": "x", "title": "{{title}}"},
                                                  "autoIdempotencyKey": False},
               cat={"delivery": {"targets": ["bot1-submit"], "fields": {"tags": ["cats", "cute", "{{nope}}"]}}})
    rt.settle()
    (post,) = receiver.at(SUBMIT, "POST")
    pairs = [(p.name, p.text) for p in post.parts() if p.filename is None]
    assert [p for p in pairs if p[0] == "tags"] == expected
    assert ("title", title) in pairs
    assert "idempotency_key" not in dict(pairs)  # autoIdempotencyKey: false and none declared


def test_the_same_key_travels_once_per_request_on_every_retry(make_runtime, receiver):
    receiver.queue(SUBMIT, (503, {"error": "busy"}), (500, {"error": "boom"}))
    rt = start(make_runtime, receiver)
    drive(rt)
    posts = receiver.at(SUBMIT, "POST")
    assert len(posts) == 3
    keys = [p.fields()["idempotency_key"] for p in posts]
    assert all(len(k) == 1 for k in keys) and len({k[0] for k in keys}) == 1
    i = intents(rt)["bot1-submit"]
    assert keys[0] == [i.idempotency_key] and (i.status, i.attempts) == ("delivered", 3)
    # the files of every retry are the same bytes
    assert len({tuple(f.data for f in p.files()) for p in posts}) == 1


def test_a_failing_readiness_probe_defers_without_consuming_an_attempt(make_runtime, receiver, logs):
    receiver.queue(HEALTH, (503, {"status": "starting"}), (503, {"status": "starting"}))
    rt = start(make_runtime, receiver)
    rt.pump()
    i = intents(rt)["bot1-submit"]
    assert (i.outbox_status, i.attempts) == ("pending", 0)
    assert i.next_attempt_at == ms(FIRE) + 60_000
    assert receiver.at(SUBMIT) == []
    drive(rt)
    i = intents(rt)["bot1-submit"]
    before = receiver.requests[: receiver.requests.index(receiver.at(SUBMIT)[0])]
    assert [r.path for r in before] == [HEALTH] * 3 and len(receiver.at(SUBMIT)) == 1
    assert (i.status, i.attempts) == ("delivered", 1)
    assert len(logs.events("outbox.deferred")) == 2


def test_ack_hints_of_the_route_read_a_terminal_remote_status(make_runtime, receiver):
    hints = {"dataPath": "result.record", "idField": "rid", "statusField": "state", "reusedField": "again",
             "reasonField": "why", "keyField": "key"}
    receiver.queue(SUBMIT, (200, {"result": {"record": {"rid": 77, "state": "Rejected"}}}))
    rt = start(make_runtime, receiver, multipart={"ack": hints})
    drive(rt)
    i = intents(rt)["bot1-submit"]
    assert (i.status, i.outbox_status, i.remote_id, i.remote_status, i.attempts) == ("failed", "done", "77", "rejected", 1)
    assert state(rt).cells["cats"].status == "failed" and len(receiver.at(SUBMIT)) == 1
    # files are kept for a failure
    assert len(bucket_files(rt, f"{SLOT}/cats/{i.work_id}")) == 4  # two pages and their previews


def test_ack_hints_of_the_route_read_a_historical_duplicate(make_runtime, receiver):
    hints = {"dataPath": "", "reusedField": "again", "reasonField": "why"}
    receiver.queue(SUBMIT, (200, {"review_id": "old-9", "again": True, "why": "historical"}))
    rt = start(make_runtime, receiver, multipart={"ack": hints})
    drive(rt)
    i = intents(rt)["bot1-submit"]
    assert (i.status, i.remote_id, i.reuse_reason) == ("duplicate", "old-9", "historical_duplicate")
    assert state(rt).cells["cats"].status == "duplicate"
    assert len(bucket_files(rt, f"{SLOT}/cats/{i.work_id}")) == 4  # kept for a duplicate (pages and previews)


def test_stored_files_are_deleted_once_delivered(make_runtime, receiver, logs):
    # (with deleteAfterDelivery: false they stay: the first test of this module reads them back)
    rt = start(make_runtime, receiver)
    rt.settle()
    i = intents(rt)["bot1-submit"]
    # deleteAfterDelivery (note §2.4): the originals go at once; the small previews (the operator
    # page's thumbnails) stay for storage.cacheRetentionDays, tagged with its class (issue 25).
    left = bucket_files(rt, f"{SLOT}/cats/{i.work_id}")
    assert i.status == "delivered" and sorted(left) == [f"{i.work_id}_p0.png.preview.jpg", f"{i.work_id}_p1.png.preview.jpg"]
    (deleted,) = logs.events("artifacts.deleted")
    assert deleted["count"] == 2  # the two pages
    s3 = aws.client("s3")
    for name in left:
        tags = s3.get_object_tagging(Bucket=rt.env["ARTIFACT_BUCKET"], Key=f"{SLOT}/cats/{i.work_id}/{name}")["TagSet"]
        assert tags == [{"Key": "retention", "Value": "14d"}]


def test_our_kind_webhook_route_keeps_its_stored_files_as_before(make_runtime, downstream):
    def mutate(cfg):
        cfg["schedules"][0].update(targetIds=["cats"])
        next(t for t in cfg["targets"] if t["id"] == "cats")["r18"] = True  # the R-18 cat, as above

    rt = make_runtime(FIRE, mutate=mutate, catalog=CATALOG)
    rt.fire("morning-tokyo", iso=FIRE)
    rt.settle()
    (req,) = downstream.requests
    assert req.headers["idempotency-key"] == req.body["idempotency_key"]
    assert set(req.body) >= {"idempotency_key", "slot_id", "target_id", "work"} and "context" not in req.body
    work_id = req.body["work"]["id"]
    assert state(rt).cells["cats"].status == "submitted"
    assert sorted(bucket_files(rt, f"{SLOT}/cats/{work_id}")) == [f"{work_id}_p0.png", f"{work_id}_p1.png"]


def test_an_unresolvable_secret_dead_letters_the_row_naming_the_variable(make_runtime, receiver, monkeypatch):
    monkeypatch.delenv("TELEPOST_BOT1_SUBMIT_TOKEN")
    rt = start(make_runtime, receiver)
    rt.settle()
    i = intents(rt)["bot1-submit"]
    assert (i.status, i.outbox_status, i.attempts) == ("failed", "dead", 1)
    assert i.last_error.startswith("configuration_error: UnresolvedSecret: secret reference ${TELEPOST_BOT1_SUBMIT_TOKEN}")
    assert receiver.at(SUBMIT) == []  # nothing went out without its credentials
    cell = state(rt).cells["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("failed", "delivery_abandoned")


def test_a_url_is_validated_after_expansion(make_runtime, receiver, monkeypatch):
    monkeypatch.setenv("TELEPOST_API_BASE_URL", "ftp://files.example")
    rt = start(make_runtime, receiver)
    rt.settle()
    i = intents(rt)["bot1-submit"]
    assert i.outbox_status == "dead" and "not an http(s) URL once its ${VAR} references are expanded" in i.last_error
    assert receiver.requests == []


def test_a_transient_ssm_error_then_success_sends_the_header_and_is_accepted(make_runtime, receiver, monkeypatch):
    from pixivflow.adapters.secret_refs import ssm_reader

    monkeypatch.delenv("TELEPOST_BOT1_SUBMIT_TOKEN")
    monkeypatch.setenv("ROUTE_SECRETS_PATH", "/pixivflow/routes")
    calls = []

    def flaky(name):
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError("ThrottlingException: Rate exceeded")
        return ssm_reader(name)

    secrets = SecretStore(reader=flaky, sleep=lambda s: None)
    rt = make_runtime(FIRE, mutate=routes_config(receiver), catalog=CATALOG, overrides={"secrets": secrets},
                      backend="twin", ssm=True)  # SSM on moto beside the twins (they model DynamoDB, SQS and S3)
    aws.client("ssm").put_parameter(Name="/pixivflow/routes/TELEPOST_BOT1_SUBMIT_TOKEN", Value="from-ssm-token",
                                      Type="SecureString")
    rt.fire("morning-tokyo", iso=FIRE)
    rt.settle()
    (post,) = receiver.at(SUBMIT, "POST")
    assert post.headers["authorization"] == "Bearer from-ssm-token"
    assert receiver.at(HEALTH)[0].headers["authorization"] == "Bearer from-ssm-token"
    i = intents(rt)["bot1-submit"]
    assert (i.status, i.ack_kind, i.attempts) == ("delivered", "accepted", 1)
    assert calls[:2] == ["/pixivflow/routes/TELEPOST_BOT1_SUBMIT_TOKEN"] * 2
    assert len(calls) == 2  # the value is cached once read


# -- type: webhook (PixivFlow's gateway; note §2.5) -------------------------------------------------


def test_gateway_document_headers_and_signature(make_runtime, receiver):
    rt = start(make_runtime, receiver, routes=("qq-main",))
    rt.settle()
    (post,) = receiver.at(GATEWAY, "POST")
    i = intents(rt)["qq-main"]
    h = post.headers
    assert h["content-type"] == "application/json" and h["x-pixivflow-delivery"] == "qq-main"
    assert h["x-idempotency-key"] == i.idempotency_key and h["authorization"] == f"Bearer {GATEWAY_TOKEN}"
    assert h["x-webhook-timestamp"] == str(ms(FIRE) // 1000)  # the engine's clock at send time
    mac = hmac.new(SIGNING.encode(), h["x-webhook-timestamp"].encode() + b"." + post.raw, hashlib.sha256).hexdigest()
    assert h["x-webhook-signature"] == f"sha256={mac}"
    doc = post.json
    assert doc["schemaVersion"] == 1 and doc["idempotencyKey"] == i.idempotency_key and doc["deliveryTarget"] == "qq-main"
    assert doc["work"] == {"id": "424242", "type": "illustration", "title": "The only cat",
                           "sourceUrl": "https://www.pixiv.net/artworks/424242", "spoiler": True, "tags": ["cats", "cute"]}
    assert doc["delivery"] == {"idempotencyKey": i.idempotency_key, "slotId": SLOT, "targetId": "cats",
                               "executionId": SLOT, "triggerSource": "cron"}
    message = doc["message"]
    assert message["text"] == "The only cat\nhttps://www.pixiv.net/artworks/424242"
    assert message["mediaTransport"] == "reference" and message["dropped"] == []
    assert [p["kind"] for p in message["parts"]] == ["text", "album", "album"]
    for n, media in enumerate(message["media"]):
        assert media["kind"] == "image" and media["mime"] == "image/png" and "dataBase64" not in media
        assert f"424242_p{n}.png" in media["url"] and "Signature" in media["url"]  # a presigned S3 GET
        assert media["sha256"] == hashlib.sha256(artifact_bytes("424242", n)).hexdigest()
    assert (i.status, i.remote_id) == ("delivered", "msg-1")


def test_gateway_base64_transport_inlines_the_stored_bytes(make_runtime, receiver):
    rt = start(make_runtime, receiver, routes=("qq-main",), gateway={"mediaTransport": "base64"})
    rt.settle()
    doc = receiver.at(GATEWAY, "POST")[0].json
    assert doc["message"]["mediaTransport"] == "base64"
    assert [base64.b64decode(m["dataBase64"]) for m in doc["message"]["media"]] == [artifact_bytes("424242", 0),
                                                                                    artifact_bytes("424242", 1)]
    assert all("url" not in m for m in doc["message"]["media"])


def test_gateway_base64_above_max_inline_bytes_dead_letters_without_sending(make_runtime, receiver):
    rt = start(make_runtime, receiver, routes=("qq-main",), gateway={"mediaTransport": "base64", "maxInlineBytes": 10})
    rt.settle()
    i = intents(rt)["qq-main"]
    assert i.outbox_status == "dead" and "maxInlineBytes=10" in i.last_error and receiver.at(GATEWAY) == []


@pytest.mark.parametrize("answer,status,ledger,requests", [
    ((200, {"status": "published", "id": "m-7"}), "submitted", "delivered", 1),
    ((200, {"status": "queued"}), "submitted", "delivered", 2),  # pending word: retried with the same key
    ((200, {"status": "blocked", "reason": "spam"}), "failed", "failed", 1),
    ((409, {"error": "exists"}), "duplicate", "duplicate", 1),
    ((200, {"status": "duplicate"}), "duplicate", "duplicate", 1),
    ((422, {"error": "bad"}), "failed", "failed", 1),
])
def test_gateway_ack_words(make_runtime, receiver, answer, status, ledger, requests):
    receiver.queue(GATEWAY, answer)
    rt = start(make_runtime, receiver, routes=("qq-main",))
    drive(rt)
    posts = receiver.at(GATEWAY, "POST")
    assert len(posts) == requests and len({p.headers["x-idempotency-key"] for p in posts}) == 1
    assert state(rt).cells["cats"].status == status and intents(rt)["qq-main"].status == ledger


# -- fan-out: one target, two routes of different types ------------------------------------------------


def test_fan_out_sends_each_route_once_and_submits_only_when_both_confirm(make_runtime, receiver):
    from pixivflow.services.delivery import deliver_intent

    rt = start(make_runtime, receiver, routes=("bot1-submit", "qq-main"))
    while rt.pumps["execute"].poll():
        pass
    rows = intents(rt)
    assert set(rows) == {"bot1-submit", "qq-main"}
    assert len({(r.work_id, r.work_type) for r in rows.values()}) == 1
    assert deliver_intent(rt.wiring.deliveries, rows["bot1-submit"]).action == "done"
    assert state(rt).cells["cats"].status == "delivery_pending"  # one route confirmed is not enough
    assert bucket_files(rt, f"{SLOT}/cats/424242")  # files kept while a route is open
    assert deliver_intent(rt.wiring.deliveries, rows["qq-main"]).action == "done"
    assert state(rt).cells["cats"].status == "submitted"
    rt.settle()  # the two outbox messages find settled rows
    assert len(receiver.at(SUBMIT, "POST")) == 1 and len(receiver.at(GATEWAY, "POST")) == 1
    assert {r.status for r in intents(rt).values()} == {"delivered"}
    # the originals went once both routes delivered; the previews stay for the retention
    assert sorted(bucket_files(rt, f"{SLOT}/cats/424242")) == ["424242_p0.png.preview.jpg", "424242_p1.png.preview.jpg"]


# -- outcome notifications (note §3) --------------------------------------------------------------------


def test_schedule_summary_is_sent_once_despite_repeated_rollups_and_sweeps(make_runtime, receiver):
    from pixivflow.services.rollup import close, rollup

    rt = start(make_runtime, receiver, targets=("cats", "landscape"))
    rt.settle()
    (post,) = receiver.at(SCHEDULE_OUTCOMES, "POST")
    assert post.headers["authorization"] == f"Bearer {TOKEN}" and post.headers["content-type"] == "application/json"
    body = post.json
    assert (body["schedule_id"], body["slot_id"]) == ("morning-tokyo", SLOT)
    assert [t["target_id"] for t in body["targets"]] == ["cats", "landscape"]
    cats = body["targets"][0]
    assert (cats["status"], cats["work_id"], cats["work_type"]) == ("submitted", "424242", "illustration")
    assert set(cats) >= {"terminal_reason_code", "reason", "stage", "retryable", "operator_hint", "candidate_report"}
    # landscape has no candidate in this catalogue
    assert body["targets"][1]["status"] == "no_candidate" and body["status"] == "partial"
    for _ in range(3):
        rollup(rt.wiring.slot_rollup, SLOT)
        close(rt.wiring.slot_rollup, state(rt))
        rt.clock.advance(5 * 60_000)
        rt.sweep()
        rt.pump()
    assert len(receiver.at(SCHEDULE_OUTCOMES)) == 1
    row = rt.wiring.outbox_rows.get("notification", f"notification:{SLOT}:summary")
    assert (row.status, row.attempts, row.target) == ("done", 1, "bot1-submit")


def test_a_crash_before_the_notification_row_is_repaired_by_the_sweep(make_runtime, receiver):
    from pixivflow.domain.errors import LedgerUnavailable

    rt = start(make_runtime, receiver)
    rows = rt.wiring.outbox_rows
    real = rows.enqueue
    crashed = []

    def crash_once(row, **kw):
        if not crashed:
            crashed.append(row.key)
            raise LedgerUnavailable("DynamoDB put_item failed: InternalServerError")
        return real(row, **kw)

    rows.enqueue = crash_once
    rt.pump()
    assert crashed == [f"notification:{SLOT}:summary"]
    slot = state(rt).slot
    assert slot.status == "running" and slot.open  # rows come before the outcome record: neither is written
    assert "execution.summary" not in state(rt).events and receiver.at(SCHEDULE_OUTCOMES) == []
    rt.clock.advance(60_000)  # the next sweep tick
    rt.sweep()
    rt.pump()
    (post,) = receiver.at(SCHEDULE_OUTCOMES, "POST")
    assert post.json["status"] == "success"
    slot = state(rt).slot
    assert slot.status == "success" and not slot.open
    rt.clock.advance(10 * 60_000)
    rt.sweep()
    rt.pump()
    assert len(receiver.at(SCHEDULE_OUTCOMES)) == 1


class Died(BaseException):
    """The invocation dies here: no except and no finally of ours runs (a Lambda killed mid-call)."""


def _die_at_the_notification(rt, where, key_prefix):
    """Kill the invocation that writes the first notification row starting with ``key_prefix``:
    right after the row's put (``row``), or at its queue send (``send``)."""
    rows, queues = rt.wiring.outbox_rows, rt.wiring.queues
    real_enqueue, real_send = rows.enqueue, queues.send_outbox
    died = []

    def enqueue(row, **kw):
        stored = real_enqueue(row, **kw)
        if where == "row" and not died and row.key.startswith(key_prefix):
            died.append(row.key)
            raise Died()
        return stored

    def send_outbox(messages):
        if where == "send" and not died and any(str(m.body.get("key")).startswith(key_prefix) for m in messages):
            died.append(messages[0].body["key"])
            raise Died()
        return real_send(messages)

    def revive():  # the next invocations run normally
        rows.enqueue, queues.send_outbox = real_enqueue, real_send

    rows.enqueue, queues.send_outbox = enqueue, send_outbox
    return died, revive


def _outcome_lines(logs, slot_id):
    return [line for line in logs.all() if line.get("message") == OUTCOME_MESSAGE and line.get("slot_id") == slot_id]


@pytest.mark.parametrize("where", ["row", "send"])
def test_a_deliverer_dying_at_the_notification_rows_leaves_one_outcome_line(make_runtime, receiver, logs, where):
    """Make sim's routes world, seeds 3901 and 4552: the deliverer that settled the last cell
    logged the schedule.outcome line, then died at the summary's row (after its put, or at its
    queue send) before closing the slot; a minute later the sweep took the record for an orphan
    and logged it again (and again, when the sweep died at the same row). The rows now come
    before the record, so a death there has logged nothing and the sweep logs the one line."""
    rt = start(make_runtime, receiver)
    died, revive = _die_at_the_notification(rt, where, f"notification:{SLOT}:summary")
    with pytest.raises(Died):
        rt.pump()
    assert died and state(rt).slot.open
    revive()
    rt.settle()
    [line] = _outcome_lines(logs, SLOT)
    assert line["status"] == "success" and line["cells"]["submitted"] == 1
    assert not state(rt).slot.open and state(rt).slot.status == "success"
    (post,) = receiver.at(SCHEDULE_OUTCOMES, "POST")
    assert post.json["status"] == "success"
    rt.clock.advance(10 * 60_000)
    rt.sweep()
    rt.pump()
    assert len(_outcome_lines(logs, SLOT)) == 1 and len(receiver.at(SCHEDULE_OUTCOMES)) == 1


@pytest.mark.parametrize("where", ["row", "send"])
def test_a_cancel_dying_at_the_refetch_verdict_row_leaves_one_outcome_line(make_runtime, receiver, logs, where):
    """Make sim's routes world, seed 4543: a consumer's cancel of a manual refetch closed its slot
    (``rollup.close``): it logged the outcome line, then its invocation died right after the
    refetch verdict's row was written; the sweep re-logged the orphaned record a minute later.
    The verdict row now comes before the record: the sweep's close writes and logs it once."""
    rt = make_runtime(FIRE, mutate=routes_config(receiver), catalog=CATALOG)
    manual = _refetch(rt)
    died, revive = _die_at_the_notification(rt, where, f"refetch-outcome:{manual}:")
    with pytest.raises(Died):
        rt.http("POST", f"/jobs/{manual}/cancel", {}, token=JOBS_TOKEN, function="job_events")
    assert died and state(rt, manual).slot.open
    assert state(rt, manual).cells["cats"].terminal_reason_code == "cancelled_by_consumer"  # the cancel committed
    revive()
    rt.settle()
    [line] = _outcome_lines(logs, manual)
    assert line["status"] == "failed"
    assert not state(rt, manual).slot.open
    (post,) = receiver.at(REFETCH_OUTCOMES, "POST")
    assert (post.json["request_id"], post.json["disposition"]) == (RID, "failed")
    rt.clock.advance(10 * 60_000)
    rt.sweep()
    rt.pump()
    assert len(_outcome_lines(logs, manual)) == 1 and len(receiver.at(REFETCH_OUTCOMES)) == 1


def test_a_lost_notification_message_is_re_driven_by_the_sweep(make_runtime, receiver):
    receiver.queue(SCHEDULE_OUTCOMES, (503, {"error": "busy"}))
    rt = start(make_runtime, receiver)
    rt.settle()
    assert len(receiver.at(SCHEDULE_OUTCOMES)) == 2  # one retry of the same row
    row = rt.wiring.outbox_rows.get("notification", f"notification:{SLOT}:summary")
    assert (row.status, row.attempts) == ("done", 2)


def _refetch(rt, target="cats"):
    status, body = rt.http("POST", f"/internal/targets/{target}/refetch", {"requestId": RID}, token=JOBS_TOKEN)
    assert status == 202, body
    return body["slotId"]


def test_refetch_verdict_for_a_manual_slot_ending_no_candidate(make_runtime, receiver):
    one_cat = {"illusts": [CAT], "novels": [], "ranking": {}}
    rt = start(make_runtime, receiver, catalog=one_cat)
    rt.settle()
    assert len(receiver.at(SCHEDULE_OUTCOMES)) == 1
    manual = _refetch(rt)
    rt.settle()
    manual_state = state(rt, manual)
    assert manual_state.cells["cats"].status == "no_candidate"
    (post,) = receiver.at(REFETCH_OUTCOMES, "POST")
    body = post.json
    assert (body["request_id"], body["disposition"]) == (RID, "no_alternative")
    assert body["skipped"] == {"total": 1, "duplicate": 1, "invalid": 0, "unavailable": 0}
    assert isinstance(body["reason"], str) and body["reason"]
    assert len(receiver.at(SCHEDULE_OUTCOMES)) == 1  # a manual slot sends no schedule summary
    assert len(receiver.at(SUBMIT, "POST")) == 1


def test_a_manual_slot_that_delivered_sends_no_verdict(make_runtime, receiver):
    rt = make_runtime(FIRE, mutate=routes_config(receiver), catalog=CATALOG)
    manual = _refetch(rt)
    rt.settle()
    assert state(rt, manual).cells["cats"].status == "submitted"
    (post,) = receiver.at(SUBMIT, "POST")
    assert post.fields()["refetch_request_id"] == [RID]
    assert receiver.at(REFETCH_OUTCOMES) == [] and receiver.at(SCHEDULE_OUTCOMES) == []
    assert rt.wiring.outbox_rows.due(rt.clock.now_ms() + 10**9) == []


@pytest.mark.size("large")  # an outage lived through on the virtual clock (tests/README.md, test sizes)
def test_a_secret_store_outage_at_a_notification_is_retried_never_dead_lettered_never_cached(make_runtime, receiver,
                                                                                              monkeypatch, logs):
    """Issue 21: the notification row is released unsent (its attempt given back) while SSM does
    not answer, and sent once it does; nothing of the outage is remembered."""
    import itertools

    from pixivflow.adapters.secret_refs import ssm_reader

    monkeypatch.delenv("TELEPOST_BOT1_SUBMIT_TOKEN")
    monkeypatch.setenv("ROUTE_SECRETS_PATH", "/pixivflow/routes")
    outage = {"on": False, "left": 2}
    calls = []

    def flaky(name):
        calls.append(outage["on"])
        if outage["on"]:
            raise RuntimeError("ThrottlingException: Rate exceeded")
        return ssm_reader(name)

    tick = itertools.count(step=1_000)  # every look is 1,000 s after the last: no value stays cached
    secrets = SecretStore(reader=flaky, sleep=lambda s: None, monotonic=lambda: float(next(tick)))
    rt = make_runtime(FIRE, mutate=routes_config(receiver), catalog=CATALOG, overrides={"secrets": secrets},
                      backend="twin", ssm=True)
    aws.client("ssm").put_parameter(Name="/pixivflow/routes/TELEPOST_BOT1_SUBMIT_TOKEN", Value="from-ssm-token",
                                      Type="SecureString")
    rows = rt.wiring.outbox_rows
    real_claim = rows.claim

    def claim(row, *args, **kwargs):  # SSM stops answering exactly while the notification is claimed, twice
        got = real_claim(row, *args, **kwargs)
        outage["on"] = bool(got is not None and got.kind == "notification" and outage["left"] > 0)
        outage["left"] -= outage["on"]
        return got

    monkeypatch.setattr(rows, "claim", claim)
    rt.fire("morning-tokyo", iso=FIRE)
    rt.settle()
    (post,) = receiver.at(SCHEDULE_OUTCOMES, "POST")
    assert post.headers["authorization"] == "Bearer from-ssm-token"
    row = rows.get("notification", f"notification:{SLOT}:summary")
    assert (row.status, row.attempts) == ("done", 1)  # two releases used no attempt
    assert len(logs.events("outbox.secret_unavailable")) == 2
    assert logs.events("outbox.dead") == []
    assert calls.count(True) == 2 * 3  # two outages of three quick tries each, then read again


ZH_TITLE = "猫" * 30 + "与海的故事" * 6  # 60 Han characters: enough text to detect a language from
NOVEL = {"id": 777001, "type": "novel", "title": ZH_TITLE, "tags": [{"name": "cats"}], "user": {"id": 2, "name": "writer"},
         "create_date": "2026-11-01T00:00:00+09:00", "total_bookmarks": 10, "total_view": 100, "x_restrict": 0,
         "page_count": 1, "text_length": 60}


@pytest.mark.parametrize("detect,expected", [(None, "Chinese (Mandarin) (cmn)"), (False, "")])
def test_language_is_rendered_for_every_novel_when_detection_is_on_filter_or_not(make_runtime, receiver, detect, expected):
    """PixivFlow fills ``{{language}}`` for a novel whenever ``detectLanguage`` is on (its default),
    with or without a ``languageFilter``; an illustration's is empty (the "unknown_and_missing" family)."""
    def with_novel_target(cfg):
        routes_config(receiver, multipart={"fields": {"lang": "{{language}}"}}, targets=("zh-novel",))(cfg)
        target = {"id": "zh-novel", "type": "novel", "mode": "search", "tag": "cats", "limit": 1, "storageMode": "cache",
                  "delivery": {"targets": ["bot1-submit"]}}
        if detect is not None:
            target["detectLanguage"] = detect
        cfg["targets"].append(target)

    rt = make_runtime(FIRE, mutate=with_novel_target, catalog={**CATALOG, "novels": [NOVEL]})
    assert rt.fire("morning-tokyo", iso=FIRE)["disposition"] == "accepted"
    rt.settle()
    (post,) = receiver.at(SUBMIT, "POST")
    assert post.fields()["lang"] == [expected]
    assert state(rt).cells["zh-novel"].status == "submitted"


def test_refetch_provenance_reaches_the_route_as_a_canonical_uuid(make_runtime, receiver):
    """{{refetchRequestId}} is the canonical lower-case hyphenated UUID whatever the spelling the
    request came in (PixivFlow 3.4.3; TelePost refuses anything else, permanently)."""
    rt = start(make_runtime, receiver)
    rt.settle()
    status, body = rt.http("POST", "/internal/targets/cats/refetch", {"requestId": RID.upper()}, token=JOBS_TOKEN)
    assert status == 202, body
    rt.settle()
    scheduled, manual = receiver.at(SUBMIT, "POST")
    assert scheduled.fields()["refetch_request_id"] == [""]  # a scheduled run carries none
    assert manual.fields()["refetch_request_id"] == [RID]


def test_a_job_key_that_is_not_a_uuid_is_delivered_without_provenance_and_said_once(make_runtime, receiver, logs):
    rt = start(make_runtime, receiver)
    rt.settle()
    task = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": "api:110:0f9a1b",
            "params": {"target_id": "cats", "query": {"tags": ["cats"]}}}
    status, body = rt.http("POST", "/jobs", task, token=JOBS_TOKEN, function="job_events")
    assert status in (200, 202), body
    rt.settle()
    posts = receiver.at(SUBMIT, "POST")
    assert len(posts) == 2 and posts[-1].fields()["refetch_request_id"] == [""]  # never the raw key
    [line] = logs.events("delivery.provenance_dropped")
    assert (line["level"], line["slot_id"], line["target_id"]) == ("WARNING", "morning-tokyo@manual-api:110:0f9a1b", "cats")
