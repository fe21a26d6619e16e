"""The ``schedule.outcome`` record of a finished occurrence, end to end (spec §3.4 step 5, §9, §13.18).

Each test drives real occurrences through the trigger, execute, deliver and stall_sweep
handlers and reads the record the way an operator would: the JSON log line
"Schedule occurrence reached a terminal outcome" on stdout, and the persisted
``EVT#L#execution.summary`` event next to the slot.
"""

from __future__ import annotations


from pixivflow import aws
import pytest

from conftest import ms
from pixivflow.services.rollup import finish, record_outcome, rollup

T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
T0_MS = ms(T0)
OUTCOME_MESSAGE = "Schedule occurrence reached a terminal outcome"
OUTCOME_KEYS = ("event", "outcome_version", "schedule_id", "slot_id", "occurrence_at", "occurrence_date", "status",
                "business_status", "alertable", "duration_ms", "cells")
NOTHING = {"id": "nothing", "type": "illustration", "mode": "search", "tag": "no-such-tag-anywhere", "limit": 1,
           "storageMode": "cache", "delivery": {"target": "review"}}
DUPLICATE_ANSWER = (200, {"data": {"review_id": "r-old", "status": "published", "reused": True,
                                   "reuse_reason": "historical_duplicate"}})


def config(*targets: str, extra_targets=(), route=None):
    def mutate(cfg):
        cfg["targets"].extend(extra_targets)
        cfg["schedules"].append({"id": "plan", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": list(targets)})
        if route:
            cfg["delivery"]["targets"]["review"].update(route)

    return mutate


SLOT = "plan@2026-12-01T0800"


def summary_events(rt, slot_id: str = SLOT) -> list[dict]:
    """Every persisted execution.summary item of the slot, read straight from the table."""
    resp = aws.client("dynamodb").query(
        TableName=rt.env["LEDGER_TABLE"], KeyConditionExpression="pk = :pk AND begins_with(sk, :evt)",
        ExpressionAttributeValues={":pk": {"S": f"SLOT#{slot_id}"}, ":evt": {"S": "EVT#L#execution.summary"}},
        ConsistentRead=True,
    )
    return resp["Items"]


def the_record(rt, logs, slot_id: str = SLOT) -> dict:
    """Exactly one logged record and one persisted event, and they are the same object."""
    logged = logs.outcomes(slot_id, OUTCOME_KEYS)
    assert len(logged) == 1, logged
    assert len(summary_events(rt, slot_id)) == 1
    event = rt.wiring.ledger.get_event(slot_id, "execution.summary")
    assert event["detail"]["outcome"] == logged[0]
    return logged[0]


def run_to_end(rt):
    rt.fire("plan", iso=T0)
    rt.settle()


# -- counts ------------------------------------------------------------------------------------------


def test_one_submitted_cell_gives_exactly_one_record_with_exact_counts(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=config("cats"))
    rt.fire("plan", iso=T0)
    rt.clock.advance(1_000)
    rt.pumps["execute"].poll()  # execution starts the slot at T0+1s
    assert logs.outcomes(SLOT, OUTCOME_KEYS) == []  # delivery_pending: nothing yet
    rt.clock.advance(2_000)
    rt.pump()  # the ACK arrives at T0+3s

    state = rt.wiring.ledger.load(SLOT)
    cell = state.cells["cats"]
    assert state.slot.status == "success" and cell.status == "submitted"
    [request] = downstream.requests
    assert request.body["work_id"] == cell.work_id

    record = the_record(rt, logs)
    assert record == {
        "event": "schedule.outcome",
        "outcome_version": 2,  # the 3.x record with business_status (incl. cancelled) and alertable
        "schedule_id": "plan",
        "slot_id": SLOT,
        "occurrence_at": "2026-11-30T23:00:00.000Z",
        "occurrence_date": "2026-12-01",
        "status": "success",
        "business_status": "success",
        "alertable": False,
        "duration_ms": 2_000,
        "cells": {
            "total": 1, "submitted": 1, "no_match": 0, "duplicate": 0, "all_duplicates": False,
            "executor_failed": 0, "delivery_failed": 0,
            "targets": [{
                "target_id": "cats", "status": "submitted", "work_id": cell.work_id, "error": None,
                "terminal_reason_code": None, "terminal_reason_message": None,
                "candidate_report": cell.candidate_report,
            }],
        },
    }
    assert cell.candidate_report["attempted"] == 1

    summary = rt.wiring.ledger.get_event(SLOT, "execution.summary")["detail"]["summary"]
    assert summary["status"] == "completed" and summary["executionId"] == SLOT and summary["durationMs"] == 2_000
    assert summary["candidates"] == {"selected": 1, "none": []}
    assert summary["deliveries"] == [{"target": "review", "pixivId": cell.work_id, "status": "delivered", "attempts": 1,
                                      "remoteStatus": "pending_review", "reviewId": "r-1"}]
    assert summary["warnings"] == []


def test_submitted_plus_no_candidate_is_partial_with_business_partial_success(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=config("cats", "nothing", extra_targets=[NOTHING]))
    run_to_end(rt)

    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.status == "partial"
    nothing = state.cells["nothing"]
    assert (nothing.status, nothing.terminal_reason_code, nothing.work_id) == ("no_candidate", "no_candidate", None)
    assert len(downstream.requests) == 1

    record = the_record(rt, logs)
    assert (record["status"], record["business_status"], record["alertable"]) == ("partial", "partial_success", False)
    cells = {k: v for k, v in record["cells"].items() if k != "targets"}
    assert cells == {"total": 2, "submitted": 1, "no_match": 1, "duplicate": 0, "all_duplicates": False,
                     "executor_failed": 0, "delivery_failed": 0}
    targets = {t["target_id"]: t for t in record["cells"]["targets"]}
    assert list(targets) == ["cats", "nothing"]  # the slot's frozen target order
    assert targets["nothing"]["terminal_reason_code"] == "no_candidate"
    assert targets["nothing"]["terminal_reason_message"] == "没有找到合适的新作品"

    summary = rt.wiring.ledger.get_event(SLOT, "execution.summary")["detail"]["summary"]
    assert summary["status"] == "partial"
    assert [n["target"] for n in summary["candidates"]["none"]] == ["nothing"]
    assert [w.split(":")[0] for w in summary["warnings"]] == ["no_candidate"]


@pytest.mark.parametrize(
    "targets, duplicated, expected",
    [
        # (total - submitted) = 2 > 0 and duplicate == 2
        (("cats", "landscape", "ranking-daily"), {"landscape", "ranking-daily"},
         dict(status="partial", business="partial_success", submitted=1, duplicate=2, no_match=0, all_duplicates=True)),
        # nothing submitted, every cell a duplicate: a no-content run, not an alert
        (("cats", "landscape", "ranking-daily"), {"cats", "landscape", "ranking-daily"},
         dict(status="failed", business="duplicate_only", submitted=0, duplicate=3, no_match=0, all_duplicates=True)),
        # duplicate 1 != (total - submitted) 2
        (("cats", "landscape", "nothing"), {"landscape"},
         dict(status="partial", business="partial_success", submitted=1, duplicate=1, no_match=1, all_duplicates=False)),
    ],
    ids=["two-duplicates-one-submitted", "all-duplicates", "duplicate-and-no-candidate"],
)
def test_all_duplicates_follows_the_formula(make_runtime, downstream, logs, targets, duplicated, expected):
    rt = make_runtime(T0, mutate=config(*targets, extra_targets=[NOTHING]))
    downstream.state.responder = lambda req: DUPLICATE_ANSWER if req.body.get("target_id") in duplicated else None
    run_to_end(rt)

    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.status == expected["status"]
    for target in duplicated:
        assert (state.cells[target].status, state.cells[target].terminal_reason_code) == ("duplicate", "duplicate_exhausted")

    record = the_record(rt, logs)
    cells = record["cells"]
    assert record["status"] == expected["status"]
    assert record["business_status"] == expected["business"]
    assert record["alertable"] is False
    assert (cells["total"], cells["submitted"], cells["duplicate"], cells["no_match"]) == (
        3, expected["submitted"], expected["duplicate"], expected["no_match"])
    assert cells["all_duplicates"] is expected["all_duplicates"]
    assert cells["executor_failed"] == cells["delivery_failed"] == 0


@pytest.mark.parametrize("how", ["rejected", "retries_exhausted"])
def test_a_dead_delivery_counts_as_delivery_failed_not_executor_failed(make_runtime, downstream, logs, how):
    rt = make_runtime(T0, mutate=config("cats", route={"maxAttempts": 2}))
    if how == "rejected":
        downstream.state.responder = lambda req: (400, {"error": "payload refused"})
    else:
        downstream.state.responder = lambda req: (503, {"error": "try later"})
    run_to_end(rt)

    state = rt.wiring.ledger.load(SLOT)
    cell = state.cells["cats"]
    assert state.slot.status == "failed"
    assert (cell.status, cell.terminal_reason_code, cell.terminal_reason_message) == (
        "failed", "delivery_abandoned", "投稿未被处理，已放弃")
    [intent] = state.intents
    assert (intent.status, intent.outbox_status) == ("failed", "dead")
    assert len(downstream.requests) == (1 if how == "rejected" else 2)

    record = the_record(rt, logs)
    assert (record["status"], record["business_status"], record["alertable"]) == ("failed", "failed", True)
    cells = record["cells"]
    assert (cells["delivery_failed"], cells["executor_failed"], cells["submitted"], cells["total"]) == (1, 0, 0, 1)
    assert cells["targets"][0]["terminal_reason_code"] == "delivery_abandoned"


# -- when there is (no) record -----------------------------------------------------------------------


def test_a_slot_left_with_a_delivery_pending_cell_has_no_record_until_it_settles(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=config("cats", "landscape"))
    downstream.state.responder = lambda req: (503, {"error": "down"}) if req.body.get("target_id") == "landscape" else None
    rt.fire("plan", iso=T0)
    rt.pump()
    for _ in range(3):  # a few minutes of sweeps and retries while landscape's route is down
        rt.clock.advance(60_000)
        rt.pump()
        rt.sweep()
        rt.pump()

    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.status == "running"
    assert state.cells["cats"].status == "submitted"
    assert state.cells["landscape"].status == "delivery_pending"
    assert logs.outcomes(SLOT, OUTCOME_KEYS) == []
    assert summary_events(rt) == []
    assert rollup(rt.wiring.slot_rollup, SLOT) == "running"  # an explicit rollup changes nothing either
    assert logs.outcomes(SLOT, OUTCOME_KEYS) == [] and summary_events(rt) == []

    downstream.state.responder = None  # the route recovers
    rt.settle()
    assert rt.wiring.ledger.get_slot(SLOT).status == "success"
    record = the_record(rt, logs)
    assert (record["cells"]["submitted"], record["cells"]["total"], record["business_status"]) == (2, 2, "success")


@pytest.mark.parametrize("ending", ["delivered", "stalled"])
def test_finishing_twice_still_gives_one_logged_record_and_one_event(make_runtime, downstream, logs, ending):
    rt = make_runtime(T0, mutate=config("cats"))
    rt.fire("plan", iso=T0)
    if ending == "delivered":
        rt.pump()
        expected_status = "success"
    else:
        aws.client("sqs").purge_queue(QueueUrl=rt.env["EXECUTION_QUEUE_URL"])  # admitted, never executed
        rt.clock.set(T0_MS + 30 * 60_000)
        assert rt.sweep()["queuedTooLong"] == 1
        expected_status = "failed"
    first = the_record(rt, logs)
    first_event = rt.wiring.ledger.get_event(SLOT, "execution.summary")
    assert first["status"] == expected_status

    # Everything that could finish the slot again, later.
    rt.clock.advance(5 * 60_000)
    assert rollup(rt.wiring.slot_rollup, SLOT) == expected_status
    state = rt.wiring.ledger.load(SLOT)
    finish(rt.wiring.slot_rollup, state, expected_status)
    stale = rt.wiring.ledger.load(SLOT)
    stale.events.pop("execution.summary", None)  # a finisher that read the slot before the record existed
    # It finds the record already durable and logged: nothing is written, nothing logged again.
    assert record_outcome(rt.wiring.slot_rollup, stale) is True
    rt.sweep()
    assert rt.fire("plan", iso=T0)["disposition"] in ("already_completed", "rejected")
    rt.settle()

    assert the_record(rt, logs) == first
    assert rt.wiring.ledger.get_event(SLOT, "execution.summary") == first_event  # not rewritten
    assert rt.wiring.ledger.get_slot(SLOT).status == expected_status
    assert len(downstream.requests) == (1 if ending == "delivered" else 0)
