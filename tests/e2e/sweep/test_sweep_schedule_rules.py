"""The sweep and the executor honour a schedule that was disabled or removed, and the sweep's
counters mean what spec §7.2 says (issue 15 items 4 and 5; spec §1.1, §7.1, §7.2).

Config changes are played as production meets them: the config file is rewritten and the next
cold start reads it (the embedded runtime rebuilds its object graph). A lost message is one taken
off the queue and thrown away; a dead executor is a lease claimed by an owner that never returns.
"""

from __future__ import annotations

import json

import yaml

from conftest import claim, JOBS_TOKEN, ms
from pixivflow import runtime
from pixivflow.adapters.sqs_queues import OutgoingMessage
from pixivflow.services.messages import execution_body
from support.queues import take

T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
T0_MS = ms(T0)
MIN = 60_000
SLOT = "solo@2026-12-01T0800"
GHOST = "exec-ghost-that-died"
NOT_RECOVERABLE = "Cannot recover slot: no enabled schedule (or occurrence) for it"
RID = "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab"


def solo(cfg):
    cfg["schedules"].append({"id": "solo", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["cats"]})


def at(rt, minutes: float) -> None:
    rt.clock.set(T0_MS + int(minutes * MIN))


def drop(rt, queue="EXECUTION_QUEUE_URL") -> list[dict]:
    return [json.loads(body) for body in take(rt, queue, visibility_s=30)]


