"""The trigger function's HTTP routes through the real handler (spec §11.1, §11.3, §12.6).

Every case asserts what the caller sees (status and exact body) and what the ledger holds.
The virtual clock starts one minute before morning-tokyo's 08:00 Asia/Tokyo fire (23:00Z).
"""

from __future__ import annotations

import threading

from conftest import claim, JOBS_TOKEN, TRIGGER_TOKEN, ms

import pixivflow
from pixivflow.services import manual

SLOT = "morning-tokyo@2026-12-01T0800"
RID = "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab"
RID_UPPER = "9A1B2C3D-4E5F-4A6B-9C7D-8E9F0A1B2C3D"
TOKEN_MISSING = {"status": "error", "error": "endpoint disabled: token not configured"}
UNAUTHORIZED = {"status": "error", "error": "unauthorized"}
NOT_A_UUID = {"status": "error", "error": "requestId must be a UUID"}


def run(rt, schedule="morning-tokyo", body=None, token=TRIGGER_TOKEN, **kw):
    return rt.http("POST", f"/internal/schedules/{schedule}/run", body, token=token, **kw)


def refetch(rt, target="cats", body=None, token=JOBS_TOKEN):
    return rt.http("POST", f"/internal/targets/{target}/refetch", body, token=token)


def refetch_status(rt, request_id, target="cats", token=JOBS_TOKEN):
    return rt.http("GET", f"/internal/targets/{target}/refetch/{request_id}", token=token)


def slot_ids(rt):
    """Every slot item in the table (a scan; the table also holds REQUEST# identity items)."""
    from pixivflow import aws

    pages = aws.client("dynamodb").get_paginator("scan").paginate(
        TableName=rt.env["LEDGER_TABLE"], FilterExpression="sk = :m AND begins_with(pk, :p)",
        ExpressionAttributeValues={":m": {"S": "META"}, ":p": {"S": "SLOT#"}})
    return sorted(item["slotId"]["S"] for page in pages for item in page["Items"])


def manual_slot_ids(rt):
    return [s for s in slot_ids(rt) if "@manual-" in s]


def fail_sends(monkeypatch, rt):
    """Every SendMessageBatch entry fails (the queue is unreachable)."""
    monkeypatch.setattr(rt.wiring.queues, "send_execution", lambda messages: list(range(len(messages))))


# -- /health and auth ------------------------------------------------------------------------


def test_health_needs_no_token(make_runtime):
    rt = make_runtime()
    assert rt.http("GET", "/health") == (200, {"status": "ok", "service": "pixivflow-scheduler-trigger",
                                               "version": pixivflow.__version__, "commit": None})


INTERNAL_ROUTES = [
    ("GET", "/internal/schedules", None),
    ("POST", "/internal/schedules/morning-tokyo/run", None),
    ("POST", "/internal/outbox/drain", None),
    ("POST", "/internal/targets/cats/refetch", {"requestId": RID}),
    ("GET", f"/internal/targets/cats/refetch/{RID}", None),
]


def test_every_internal_route_fails_closed_without_a_configured_token(make_runtime):
    rt = make_runtime(tokens={"trigger": "", "jobs": ""})
    for method, path, body in INTERNAL_ROUTES:
        assert rt.http(method, path, body, token="anything") == (503, TOKEN_MISSING), path
        assert rt.http(method, path, body) == (503, TOKEN_MISSING), path
    assert slot_ids(rt) == []


def test_missing_or_wrong_bearer_is_401_and_admits_nothing(make_runtime):
    rt = make_runtime()
    assert run(rt, token=None) == (401, UNAUTHORIZED)
    assert run(rt, token=TRIGGER_TOKEN + "x") == (401, UNAUTHORIZED)
    assert run(rt, token=TRIGGER_TOKEN[:-1]) == (401, UNAUTHORIZED)
    assert run(rt, token=None, headers={"Authorization": f"Bearer{TRIGGER_TOKEN}"}) == (401, UNAUTHORIZED)
    assert run(rt, token=None, headers={"Authorization": f"Basic {TRIGGER_TOKEN}"}) == (401, UNAUTHORIZED)
    assert slot_ids(rt) == []


