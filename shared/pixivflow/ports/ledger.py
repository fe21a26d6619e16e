"""The ports to the table and the queues: the ledger's roles (``LEDGER_ROLES``), the generic outbox
rows, the job event store, the sweep's own state, and the two queues."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol, Sequence

from ..domain.failures import FailureEntry
from ..domain.model import Cell, Intent, Slot, SlotState
from ..domain.outbox import OutgoingMessage, OutboxRow
from ..domain.pause import SchedulePause
from ..domain.event_stream import StoredEvent, EventStream
from ..domain.sweep_state import SweepCursor, SweepLease, SparseIndex, ActiveRow, ScheduleWatch



# -- generic outbox rows (``OUTBOX#<kind>#<key>`` / ``META``) ---------------------------------------
#
# Notifications and event callbacks are outbox rows that belong to no delivery intent. They
# follow the intent rows' lifecycle: insert-if-absent on (kind, key), claimed under a lease with
# a conditional write, settled by the lease holder, due rows found through a sparse index.


class OutboxRows(Protocol):
    def enqueue(self, row: OutboxRow, *, revive: bool = False) -> tuple[OutboxRow, bool]:
        """Insert if absent on (kind, key); the existing row wins. With ``revive`` a ``dead`` or
        ``cancelled`` row goes back to ``pending`` (attempts 0, due now). Returns (row, created)."""
        ...

    def get(self, kind: str, key: str) -> OutboxRow | None: ...

    def claim(self, row: OutboxRow, owner: str, now_ms: int, lease_ms: int) -> OutboxRow | None:
        """pending/retry_wait and due, or processing with an expired lease -> processing under
        ``owner``, with one more attempt counted (the claim is the attempt's start)."""
        ...

    def settle(self, row: OutboxRow, owner: str, now_ms: int, *, status: str, error: str | None = None,
               next_attempt_at: int | None = None, unsent: bool = False) -> OutboxRow | None:
        """Record the claimed attempt's result as the lease holder: done, dead or retry_wait.
        ``unsent``: the claim sent nothing (it found the budget spent), so the attempt it counted
        is given back and the row says how many attempts were really made."""
        ...

    def release(self, row: OutboxRow, owner: str, now_ms: int, next_attempt_at: int) -> OutboxRow | None:
        """Give the row back unsent (a readiness deferral, a secret store that did not answer):
        the attempt its claim counted is given back."""
        ...

    def due(self, before_ms: int, limit_per_shard: int = 100) -> list[tuple[str, str]]:
        """(kind, key) of actionable rows due at or before ``before_ms`` (eventually consistent)."""
        ...

    # operator tooling
    def dead_rows(self) -> list[OutboxRow]: ...
    def find_rows(self, status: str | None = None) -> list[OutboxRow]:
        """Every row of every kind, or those in ``status``, newest first (a scan; operator tooling)."""
        ...

    def redrive(self, row: OutboxRow, now_ms: int) -> OutboxRow | None:
        """Re-arm a ``dead`` row (``requeue``); None when it is not dead."""
        ...


# -- the ledger and the queues ------------------------------------------------------------------
# Services see these Protocols only. ``adapters.dynamo_ledger.DynamoLedger`` and
# ``adapters.sqs_queues.SqsQueues`` implement them on DynamoDB and SQS; the embedded runtime can
# run the same adapters on moto or on the in-memory twins of ``pixivflow.local.twins``, and the
# contract suite (tests/contract) runs against both so they cannot drift. Every method that
# changes state is ONE conditional write (or one transaction): ``False``/``None`` means the
# condition refused the move, ``LedgerUnavailable`` means the ledger could not be reached.


class Queues(Protocol):
    """Transport only: any message may be lost, duplicated or reordered; the ledger decides."""

    def send_execution(self, messages: Sequence[OutgoingMessage]) -> list[int]:
        """Send execution messages. Returns the indexes of the messages that were NOT sent."""
        ...

    def send_outbox(self, messages: Sequence[OutgoingMessage]) -> list[int]:
        """Send outbox messages. Returns the indexes of the messages that were NOT sent."""
        ...

    def dead_letter_depth(self) -> int:
        """Messages waiting in the dead-letter queues (approximate, as SQS counts them); 0 when the
        deployment names none. Raises on an outage: the caller decides what an unknown depth means."""
        ...


# The ledger's roles. One DynamoDB adapter (``adapters.dynamo_ledger.DynamoLedger``) implements them all,
# since they share one table; each use case takes the roles it uses, so a change to one role's
# queries never reaches a service that does not use it.


class Occurrences(Protocol):
    """Slots (one per occurrence), their cells as read, and their lifecycle events: admission's
    insert-if-absent, the reads every use case starts from, the slot's own status moves."""

    def create_slot(self, slot: Slot) -> tuple[Slot, bool]:
        """Insert-if-absent (the commit point of admission): (the stored slot, whether this call created it)."""
        ...

    def ensure_cells(self, slot: Slot, target_types: Mapping[str, str], now_ms: int, existing: Iterable[str] = ()) -> list[str]: ...

    def get_slot(self, slot_id: str) -> Slot | None: ...

    def get_cell(self, slot_id: str, target_id: str) -> Cell | None: ...

    def load(self, slot_id: str) -> SlotState | None:
        """The whole slot partition, strongly consistent."""
        ...

    def mark_slot_running(self, slot_id: str, now_ms: int) -> bool: ...

    def finish_slot(self, slot_id: str, status: str, now_ms: int, *, last_error: str | None = None,
                    force_from: Iterable[str] = ...) -> bool: ...

    def leave_active_index(self, slot_id: str) -> bool: ...

    def put_event_once(self, slot_id: str, kind: str, detail: Mapping[str, Any], now_ms: int) -> bool: ...

    def get_event(self, slot_id: str, kind: str) -> dict[str, Any] | None: ...

    def claim_event_relog(self, slot_id: str, kind: str, now_ms: int, quiet_ms: int) -> bool:
        """Take the re-log of an existing event whose writer is presumed dead, as one conditional
        write: True for exactly one of several callers, and again only ``quiet_ms`` after the last
        claim (a claimer that died before logging it)."""
        ...

    def slot_ids(self) -> list[str]: ...


class CellLeases(Protocol):
    """A cell's run lease: one executor at a time, heartbeats, the hand-back of a deferral, the
    sweep's re-dispatch marker, and what an executor records under its lease."""

    def claim_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, ttl_ms: int, *,
                   unwritten: Cell | None = None) -> Cell | None:
        """Take the lease; with ``unwritten`` (the pending cell an unwritten snapshot target stands
        for) the same conditional write creates the item when it does not exist yet."""
        ...

    def heartbeat_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, ttl_ms: int) -> bool: ...

    def release_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, *, no_attempt: bool = False) -> bool:
        """Drop the lease; ``no_attempt`` gives the claim's attempt back (it started no execution)."""
        ...

    def defer_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, due_at: int, *,
                   candidate_report: Mapping[str, Any], reason_code: str | None = None) -> bool:
        """Give the lease and the claim's attempt back; the cell is due again at ``due_at``."""
        ...

    def mark_dispatched(self, slot_id: str, target_id: str, previous: int | None, now_ms: int, *,
                        unwritten: Cell | None = None) -> bool: ...

    def record_cell_error(self, slot_id: str, target_id: str, error: str, now_ms: int, *, owner: str | None = None,
                          candidate_report: Mapping[str, Any] | None = None, dispatched_at: int | None = None,
                          reason_code: str | None = None) -> bool: ...

    def save_selection_checkpoint(self, slot_id: str, target_id: str, owner: str, now_ms: int,
                                  checkpoint: Mapping[str, Any]) -> bool:
        """A topic selection's progress on its cell, conditional on the lease owner."""
        ...


