"""The stall sweep, every SweepIntervalMinutes (``docs/explanation/stall-rules.md``).

Cost stays proportional to live work: slots are found through the sparse ActiveSlots index,
the delivery rows of open slots through their slot (read anyway: a row needs no index entry of
its own while its slot is open), and every other outbox row through DueOutbox (rows of closed
slots enter it as their slot closes, ``rollup.rows_outlive_slot``); every hit is re-read strongly
consistently before anything is decided. A snapshot cell whose item was never written (nobody claimed it yet) is a pending
cell without a lease (``SlotState.cell``); re-dispatching or failing it writes its item. Per
active slot, in order:
  1. (nothing to materialise: admission writes the slot alone);
  2. settle lease-less in-delivery cells from the ledger and roll the slot up;
  3. fail cells running past their schedule's timeout (execution_timeout), except
     delivery_pending cells, which belong to the outbox, and a handed-over cell every route of
     which confirmed, which is submitted instead, even under a lease;
  4. recovery: re-dispatch lease-less open cells whose dispatch is 5 min old, only while the
     slot is inside its liveness budget and its schedule is enabled; a rescued
     slot is not judged by the stall rules;
  5. the stall rules queued_too_long / stalled_no_heartbeat, one transaction per slot.
Then outbox rows overdue by more than 120 s, or processing past their lease, are re-sent.
A single bad item never aborts the sweep.

The walk is incremental (the scale model of ``make bench``: ``docs/explanation/scale.md``): one
tick visits live slots shard by shard, page by page, from the cursor the previous tick left on the
lease item, and starts no new slot once ``SWEEP_BUDGET_MS`` of its clock has passed (under half
its lease and timeout).
While the live slots fit one budget, every tick is a whole pass and the cursor stays at its start;
past that, a pass spans ticks, and none of the waits the rules above act on (recovery's 5 min,
the 120 s re-drive grace, the stall budgets) is shorter than the few ticks a pass then takes.

An idle ledger costs a tick one read per sparse index (``Ledger.occupied_indexes``),
not a Query per shard: an index found empty is not walked this tick. Nothing that must be seen is
skipped by it: the probe reads the very index the Queries would, with the same lag, so an entry
written after it is found by the next tick, exactly as one written after the Queries would be; and
the index entries are written by the same conditional writes that create the work (no marker a
dying writer could leave wrong). Overdue rows of open slots are found through their slot, so they
are re-sent whatever DueOutbox holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from ..clock import Entropy
from ..ports import Settings, ScheduleSettings
from ..domain.model import Cell, SlotState, row_overdue
from ..domain.cells import CellStatus, derive_slot_status, is_terminal_slot
from ..domain.occurrence import fires_between, occurrence_for_fire
from ..domain.reasons import reason_message
from ..domain.stall import StallVerdict, judge_slot, progress_clock
from ..domain.sweep_state import SPARSE_INDEXES, ScheduleWatch, SparseIndex, SweepCursor
from ..ports import (HEALTH_METRIC, CellLeases, CellMoves, Clock, Log, Metrics, Occurrences, Queues, SchedulePauses,
                     SweepIndexes, SweepState)
from .context import Measured
from .timing import REDISPATCH_AFTER_MS, REDRIVE_GRACE_MS
from .job_events import JobEvents
from .messages import wake_cells, wake_outbox
from .plans import NOT_RECOVERABLE_MESSAGE, run_blocked
from .delivery import Deliveries, due_delivery_keys
from .outbox import Outbox, redrive_rows
from .rollup import SlotRollup, close, converge_deliveries, delivery_states, owned_by_outbox, rollup, settle_delivered_handover

BATCH_LIMIT = 100  # slots per rule per tick
PAGE_ROWS = BATCH_LIMIT  # active-index rows per query of the walk
SWEEP_BUDGET_MS = 25_000  # a tick starts no new slot past this: under half its 60 s lease (SWEEP_LEASE_MS)
MAX_SLOTS_PER_TICK = 64 * BATCH_LIMIT  # and visits at most this many, should its clock stand still


@dataclass(frozen=True)
class Sweeps(Measured):
    """What a sweep tick takes: the slots and their cells (reads, leases, moves), the sparse
    indexes it walks, the schedules' pauses, the execution and outbox queues, its own lease and
    the schedules' watches (None: no lease, no missed-fire detection), the config, entropy, how
    often it is scheduled, the slot rollup, the delivery re-drive, the generic rows' worker,
    the job event stream's repair, the clock, log and metrics."""

    occurrences: Occurrences
    cells: CellMoves
    leases: CellLeases
    indexes: SweepIndexes
    pauses: SchedulePauses
    queues: Queues
    sweep_state: SweepState
    config: Settings
    entropy: Entropy
    interval_ms: int
    rollup: SlotRollup
    deliveries: Deliveries
    outbox: Outbox
    job_events: JobEvents
    clock: Clock
    log: Log
    metrics: Metrics | None