def test_the_two_tokens_never_open_each_others_routes(make_runtime):
    rt = make_runtime()
    assert run(rt, token=JOBS_TOKEN) == (401, UNAUTHORIZED)
    assert rt.http("GET", "/internal/schedules", token=JOBS_TOKEN) == (401, UNAUTHORIZED)
    assert rt.http("POST", "/internal/outbox/drain", token=JOBS_TOKEN) == (401, UNAUTHORIZED)
    assert refetch(rt, body={"requestId": RID}, token=TRIGGER_TOKEN) == (401, UNAUTHORIZED)
    assert refetch_status(rt, RID, token=TRIGGER_TOKEN) == (401, UNAUTHORIZED)
    assert slot_ids(rt) == []


def test_only_the_jobs_token_being_configured_keeps_trigger_routes_closed(make_runtime):
    rt = make_runtime(tokens={"trigger": "", "jobs": JOBS_TOKEN})
    assert run(rt, token=JOBS_TOKEN) == (503, TOKEN_MISSING)
    status, body = refetch(rt, body={"requestId": RID})
    assert (status, body["disposition"]) == (202, "accepted")


def test_an_unknown_route_is_a_plain_404(make_runtime):
    rt = make_runtime()
    assert rt.http("GET", "/internal/nothing-here", token=TRIGGER_TOKEN) == (404, {"status": "error", "error": "not found"})


# -- GET /internal/schedules -----------------------------------------------------------------------


def test_schedule_listing_names_the_occurrence_a_trigger_would_run_now(make_runtime):
    def mutate(cfg):
        cfg["schedules"].append({"id": "paused", "cron": "0 9 * * *", "enabled": False, "targetIds": ["cats"]})
        cfg["schedules"].append({"id": "never", "cron": "0 0 30 2 *", "targetIds": ["dogs"]})

    rt = make_runtime(mutate=mutate)
    assert rt.http("GET", "/internal/schedules", token=TRIGGER_TOKEN) == (200, {"schedules": [
        {"scheduleId": "morning-tokyo", "mode": "external", "occurrence": SLOT},
        {"scheduleId": "evening-berlin", "mode": "external", "occurrence": None},  # 18:30Z: long expired
        {"scheduleId": "noon-flaky", "mode": "external", "occurrence": None},
        {"scheduleId": "never", "mode": "external", "occurrence": None},  # February 30th never fires
    ]})
    assert slot_ids(rt) == []  # listing resolves, it never admits


def test_schedule_listing_reports_the_configured_mode(make_runtime):
    def mutate(cfg):
        cfg["schedulerRuntime"]["mode"] = "internal"

    rt = make_runtime("2026-12-01T18:40:00Z", mutate=mutate)
    status, body = rt.http("GET", "/internal/schedules", token=TRIGGER_TOKEN)
    assert status == 200
    assert body["schedules"][1] == {"scheduleId": "evening-berlin", "mode": "internal",
                                    "occurrence": "evening-berlin@2026-12-01T1930"}


# -- POST /internal/schedules/{id}/run ---------------------------------------------------------------


def test_run_accepts_the_occurrence_due_now(make_runtime):
    rt = make_runtime()
    assert run(rt) == (202, {"status": "accepted", "schedule": {
        "scheduleId": "morning-tokyo", "slotId": SLOT, "disposition": "accepted", "status": "pending"}, "note": "queued"})
    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.trigger_source == "http" and state.slot.slot_name == "08:00"
    # admission writes the slot alone: its targetIds are the frozen cells; each cell's first claim writes its item
    assert [c.target_id for c in state.snapshot_cells()] == ["cats", "landscape", "ranking-daily"] and state.cells == {}


def test_run_label_names_the_slot_and_is_cut_to_80_chars(make_runtime):
    rt = make_runtime()
    status, _ = run(rt, body={"label": "  " + "早" * 100 + "  ", "extra": 1})
    assert status == 202
    assert rt.wiring.ledger.get_slot(SLOT).slot_name == "早" * 80