class CellMoves(Protocol):
    """A cell's state moves: the work binding (compare-and-set, never rebound), the named moves of
    the cell's state machine, and the multi-item steps that end a slot's cells at once."""

    def bind_work(self, slot_id: str, target_id: str, work_id: str, work_type: str, now_ms: int) -> tuple[bool, str | None]: ...

    def release_work(self, slot_id: str, target_id: str, work_id: str, now_ms: int) -> bool: ...

    def transition_cell(self, slot_id: str, target_id: str, to_status: str, now_ms: int, *, owner: str | None = None,
                        require_no_live_lease: bool = False, from_states: Iterable[str] | None = None,
                        work_id: str | None = None, work_type: str | None = None, last_error: str | None = None,
                        keep_error: bool = False, reason_code: str | None = None, reason_message: str | None = None,
                        candidate_report: Mapping[str, Any] | None = None, release_lease: bool = True,
                        no_attempt: bool = False) -> bool:
        """The general conditional FSM move (tooling and the ledger's tests); services use the named moves."""
        ...

    def move_cell_as_owner(self, slot_id: str, target_id: str, to_status: str, now_ms: int, owner: str,
                           **fields: Any) -> bool: ...

    def settle_unleased_cell(self, slot_id: str, target_id: str, to_status: str, now_ms: int, **fields: Any) -> bool: ...

    def settle_cell_from_delivery(self, slot_id: str, target_id: str, to_status: str, now_ms: int, **fields: Any) -> bool: ...

    def fail_cell_if_unchanged(self, slot_id: str, target_id: str, seen_status: str, now_ms: int, **fields: Any) -> bool: ...

    def terminalise_slot(self, state: SlotState, *, fail_cells: Iterable[str], guard_cells: Iterable[str], slot_status: str,
                         reason_code: str, reason_message: str, now_ms: int) -> bool: ...

    def cancel_cells(self, state: SlotState, *, cells: Iterable[str], intents: Iterable[Intent], slot_status: str | None,
                     reason_code: str, reason_message: str, now_ms: int) -> bool:
        """A consumer cancel in one transaction, conditioned on the read ``state``."""
        ...