@dataclass
class SweepResult:
    """The ``sweep.finished`` counters (kept stable: names are only ever added).

    ``scanned``: the slots the two stall rules' queries return (past their budget, lease dead),
    skipped ones included. ``activeSlots`` is every row the active-slot index returned this tick.
    ``unrecoverable`` counts slots that recovery would have re-dispatched but whose schedule is
    disabled or gone; they are left to the stall rules.
    """

    scanned: int = 0
    queuedTooLong: int = 0
    stalledNoHeartbeat: int = 0
    recovered: int = 0
    timedOut: int = 0
    rolledUp: int = 0
    redriven: int = 0
    jobsRepaired: int = 0  # jobs with a callback and no terminal event the repair pass looked at
    errors: int = 0
    activeSlots: int = 0
    indexesEmpty: int = 0  # sparse indexes found empty by this tick's probe, so not queried
    unrecoverable: int = 0
    shardsWalked: int = 0  # active-index shards walked to their end this tick
    passComplete: int = 0  # 1 when the walk came round to where it began (every live slot visited)
    rescued: list[str] = field(default_factory=list)
    cursor: SweepCursor = field(default_factory=SweepCursor)  # where the next tick's walk resumes

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
            "activeSlots": self.activeSlots,
            "unrecoverable": self.unrecoverable,
            "shardsWalked": self.shardsWalked,
            "passComplete": self.passComplete,
            "indexesEmpty": self.indexesEmpty,
        }


def sweep(ctx: Sweeps, cursor: SweepCursor | None = None) -> SweepResult:
    result = SweepResult()
    runtime = ctx.config.schedulerRuntime
    queued_ms, stall_ms = runtime.queued_timeout_ms, runtime.stall_timeout_ms
    judged = {"queued_too_long": 0, "stalled_no_heartbeat": 0}
    overdue: list[str] = []  # delivery rows of open slots to re-send
    occupied = _occupied(ctx, result)
    walk = _walk(ctx, cursor or SweepCursor(), ctx.now(), result) if "active" in occupied else _no_walk(cursor, result)
    for slot_id in walk:
        result.activeSlots += 1  # every row the index returned, even one that is then skipped
        try:
            state = ctx.occurrences.load(slot_id)
            if state is None:
                continue
            now = ctx.now()
            overdue += [i.idempotency_key for i in state.intents if row_overdue(i, now, REDRIVE_GRACE_MS)]
            if is_terminal_slot(state.slot.status):
                close(ctx.rollup, state)  # terminal but its outcome record not yet logged: finish closing it
                continue
            _sweep_slot(ctx, state, result, queued_ms, stall_ms, judged)
        except Exception as exc:  # one bad slot never aborts the sweep
            result.errors += 1
            ctx.log("error", "sweep failed on a slot", event="sweep.slot_error", slot_id=slot_id, error=repr(exc)[:300])
    _redrive_outbox(ctx, result, overdue, indexed="due" in occupied)
    if "due" in occupied:
        _repair_outbox_rows(ctx, result)
    if "callbacks" in occupied:
        _repair_job_events(ctx, result)
    ctx.log("info", "sweep finished", event="sweep.finished", **result.as_dict())
    for rule, count in (("queued_too_long", result.queuedTooLong), ("stalled_no_heartbeat", result.stalledNoHeartbeat)):
        if count:
            ctx.metric("Stalls", count, rule=rule)
    return result


