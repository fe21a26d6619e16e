"""Slot rollup and delivery settlement (``docs/explanation/ledger.md``).

Rollup converges only what needs no live lease: abandoned or confirmed deliveries of cells
nobody holds. It never fails a sibling that is still pending/selected (it may just be queued);
those end through their own execution, the timeout rule or the stall rules. The slot turns
terminal when every snapshot cell is terminal, and then exactly one outcome record is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ports import Settings
from ..domain.model import SlotState
from ..domain.cells import CellStatus, derive_slot_status, is_terminal_slot
from ..domain.delivery_state import DeliveryState, delivery_state, in_flight
from ..domain.errors import LedgerUnavailable
from ..domain.model import Intent
from ..domain.outcome_record import build_outcome, build_summary
from ..domain.reasons import reason_message, reason_of
from ..ports import HEALTH_METRIC, CellMoves, Clock, DeliveryRows, Log, Metrics, Occurrences
from .context import Measured
from .timing import LEASE_TTL_MS
from .job_events import JobEvents
from .notifications import enqueue_terminal_notifications
from .outbox import Outbox

SUMMARY_EVENT = "execution.summary"
ABANDONED_MESSAGE = "投稿未被处理，已放弃"


@dataclass(frozen=True)
class SlotRollup(Measured):
    """What rolling a slot up and settling a delivery take: the slot and its cells, the delivery
    rows, the config (a target's routes, the notifications it owes), the outbox the notification
    rows go to, the job event stream a job's terminal event goes to, the clock, log and metrics."""

    occurrences: Occurrences
    cells: CellMoves
    rows: DeliveryRows
    config: Settings
    outbox: Outbox
    job_events: JobEvents
    clock: Clock
    log: Log
    metrics: Metrics | None


def routes_of(ctx: SlotRollup, target_id: str) -> list[str]:
    target = ctx.config.target(target_id)
    return target.routes() if target else []


def cell_delivery_state(ctx: SlotRollup, state: SlotState, target_id: str) -> DeliveryState:
    """The delivery ledger's verdict on one cell. A target whose routes were removed
    from the config is judged by the routes its intents name: its ledger still speaks."""
    intents = state.intents_for(target_id)
    routes = routes_of(ctx, target_id) or sorted({i.route for i in intents})
    return delivery_state(routes, intents)


def delivery_states(ctx: SlotRollup, state: SlotState) -> dict[str, str | None]:
    """Per target: its delivery verdict, or None for a target with no route at all (download-only)."""
    out: dict[str, str | None] = {}
    for target_id in state.slot.target_ids:
        verdict = cell_delivery_state(ctx, state, target_id)
        has_routes = bool(routes_of(ctx, target_id) or state.intents_for(target_id))
        out[target_id] = verdict.state if has_routes else None
    return out


def handed_over(state: SlotState, cell: Any) -> bool:
    """A ``selected`` cell whose executor already recorded its intents (and died before the cell
    move): its work is in the outbox's hands even though the cell does not say so yet."""
    return cell.status == CellStatus.SELECTED and bool(state.intents_for(cell.target_id))


def owned_by_outbox(ctx: SlotRollup, state: SlotState) -> set[str]:
    """Open cells whose progress belongs to the outbox: every delivery_pending cell, and a handed-over
    selected cell while one of its rows is in flight. The sweep's timeout and stall rules never fail
    these (a row being posted could be recorded downstream); the outbox's attempt
    budget and dead-letter path end them, and converge_deliveries settles them.

    In flight means a row that exists and is still the outbox's, not the delivery verdict "live":
    that verdict also covers a fan-out cell some of whose routes confirmed while another route has
    no row at all. Its executor died between two of its rows' writes; only an executor's re-run
    writes the missing one, so when no re-dispatch rescues it the stall and timeout rules must end
    it, or the cell stays `selected` and its job `running` for ever."""
    owned = set()
    for cell in state.snapshot_cells():
        if cell.status == CellStatus.DELIVERY_PENDING:
            owned.add(cell.target_id)
        elif handed_over(state, cell) and any(in_flight(i) for i in state.intents_for(cell.target_id)):
            owned.add(cell.target_id)
    return owned


def settle_delivered_handover(ctx: SlotRollup, state: SlotState, cell: Any, now: int) -> bool | None:
    """Submit a handed-over cell every route of which confirmed, whoever holds its lease: the ACKs
    decided it, as the deliverer's own settle would have, which leaves an executor's
    lease as it is (``settle_cell_from_delivery``). None when the cell is no such cell; else whether
    the write took.

    The sweep's timeout rule asks this before it fails a cell under a lease: when the deliverer
    recorded the delivery and died before settling the cell, and a re-dispatched executor took the
    cell and hung, the timeout rule would otherwise fail a delivered cell ``execution_timeout``."""
    if not handed_over(state, cell):
        return None
    verdict = cell_delivery_state(ctx, state, cell.target_id)
    if verdict.state != "confirmed":
        return None
    ok = ctx.cells.settle_cell_from_delivery(cell.slot_id, cell.target_id, CellStatus.SUBMITTED, now,
                                             work_id=verdict.work_id, work_type=verdict.work_type)
    if ok:
        ctx.log("info", "cell converged from the delivery ledger", event="cell.converged", slot_id=cell.slot_id,
                target_id=cell.target_id, verdict=verdict.state, under_lease=cell.lease_live(now))
    return ok


def converge_deliveries(ctx: SlotRollup, state: SlotState) -> bool:
    """Settle lease-less in-delivery cells from the ledger. Returns True when a cell moved.

    A ``selected`` cell that already has intents counts when its delivery is confirmed: its
    executor recorded the intent and died before moving the cell to delivery_pending, and the
    sweep's re-drive delivered the row meanwhile. The delivery ledger is the authority; without
    this the stall rule would fail a delivered cell."""
    now = ctx.now()
    moved = False
    for cell in state.snapshot_cells():
        selected_with_intents = handed_over(state, cell)
        if not (cell.in_delivery or selected_with_intents) or cell.lease_live(now):
            continue
        verdict = cell_delivery_state(ctx, state, cell.target_id)
        if selected_with_intents and verdict.state != "confirmed":
            continue  # live rows deliver it, lost ones are the executor's re-run to judge
        if verdict.state == "confirmed":
            ok = ctx.cells.settle_unleased_cell(
                cell.slot_id, cell.target_id, CellStatus.SUBMITTED, now, work_id=verdict.work_id, work_type=verdict.work_type,
            )
        elif verdict.state == "lost":
            ok = ctx.cells.settle_unleased_cell(
                cell.slot_id, cell.target_id, CellStatus.FAILED, now, last_error=cell.last_error or ABANDONED_MESSAGE,
                reason_code="delivery_abandoned", reason_message=reason_message("delivery_abandoned"),
            )
        else:
            continue
        if ok:
            moved = True
            ctx.log("info", "cell converged from the delivery ledger", event="cell.converged",
                    slot_id=cell.slot_id, target_id=cell.target_id, verdict=verdict.state)
    return moved


def rollup(ctx: SlotRollup, slot_id: str, state: SlotState | None = None) -> str | None:
    """Roll a slot up. Safe to repeat; returns the slot status afterwards (None if no slot)."""
    state = state or ctx.occurrences.load(slot_id)
    if state is None:
        return None
    if is_terminal_slot(state.slot.status):
        return state.slot.status
    if converge_deliveries(ctx, state):
        state = ctx.occurrences.load(slot_id) or state
    statuses = [c.status for c in state.snapshot_cells()]  # an unwritten cell counts as the pending cell it is
    status = derive_slot_status(statuses)
    if not is_terminal_slot(status):
        return state.slot.status
    finish(ctx, state, status)
    return status


ORPHAN_RECORD_MS = 60_000  # a record whose slot is still open this long after it was written lost its writer


def finish(ctx: SlotRollup, state: SlotState, status: str, *, last_error: str | None = None) -> None:
    """Write the notification rows, record the one outcome, log it, and only then close the slot
    (terminal status and out of the active index in one write). A crash in between leaves the slot
    open, where the sweep finds it; only a crash between the log line and the close repeats the
    line, so nothing else runs there (``_notify``)."""
    state.slot.status = status
    if an_executor_may_still_run(state, ctx.now()) or not rows_outlive_slot(ctx, state):
        return  # not yet: the next rollup (or the sweep) decides again
    _notify(ctx, state)
    if record_outcome(ctx, state):
        if not ctx.occurrences.finish_slot(state.slot.slot_id, status, ctx.now(), last_error=last_error):
            # The stall transaction made the slot terminal after this rollup read it (a cell it
            # guarded, which the outbox settled meanwhile): its record is logged, so it leaves the
            # active index all the same, or the sweep would take the record for an orphan and log
            # it again a minute later.
            ctx.occurrences.leave_active_index(state.slot.slot_id)
        _job_terminal(ctx, state)


def close(ctx: SlotRollup, state: SlotState) -> bool:
    """A slot already made terminal by the stall transaction: record and log its outcome, then let
    it leave the active index.

    The stall rules never fail a cell in delivery whose row is live (``owned_by_outbox``); such a
    cell is the outbox's. Until every cell ends, the slot stays open, so the sweep keeps settling
    it from the delivery ledger (an ACK whose worker died before settling the cell is found here),
    and its one outcome record waits for it; a slot closed earlier would leave such a cell
    delivery_pending forever."""
    if converge_deliveries(ctx, state):
        state = ctx.occurrences.load(state.slot.slot_id) or state
    if any(not c.terminal for c in state.snapshot_cells()) or an_executor_may_still_run(state, ctx.now()):
        return False
    if not rows_outlive_slot(ctx, state):
        return False  # a row moved under us: the sweep's next tick closes it
    _notify(ctx, state)  # before the record, as in finish()
    if record_outcome(ctx, state):
        left = ctx.occurrences.leave_active_index(state.slot.slot_id)
        _job_terminal(ctx, state)
        return left
    return False


# The rules that end a cell without waiting for its lease to die: its executor may still be
# running and record a delivery row after the cell ended.
ENDED_UNDER_A_LEASE = frozenset({"cancelled_by_consumer", "execution_timeout"})


def an_executor_may_still_run(state: SlotState, now: int) -> bool:
    """Whether some executor may still write a delivery row for this slot: a cell's lease is live
    (a multi-work cell the outbox settled while its executor runs), or a cell was cancelled or
    timed out under an executor that was alive (heartbeat) less than a lease TTL ago (an
    invocation never outlives the lease). The slot then stays open a little longer, so such a row
    lands where the sweep finds it; ``rows_outlive_slot`` indexes it when the slot closes."""
    for cell in state.snapshot_cells():
        if cell.lease_live(now):
            return True
        if cell.terminal_reason_code in ENDED_UNDER_A_LEASE and (cell.heartbeat_at or 0) > now - LEASE_TTL_MS:
            return True
    return False


def rows_outlive_slot(ctx: SlotRollup, state: SlotState) -> bool:
    """Before a slot leaves ActiveSlots, each of its still-actionable outbox rows enters DueOutbox.

    While a slot is open the sweep finds its rows through the slot (a delivery row is written
    without an index entry: two write units less per delivery). A slot can close with a
    row still actionable: another work of a multi-work cell, a row of a cell the timeout, a stall
    or a cancel ended. From then on only the index finds it, and the sweep's re-drive goes on exactly
    as for any indexed row (a row of an ended cell is dead-lettered unposted by the worker that
    claims it). Done BEFORE the outcome record, so the record still means "closing now". Returns
    False when a row moved since ``state`` was read (nothing is closed; the next pass reads again)."""
    indexed = True
    for intent in state.intents:
        if intent.actionable and not ctx.rows.index_due(intent):
            indexed = False
    return indexed


def _notify(ctx: SlotRollup, state: SlotState) -> None:
    """The terminal slot's notification rows, written BEFORE its outcome record (and so before the
    slot closes): a crash in between leaves the slot open with no record, and the next rollup or
    sweep pass repeats this (rows are insert-if-absent, so duplicate passes enqueue each key once).

    Not after the record: the outcome line is logged right after the record is made, and a writer
    that dies after logging and before closing makes the sweep log the stored record again
    (``record_outcome``). Each row is a write and a queue send, each a point where a Lambda can
    die; inside that window every such death would be one more ``schedule.outcome`` line (the
    line is logged once per slot). Out of it, the window
    holds only the close itself. A ledger outage propagates for that retry; any other failure is
    logged and never keeps the slot from closing."""
    try:
        enqueue_terminal_notifications(ctx.outbox, ctx.config, state.slot, state.snapshot_cells())
    except LedgerUnavailable:
        raise
    except Exception as exc:
        ctx.log("error", "notification rows could not be planned; slot closes without them",
                event="notification.enqueue_failed", slot_id=state.slot.slot_id, error=repr(exc)[:300])


def _job_terminal(ctx: SlotRollup, state: SlotState) -> None:
    """A job's slot is terminal: its terminal event (and callback) now, not at the next read."""
    from .job_events import on_slot_terminal

    on_slot_terminal(ctx.job_events, state)


def record_outcome(ctx: SlotRollup, state: SlotState) -> bool:
    """Persist the slot's ``execution.summary`` once and log the identical ``schedule.outcome`` once.

    The record is created insert-if-absent and its creator logs it; the slot is closed after that,
    so "closed" means "logged" and re-rolling a closed slot writes and logs nothing. A record
    found while its slot is still open belongs to a writer that is closing it right now, or that
    died before logging it: after a minute the sweep logs the STORED object, once per minute at
    most whoever finds it (``Ledger.claim_event_relog``).
    Returns True when the record is durable and logged, i.e. the slot may be closed."""
    now = ctx.now()
    slot = state.slot
    existing = state.events.get(SUMMARY_EVENT)
    if existing is None:
        slot.completed_at = slot.completed_at or now
        cells = state.snapshot_cells()
        outcome = build_outcome(slot, cells, delivery_states(ctx, state), slot.completed_at)
        if outcome is None:
            return False
        detail = {"summary": build_summary(slot, cells, state.intents), "outcome": outcome}
        if ctx.occurrences.put_event_once(slot.slot_id, SUMMARY_EVENT, detail, now):
            state.events[SUMMARY_EVENT] = {"ts": now}
            _log_outcome(ctx, outcome)
            return True
        existing = ctx.occurrences.get_event(slot.slot_id, SUMMARY_EVENT)  # another writer made it
        if existing is None:
            return False
    if not slot.open:
        return True  # closed: its record was logged before it was closed
    if now - int(existing.get("ts") or now) < ORPHAN_RECORD_MS:
        return False  # its writer may be logging and closing it right now
    if not ctx.occurrences.claim_event_relog(slot.slot_id, SUMMARY_EVENT, now, ORPHAN_RECORD_MS):
        # Another sweep (or a late rollup) found the orphan at the same time and re-logs it; only
        # one does, or the slot's one outcome line becomes one per finder.
        # A winner that died before logging leaves it to the next finder a minute later.
        return False
    stored = existing.get("detail") or (ctx.occurrences.get_event(slot.slot_id, SUMMARY_EVENT) or {}).get("detail") or {}
    ctx.log("warning", "outcome record found with its slot still open; logging the stored record",
            event="schedule.outcome_recovered", slot_id=slot.slot_id)
    if stored.get("outcome"):
        _log_outcome(ctx, stored["outcome"])
    return True


def _log_outcome(ctx: SlotRollup, outcome: dict[str, Any]) -> None:
    ctx.log("info", "Schedule occurrence reached a terminal outcome", **outcome)
    ctx.metric("SlotsFinished", status=str(outcome.get("status")))
    if outcome.get("alertable"):  # the page an operator gets: one per occurrence
        ctx.metric("AlertableOutcomes", status=str(outcome.get("business_status")))
        ctx.metric(HEALTH_METRIC)  # the default profile's one alarm sees it too (services.sweep.publish_health)
    for bucket in ("submitted", "no_match", "duplicate", "executor_failed", "delivery_failed"):
        count = outcome.get("cells", {}).get(bucket, 0)
        if count:
            ctx.metric("CellOutcomes", count, category=bucket)


def settle_delivery_terminal(ctx: SlotRollup, intent: Intent, cell_outcome: str, error: str | None, *, reason_code: str | None = None) -> bool:
    """Map a terminal delivery result onto its cell. A late failure never downgrades a settled cell."""
    now = ctx.now()
    if cell_outcome == "submitted":
        to, code, message = CellStatus.SUBMITTED, None, None
    elif cell_outcome == "duplicate":
        to, code = CellStatus.DUPLICATE, reason_code or "duplicate_exhausted"
        message = reason_message(code)
    else:
        to = CellStatus.FAILED
        code = reason_of(reason_code, error or "delivery failed")  # without a code: an answer's own text
        message = reason_message(code) if code else None
    return ctx.cells.settle_cell_from_delivery(
        intent.slot_id, intent.target_id, to, now,
        work_id=intent.work_id, work_type=intent.work_type, last_error=error, reason_code=code, reason_message=message,
    )