class WorkReservations(Protocol):
    """Which cell holds a work on a route (``WORK#<route>#<type>#<workId>`` / ``OWNER``): the
    selection-time dedupe across slots."""

    def reserve_work(self, route: str, work_type: str, work_id: str, owner_key: str, now_ms: int, *,
                     executor: str | None = None) -> tuple[bool, str | None]: ...

    def take_over_work(self, route: str, work_type: str, work_id: str, holder_key: str, owner_key: str, now_ms: int, *,
                       executor: str | None = None) -> bool: ...

    def release_work_reservation(self, route: str, work_type: str, work_id: str, owner_key: str, *,
                                 executor: str | None = None) -> bool: ...

    def work_owners(self, route: str, work_type: str, work_ids: Iterable[str], *, consistent: bool = True) -> dict[str, str]: ...


class DeliveryRows(Protocol):
    """A cell's delivery intents, each its own outbox row: recorded once, claimed under a lease,
    settled by the lease holder, found when due."""

    def put_intent(self, intent: Intent) -> tuple[Intent, bool]: ...

    def get_intent(self, slot_id: str, target_id: str, route: str, work_type: str, work_id: str) -> Intent | None: ...

    def get_intent_by_key(self, pk: str, sk: str) -> Intent | None: ...

    def claim_intent(self, intent: Intent, owner: str, now_ms: int, lease_ms: int, *, ignore_due: bool = False) -> Intent | None: ...

    def settle_intent(self, intent: Intent, owner: str, now_ms: int, *, ledger_status: str | None, outbox_status: str,
                      remote_id: str | None = None, remote_status: str | None = None, reuse_reason: str | None = None,
                      error: str | None = None, next_attempt_at: int | None = None, ack_kind: str | None = None,
                      send_progress: Mapping[str, Any] | None = None, clear_sending: bool = False) -> Intent | None:
        """Record one attempt's result on the intent and its outbox row, as the lease holder."""
        ...

    def release_intent(self, intent: Intent, owner: str, now_ms: int, next_attempt_at: int) -> Intent | None:
        """Readiness deferral: processing -> pending as the lease holder, due at ``next_attempt_at``,
        without consuming an attempt (None when the lease was lost)."""
        ...

    def mark_intent_sending(self, intent: Intent, owner: str, now_ms: int) -> Intent | None:
        """Set the row's ``sending`` marker as its lease holder, only if no marker is set."""
        ...

    def index_due(self, intent: Intent) -> bool:
        """Put an actionable row its slot no longer covers into DueOutbox (refused if the row moved)."""
        ...

    def due_intents(self, before_ms: int, limit_per_shard: int = 100) -> list[tuple[str, str]]:
        """Keys of indexed outbox rows due at or before ``before_ms`` (sparse index: may lag). Rows
        of open slots are not in it: they are found through their slot (``open_rows``)."""
        ...