def _occupied(ctx: Sweeps, result: SweepResult) -> frozenset[SparseIndex]:
    """The sparse indexes this tick reads. A probe that fails reads them all."""
    try:
        occupied = ctx.indexes.occupied_indexes()
    except Exception as exc:  # never aborts the sweep: the Queries below are the slow, sure way
        ctx.log("warning", "sparse-index probe failed; every index is read", event="sweep.probe_failed", error=repr(exc)[:300])
        return SPARSE_INDEXES
    result.indexesEmpty = len(SPARSE_INDEXES - occupied)
    return occupied


def _no_walk(cursor: SweepCursor | None, result: SweepResult) -> Iterator[str]:
    """ActiveSlots held no entry: a whole pass over no live slot; the cursor goes back to its shard's start."""
    result.passComplete = 1
    result.cursor = SweepCursor((cursor or SweepCursor()).shard, "")
    yield from ()


def _walk(ctx: Sweeps, cursor: SweepCursor, started_ms: int, result: SweepResult) -> Iterator[str]:
    """The live slots this tick visits, from ``cursor``: shard by shard (each oldest first), at most
    one pass. Sets ``result.cursor`` to where the next tick resumes: this walk's start after a whole
    pass, else the position after the last slot it handed out."""
    shards = ctx.indexes.active_shards()
    first = cursor.shard % shards
    visited = 0
    for step in range(shards):
        shard = (first + step) % shards
        after = cursor.after if step == 0 else ""
        more = True
        while more:
            rows, more = ctx.indexes.active_page(shard, after, PAGE_ROWS)
            for row in rows:
                # the budget, checked before each slot; one slot a tick at least, so the walk always moves
                spent = ctx.now() - started_ms >= SWEEP_BUDGET_MS or visited >= MAX_SLOTS_PER_TICK
                if visited and spent:
                    result.cursor = SweepCursor(shard, after)
                    return
                visited += 1
                yield row.slot_id
                after = row.position
        result.shardsWalked += 1
    result.passComplete = 1
    result.cursor = SweepCursor(first, "")


def _sweep_slot(ctx: Sweeps, state: SlotState, result: SweepResult, queued_ms: int, stall_ms: int, judged: dict[str, int]) -> None:
    now = ctx.now()
    slot = state.slot
    if converge_deliveries(ctx.rollup, state):
        state = ctx.occurrences.load(slot.slot_id) or state
    if _all_terminal(state):
        if rollup(ctx.rollup, slot.slot_id, state) != slot.status:
            result.rolledUp += 1
        return
    if _timeouts(ctx, state, now):
        result.timedOut += 1
        state = ctx.occurrences.load(slot.slot_id) or state
        if _all_terminal(state):
            rollup(ctx.rollup, slot.slot_id, state)
            result.rolledUp += 1
            return
    verdict = judge_slot(state.slot, state.snapshot_cells(), now, queued_timeout_ms=queued_ms, stall_timeout_ms=stall_ms)
    if verdict is not None:
        if judged[verdict.rule] >= BATCH_LIMIT:
            return  # beyond this tick's batch for the rule: the next tick takes it
        judged[verdict.rule] += 1
        result.scanned += 1  # a row of a stall rule's query, whether or not it is then skipped
    if _recover(ctx, state, now, queued_ms, stall_ms, result):
        result.recovered += 1
        result.rescued.append(slot.slot_id)
        return
    if verdict is None or _outbox_owns_progress(ctx, state):
        return
    if _terminalise(ctx, state, verdict, now):
        if verdict.rule == "queued_too_long":
            result.queuedTooLong += 1
        else:
            result.stalledNoHeartbeat += 1


