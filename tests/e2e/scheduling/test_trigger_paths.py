"""Trigger paths end to end (foundation issue): scheduled fires, the HTTP run route, auth, windows, labels, health.

Spec §1.3, §1.4, §4.4, §11.1; DESIGN §6 (a refused fire is logged and returns normally), §8.
"""

from __future__ import annotations

import json
import logging

import pytest

from conftest import claim, TRIGGER_TOKEN, ms
from pixivflow import __version__

SLOT = "morning-tokyo@2026-12-01T0800"
RUN = "/internal/schedules/morning-tokyo/run"


class Logs:
    """The package's structured log records (Powertools passes ``extra`` fields onto each record)."""

    def __init__(self, caplog) -> None:
        self._caplog = caplog

    def events(self, name: str) -> list[dict]:
        return [dict(vars(r)) for r in self._caplog.records if getattr(r, "event", None) == name]


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.INFO, logger="pixivflow")
    return Logs(caplog)


def slot_state(rt, slot_id: str = SLOT):
    return rt.wiring.ledger.load(slot_id)


# -- scheduled fires ----------------------------------------------------------------------------------


def test_same_scheduler_event_twice_makes_one_slot_and_one_delivery_per_cell(make_runtime, downstream) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    first = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    second = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")  # Scheduler's at-least-once duplicate
    assert first["slot_id"] == second["slot_id"] == SLOT
    assert first["status"] == second["status"] == "admitted"
    rt.settle()

    state = slot_state(rt)
    assert state.slot.status == "success"
    assert sorted(c.status for c in state.snapshot_cells()) == ["submitted"] * 3
    assert len(state.intents) == 3
    assert len(downstream.requests) == 3
    assert len({r.headers["idempotency-key"] for r in downstream.requests}) == 3
    assert sorted(r.body["target_id"] for r in downstream.requests) == ["cats", "landscape", "ranking-daily"]


def test_a_late_duplicate_after_completion_changes_nothing(make_runtime, downstream) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    rt.settle()
    again = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    assert again == {"status": "admitted", "slot_id": SLOT, "disposition": "already_completed", "sent": 0}
    rt.settle()
    assert len(downstream.requests) == 3
    assert slot_state(rt).slot.status == "success"


def test_scheduler_event_that_is_not_a_fire_of_the_cron_is_refused(make_runtime, logs) -> None:
    rt = make_runtime("2026-11-30T23:05:00Z")
    result = rt.fire("morning-tokyo", iso="2026-11-30T23:05:00Z")  # 08:05 Tokyo: not a fire of 0 8 * * *
    assert result["status"] == "refused"
    assert "slot_id" not in result and result.get("sent", 0) == 0
    assert rt.wiring.ledger.active_slots() == []
    assert slot_state(rt) is None and slot_state(rt, "morning-tokyo@2026-12-01T0805") is None
    refused = logs.events("schedule.fire_refused")
    assert len(refused) == 1 and refused[0]["schedule_id"] == "morning-tokyo"


def test_scheduler_event_for_an_unknown_schedule_is_refused(make_runtime, logs) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    result = rt.fire("nope", iso="2026-11-30T23:00:00Z")
    assert result == {"status": "refused", "reason": "unknown or disabled schedule: nope", "sent": 0}
    assert rt.wiring.ledger.active_slots() == []
    refused = logs.events("schedule.fire_refused")
    assert [r["schedule_id"] for r in refused] == ["nope"]


@pytest.mark.parametrize("event", [{}, {"scheduleId": "morning-tokyo"}, {"scheduleId": "morning-tokyo", "scheduledTime": "yesterday"},
                                   {"scheduleId": "morning-tokyo", "scheduledTime": "2026-11-30T23:00:00"}])
def test_malformed_scheduler_events_return_normally_without_a_slot(make_runtime, event) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    from pixivflow.local.lambda_context import context_for

    result = rt.handlers["trigger"](event, context_for("trigger"))
    assert result["status"] == "refused" and result["reason"]
    assert rt.wiring.ledger.active_slots() == []


# -- HTTP run route -----------------------------------------------------------------------------------


def test_http_run_is_accepted_then_already_completed(make_runtime, downstream, logs) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    status, body = rt.http("POST", RUN, {}, token=TRIGGER_TOKEN)
    assert status == 202
    assert body == {
        "status": "accepted",
        "schedule": {"scheduleId": "morning-tokyo", "slotId": SLOT, "disposition": "accepted", "status": "pending"},
        "note": "queued",
    }
    assert slot_state(rt).slot.trigger_source == "http"
    accepted = logs.events("schedule.trigger_accepted")
    assert len(accepted) == 1 and accepted[0]["http_status"] == 202 and accepted[0]["slot_id"] == SLOT

    rt.settle()
    assert len(downstream.requests) == 3
    status, body = rt.http("POST", RUN, {}, token=TRIGGER_TOKEN)
    assert status == 200
    assert body["status"] == "completed" and body["note"] == "already_completed"
    schedule = body["schedule"]
    assert {k: schedule[k] for k in ("scheduleId", "slotId", "disposition", "status", "alreadyCompleted")} == {
        "scheduleId": "morning-tokyo", "slotId": SLOT, "disposition": "already_completed", "status": "success",
        "alreadyCompleted": True}
    state = slot_state(rt)
    assert sorted(schedule["cells"], key=lambda c: c["targetId"]) == sorted(
        ({"targetId": c.target_id, "status": "submitted", "workId": c.work_id} for c in state.snapshot_cells()),
        key=lambda c: c["targetId"])
    assert all(c["workId"] for c in schedule["cells"])
    assert len(logs.events("schedule.trigger_already_completed")) == 1
    rt.settle()
    assert len(downstream.requests) == 3  # the second POST sent nothing