def test_unknown_or_disabled_schedule_is_404(make_runtime):
    def mutate(cfg):
        cfg["schedules"][1]["enabled"] = False

    rt = make_runtime(mutate=mutate)
    assert run(rt, "nope") == (404, {"status": "error", "error": "unknown schedule: nope"})
    assert run(rt, "evening-berlin") == (404, {"status": "error", "error": "unknown schedule: evening-berlin"})
    assert slot_ids(rt) == []


def test_a_trigger_past_the_grace_window_is_410_and_never_back_fills(make_runtime):
    rt = make_runtime("2026-12-01T01:00:00Z")  # 2 h after the 23:00Z fire; grace is 90 min
    assert run(rt) == (410, {"status": "error", "error": f"occurrence {SLOT} has expired (grace 90m)"})
    assert slot_ids(rt) == []


def test_a_trigger_too_early_for_its_occurrence_is_425(make_runtime, monkeypatch):
    # The resolver never picks a fire more than 15 min ahead, so the 425 branch of the window
    # check is reached with a resolver that names the fire 30 minutes early.
    from pixivflow.services import trigger

    real = trigger.resolve_occurrence
    monkeypatch.setattr(trigger, "resolve_occurrence", lambda sid, cron, tz, at: real(sid, cron, tz, at + 30 * 60_000))
    rt = make_runtime("2026-11-30T22:30:00Z")
    assert run(rt) == (425, {"status": "error", "error": f"occurrence {SLOT} is not due yet"})
    assert slot_ids(rt) == []


def test_a_schedule_that_never_fires_is_400(make_runtime):
    def mutate(cfg):
        cfg["schedules"].append({"id": "never", "cron": "0 0 30 2 *", "targetIds": ["dogs"]})

    rt = make_runtime(mutate=mutate)
    assert run(rt, "never") == (400, {"status": "error",
                                      "error": "schedule never has no fire of '0 0 30 2 *' in UTC near this trigger"})


def test_an_invalid_run_body_is_400_never_422(make_runtime):
    rt = make_runtime()
    for body, error in [
        ({"label": 3}, "label: Input should be a valid string"),
        ("not json", "body: JSON decode error"),
        ([1, 2], "body: Input should be a valid dictionary or object to extract fields from"),
    ]:
        assert run(rt, body=body) == (400, {"status": "error", "error": error})
    assert slot_ids(rt) == []


def test_body_validation_never_answers_before_auth_or_the_schedule_check(make_runtime):
    rt = make_runtime()
    assert run(rt, body={"label": 3}, token=None) == (401, UNAUTHORIZED)
    assert run(rt, "nope", body={"label": 3}) == (404, {"status": "error", "error": "unknown schedule: nope"})


def test_a_second_trigger_while_every_cell_is_leased_is_202_running(make_runtime):
    rt = make_runtime()
    assert run(rt)[0] == 202
    now = rt.clock.now_ms()
    for target in ("cats", "landscape", "ranking-daily"):
        assert claim(rt.wiring.ledger, SLOT, target, "worker-elsewhere", now, 180_000) is not None
    assert run(rt) == (202, {"status": "running", "schedule": {
        "scheduleId": "morning-tokyo", "slotId": SLOT, "disposition": "already_running", "status": "pending"},
        "note": "already_running"})


def test_a_completed_occurrence_answers_200_with_its_cells(make_runtime, downstream):
    rt = make_runtime()
    assert run(rt)[0] == 202
    rt.settle()
    cells = rt.wiring.ledger.load(SLOT).snapshot_cells()
    status, body = run(rt)
    assert status == 200
    assert body == {"status": "completed", "note": "already_completed", "schedule": {
        "scheduleId": "morning-tokyo", "slotId": SLOT, "disposition": "already_completed", "status": "success",
        "alreadyCompleted": True,
        "cells": [{"targetId": c.target_id, "status": "submitted", "workId": c.work_id} for c in cells]}}
    assert [c["targetId"] for c in body["schedule"]["cells"]] == ["cats", "landscape", "ranking-daily"]
    assert len(downstream.requests) == 3  # the replay delivered nothing