def _outbox_owns_progress(ctx: Sweeps, state: SlotState) -> bool:
    """Every open cell waits on a live outbox row: progress belongs to the outbox (its retry
    budget and dead-letter path end it), so the stall rules do not judge this slot."""
    open_cells = [c for c in state.snapshot_cells() if not c.terminal]
    owned = owned_by_outbox(ctx.rollup, state)
    if not open_cells or any(c.target_id not in owned for c in open_cells):
        return False
    states = delivery_states(ctx.rollup, state)
    return all(states.get(c.target_id) == "live" for c in open_cells)


def _all_terminal(state: SlotState) -> bool:
    return all(c.terminal for c in state.snapshot_cells())  # an unwritten cell is pending


def _timeouts(ctx: Sweeps, state: SlotState, now: int) -> bool:
    """Fail cells still running past the schedule's timeout (delivery_pending belongs to the outbox;
    a handed-over cell whose routes all confirmed is submitted, ``settle_delivered_handover``)."""
    timeout = state.slot.timeout_ms or 1_800_000
    moved = False
    owned = owned_by_outbox(ctx.rollup, state)
    for cell in state.snapshot_cells():
        if cell.terminal or cell.target_id in owned or cell.started_at is None:
            continue
        if now - cell.started_at <= timeout:
            continue
        settled = settle_delivered_handover(ctx.rollup, state, cell, now)  # delivered: never failed for its lateness
        if settled is not None:
            moved = moved or settled
            continue
        # A cell whose last run failed for a reason (the source down, rate-limited, refusing the
        # account) ends with that cause: the timeout only stopped the retries. A cell that never
        # reported a failure ends as a timeout.
        cause = cell.retry_reason_code if reason_message(cell.retry_reason_code or "") else None
        error = f"execution exceeded the schedule timeout of {timeout} ms"
        if cause is not None:
            error = f"{cause}: {error}; the last attempt failed: {cell.last_error or cause}"[:1000]
        ok = ctx.cells.fail_cell_if_unchanged(
            cell.slot_id, cell.target_id, cell.status, now, last_error=error,
            reason_code=cause or "execution_timeout", reason_message=reason_message(cause or "execution_timeout"),
        )
        if ok:
            moved = True
            ctx.log("warning", "cell timed out", event="cell.execution_timeout", slot_id=cell.slot_id,
                    target_id=cell.target_id, started_at=cell.started_at, timeout_ms=timeout)
    return moved


def _inside_budget(state: SlotState, now: int, queued_ms: int, stall_ms: int) -> bool:
    slot = state.slot
    if slot.status == "pending":
        return now - slot.created_at < queued_ms
    if slot.status == "running":
        return now - progress_clock(slot, state.snapshot_cells()) < stall_ms
    return False


def _recover(ctx: Sweeps, state: SlotState, now: int, queued_ms: int, stall_ms: int, result: SweepResult) -> bool:
    """Re-dispatch lease-less open cells whose message was lost or whose executor died."""
    if not _inside_budget(state, now, queued_ms, stall_ms):
        return False
    due = [
        c for c in state.snapshot_cells()
        if not c.terminal and c.status != CellStatus.DELIVERY_PENDING and not c.lease_live(now)
        and (c.dispatched_at is None or c.dispatched_at <= now - REDISPATCH_AFTER_MS)
    ]
    if not due:
        return False
    blocked = run_blocked(ctx.config, state.slot)
    if blocked:
        # A disabled or removed schedule is not recoverable; the stall rules end it.
        slot = state.slot
        result.unrecoverable += 1
        ctx.log("warning", NOT_RECOVERABLE_MESSAGE, event="sweep.recovery_skipped", slot_id=slot.slot_id,
                schedule_id=slot.schedule_id, reason=blocked, manual_request_id=slot.manual_request_id,
                correlation_id=slot.correlation_id, targets=[c.target_id for c in due])
        return False
    claimed = [c for c in due if ctx.leases.mark_dispatched(c.slot_id, c.target_id, c.dispatched_at, now,
                                                            unwritten=_typed(ctx, c) if c.virtual else None)]
    if not claimed:
        return False
    failed = wake_cells(ctx.queues, ctx.log, [(c.slot_id, c.target_id) for c in claimed], event="sweep.dispatch_failed",
                        slot_id=state.slot.slot_id)
    ctx.log("warning", "cells re-dispatched", event="sweep.recovered", slot_id=state.slot.slot_id,
            targets=[c.target_id for c in claimed], failed=len(failed))
    return len(failed) < len(claimed)