class SweepIndexes(Protocol):
    """The sparse index of live slots, as the sweep walks it, and the one cheap probe of every
    sparse index that keeps an idle tick cheap."""

    def active_slots(self, limit_per_shard: int = 100) -> list[tuple[str, int]]:
        """(slotId, createdAt) from the sparse active index: may lag; re-read before deciding."""
        ...

    def active_shards(self) -> int:
        """How many shards the active index has (``active_page``'s shard is below it)."""
        ...

    def active_page(self, shard: int, after: str, limit: int) -> tuple[list[ActiveRow], bool]:
        """Up to ``limit`` rows of one active-index shard past position ``after`` ("" = its start),
        oldest first, and whether more may follow. May lag like ``active_slots``."""
        ...

    def occupied_indexes(self) -> frozenset[SparseIndex]:
        """Which of the sweep's sparse indexes may hold an entry (keeps an idle tick cheap).
        One eventually consistent read of at most one entry per index, lagging exactly as the
        Queries it spares do: an index reported empty had no entry when read, and one written since
        is seen by the next tick. An answer it cannot be sure of counts as occupied."""
        ...


class RequestKeys(Protocol):
    """Manual identity: one idempotency key, one slot, forever."""

    def claim_request_key(self, key: str, record: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]: ...

    def get_request_key(self, key: str) -> dict[str, Any] | None: ...


class SchedulePauses(Protocol):
    """An operator's pause of a schedule (``SchedulePause``), flipped by conditional writes."""

    def schedule_pause(self, schedule_id: str) -> SchedulePause | None:
        """The schedule's pause item (strongly consistent), or None when it was never paused."""
        ...

    def pause_schedule(self, schedule_id: str, by: str | None, now_ms: int) -> SchedulePause | None:
        """Mark the schedule paused, on condition it is not paused now; None when it already is."""
        ...

    def resume_schedule(self, schedule_id: str, by: str | None, now_ms: int) -> SchedulePause | None:
        """Mark the schedule running again, on condition it is paused now; None when it is not."""
        ...


class OperatorTools(Protocol):
    """Operator tooling (the CLI and /ui). Reads scan the table: never on a hot path."""

    def find_slots(self, *, schedule_id: str | None = None, status: str | None = None,
                   since_ms: int | None = None) -> list[Slot]:
        """Slots matching every given filter, newest first."""
        ...

    def dead_intents(self) -> list[Intent]: ...

    def find_intents(self, outbox_status: str | None = None) -> list[Intent]:
        """Every delivery intent, or those whose outbox row is in ``outbox_status``, newest first (a scan)."""
        ...

    def redrive_intent(self, intent: Intent, now_ms: int) -> Intent | None:
        """Re-arm a ``dead`` outbox row (``requeue``); None when it is not dead."""
        ...

