"""Plain views of the ledger's entities: what services and pure rules read.

The DynamoDB adapter maps items to these (attribute names are the camelCase names
below); nothing here knows about storage. All times are integer epoch milliseconds UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .cells import TERMINAL_CELL_STATES, CellStatus


class LedgerStatus(StrEnum):
    """Delivery ledger status of an intent."""

    PENDING = "pending"
    DELIVERED = "delivered"
    DUPLICATE = "duplicate"
    FAILED = "failed"


class OutboxStatus(StrEnum):
    """Outbox status of the same intent item."""

    PENDING = "pending"
    PROCESSING = "processing"
    RETRY_WAIT = "retry_wait"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


ACTIONABLE_OUTBOX: frozenset[str] = frozenset(
    {OutboxStatus.PENDING, OutboxStatus.PROCESSING, OutboxStatus.RETRY_WAIT}
)
CONFIRMED_LEDGER: frozenset[str] = frozenset({LedgerStatus.DELIVERED, LedgerStatus.DUPLICATE})


def cell_key(slot_id: str, target_id: str) -> str:
    """How a cell names itself as the owner of a work on a route (route-work ownership)."""
    return f"{slot_id}#{target_id}"


def lease_is_live(owner: str | None, lease_until: int | None, now_ms: int) -> bool:
    """A lease is live iff it has an owner and has not expired."""
    return bool(owner) and lease_until is not None and lease_until > now_ms


@dataclass
class Slot:
    slot_id: str
    schedule_id: str
    status: str
    target_ids: list[str]
    created_at: int
    occurrence_at: int | None = None
    occurrence_date: str | None = None
    occurrence_label: str | None = None
    timezone: str = "UTC"
    trigger_source: str = "cron"
    slot_name: str | None = None
    started_at: int | None = None
    completed_at: int | None = None
    last_error: str | None = None
    manual_request_id: str | None = None
    correlation_id: str | None = None
    params: dict[str, Any] | None = None
    timeout_ms: int | None = None
    # A Failure Center retry (domain/failures.py): its mode and the occurrence whose failure it retries.
    retry_mode: str | None = None
    retry_of: str | None = None
    open: bool = False

    @property
    def is_job(self) -> bool:
        """A protocol job's slot: the one kind that carries the job's stored params."""
        return self.params is not None  # still in the active index: not yet closed (a closed slot's outcome is logged)


@dataclass
class Cell:
    slot_id: str
    target_id: str
    status: str
    work_type: str | None = None
    work_id: str | None = None
    attempt_count: int = 0
    lease_owner: str | None = None
    lease_until: int | None = None
    heartbeat_at: int | None = None
    started_at: int | None = None
    dispatched_at: int | None = None
    created_at: int = 0
    updated_at: int = 0
    completed_at: int | None = None
    last_error: str | None = None
    terminal_reason_code: str | None = None
    terminal_reason_message: str | None = None
    # The reason of the last retryable failure (``last_error``): a cell the schedule's timeout ends
    # while the source keeps failing ends with that cause, not as a bare timeout.
    retry_reason_code: str | None = None
    candidate_report: dict[str, Any] | None = None
    # A topic selection's progress (day, tag, collected works), written by the lease owner after
    # each (day, tag) step so the next invocation resumes there (domain/topic.DayProgress).
    selection_checkpoint: dict[str, Any] | None = None
    # Not written yet: a snapshot target whose cell item the ledger does not hold. Admission writes
    # the slot alone (its targetIds ARE the frozen membership); a cell's item is created by its
    # first claim, or by the sweep when it re-dispatches or fails it (one request per admission, one
    # write unit less per cell). Until then it is exactly a pending cell with no
    # lease, dispatched when the slot was created.
    virtual: bool = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_CELL_STATES

    def lease_live(self, now_ms: int) -> bool:
        return lease_is_live(self.lease_owner, self.lease_until, now_ms)

    @property
    def in_delivery(self) -> bool:
        return self.status in (CellStatus.DELIVERY_PENDING, CellStatus.ARTIFACT_READY)


@dataclass
class Intent:
    """A delivery intent and, on the same item, its outbox row."""

    slot_id: str
    target_id: str
    route: str
    work_type: str
    work_id: str
    idempotency_key: str
    status: str = LedgerStatus.PENDING
    outbox_status: str = OutboxStatus.PENDING
    attempts: int = 0
    max_attempts: int = 12
    next_attempt_at: int = 0
    lease_owner: str | None = None
    lease_until: int | None = None
    remote_id: str | None = None
    remote_status: str | None = None
    reuse_reason: str | None = None
    ack_kind: str | None = None  # the DeliveryAck kind of the attempt that settled the row
    last_error: str | None = None
    created_at: int = 0
    updated_at: int = 0
    delivered_at: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    # A route that posts in several calls (Telegram review): when an attempt began
    # posting without saving what it posted, and what earlier attempts posted and saved.
    sending_at: int | None = None
    send_progress: dict[str, Any] | None = None
    redrive_count: int = 0
    # The worker whose claim began the row's current unsettled stretch: set by the first claim after
    # a settle, kept by later claims (one that took over a lapsed lease), cleared by a settle, and by
    # a deferral only when the deferring worker made that first claim. While it is set, a worker may
    # have posted this row without recording anything (``may_be_downstream``).
    unsettled_claim: str | None = None
    # The bound work's stored files (the ledger, not a manifest object, records them), written
    # once with the row, after every file is stored; services/assets.py.
    files: list[dict[str, Any]] | None = None

    @property
    def confirmed(self) -> bool:
        return self.status in CONFIRMED_LEDGER

    @property
    def actionable(self) -> bool:
        return self.outbox_status in ACTIONABLE_OUTBOX

    @property
    def began_posting(self) -> bool:
        """Part of this row may be in a chat (Telegram review): an attempt marked it ``sending``
        and saved nothing, or earlier attempts posted and saved their posts without the review
        being recorded. Such a row is never cancelled nor dead-lettered unrecorded: only an attempt
        of the route records what is in the chat at the control plane."""
        return self.sending_at is not None or self.send_progress is not None

    @property
    def may_be_downstream(self) -> bool:
        """The downstream may hold this row's work (one delivery per work and route, so the work
        must stay reserved): an attempt was recorded (its answer lost or failed after the
        downstream took it), or a worker claimed the row and never settled it. A claim uses no
        attempt, so a row ``processing`` under a lapsed lease is one whose worker may have posted and
        died before recording anything; a live lease is a post under way. A row a worker took over
        from a lapsed lease and then deferred (the route not ready) is ``pending`` again with no
        attempt, and its first claimer may still have posted it: ``unsettled_claim`` says so."""
        return self.attempts > 0 or self.outbox_status == OutboxStatus.PROCESSING or self.unsettled_claim is not None


def unwritten_cell(slot: Slot, target_id: str) -> Cell:
    """What a snapshot cell is before its item exists: pending, never claimed, dispatched at admission."""
    return Cell(slot_id=slot.slot_id, target_id=target_id, status=CellStatus.PENDING, created_at=slot.created_at,
                updated_at=slot.created_at, dispatched_at=slot.created_at, virtual=True)


def row_overdue(intent: Intent, now_ms: int, grace_ms: int = 0) -> bool:
    """An outbox row to (re-)send now: pending or retry_wait and due ``grace_ms`` ago, or
    processing under a claim that expired (re-claimed with the same intent)."""
    if not intent.actionable:
        return False
    if intent.outbox_status == OutboxStatus.PROCESSING:
        return intent.lease_until is None or intent.lease_until <= now_ms
    return intent.next_attempt_at <= now_ms - grace_ms


@dataclass
class SlotState:
    """One consistent read of a slot's partition."""

    slot: Slot
    cells: dict[str, Cell] = field(default_factory=dict)
    intents: list[Intent] = field(default_factory=list)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)  # lifecycle event kind -> {ts}
    # Cell items the ledger holds but cannot read (target id -> why): left out of
    # ``cells``, so each reads as the pending cell it stood for before its first write, and the
    # next claim or sweep write completes the item (the ledger's upserts accept an item with no
    # status). Never a reason to fail the read.
    malformed: dict[str, str] = field(default_factory=dict)

    def cell(self, target_id: str) -> Cell | None:
        """The target's cell: its item, or the pending cell it stands for while unwritten (None for a
        target outside the snapshot)."""
        found = self.cells.get(target_id)
        if found is not None or target_id not in self.slot.target_ids:
            return found
        return unwritten_cell(self.slot, target_id)

    def first_cell(self) -> Cell | None:
        """The cell a job is projected from: its first snapshot target's."""
        return self.cell(self.slot.target_ids[0]) if self.slot.target_ids else None

    def snapshot_cells(self) -> list[Cell]:
        """One cell per snapshot target, in snapshot order: written ones and unwritten (virtual) ones."""
        return [c for t in self.slot.target_ids if (c := self.cell(t)) is not None]  # never None: t is in the snapshot

    def missing_targets(self) -> list[str]:
        """Snapshot targets whose cell item is not written yet."""
        return [t for t in self.slot.target_ids if t not in self.cells]

    def intents_for(self, target_id: str) -> list[Intent]:
        return [i for i in self.intents if i.target_id == target_id]