def _typed(ctx: Sweeps, cell: Cell) -> Cell:
    """An unwritten cell with its target's work type, as its item will carry it."""
    target = ctx.config.target(cell.target_id)
    cell.work_type = target.type if target else None
    return cell


def _terminalise(ctx: Sweeps, state: SlotState, verdict: StallVerdict, now: int) -> bool:
    cells = state.snapshot_cells()
    owned = owned_by_outbox(ctx.rollup, state)  # guarded, never failed: a live row may be posting its work
    fail = [c.target_id for c in cells if c.status in (CellStatus.PENDING, CellStatus.SELECTED) and c.target_id not in owned]
    guard = [c.target_id for c in cells if not c.terminal and c.target_id not in fail]
    after = [CellStatus.FAILED if c.target_id in fail else c.status for c in cells]
    status = derive_slot_status(after) if cells else "failed"
    if status in ("success", "running", "pending"):
        status = "failed"
    message = reason_message(verdict.rule) or verdict.rule
    ok = ctx.cells.terminalise_slot(state, fail_cells=fail, guard_cells=guard, slot_status=status,
                                    reason_code=verdict.rule, reason_message=message, now_ms=now)
    if not ok:
        return False
    ctx.log("warning", "slot terminalised by the stall sweep", event="sweep.stalled", slot_id=state.slot.slot_id,
            reason_code=verdict.rule, cells_failed=len(fail), stalled_since=verdict.since, slot_status=status)
    refreshed = ctx.occurrences.load(state.slot.slot_id)
    if refreshed is not None:
        close(ctx.rollup, refreshed)  # the slot is terminal now: its one outcome record, then out of the index
    return True


def _redrive_outbox(ctx: Sweeps, result: SweepResult, overdue: list[str], *, indexed: bool = True) -> None:
    """Re-send the overdue rows of open slots (``overdue``) and, when DueOutbox holds any entry
    (``indexed``), the indexed ones."""
    def unreadable(sk: str, exc: Exception) -> None:
        result.errors += 1
        ctx.log("error", "sweep failed on an outbox row", event="sweep.outbox_error", sk=sk, error=repr(exc)[:300])

    send = due_delivery_keys(ctx.deliveries, ctx.now(), REDRIVE_GRACE_MS, overdue, limit_per_shard=BATCH_LIMIT, on_error=unreadable,
                             indexed=indexed)
    if send:
        failed = wake_outbox(ctx.queues, ctx.log, [("delivery", k) for k in send], event="sweep.redrive_send_failed")
        result.redriven += len(send) - len(failed)
        ctx.log("warning", "outbox rows re-driven", event="sweep.outbox_redriven", count=len(send) - len(failed))


def _repair_job_events(ctx: Sweeps, result: SweepResult) -> None:
    """The job events' repair pass: a declared callback is never silently dropped."""
    from .job_events import reconcile_outstanding

    try:
        examined, errors = reconcile_outstanding(ctx.job_events)
    except Exception as exc:  # the index could not be read: next tick
        result.errors += 1
        ctx.log("error", "job event repair pass failed", event="sweep.repair_error", error=repr(exc)[:300])
        return
    result.jobsRepaired += examined
    result.errors += errors


# ---------------------------------------------------------------- one tick: lease, sweep, missed fires
#
# The stall_sweep handler runs ``tick``. One sweep runs at a time: a short conditional
# lease item in the ledger, taken at the start of a tick, makes a concurrent second tick a no-op,
# so no reserved concurrency is needed (reserving any fails to deploy on accounts whose
# concurrency quota is 10). After the sweep proper, the tick looks for missed fires.