def test_a_dispatch_failure_is_503_rejected_and_the_sweep_still_runs_the_slot(make_runtime, monkeypatch):
    rt = make_runtime()
    fail_sends(monkeypatch, rt)
    assert run(rt) == (503, {"status": "rejected", "schedule": {
        "scheduleId": "morning-tokyo", "slotId": SLOT, "disposition": "rejected", "status": "pending"}, "note": "rejected"})
    assert rt.wiring.ledger.load(SLOT).slot.target_ids == ["cats", "landscape", "ranking-daily"]  # durable
    monkeypatch.undo()
    rt.settle()
    assert rt.wiring.ledger.get_slot(SLOT).status == "success"


def test_an_unexpected_failure_is_500_with_the_resume_hint(make_runtime, monkeypatch):
    from pixivflow.http import trigger_api

    def explode(*args, **kwargs):
        raise RuntimeError("ledger on fire")

    monkeypatch.setattr(trigger_api, "run_now", explode)
    rt = make_runtime()
    assert run(rt) == (500, {"status": "error", "error": "schedule run failed; the occurrence will resume on the next trigger"})


def test_correlation_headers_never_change_identity(make_runtime):
    rt = make_runtime()
    first = run(rt, headers={"x-schedule-attempt-id": "a-1", "x-schedule-provider": "cron-job-org"})
    second = run(rt, headers={"x-attempt-id": "b-2", "x-schedule-provider": "cloudflare"})
    third = run(rt)
    assert {r[1]["schedule"]["slotId"] for r in (first, second, third)} == {SLOT}
    assert slot_ids(rt) == [SLOT]


def test_drain_reports_its_counters(make_runtime):
    rt = make_runtime()
    assert rt.http("POST", "/internal/outbox/drain", token=TRIGGER_TOKEN) == (200, {"status": "ok", "result": {
        "queued": 0, "kinds": {"delivery": 0, "event_callback": 0, "notification": 0}, "unsent": 0}})


# -- POST /internal/targets/{id}/refetch ---------------------------------------------------------------


BAD_REFETCH_BODIES = [
    {"requestId": "bad"},
    {"requestId": "3f2b8c1e-4d5a-0b7c-8e9f-0123456789ab"},  # version 0
    {"requestId": "3f2b8c1e-4d5a-4b7c-ce9f-0123456789ab"},  # variant c
    {"requestId": "3f2b8c1e4d5a4b7c8e9f0123456789ab"},  # no dashes
    {"requestId": f" {RID} "},  # whitespace is not part of a UUID
    {"requestId": 12345},
    {},
    None,
    "not json",
    [RID],
]


def test_refetch_needs_a_uuid_request_id(make_runtime):
    rt = make_runtime()
    for body in BAD_REFETCH_BODIES:
        assert refetch(rt, body=body) == (400, NOT_A_UUID), body
    assert slot_ids(rt) == []


def test_refetch_correlation_id_must_be_a_short_string(make_runtime):
    rt = make_runtime()
    for correlation in ["x" * 201, 42, ["a"], {"a": 1}]:
        assert refetch(rt, body={"requestId": RID, "correlationId": correlation}) == (
            400, {"status": "error", "error": "correlationId must be a string of at most 200 chars"}), correlation
    assert slot_ids(rt) == []


def test_refetch_of_an_unknown_target_is_404(make_runtime):
    def mutate(cfg):
        cfg["schedules"][2]["enabled"] = False  # noon-flaky: its only target is in no enabled plan

    rt = make_runtime(mutate=mutate)
    assert refetch(rt, "nope", {"requestId": RID}) == (404, {"status": "error", "error": "unknown target"})
    assert refetch(rt, "flaky", {"requestId": RID}) == (404, {"status": "error", "error": "unknown target"})
    assert slot_ids(rt) == []