class OperatorPages(Protocol):
    """The operator page's lists, each read one page of an index at a time (the jobs, the occurrences,
    the Failure Center), whatever the ledger holds; and the one-off reindex of items written before
    each index existed."""

    def job_page(self, limit: int, before: str | None = None) -> tuple[list[str], str | None]:
        """One page of job slot ids, newest first, older than the cursor ``before``; and the next
        page's cursor (None: the last). One index Query of at most ``limit`` entries."""
        ...

    def index_jobs(self) -> int:
        """Index the job slots written before the jobs index existed (a scan; idempotent)."""
        ...

    def slot_page(self, limit: int, before: str | None = None, *, schedule_id: str | None = None,
                  since_ms: int | None = None) -> tuple[list[str], str | None]:
        """One page of slot ids, newest first, after the cursor ``before``, created at or after
        ``since_ms``, of ``schedule_id``; and the next page's cursor (None: the last). One index
        Query of at most ``limit`` entries (the schedule filter may leave fewer ids)."""
        ...

    def slot_heads(self, slot_ids: list[str], *, with_cells: bool = True) -> list[SlotState]:
        """These slots with their written cells (none without ``with_cells``), in order (batched
        reads bounded by the ids given)."""
        ...

    def index_slots(self) -> int:
        """Index the slots written before the occurrence index existed (a scan; idempotent)."""
        ...

    def dead_page(self, limit: int, before: tuple[str, str, str] | None = None
                  ) -> tuple[list[tuple[str, str]], tuple[str, str, str] | None]:
        """One page of dead outbox rows' item keys, newest death first, after the cursor ``before``;
        and the next page's cursor (None: the last). One index Query of at most ``limit`` entries."""
        ...

    def dead_heads(self, keys: list[tuple[str, str]]) -> list[Intent | OutboxRow]:
        """The dead rows at these keys, in order: delivery rows and generic rows (one batched read)."""
        ...

    def failure_page(self, limit: int, before: str | None = None, *, between: tuple[int, int] | None = None,
                     schedule_id: str | None = None, target_id: str | None = None,
                     reason: str | None = None) -> tuple[list[FailureEntry], str | None]:
        """One page of failed cells, newest failure first, after the cursor ``before``, failed within
        ``between`` (epoch ms, end exclusive), matching the filters; and the next page's cursor (None:
        the last). One index Query of at most ``limit`` entries (filters may leave fewer rows)."""
        ...

    def failure_heads(self, keys: list[tuple[str, str]],
                      routes: Mapping[str, list[str]]) -> list[tuple[Slot, Cell, list[Intent]]]:
        """These failed cells (slot id, target id) with their slots and their delivery rows on
        ``routes[target]``, in order (batched reads bounded by the keys given)."""
        ...

    def index_failures(self) -> int:
        """List the failed cells written before the failures index existed (a scan; idempotent)."""
        ...


class UiSessions(Protocol):
    """The operator page's session epoch: a /ui cookie names the epoch it was issued under and
    works only while that epoch is current."""

    def ui_session_epoch(self) -> int:
        """The current epoch (0 before any logout)."""
        ...

    def end_ui_sessions(self, seen_epoch: int, now_ms: int) -> int:
        """Advance the epoch past ``seen_epoch`` (conditional: only from ``seen_epoch``, so two
        logouts racing advance it once); returns the epoch now current."""
        ...

    def login_failures(self, client: str, minute: int) -> int:
        """Wrong tokens ``client`` (its address) presented in that minute (epoch minutes)."""
        ...

    def count_login_failure(self, client: str, minute: int, limit: int, now_ms: int) -> bool:
        """Count one more wrong token of ``client`` in that minute, only while it has fewer than
        ``limit`` (conditional: racing attempts never count past it); False when it was at the limit."""
        ...


class TopicSpaces(Protocol):
    """A topic's cached tag space, shared by the cells that select from it while it is fresh."""

    def get_topic_space(self, key: str, now_ms: int) -> dict[str, Any] | None: ...

    def put_topic_space(self, key: str, topic: str, work_type: str, space: list[Any], now_ms: int,
                        fresh_until_ms: int) -> bool: ...