def reconfigure(rt, edit) -> None:
    """Rewrite the config file; the next invocation is a cold start that reads it."""
    with open(rt.config_path) as fh:
        cfg = yaml.safe_load(fh)
    edit(cfg)
    with open(rt.config_path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    runtime.override(clock=rt.clock)  # drop the cached graph, keep the harness's clock and entropy


def disable(schedule_id):
    def edit(cfg):
        next(s for s in cfg["schedules"] if s["id"] == schedule_id)["enabled"] = False
    return edit


def remove(schedule_id):
    def edit(cfg):
        cfg["schedules"] = [s for s in cfg["schedules"] if s["id"] != schedule_id]
    return edit


def die_mid_run(rt, slot_id, target_id="cats"):
    now = rt.clock.now_ms()
    assert claim(rt.wiring.ledger, slot_id, target_id, GHOST, now, 180_000) is not None
    assert rt.wiring.ledger.mark_slot_running(slot_id, now)


def sweep_minutes(rt, first, last):
    out = []
    for minute in range(first, last + 1):
        at(rt, minute)
        result = rt.sweep()
        out.append((minute, result, drop(rt)))
    return out


# -- 4. a disabled or removed schedule is not recovered -------------------------------------------------


def test_a_running_slot_of_a_disabled_schedule_is_not_redispatched_and_ends_stalled(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=solo)
    rt.fire("solo", iso=T0)
    drop(rt)
    die_mid_run(rt, SLOT)
    reconfigure(rt, disable("solo"))

    history = sweep_minutes(rt, 1, 14)
    assert all(r["recovered"] == 0 for _, r, _ in history)
    assert all(sent == [] for _, _, sent in history)  # nothing was re-dispatched (it was at 5 and 10 before)
    assert [m for m, r, _ in history if r["unrecoverable"]] == list(range(5, 15))
    skipped = logs.events("sweep.recovery_skipped")
    assert skipped and {line["message"] for line in skipped} == {NOT_RECOVERABLE}
    assert {(line["slot_id"], line["reason"], line["schedule_id"]) for line in skipped} == {(SLOT, "schedule_disabled", "solo")}

    at(rt, 15)
    result = rt.sweep()
    assert result["stalledNoHeartbeat"] == 1 and result["recovered"] == 0
    cell = rt.wiring.ledger.get_cell(SLOT, "cats")
    assert (cell.status, cell.terminal_reason_code) == ("failed", "stalled_no_heartbeat")
    assert rt.wiring.ledger.get_slot(SLOT).status == "failed"
    rt.settle()
    assert downstream.requests == []


def test_a_queued_slot_of_a_removed_schedule_is_not_redispatched_and_ends_queued_too_long(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=solo)
    rt.fire("solo", iso=T0)
    drop(rt)  # admitted, its message lost
    reconfigure(rt, remove("solo"))

    history = sweep_minutes(rt, 1, 29)
    assert all(r["recovered"] == 0 and sent == [] for _, r, sent in history)
    assert {line["reason"] for line in logs.events("sweep.recovery_skipped")} == {"schedule_removed"}
    at(rt, 30)
    assert rt.sweep()["queuedTooLong"] == 1
    cell = rt.wiring.ledger.get_cell(SLOT, "cats")
    assert (cell.status, cell.terminal_reason_code) == ("failed", "queued_too_long")
    rt.settle()
    assert downstream.requests == []


def test_an_execution_message_for_a_disabled_schedules_cell_is_refused(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=solo)
    rt.fire("solo", iso=T0)  # the message is on the queue ...
    reconfigure(rt, disable("solo"))  # ... when the operator disables the schedule
    assert rt.pumps["execute"].poll() == 1
    rt.pump()
    # not claimed: its item was never written (a cell's first claim writes it), so the stall
    # rules still see a pending cell that never started: no attempt, no heartbeat, no lease
    assert rt.wiring.ledger.get_cell(SLOT, "cats") is None
    cell = rt.wiring.ledger.load(SLOT).cell("cats")
    assert (cell.status, cell.attempt_count, cell.heartbeat_at, cell.lease_owner) == ("pending", 0, None, None)
    [refused] = logs.events("cell.execution_refused")
    assert (refused["slot_id"], refused["target_id"], refused["reason"]) == (SLOT, "cats", "schedule_disabled")
    assert downstream.requests == []

    # A late redelivery of the same message, once the schedule is gone entirely, is refused too.
    reconfigure(rt, remove("solo"))
    rt.wiring.queues.send_execution([OutgoingMessage(execution_body(SLOT, "cats"))])
    rt.pump()
    assert rt.wiring.ledger.load(SLOT).cell("cats").status == "pending"  # still never claimed
    assert [line["reason"] for line in logs.events("cell.execution_refused")] == ["schedule_disabled", "schedule_removed"]
    at(rt, 30)
    assert rt.sweep()["queuedTooLong"] == 1
    assert downstream.requests == []


def test_the_same_slot_with_its_schedule_enabled_is_recovered_and_delivered(make_runtime, downstream):
    """The control: nothing changed for a schedule that is still enabled."""
    rt = make_runtime(T0, mutate=solo)
    rt.fire("solo", iso=T0)
    drop(rt)
    die_mid_run(rt, SLOT)
    at(rt, 5)
    result = rt.sweep()
    assert result["recovered"] == 1 and result["unrecoverable"] == 0
    rt.pump()
    assert rt.wiring.ledger.get_cell(SLOT, "cats").status == "submitted"
    assert len(downstream.requests) == 1


def _refetch_slot(rt) -> str:
    status, body = rt.http("POST", "/internal/targets/cats/refetch", {"requestId": RID}, token=JOBS_TOKEN)
    assert status == 202, body
    drop(rt)  # the refetch's execution message is lost
    return f"morning-tokyo@manual-{RID}"


def test_a_manual_slot_whose_plan_was_removed_keeps_being_recovered(make_runtime, downstream):
    rt = make_runtime(T0)
    slot_id = _refetch_slot(rt)
    reconfigure(rt, remove("morning-tokyo"))  # the operator's explicit request outlives the plan
    at(rt, 5)
    result = rt.sweep()
    assert result["recovered"] == 1 and result["unrecoverable"] == 0
    rt.pump()
    assert rt.wiring.ledger.get_cell(slot_id, "cats").status == "submitted"
    assert [r.body["slot_id"] for r in downstream.requests] == [slot_id]


def test_a_manual_slot_whose_plan_was_disabled_is_not_recovered(make_runtime, downstream, logs):
    rt = make_runtime(T0)
    slot_id = _refetch_slot(rt)
    reconfigure(rt, disable("morning-tokyo"))
    at(rt, 5)
    result = rt.sweep()
    assert result["recovered"] == 0 and result["unrecoverable"] == 1 and drop(rt) == []
    [line] = logs.events("sweep.recovery_skipped")
    assert (line["slot_id"], line["reason"], line["manual_request_id"]) == (slot_id, "schedule_disabled", RID)
    at(rt, 30)
    assert rt.sweep()["queuedTooLong"] == 1
    assert downstream.requests == []


# -- 5. the sweep's counters ------------------------------------------------------------------------------


def test_scanned_counts_the_stall_rules_rows_and_active_slots_counts_the_index(make_runtime, downstream, logs):
    def mutate(cfg):
        solo(cfg)
        cfg["schedules"].append({"id": "dead", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["landscape"]})

    rt = make_runtime(T0, mutate=mutate)
    rt.fire("solo", iso=T0)
    rt.fire("dead", iso=T0)
    drop(rt)
    at(rt, 0.5)
    # right after an admission nothing is stalled: the stall rules return no row (it said 1 before)
    fresh = rt.sweep()
    assert (fresh["scanned"], fresh["activeSlots"]) == (0, 2)
    die_mid_run(rt, "dead@2026-12-01T0800", "landscape")
    sweep_minutes(rt, 1, 14)
    at(rt, 16)  # dead is past its 15 min stall budget, solo still inside its 30 min queue budget
    result = rt.sweep()
    assert (result["scanned"], result["stalledNoHeartbeat"], result["queuedTooLong"], result["activeSlots"]) == (1, 1, 0, 2)
    at(rt, 31)
    result = rt.sweep()
    assert (result["scanned"], result["queuedTooLong"], result["activeSlots"]) == (1, 1, 1)
    finished = logs.events("sweep.finished")
    assert {k: finished[-1][k] for k in result} == result


def test_scanned_includes_a_row_the_sweep_then_leaves_to_the_outbox(make_runtime, downstream):
    """Spec §7.2: ``scanned`` counts the rows both queries returned, skipped ones included."""
    rt = make_runtime(T0, mutate=solo)
    downstream.state.responder = lambda req: (503, {"error": "maintenance"})
    rt.fire("solo", iso=T0)
    rt.pump()
    assert rt.wiring.ledger.get_cell(SLOT, "cats").status == "delivery_pending"
    at(rt, 16)  # running, no lease, last heartbeat 16 min ago: a stalled_no_heartbeat row ...
    result = rt.sweep()
    assert result["scanned"] == 1 and result["stalledNoHeartbeat"] == 0  # ... that the outbox owns
    assert rt.wiring.ledger.get_slot(SLOT).status == "running"