def test_refetch_of_a_target_in_two_plans_is_409(make_runtime):
    def mutate(cfg):
        cfg["schedules"][1]["targetIds"].append("cats")

    rt = make_runtime(mutate=mutate)
    assert refetch(rt, "cats", {"requestId": RID}) == (409, {"status": "error", "error": "ambiguous target"})
    assert slot_ids(rt) == []


def test_refetch_opens_one_manual_slot_with_only_that_target(make_runtime, downstream):
    rt = make_runtime()
    now = rt.clock.now_ms()
    slot_id = f"morning-tokyo@manual-{RID}"
    assert refetch(rt, body={"requestId": RID, "correlationId": "review-42"}) == (
        202, {"status": "accepted", "slotId": slot_id, "disposition": "accepted"})
    state = rt.wiring.ledger.load(slot_id)
    slot = state.slot
    assert (slot.schedule_id, slot.status, slot.target_ids) == ("morning-tokyo", "pending", ["cats"])
    assert (slot.trigger_source, slot.slot_name, slot.occurrence_label) == ("manual", "审核群重抓", "manual")
    assert (slot.occurrence_at, slot.created_at, slot.occurrence_date) == (now, now, "2026-12-01")  # Tokyo date
    assert (slot.manual_request_id, slot.correlation_id) == (RID, "review-42")
    assert [c.target_id for c in state.snapshot_cells()] == ["cats"] and state.cells == {}  # written by its first claim
    rt.settle()
    assert rt.wiring.ledger.get_slot(slot_id).status == "success"
    assert len(downstream.requests) == 1
    sent = downstream.requests[0].body
    assert (sent["slot_id"], sent["target_id"]) == (slot_id, "cats")
    assert (sent["refetch_request_id"], sent["correlation_id"]) == (RID, "review-42")


def test_refetch_lower_cases_the_slot_id_but_keeps_the_request_id_as_sent(make_runtime):
    rt = make_runtime()
    slot_id = f"morning-tokyo@manual-{RID_UPPER.lower()}"
    assert refetch(rt, body={"requestId": RID_UPPER, "correlationId": "x" * 200}) == (
        202, {"status": "accepted", "slotId": slot_id, "disposition": "accepted"})
    assert rt.wiring.ledger.get_slot(slot_id).manual_request_id == RID_UPPER
    # the same UUID spelled in lower case is the same request, not a second slot
    assert refetch(rt, body={"requestId": RID_UPPER.lower()})[1]["slotId"] == slot_id
    assert manual_slot_ids(rt) == [slot_id]


def test_replaying_a_request_id_answers_the_same_slot_forever(make_runtime, downstream):
    rt = make_runtime()
    slot_id = f"morning-tokyo@manual-{RID}"
    first = refetch(rt, body={"requestId": RID, "correlationId": "first"})
    second = refetch(rt, body={"requestId": RID, "correlationId": "second"})
    assert first[1]["slotId"] == second[1]["slotId"] == slot_id
    assert manual_slot_ids(rt) == [slot_id]
    rt.settle()
    assert refetch(rt, body={"requestId": RID}) == (
        202, {"status": "accepted", "slotId": slot_id, "disposition": "already_completed"})
    rt.clock.advance(3 * 86_400_000)  # days later, after a "restart"
    from pixivflow import runtime
    runtime.override(clock=rt.clock)
    assert refetch(rt, body={"requestId": RID}) == (
        202, {"status": "accepted", "slotId": slot_id, "disposition": "already_completed"})
    assert manual_slot_ids(rt) == [slot_id]
    assert len(downstream.requests) == 1
    assert rt.wiring.ledger.get_slot(slot_id).correlation_id == "first"  # the first request owns the slot


def test_a_request_id_bound_to_one_target_cannot_be_reused_for_another(make_runtime):
    rt = make_runtime()
    assert refetch(rt, "cats", {"requestId": RID})[0] == 202
    assert refetch(rt, "landscape", {"requestId": RID}) == (409, {"status": "error", "error": "ambiguous target"})
    assert manual_slot_ids(rt) == [f"morning-tokyo@manual-{RID}"]


