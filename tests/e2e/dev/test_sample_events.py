"""The `events/*.json` samples (for `sam local invoke -e`) fed through their real handlers on the embedded runtime."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import TRIGGER_TOKEN, ms
from pixivflow.local.lambda_context import context_for

EVENTS = Path(__file__).resolve().parents[3] / "events"
SLOT = "morning-tokyo@2026-12-01T0800"
PLACEHOLDER = "<TRIGGER_TOKEN>"
SWEEP_KEYS = {"scanned", "queuedTooLong", "stalledNoHeartbeat", "recovered", "timedOut", "rolledUp", "redriven", "jobsRepaired", "errors",
              "activeSlots", "unrecoverable", "shardsWalked", "passComplete", "indexesEmpty"}


def sample(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def invoke(rt, function: str, event: dict):
    return rt.handlers[function](copy.deepcopy(event), context_for(function))


def cells(rt) -> dict[str, tuple[str, str | None]]:
    state = rt.wiring.ledger.load(SLOT)
    return {c.target_id: (c.status, c.work_id) for c in state.snapshot_cells()}


# -- the sample files themselves ---------------------------------------------------------------------


def test_every_entry_point_has_a_sample() -> None:
    names = {p.name for p in EVENTS.glob("*.json")}
    assert {"scheduler_fire.json", "http_run.json", "sqs_execution_batch.json", "sqs_outbox_batch.json",
            "sweep_tick.json"} <= names
    assert sample("scheduler_fire.json") == {"scheduleId": "morning-tokyo", "scheduledTime": "2026-11-30T23:00:00Z"}


def test_http_sample_is_a_complete_http_api_v2_payload() -> None:
    event = sample("http_run.json")
    assert event["version"] == "2.0"
    assert event["routeKey"] == "POST /internal/schedules/{scheduleId}/run"
    assert event["rawPath"] == "/internal/schedules/morning-tokyo/run"
    assert event["rawQueryString"] == ""
    assert event["headers"]["authorization"] == f"Bearer {PLACEHOLDER}"
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["requestContext"]["http"]["path"] == event["rawPath"]
    assert event["pathParameters"] == {"scheduleId": "morning-tokyo"}
    assert event["isBase64Encoded"] is False
    assert isinstance(json.loads(event["body"]), dict)


def test_sqs_samples_are_well_formed() -> None:
    execution = sample("sqs_execution_batch.json")["Records"]
    assert [json.loads(r["body"]) for r in execution] == [
        {"slotId": SLOT, "targetId": "cats"}, {"slotId": SLOT, "targetId": "landscape"}]
    assert len({r["messageId"] for r in execution}) == 2
    outbox = sample("sqs_outbox_batch.json")["Records"]
    assert len(outbox) == 1
    body = json.loads(outbox[0]["body"])
    assert body["kind"] == "delivery"
    assert body["key"].startswith("pixivflow:review:illustration:") and body["key"].endswith(f":{SLOT}:cats")
    assert all(r["eventSource"] == "aws:sqs" for r in execution + outbox)


# -- scheduler fire -----------------------------------------------------------------------------------


def test_scheduler_sample_admits_the_slot(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    result = invoke(rt, "trigger", sample("scheduler_fire.json"))
    assert result == {"status": "admitted", "slot_id": SLOT, "disposition": "accepted", "sent": 3}
    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.status == "pending"
    assert state.slot.trigger_source == "cron"
    assert state.slot.occurrence_at == ms("2026-11-30T23:00:00Z")
    assert cells(rt) == {"cats": ("pending", None), "landscape": ("pending", None), "ranking-daily": ("pending", None)}


# -- HTTP run -------------------------------------------------------------------------------------------


def test_http_sample_with_the_real_token_is_accepted(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    event = sample("http_run.json")
    event["headers"]["authorization"] = event["headers"]["authorization"].replace(PLACEHOLDER, TRIGGER_TOKEN)
    resp = invoke(rt, "trigger", event)
    assert resp["statusCode"] == 202
    assert json.loads(resp["body"]) == {
        "status": "accepted",
        "schedule": {"scheduleId": "morning-tokyo", "slotId": SLOT, "disposition": "accepted", "status": "pending"},
        "note": "queued",
    }
    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.trigger_source == "http"
    assert state.slot.slot_name == json.loads(event["body"])["label"]


def test_http_sample_with_the_placeholder_token_is_unauthorized(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    resp = invoke(rt, "trigger", sample("http_run.json"))
    assert resp["statusCode"] == 401
    assert json.loads(resp["body"]) == {"status": "error", "error": "unauthorized"}
    assert rt.wiring.ledger.load(SLOT) is None


# -- execution batch ------------------------------------------------------------------------------------


def test_execution_sample_moves_the_two_cells_it_names(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    result = invoke(rt, "execute", sample("sqs_execution_batch.json"))
    assert result == {"batchItemFailures": []}
    moved = cells(rt)
    assert moved["cats"][0] == "delivery_pending" and moved["cats"][1]
    assert moved["landscape"][0] == "delivery_pending" and moved["landscape"][1]
    assert moved["ranking-daily"] == ("pending", None)  # not named by the sample
    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.status == "running"
    assert sorted(i.target_id for i in state.intents) == ["cats", "landscape"]


def test_execution_record_with_an_unparsable_body_is_the_only_failure(make_runtime, logs) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    event = sample("sqs_execution_batch.json")
    bad = event["Records"][1]
    bad["body"] = "{not json"
    logs()  # drop what the fire logged
    result = invoke(rt, "execute", event)
    assert result == {"batchItemFailures": [{"itemIdentifier": bad["messageId"]}]}
    # the failure is told once, by the record's id, the times SQS handed it out and the error's type
    lines, printed = logs()
    failed = [line for line in lines if line.get("event") == "sqs.record_failed"]
    assert [(f["message_id"], f["receive_count"], f["error_type"], f["level"]) for f in failed] == [
        (bad["messageId"], "1", "ValidationError", "ERROR")]
    assert "{not json" not in printed  # never the body
    moved = cells(rt)
    assert moved["cats"][0] == "delivery_pending"
    assert moved["landscape"] == ("pending", None)


def test_execution_record_missing_a_field_is_the_only_failure(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    event = sample("sqs_execution_batch.json")
    bad = event["Records"][0]
    bad["body"] = json.dumps({"slotId": SLOT})
    result = invoke(rt, "execute", event)
    assert result == {"batchItemFailures": [{"itemIdentifier": bad["messageId"]}]}
    moved = cells(rt)
    assert moved["cats"] == ("pending", None)
    assert moved["landscape"][0] == "delivery_pending"


@pytest.mark.parametrize("function", ["execute", "deliver"])
@pytest.mark.parametrize("event", [{}, {"Records": []}, {"Records": "m1"}], ids=["no-records", "empty", "not-a-list"])
def test_an_event_that_is_no_sqs_batch_fails_the_invocation_and_changes_nothing(make_runtime, function, event) -> None:
    """No record can be reported as a batchItemFailure, so the invocation fails (Lambda retries the
    batch) rather than answering "all processed", which would delete it."""
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    before = cells(rt)
    with pytest.raises(ValueError, match="Records"):
        invoke(rt, function, event)
    assert cells(rt) == before


def test_execution_sample_for_a_slot_that_does_not_exist_is_processed(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    assert invoke(rt, "execute", sample("sqs_execution_batch.json")) == {"batchItemFailures": []}
    assert rt.wiring.ledger.load(SLOT) is None


# -- outbox batch ---------------------------------------------------------------------------------------


def outbox_key() -> str:
    return json.loads(sample("sqs_outbox_batch.json")["Records"][0]["body"])["key"]


def test_outbox_sample_before_its_intent_exists_is_a_processed_no_op(make_runtime, downstream) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    result = invoke(rt, "deliver", sample("sqs_outbox_batch.json"))
    assert result == {"batchItemFailures": []}  # processed (deleted from the queue), not retried
    assert downstream.requests == []
    state = rt.wiring.ledger.load(SLOT)
    assert state.intents == []
    assert cells(rt)["cats"] == ("pending", None)


def test_outbox_sample_delivers_once_its_intent_exists(make_runtime, downstream) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    assert invoke(rt, "execute", sample("sqs_execution_batch.json")) == {"batchItemFailures": []}
    key = outbox_key()
    intents = {i.target_id: i for i in rt.wiring.ledger.load(SLOT).intents}
    # the sample names exactly the intent the demo catalogue produces for cats
    assert intents["cats"].idempotency_key == key

    assert invoke(rt, "deliver", sample("sqs_outbox_batch.json")) == {"batchItemFailures": []}
    assert [r.headers["idempotency-key"] for r in downstream.requests] == [key]
    assert downstream.requests[0].body["target_id"] == "cats"
    state = rt.wiring.ledger.load(SLOT)
    cats = next(i for i in state.intents if i.target_id == "cats")
    assert (cats.status, cats.outbox_status, cats.attempts) == ("delivered", "done", 1)
    assert state.cells["cats"].status == "submitted"

    # a redelivered copy of the same message (and the execute step's own outbox message) sends nothing more
    assert invoke(rt, "deliver", sample("sqs_outbox_batch.json")) == {"batchItemFailures": []}
    rt.settle()
    assert sum(1 for r in downstream.requests if r.headers["idempotency-key"] == key) == 1
    assert len(downstream.requests) == 3
    assert rt.wiring.ledger.load(SLOT).slot.status == "success"


# -- sweep tick -----------------------------------------------------------------------------------------


def test_sweep_sample_returns_the_counters(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    idle = invoke(rt, "stall_sweep", sample("sweep_tick.json"))
    # nothing done; every sparse index empty (issue 25's probe), so no shard was queried: a whole pass
    assert idle == dict.fromkeys(SWEEP_KEYS, 0) | {"passComplete": 1, "indexesEmpty": 3}
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    busy = invoke(rt, "stall_sweep", sample("sweep_tick.json"))
    assert set(busy) == SWEEP_KEYS
    # one active slot, inside its budget: nothing for the stall rules to return (spec §7.2)
    assert busy["activeSlots"] == 1 and busy["scanned"] == 0 and busy["errors"] == 0 and busy["recovered"] == 0


@pytest.mark.parametrize("event", [{}, {"anything": "else"}, {"source": "aws.scheduler", "detail-type": "Scheduled Event"}])
def test_sweep_ignores_the_content_of_its_event(make_runtime, event) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    assert invoke(rt, "stall_sweep", event) == invoke(rt, "stall_sweep", sample("sweep_tick.json"))


@pytest.mark.parametrize("raised", ["client-error", "url-with-a-token"])
def test_an_outbox_record_whose_handling_raises_is_logged_by_type_and_code_never_by_its_text(make_runtime, logs, monkeypatch,
                                                                                             raised) -> None:
    from botocore.exceptions import ClientError

    import pixivflow.services.delivery as delivery

    secret = "123456:AAE-route-token-never-logged"
    if raised == "client-error":
        error = ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": f"bot{secret}"}},
                            "UpdateItem")
    else:
        error = RuntimeError(f"connect failed: https://api.telegram.org/bot{secret}/sendMessage")

    def boom(*args, **kwargs):
        raise error

    monkeypatch.setattr(delivery, "deliver_message", boom)
    rt = make_runtime("2026-11-30T23:00:00Z")
    event = sample("sqs_outbox_batch.json")
    logs()
    result = invoke(rt, "deliver", event)
    assert result == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}
    lines, printed = logs()
    failed = [line for line in lines if line.get("event") == "sqs.record_failed"]
    assert [f["message_id"] for f in failed] == [r["messageId"] for r in event["Records"]]
    assert {f["error_type"] for f in failed} == {type(error).__name__}
    assert {f.get("error_code") for f in failed} == ({"ProvisionedThroughputExceededException"} if raised == "client-error"
                                                    else {None})
    assert secret not in printed