SWEEP_LEASE_MS = 60_000  # = the stall_sweep function timeout: a tick never outlives its lease
MISSED_FIRES_PER_SCHEDULE = 100  # fires checked per schedule per tick; a long backlog catches up over ticks


def sweep_lease_ms(interval_ms: int) -> int:
    """The lease one tick takes, checked against the interval the sweep is scheduled at.

    The lease is the function's timeout, so a tick that is still running always holds it and a
    second tick is a no-op. It must also be over by the next scheduled tick: the lease of a tick that
    died is only cleared by expiring, and a lease longer than the interval would make the next tick
    find it held and do nothing, so the sweep would fall silent for a whole interval or more each
    time. An interval shorter than the lease is therefore refused, loudly (each refused tick fails,
    which HealthAlarm counts), rather than run with overlapping ticks or a shortened lease."""
    if interval_ms < SWEEP_LEASE_MS:
        raise ValueError(f"SWEEP_INTERVAL_MS: {interval_ms} ms is shorter than the sweep's {SWEEP_LEASE_MS} ms lease "
                         "(the stall_sweep timeout); schedule the sweep at least a minute apart (SweepIntervalMinutes)")
    return SWEEP_LEASE_MS


@dataclass
class SkippedSweep(SweepResult):
    """A tick that found the lease held by another sweep and did nothing."""

    leaseOwner: str = ""
    leaseUntil: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "skipped": True, "reason": "lease_held",
                "leaseOwner": self.leaseOwner, "leaseUntil": self.leaseUntil}


def tick(ctx: Sweeps) -> SweepResult:
    """Take the lease, sweep, check for missed fires, release the lease.

    A tick that dies
    keeps the lease until it expires, before the next scheduled tick (``sweep_lease_ms``), which then
    takes it over."""
    state = ctx.sweep_state
    lease_ms = sweep_lease_ms(ctx.interval_ms)
    owner = ctx.entropy.token("sweep")
    lease = state.acquire_lease(owner, ctx.now(), lease_ms)
    if not lease.acquired:
        ctx.log("info", "another sweep holds the lease; this tick does nothing", event="sweep.skipped",
                lease_owner=lease.owner, lease_until=lease.until_ms)
        return SkippedSweep(leaseOwner=lease.owner, leaseUntil=lease.until_ms)
    result: SweepResult | None = None
    try:
        result = sweep(ctx, lease.cursor)
        missed = detect_missed_fires(ctx)
        publish_health(ctx, result, missed)
        return result
    finally:
        try:
            # the cursor rides on the release: a tick that died leaves the old one, and its successor redoes the walk
            state.release_lease(owner, ctx.now(), result.cursor if result is not None else None)
        except Exception as exc:  # the lease expires on its own
            ctx.log("warning", "sweep lease not released", event="sweep.lease_release_failed", error=repr(exc)[:300])


def publish_health(ctx: Sweeps, result: SweepResult, missed: int) -> int:
    """The Health value of this tick: occurrences ended by the stall rules, fires missed, slots the
    sweep failed on, and messages in the dead-letter queues. An unreadable queue depth counts as one
    problem: it is unknown, and the operator should look. Alertable outcomes add 1 each as they
    close (services.rollup). Logged every tick (``sweep.health``); published as the metric only
    when above 0 (a custom metric is billed for the hours it is published, and a
    healthy month then publishes none). That the sweep ran at all, HealthAlarm reads from the
    function's own Invocations and Errors (template.yaml). Returns the value."""
    value = result.queuedTooLong + result.stalledNoHeartbeat + missed + result.errors
    try:
        depth = ctx.queues.dead_letter_depth()
    except Exception as exc:
        depth = 1
        ctx.log("warning", "dead-letter queue depth unreadable; counted as one problem", event="sweep.dlq_depth_failed",
                error=repr(exc)[:300])
    value += depth
    # interval_ms: the span one Health value stands for (HealthAlarm's period is the same interval)
    ctx.log("info", "health", event="sweep.health", health=value, dead_letters=depth, missed_fires=missed,
            interval_ms=ctx.interval_ms)
    if value > 0:
        ctx.metric(HEALTH_METRIC, value)
    return value