# The roles the ledger adapter implements on its one table (adapters.dynamo_ledger.DynamoLedger):
# a use case names the ones it takes; the contract suite and the simulation's crash points follow them.
LEDGER_ROLES: tuple[type, ...] = (Occurrences, CellLeases, CellMoves, WorkReservations, DeliveryRows, SweepIndexes,
                                  RequestKeys, SchedulePauses, OperatorTools, OperatorPages, UiSessions, TopicSpaces)


# -- Workflow Protocol v1: the job event stream and its callbacks ------------------------------


class JobStore(Protocol):
    """The job event stream, its ack cursor and the open-callback index. A job's callback is an
    ``event_callback`` :class:`OutboxRow` (one model, one ``OutboxRows`` adapter for every row
    kind), inserted in the same transaction as its event; the outbox worker sends it.

    Writes are conditional: an event is inserted only if absent and only on top of the head the
    caller read (so ``seq`` is dense per job and ``ts`` never moves backwards), together with its
    callback row in ONE atomic step; the cursor only ever moves forward."""

    def stream(self, job_id: str) -> EventStream: ...

    def append(self, event: StoredEvent, *, expected_head: int, callback: OutboxRow | None = None,
               open_callback_since: int | None = None, close_callback_index: bool = False, now_ms: int = 0) -> str:
        """Insert ``event`` (seq must be ``expected_head + 1``). ``open_callback_since`` puts a
        ``job.requested`` event into the open-callback index; ``close_callback_index`` takes the
        job out of it (its terminal event). Returns an :class:`AppendResult` value."""
        ...

    def advance_cursor(self, job_id: str, position: tuple[int, int], now_ms: int) -> tuple[int, int] | None:
        """Move the ack cursor to ``position`` if that is strictly later. Returns the cursor now stored."""
        ...

    def open_callbacks(self, limit: int) -> list[str]:
        """Job ids that declared a callback and have no terminal event yet, newest first."""
        ...




# -- the sweep's own state (one sweep runs at a time; missed fires) ------------------------------


class SweepState(Protocol):
    """The sweep's items in the ledger: its single-runner lease, schedule watches, missed fires.

    Every write is conditional; a refused condition is an answer (False / not acquired), never an
    exception. Infrastructure failures raise.
    """

    def acquire_lease(self, owner: str, now_ms: int, ttl_ms: int) -> SweepLease:
        """Take the lease when it is free or expired (``until <= now``); otherwise report its holder."""
        ...

    def release_lease(self, owner: str, now_ms: int, cursor: SweepCursor | None = None) -> bool:
        """Expire our own lease now, so the next tick need not wait for the TTL, leaving ``cursor``
        (when given) for the next holder. False, and nothing written, if the lease is not ours."""
        ...

    def watches(self, schedule_ids: Sequence[str]) -> dict[str, ScheduleWatch]:
        """The stored watches of these schedules (strongly consistent); absent ids are left out."""
        ...

    def start_watch(self, schedule_id: str, fingerprint: str, now_ms: int,
                    replacing: ScheduleWatch | None = None) -> bool:
        """Start watching at ``now_ms``: insert-if-absent, or replace exactly ``replacing``."""
        ...

    def advance_watch(self, watch: ScheduleWatch, checked_through_ms: int) -> bool:
        """Move the cursor forward, on condition the watch is still exactly ``watch``."""
        ...

    def pause_watch(self, watch: ScheduleWatch) -> bool:
        """Mark the watch paused (its schedule is disabled), on condition it is still ``watch``."""
        ...

    def record_missed(self, slot_id: str, schedule_id: str, fire_ms: int, now_ms: int) -> bool:
        """Insert ``MISSED#<slotId>`` once. True only for the call that created it."""
        ...

    def missed_among(self, slot_ids: Sequence[str]) -> set[str]:
        """Which of these slot ids have a ``MISSED#`` item (at most one batched read of 100 keys)."""
        ...
