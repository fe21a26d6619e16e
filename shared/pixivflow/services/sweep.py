"""The one-minute sweep (spec §7; DESIGN §4 "Recovery", "Stall terminalisation", §5 re-drive).

Cost stays proportional to live work: slots are found through the sparse ActiveSlots index
and outbox rows through DueOutbox; every hit is re-read strongly consistently before anything
is decided. Per active slot, in order:
  1. materialise missing snapshot cells (an interrupted admission);
  2. settle lease-less in-delivery cells from the ledger and roll the slot up;
  3. fail cells running past their schedule's timeout (execution_timeout), except
     delivery_pending cells, which belong to the outbox;
  4. recovery: re-dispatch lease-less open cells whose dispatch is 5 min old, only while the
     slot is inside its liveness budget; a rescued slot is not judged by the stall rules;
  5. the stall rules queued_too_long / stalled_no_heartbeat, one transaction per slot.
Then outbox rows overdue by more than 120 s, or processing past their lease, are re-sent.
A single bad item never aborts the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.model import SlotState
from ..ports import OutgoingMessage
from ..domain.cells import CellStatus, derive_slot_status, is_terminal_slot
from ..domain.reasons import reason_message
from ..domain.stall import StallVerdict, judge_slot, progress_clock
from .engine import REDISPATCH_AFTER_MS, REDRIVE_GRACE_MS, Engine
from .messages import execution_body, outbox_body
from .rollup import close, converge_deliveries, delivery_states, rollup

BATCH_LIMIT = 100  # slots per rule per tick (spec §7.2)


@dataclass
class SweepResult:
    scanned: int = 0
    queuedTooLong: int = 0
    stalledNoHeartbeat: int = 0
    recovered: int = 0
    timedOut: int = 0
    rolledUp: int = 0
    redriven: int = 0
    jobsRepaired: int = 0  # jobs with a callback and no terminal event the repair pass looked at
    errors: int = 0
    rescued: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {
            "scanned": self.scanned,
            "queuedTooLong": self.queuedTooLong,
            "stalledNoHeartbeat": self.stalledNoHeartbeat,
            "recovered": self.recovered,
            "timedOut": self.timedOut,
            "rolledUp": self.rolledUp,
            "redriven": self.redriven,
            "jobsRepaired": self.jobsRepaired,
            "errors": self.errors,
        }


def sweep(engine: Engine) -> SweepResult:
    result = SweepResult()
    runtime = engine.config.schedulerRuntime
    queued_ms, stall_ms = runtime.queued_timeout_ms, runtime.stall_timeout_ms
    judged = {"queued_too_long": 0, "stalled_no_heartbeat": 0}
    for slot_id, _created in engine.ledger.active_slots(limit_per_shard=4 * BATCH_LIMIT):
        result.scanned += 1  # every row the index returned counts, even one that is then skipped (spec §7.2)
        try:
            state = engine.ledger.load(slot_id)
            if state is None:
                continue
            if is_terminal_slot(state.slot.status):
                close(engine, state)  # terminal but its outcome record not yet logged: finish closing it
                continue
            _sweep_slot(engine, state, result, queued_ms, stall_ms, judged)
        except Exception as exc:  # one bad slot never aborts the sweep
            result.errors += 1
            engine.log("error", "sweep failed on a slot", event="sweep.slot_error", slot_id=slot_id, error=repr(exc)[:300])
    _redrive_outbox(engine, result)
    _repair_job_events(engine, result)
    engine.log("info", "sweep finished", event="sweep.finished", **result.as_dict())
    for rule, count in (("queued_too_long", result.queuedTooLong), ("stalled_no_heartbeat", result.stalledNoHeartbeat)):
        if count:
            engine.metric("Stalls", count, rule=rule)
    return result


def _sweep_slot(engine: Engine, state: SlotState, result: SweepResult, queued_ms: int, stall_ms: int, judged: dict[str, int]) -> None:
    now = engine.now()
    slot = state.slot
    if state.missing_targets():
        types = {t.id: t.type for t in engine.config.targets}
        engine.ledger.ensure_cells(slot, types, now, existing=state.cells.keys())
        state = engine.ledger.load(slot.slot_id) or state
    if converge_deliveries(engine, state):
        state = engine.ledger.load(slot.slot_id) or state
    if _all_terminal(state):
        if rollup(engine, slot.slot_id, state) != slot.status:
            result.rolledUp += 1
        return
    if _timeouts(engine, state, now):
        result.timedOut += 1
        state = engine.ledger.load(slot.slot_id) or state
        if _all_terminal(state):
            rollup(engine, slot.slot_id, state)
            result.rolledUp += 1
            return
    if _recover(engine, state, now, queued_ms, stall_ms):
        result.recovered += 1
        result.rescued.append(slot.slot_id)
        return
    if _outbox_owns_progress(engine, state):
        return
    verdict = judge_slot(state.slot, state.snapshot_cells(), now, queued_timeout_ms=queued_ms, stall_timeout_ms=stall_ms)
    if verdict is None or judged[verdict.rule] >= BATCH_LIMIT:
        return
    judged[verdict.rule] += 1
    if _terminalise(engine, state, verdict, now):
        if verdict.rule == "queued_too_long":
            result.queuedTooLong += 1
        else:
            result.stalledNoHeartbeat += 1


def _outbox_owns_progress(engine: Engine, state: SlotState) -> bool:
    """Every open cell waits on a live outbox row: progress belongs to the outbox (its retry
    budget and dead-letter path end it), so the stall rules do not judge this slot."""
    open_cells = [c for c in state.snapshot_cells() if not c.terminal]
    if not open_cells or any(c.status != CellStatus.DELIVERY_PENDING for c in open_cells):
        return False
    states = delivery_states(engine, state)
    return all(states.get(c.target_id) == "live" for c in open_cells)


def _all_terminal(state: SlotState) -> bool:
    return not state.missing_targets() and all(c.terminal for c in state.snapshot_cells())


def _timeouts(engine: Engine, state: SlotState, now: int) -> bool:
    """Fail cells still running past the schedule's timeout (delivery_pending belongs to the outbox)."""
    timeout = state.slot.timeout_ms or 1_800_000
    moved = False
    for cell in state.snapshot_cells():
        if cell.terminal or cell.status == CellStatus.DELIVERY_PENDING or cell.started_at is None:
            continue
        if now - cell.started_at <= timeout:
            continue
        ok = engine.ledger.transition_cell(
            cell.slot_id, cell.target_id, CellStatus.FAILED, now,
            from_states=[cell.status],
            last_error=f"execution exceeded the schedule timeout of {timeout} ms",
            reason_code="execution_timeout", reason_message=reason_message("execution_timeout"),
        )
        if ok:
            moved = True
            engine.log("warning", "cell timed out", event="cell.execution_timeout", slot_id=cell.slot_id,
                       target_id=cell.target_id, started_at=cell.started_at, timeout_ms=timeout)
    return moved