def test_concurrent_refetches_of_one_request_id_make_one_slot(make_runtime):
    rt = make_runtime()
    wiring = rt.wiring
    barrier = threading.Barrier(6)
    answers: list[str] = []
    errors: list[BaseException] = []

    def call():
        try:
            barrier.wait()
            answers.append(manual.refetch(wiring.refetches, "cats", RID, "corr").slot_id)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert answers == [f"morning-tokyo@manual-{RID}"] * 6
    assert manual_slot_ids(rt) == [f"morning-tokyo@manual-{RID}"]
    assert wiring.ledger.load(answers[0]).slot.target_ids == ["cats"]
    rt.settle()
    assert refetch_status(rt, RID)[1]["state"] == "submitted"


def test_refetch_is_queued_when_dispatch_fails_and_the_sweep_runs_it(make_runtime, monkeypatch):
    rt = make_runtime()
    fail_sends(monkeypatch, rt)
    slot_id = f"morning-tokyo@manual-{RID}"
    assert refetch(rt, body={"requestId": RID}) == (202, {"status": "accepted", "slotId": slot_id, "disposition": "queued"})
    assert rt.wiring.ledger.load(slot_id).slot.target_ids == ["cats"]
    monkeypatch.undo()
    rt.settle()
    assert refetch_status(rt, RID)[1]["state"] == "submitted"


def test_refetch_answers_queued_while_its_cell_is_being_executed(make_runtime):
    rt = make_runtime()
    slot_id = refetch(rt, body={"requestId": RID})[1]["slotId"]
    assert claim(rt.wiring.ledger, slot_id, "cats", "worker-elsewhere", rt.clock.now_ms(), 180_000) is not None
    assert refetch(rt, body={"requestId": RID}) == (202, {"status": "accepted", "slotId": slot_id, "disposition": "queued"})


def test_a_crash_between_the_request_item_and_the_slot_converges_on_replay(make_runtime, monkeypatch):
    from pixivflow.services import manual as manual_service

    rt = make_runtime()

    def crash(wiring, slot):
        raise RuntimeError("function timed out")

    monkeypatch.setattr(manual_service, "admit", crash)
    assert refetch(rt, body={"requestId": RID}) == (500, {"status": "error", "error": "refetch admission failed"})
    assert rt.wiring.ledger.get_request_key(RID)["slotRef"] == f"morning-tokyo@manual-{RID}"
    assert slot_ids(rt) == []
    assert refetch_status(rt, RID) == (404, {"status": "error", "error": "manual refetch not found"})
    monkeypatch.undo()
    assert refetch(rt, body={"requestId": RID}) == (
        202, {"status": "accepted", "slotId": f"morning-tokyo@manual-{RID}", "disposition": "accepted"})
    assert manual_slot_ids(rt) == [f"morning-tokyo@manual-{RID}"]


def test_a_crash_right_after_the_slot_is_written_converges_on_replay(make_runtime, monkeypatch):
    """Admission's one write is the slot (its cells are written by their first claim): a process
    that dies right after it answered nothing, and the consumer's replay dispatches the cell."""
    rt = make_runtime()
    ledger = rt.wiring.ledger
    real = ledger.create_slot

    def crash(*args, **kwargs):
        real(*args, **kwargs)
        raise RuntimeError("function timed out")

    monkeypatch.setattr(ledger, "create_slot", crash)
    assert refetch(rt, body={"requestId": RID}) == (500, {"status": "error", "error": "refetch admission failed"})
    slot_id = f"morning-tokyo@manual-{RID}"
    assert ledger.load(slot_id).cells == {}
    pending = refetch_status(rt, RID)[1]
    assert (pending["state"], pending["slotStatus"], pending["attemptCount"]) == ("pending", "pending", 0)
    monkeypatch.undo()
    assert refetch(rt, body={"requestId": RID}) == (202, {"status": "accepted", "slotId": slot_id, "disposition": "accepted"})
    rt.settle()
    assert ledger.get_cell(slot_id, "cats").status == "submitted"


# -- GET /internal/targets/{id}/refetch/{requestId} ------------------------------------------------------