def schedule_fingerprint(cron: str, timezone: str) -> str:
    return f"{' '.join(cron.split())}|{timezone}"


def detect_missed_fires(ctx: Sweeps) -> int:
    """Count each missed fire once. Returns how many were found this tick.

    Fire F of an enabled schedule is missed when now >= F + graceMinutes and no slot exists for
    it. Only fires after the sweep first saw the schedule enabled (with its current cron and zone)
    count: a new, re-enabled or re-timed schedule starts a new watch, so history before it never
    alerts. A fire is checked once: the watch's cursor moves past it, and ``MISSED#<slotId>`` is an
    insert-if-absent, so a crash between the two re-checks the fire without counting it twice.
    Slot ids are deterministic, so "no slot" is one strongly consistent read."""
    state = ctx.sweep_state
    now = ctx.now()
    grace_minutes = ctx.config.schedulerRuntime.trigger.graceMinutes
    schedules = [s for s in ctx.config.schedules if s.cron and s.cron.strip()]
    watches = state.watches([s.id for s in schedules])
    found = 0
    for schedule in schedules:
        try:
            found += _check_schedule(ctx, schedule, watches.get(schedule.id), now, grace_minutes)
        except Exception as exc:  # one schedule never stops the others
            ctx.log("error", "missed-fire check failed", event="sweep.missed_fire_error",
                    schedule_id=schedule.id, error=repr(exc)[:300])
    return found


def _check_schedule(ctx: Sweeps, schedule: ScheduleSettings, watch: ScheduleWatch | None, now: int, grace_minutes: int) -> int:
    state = ctx.sweep_state
    assert schedule.cron is not None  # the caller checks only schedules with a cron
    if not schedule.enabled:
        if watch is not None and not watch.paused:
            state.pause_watch(watch)
        return 0
    fingerprint = schedule_fingerprint(schedule.cron, schedule.timezone)
    if watch is None or watch.paused or watch.fingerprint != fingerprint:
        state.start_watch(schedule.id, fingerprint, now, replacing=watch)
        return 0
    due = fires_between(schedule.cron, schedule.timezone, watch.checked_through_ms, now - grace_minutes * 60_000)
    due = due[:MISSED_FIRES_PER_SCHEDULE]
    if not due:
        return 0
    found = 0
    # An operator's pause: the trigger refused the fires it covers, so they are not missed.
    pause = ctx.pauses.schedule_pause(schedule.id)
    for fire in due:
        if pause is not None and pause.covers(fire):
            continue
        occ = occurrence_for_fire(schedule.id, schedule.cron, schedule.timezone, fire)
        if ctx.occurrences.get_slot(occ.slot_id) is not None:
            continue
        if state.record_missed(occ.slot_id, schedule.id, fire, now):
            found += 1
            ctx.log("warning", "scheduled fire missed: no slot exists past its grace window",
                    event="schedule.fire_missed", schedule_id=schedule.id, slot_id=occ.slot_id,
                    occurrence_at=occ.occurrence_iso, grace_minutes=grace_minutes)
            ctx.metric("MissedFires")
    state.advance_watch(watch, due[-1])
    return found


def _repair_outbox_rows(ctx: Sweeps, result: SweepResult) -> None:
    """Notification and event-callback rows whose message was lost or whose worker died are
    re-driven like intents. A slot that turned terminal without its notification
    rows is still open, and this tick's rollup/close of it above wrote them (services.notifications)."""
    try:
        result.redriven += redrive_rows(ctx.outbox, limit_per_shard=BATCH_LIMIT)
    except Exception as exc:  # never aborts the sweep
        result.errors += 1
        ctx.log("error", "sweep failed re-driving outbox rows", event="sweep.outbox_error", error=repr(exc)[:300])