def _inside_budget(state: SlotState, now: int, queued_ms: int, stall_ms: int) -> bool:
    slot = state.slot
    if slot.status == "pending":
        return now - slot.created_at < queued_ms
    if slot.status == "running":
        return now - progress_clock(slot, state.snapshot_cells()) < stall_ms
    return False


def _recover(engine: Engine, state: SlotState, now: int, queued_ms: int, stall_ms: int) -> bool:
    """Re-dispatch lease-less open cells whose message was lost or whose executor died."""
    if not _inside_budget(state, now, queued_ms, stall_ms):
        return False
    due = [
        c for c in state.snapshot_cells()
        if not c.terminal and c.status != CellStatus.DELIVERY_PENDING and not c.lease_live(now)
        and (c.dispatched_at is None or c.dispatched_at <= now - REDISPATCH_AFTER_MS)
    ]
    claimed = [c for c in due if engine.ledger.mark_dispatched(c.slot_id, c.target_id, c.dispatched_at, now)]
    if not claimed:
        return False
    failed = engine.queues.send_execution([OutgoingMessage(execution_body(c.slot_id, c.target_id)) for c in claimed])
    engine.log("warning", "cells re-dispatched", event="sweep.recovered", slot_id=state.slot.slot_id,
               targets=[c.target_id for c in claimed], failed=len(failed))
    return len(failed) < len(claimed)


