"""Admission: a trigger makes an occurrence durable, then dispatches its cells.

The slot item is the commit point and the whole of admission's writes: its ``targetIds`` are the
frozen membership, and each cell's item is written by the cell's first claim (or by
the sweep, when it re-dispatches or fails a cell nobody claimed). So an admission is one
conditional put plus ⌈n/10⌉ SendMessageBatch, whatever n. Only after the slot is
durable does the trigger answer. Dispositions and per-cell leases:
``docs/explanation/ledger.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ports import Settings, ScheduleSettings
from ..domain.cells import COMPLETED_SLOT_STATES
from ..domain.model import Cell, Slot, unwritten_cell
from ..domain.occurrence import Occurrence
from ..ports import Clock, Log, Metrics, Occurrences, Queues
from .context import Measured
from .messages import wake_cells
from .rollup import SlotRollup, rollup

ACCEPTED = "accepted"
ALREADY_RUNNING = "already_running"
ALREADY_COMPLETED = "already_completed"
REJECTED = "rejected"


@dataclass(frozen=True)
class Admissions(Measured):
    """What admitting an occurrence takes: the slot it writes, the execution queue its cells go
    to, the config (a plan's targets), the rollup of a slot whose every cell already ended, the
    clock, log and metrics."""

    occurrences: Occurrences
    queues: Queues
    config: Settings
    rollup: SlotRollup
    clock: Clock
    log: Log
    metrics: Metrics | None


@dataclass
class Admission:
    slot: Slot
    created: bool
    disposition: str
    cells: list[Cell] = field(default_factory=list)
    sent: int = 0
    reason: str | None = None


def new_slot(ctx: Admissions, schedule: ScheduleSettings, occ: Occurrence, *, trigger_source: str, label: str | None = None,
             slot_id: str | None = None, manual_request_id: str | None = None, correlation_id: str | None = None,
             params: dict[str, Any] | None = None, target_ids: list[str] | None = None) -> Slot:
    """The slot an admission writes; ``target_ids`` narrows the plan's targets (a manual job has one)."""
    targets = ctx.config.targets_for(schedule)
    return Slot(
        slot_id=slot_id or occ.slot_id,
        schedule_id=schedule.id,
        status="pending",
        target_ids=list(target_ids) if target_ids else [t.id for t in targets],
        created_at=ctx.now(),
        occurrence_at=occ.occurrence_at,
        occurrence_date=occ.occurrence_date,
        occurrence_label=occ.occurrence_label,
        timezone=occ.timezone,
        trigger_source=trigger_source,
        slot_name=(label or "").strip()[:80] or occ.occurrence_label,
        manual_request_id=manual_request_id,
        correlation_id=correlation_id,
        params=params,
        timeout_ms=schedule.timeout_ms,
    )


def admit(ctx: Admissions, slot: Slot) -> Admission:
    """Open (or resume) a slot and dispatch every cell that is neither terminal nor leased."""
    if not slot.target_ids:
        return Admission(slot, False, REJECTED, reason="schedule selects no targets")
    stored, created = ctx.occurrences.create_slot(slot)
    now = ctx.now()
    if created:
        cells = [unwritten_cell(stored, t) for t in stored.target_ids]
        ctx.log("info", "slot admitted", event="slot.admitted", slot_id=stored.slot_id,
                schedule_id=stored.schedule_id, cells=len(cells), trigger_source=stored.trigger_source)
        ctx.metric("SlotsAdmitted", trigger_source=stored.trigger_source)
        return _dispatch(ctx, Admission(stored, True, ACCEPTED, cells=cells), cells)

    state = ctx.occurrences.load(stored.slot_id)
    if state is None:  # vanished between the put and the read: treat as a fresh conflict
        return Admission(stored, False, REJECTED, reason="slot could not be read back")
    if state.slot.status in COMPLETED_SLOT_STATES:
        return Admission(state.slot, False, ALREADY_COMPLETED, cells=state.snapshot_cells())
    cells = state.snapshot_cells()  # unwritten ones included: pending, never leased
    open_cells = [c for c in cells if not c.terminal]
    if not open_cells:
        status = rollup(ctx.rollup, state.slot.slot_id, state) or state.slot.status
        state.slot.status = status
        disposition = ALREADY_COMPLETED if status in COMPLETED_SLOT_STATES else REJECTED
        reason = None if disposition == ALREADY_COMPLETED else "every cell already ended; terminal cells are never re-run"
        return Admission(state.slot, False, disposition, cells=cells, reason=reason)
    to_send = [c for c in open_cells if not c.lease_live(now)]
    if not to_send:
        return Admission(state.slot, False, ALREADY_RUNNING, cells=cells)
    return _dispatch(ctx, Admission(state.slot, False, ACCEPTED, cells=cells), to_send)


def _dispatch(ctx: Admissions, admission: Admission, cells: list[Cell]) -> Admission:
    failed = wake_cells(ctx.queues, ctx.log, [(c.slot_id, c.target_id) for c in cells], event="slot.dispatch_failed",
                        slot_id=admission.slot.slot_id)
    admission.sent = len(cells) - len(failed)
    if failed:
        # The slot stays durable; the sweep re-dispatches what was not sent.
        admission.disposition = REJECTED if admission.sent == 0 else ACCEPTED
        admission.reason = f"{len(failed)} of {len(cells)} execution message(s) could not be sent"
    return admission