def test_refetch_status_projection_before_and_after_execution(make_runtime):
    rt = make_runtime()
    created = rt.clock.now_ms()
    slot_id = f"morning-tokyo@manual-{RID}"
    refetch(rt, body={"requestId": RID, "correlationId": "review-42"})
    assert refetch_status(rt, RID) == (200, {
        "requestId": RID, "slotId": slot_id, "state": "pending", "slotStatus": "pending",
        "createdAt": created, "startedAt": None, "updatedAt": created, "heartbeatAt": None,
        "leaseExpiresAt": None, "leaseActive": False, "claimed": False, "attemptCount": 0,
        "terminalReasonCode": None, "terminalReasonMessage": None,
        "manualRequestId": RID, "idempotencyKey": RID, "correlationId": "review-42"})

    rt.settle()
    state = rt.wiring.ledger.load(slot_id)
    cell = state.cells["cats"]
    assert refetch_status(rt, RID.upper()) == (200, {
        "requestId": RID, "slotId": slot_id, "state": "submitted", "slotStatus": "success",
        "createdAt": created, "startedAt": state.slot.started_at, "updatedAt": cell.updated_at,
        "heartbeatAt": cell.heartbeat_at, "leaseExpiresAt": None, "leaseActive": False, "claimed": True,
        "attemptCount": cell.attempt_count, "terminalReasonCode": None, "terminalReasonMessage": None,
        "manualRequestId": RID, "idempotencyKey": RID, "correlationId": "review-42"})
    assert cell.attempt_count >= 1 and state.slot.started_at >= created


def test_refetch_status_shows_a_live_lease_as_claimed(make_runtime):
    rt = make_runtime()
    slot_id = refetch(rt, body={"requestId": RID})[1]["slotId"]
    now = rt.clock.now_ms()
    claim(rt.wiring.ledger, slot_id, "cats", "worker-1", now, 180_000)
    body = refetch_status(rt, RID)[1]
    assert (body["state"], body["slotStatus"], body["leaseActive"], body["claimed"]) == ("pending", "pending", True, True)
    assert (body["leaseExpiresAt"], body["heartbeatAt"], body["attemptCount"]) == (now + 180_000, now, 1)


def test_refetch_status_errors(make_runtime):
    rt = make_runtime()
    refetch(rt, body={"requestId": RID})
    assert refetch_status(rt, "bad") == (400, NOT_A_UUID)
    assert refetch_status(rt, "3f2b8c1e-4d5a-0b7c-8e9f-0123456789ab") == (400, NOT_A_UUID)
    not_found = (404, {"status": "error", "error": "manual refetch not found"})
    assert refetch_status(rt, RID_UPPER) == not_found  # never requested
    assert refetch_status(rt, RID, target="landscape") == not_found  # requested for another target
    assert refetch_status(rt, RID, token=None) == (401, UNAUTHORIZED)


def test_every_documented_route_is_served(make_runtime):
    """The OpenAPI document and both resolvers agree: no documented route answers a not-found body."""
    from pixivflow.http.openapi import openapi_document

    rt = make_runtime()
    served = 0
    for path, item in openapi_document()["paths"].items():
        concrete = (path.replace("{scheduleId}", "nope").replace("{targetId}", "nope").replace("{requestId}", RID)
                    .replace("{jobId}", "job-1"))
        for method, operation in item.items():
            status, body = rt.http(method.upper(), concrete, token="wrong", function=operation["x-pixivflow-function"])
            assert status in (200, 401), (method, path, status, body)
            served += 1
    assert served == 13  # 6 trigger routes, /capabilities and 6 job routes


def test_refetch_clock_is_ms_in_the_plan_zone(make_runtime):
    rt = make_runtime("2026-12-01T15:30:00Z")  # 00:30 on Dec 2 in Tokyo
    slot_id = refetch(rt, body={"requestId": RID})[1]["slotId"]
    slot = rt.wiring.ledger.get_slot(slot_id)
    assert (slot.occurrence_at, slot.occurrence_date, slot.timezone) == (ms("2026-12-01T15:30:00Z"), "2026-12-02", "Asia/Tokyo")