def _terminalise(engine: Engine, state: SlotState, verdict: StallVerdict, now: int) -> bool:
    cells = state.snapshot_cells()
    fail = [c.target_id for c in cells if c.status in (CellStatus.PENDING, CellStatus.SELECTED)]
    guard = [c.target_id for c in cells if not c.terminal and c.target_id not in fail]
    after = [CellStatus.FAILED if c.target_id in fail else c.status for c in cells]
    status = derive_slot_status(after) if cells else "failed"
    if status in ("success", "running", "pending"):
        status = "failed"
    message = reason_message(verdict.rule) or verdict.rule
    ok = engine.ledger.terminalise_slot(state, fail_cells=fail, guard_cells=guard, slot_status=status,
                                        reason_code=verdict.rule, reason_message=message, now_ms=now)
    if not ok:
        return False
    engine.log("warning", "slot terminalised by the stall sweep", event="sweep.stalled", slot_id=state.slot.slot_id,
               reason_code=verdict.rule, cells_failed=len(fail), stalled_since=verdict.since, slot_status=status)
    refreshed = engine.ledger.load(state.slot.slot_id)
    if refreshed is not None:
        close(engine, refreshed)  # the slot is terminal now: its one outcome record, then out of the index
    return True


def _redrive_outbox(engine: Engine, result: SweepResult) -> None:
    now = engine.now()
    keys = engine.ledger.due_intents(now - REDRIVE_GRACE_MS, limit_per_shard=BATCH_LIMIT)
    send: list[str] = []
    callbacks: list[str] = []
    for pk, sk in keys:
        callback = engine.jobs.callback_key_of(pk, sk) if engine.jobs is not None else None
        if callback is not None:
            if _callback_overdue(engine, callback, now, result):
                callbacks.append(callback)
            continue
        try:
            intent = engine.ledger.get_intent_by_key(pk, sk)
        except Exception as exc:
            result.errors += 1
            engine.log("error", "sweep failed on an outbox row", event="sweep.outbox_error", sk=sk, error=repr(exc)[:300])
            continue
        if intent is None or not intent.actionable:
            continue
        if intent.outbox_status == "processing":
            if intent.lease_until is not None and intent.lease_until > now:
                continue
        elif intent.next_attempt_at > now - REDRIVE_GRACE_MS:
            continue
        send.append(intent.idempotency_key)
    messages = [OutgoingMessage(outbox_body("delivery", k)) for k in send]
    messages += [OutgoingMessage(outbox_body("event_callback", k)) for k in callbacks]
    if messages:
        failed = engine.queues.send_outbox(messages)
        result.redriven += len(messages) - len(failed)
        engine.log("warning", "outbox rows re-driven", event="sweep.outbox_redriven", count=len(messages) - len(failed))


def _callback_overdue(engine: Engine, key: str, now: int, result: SweepResult) -> bool:
    """An event_callback row whose message was lost, or whose worker died mid-send (spec §10.5)."""
    try:
        row = engine.jobs.get_callback_row(key)
    except Exception as exc:
        result.errors += 1
        engine.log("error", "sweep failed on a callback row", event="sweep.outbox_error", key=key, error=repr(exc)[:300])
        return False
    if row is None or not row.actionable:
        return False
    if row.status == "processing":
        return row.lease_until is None or row.lease_until <= now
    return row.next_attempt_at <= now - REDRIVE_GRACE_MS


def _repair_job_events(engine: Engine, result: SweepResult) -> None:
    """Spec §12.5 repair pass: a declared callback is never silently dropped (§13.23)."""
    from .job_events import reconcile_outstanding

    try:
        examined, errors = reconcile_outstanding(engine)
    except Exception as exc:  # the index could not be read: next tick
        result.errors += 1
        engine.log("error", "job event repair pass failed", event="sweep.repair_error", error=repr(exc)[:300])
        return
    result.jobsRepaired += examined
    result.errors += errors