def test_http_run_while_every_open_cell_is_leased_is_already_running(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    rt.http("POST", RUN, {}, token=TRIGGER_TOKEN)
    now = rt.clock.now_ms()
    for target in ("cats", "landscape", "ranking-daily"):
        assert claim(rt.wiring.ledger, SLOT, target, f"busy-{target}", now, 180_000) is not None
    status, body = rt.http("POST", RUN, {}, token=TRIGGER_TOKEN)
    assert status == 202
    assert body == {"status": "running",
                    "schedule": {"scheduleId": "morning-tokyo", "slotId": SLOT, "disposition": "already_running",
                                 "status": "pending"},
                    "note": "already_running"}


def test_no_token_configured_disables_the_endpoint(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z", tokens={})
    status, body = rt.http("POST", RUN, {}, token=TRIGGER_TOKEN)
    assert (status, body) == (503, {"status": "error", "error": "endpoint disabled: token not configured"})
    assert slot_state(rt) is None


@pytest.mark.parametrize("headers", [{"authorization": "Bearer wrong-token"}, {"authorization": f"Basic {TRIGGER_TOKEN}"},
                                     {"authorization": f"bearer{TRIGGER_TOKEN}"}, {}])
def test_wrong_or_missing_token_is_unauthorized(make_runtime, logs, headers) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    status, body = rt.http("POST", RUN, {}, headers=headers)
    assert (status, body) == (401, {"status": "error", "error": "unauthorized"})
    assert slot_state(rt) is None
    denied = logs.events("schedule.trigger_unauthorized")
    assert len(denied) == 1 and denied[0]["http_status"] == 401
    assert TRIGGER_TOKEN not in json.dumps(denied[0])


def test_three_hours_late_is_gone_and_makes_no_slot(make_runtime) -> None:
    rt = make_runtime("2026-12-01T02:00:30Z")  # the 08:00 Tokyo fire was 23:00Z, grace is 90 min
    status, body = rt.http("POST", RUN, {}, token=TRIGGER_TOKEN)
    assert status == 410
    assert body == {"status": "error", "error": f"occurrence {SLOT} has expired (grace 90m)"}
    assert slot_state(rt) is None
    assert rt.wiring.ledger.active_slots() == []


def test_inside_the_grace_window_is_still_accepted(make_runtime) -> None:
    rt = make_runtime("2026-12-01T00:29:59Z")  # 89 min 59 s after the fire
    status, body = rt.http("POST", RUN, {}, token=TRIGGER_TOKEN)
    assert status == 202 and body["schedule"]["slotId"] == SLOT


def test_unknown_schedule_is_not_found(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    status, body = rt.http("POST", "/internal/schedules/nope/run", {}, token=TRIGGER_TOKEN)
    assert (status, body) == (404, {"status": "error", "error": "unknown schedule: nope"})
    assert rt.wiring.ledger.active_slots() == []


def test_long_label_is_cut_to_80_and_stored_as_slot_name_only(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    label = "Morning rerun requested by ops after the 07:55 deploy " + "x" * 60 + "-TAIL"
    assert len(label) > 80
    status, body = rt.http("POST", RUN, {"label": label}, token=TRIGGER_TOKEN)
    assert status == 202
    assert body["schedule"]["slotId"] == SLOT
    state = slot_state(rt)
    assert state.slot.slot_name == label[:80]
    assert len(state.slot.slot_name) == 80
    assert state.slot.slot_id == SLOT and "Morning" not in state.slot.slot_id
    assert [s for s, _ in rt.wiring.ledger.active_slots()] == [SLOT]


def test_without_a_label_the_slot_name_is_the_occurrence_label(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    rt.http("POST", RUN, None, token=TRIGGER_TOKEN)
    assert slot_state(rt).slot.slot_name == "08:00"


def test_a_label_that_is_not_a_string_is_a_bad_request(make_runtime) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z")
    status, body = rt.http("POST", RUN, {"label": 42}, token=TRIGGER_TOKEN)
    assert status == 400
    assert body["status"] == "error" and "label" in body["error"]
    assert slot_state(rt) is None


def test_http_run_ten_minutes_early_names_the_upcoming_fire(make_runtime) -> None:
    rt = make_runtime("2026-11-30T22:50:00Z")
    status, body = rt.http("POST", RUN, {}, token=TRIGGER_TOKEN)
    assert status == 202 and body["schedule"]["slotId"] == SLOT
    assert slot_state(rt).slot.occurrence_at == ms("2026-11-30T23:00:00Z")


def test_http_and_scheduler_converge_on_one_slot(make_runtime, downstream) -> None:
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    rt.clock.advance(30_000)
    status, body = rt.http("POST", RUN, {"label": "ops"}, token=TRIGGER_TOKEN)
    assert status == 202 and body["schedule"]["slotId"] == SLOT
    assert slot_state(rt).slot.trigger_source == "cron" and slot_state(rt).slot.slot_name == "08:00"
    rt.settle()
    assert len(downstream.requests) == 3


# -- health ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tokens", [None, {}])
def test_health_needs_no_token(make_runtime, tokens) -> None:
    rt = make_runtime("2026-11-30T23:00:30Z", tokens=tokens)
    status, body = rt.http("GET", "/health")
    assert status == 200
    assert body["status"] == "ok"
    assert body["version"] == __version__ and body["version"]
