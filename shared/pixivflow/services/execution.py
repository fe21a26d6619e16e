"""Execute one cell.

Order of one execution, each step safe to interrupt:
  claim the cell lease -> (delivery_pending: ask the delivery ledger first) -> select a work
  -> bind it (CAS) and reserve it on its routes BEFORE any side effect -> download -> store
  -> record one intent per route (= its outbox row) -> move the cell -> send outbox messages.
A crash anywhere leaves a prefix that the next run of the same message, or the sweep's
re-dispatch, completes on the SAME work: a bound work is never replaced.
"""

from __future__ import annotations

from ..domain.accounts import Admission
from ..domain.apply import decide, retry_delay_s
from ..domain.cells import CellStatus
from ..domain.delivery_state import LOST_REASON, delivery_state
from ..domain.errors import LedgerUnavailable
from ..domain.failures import retry_target
from ..domain.model import Cell, Slot, unwritten_cell
from ..domain.outcomes import TargetOutcome
from ..domain.scan import bounded_report
from ..domain.task import job_target
from ..ports import (
    TimeLeft,
)
from .binding import run_target
from .cell_run import CellRun, ExecutionResult, Executions, LeaseLost, PermitLost
from .messages import wake_cells, wake_outbox
from .plans import run_blocked
from .rollup import cell_delivery_state, rollup
from .storing import DownloadIncomplete
from .timing import LEASE_TTL_MS
from .topic import SelectionSuspended

MAX_QUEUE_DELAY_S = 900  # SQS's DelaySeconds cap; a later due time is re-deferred, never run early


def execute_cell(ctx: Executions, slot_id: str, target_id: str, *,
                 time_left: TimeLeft | None = None, time_budget: int | None = None) -> ExecutionResult:
    """Run one cell. ``time_left``: the Lambda context's remaining time; ``time_budget``: what it
    was when the invocation began (default: what it is now, for a caller running one cell)."""
    if time_budget is None and time_left is not None:
        time_budget = int(time_left())
    now = ctx.now()
    owner = ctx.entropy.token("exec")
    claimed = _claim(ctx, slot_id, target_id, owner, now)
    if isinstance(claimed, ExecutionResult):
        return claimed
    slot, cell = claimed
    target = ctx.config.target(target_id)
    excluded: frozenset[str] = frozenset()
    if target is not None and slot.params:
        # A protocol job's stored params drive its run, on every (re)run.
        target, excluded = job_target(target, slot.params)
    if target is not None and slot.retry_mode:
        # A Failure Center retry runs in its mode on every (re)run (domain/failures.py).
        target = retry_target(target, slot.retry_mode)
    run = CellRun(ctx, slot, cell, target, owner, last_beat=now, excluded=excluded, time_left=time_left,
                  time_budget=time_budget) if target else None
    try:
        if run is None:
            outcome = TargetOutcome.failed(f"target {target_id} is not configured (configuration error)", retryable=False,
                                           reason_code="configuration_error")
            return _apply(ctx, slot, cell, owner, outcome, None)
        if cell.status == CellStatus.DELIVERY_PENDING and run.target.single_work:
            settled = _settle_from_ledger(ctx, run)
            if settled is not None:
                return settled
        return _run_source_work(ctx, run)
    except LeaseLost as exc:
        ctx.log("warning", "lease lost mid-run; leaving the cell to its new holder", event="cell.lease_lost",
                slot_id=slot_id, target_id=target_id, error=str(exc))
        return ExecutionResult(slot_id, target_id, "claimed_by_other")
    except SelectionSuspended:
        # The selection's progress is on the cell (services/topic.py): give the lease back and
        # hand the cell to a fresh invocation. A lost message leaves a pending, lease-less cell
        # the sweep re-dispatches; the checkpoint is read again either way. The same execution
        # goes on there: this claim's attempt is given back, the continuing one counts it.
        ctx.leases.release_cell(slot_id, target_id, owner, ctx.now(), no_attempt=True)
        wake_cells(ctx.queues, ctx.log, [(slot_id, target_id)], event="cell.continue_send_failed", slot_id=slot_id,
                   target_id=target_id)
        return ExecutionResult(slot_id, target_id, "continued", CellStatus.PENDING)
    except BaseException:
        # Infrastructure failure: give the lease back so the SQS retry can claim at once.
        try:
            ctx.leases.release_cell(slot_id, target_id, owner, ctx.now())
        except LedgerUnavailable:
            pass
        raise


def _claim(ctx: Executions, slot_id: str, target_id: str, owner: str, now: int) -> tuple[Slot, Cell] | ExecutionResult:
    """The slot, read first, and the cell's lease; or why this message runs nothing."""
    # The slot is read BEFORE the claim: a claim moves the cell's heartbeat (the slot's progress
    # clock), and a cell that may not run must not look alive to the stall rules.
    slot = ctx.occurrences.get_slot(slot_id)
    if slot is None:  # cannot happen for cells made by admission
        return ExecutionResult(slot_id, target_id, "missing")
    blocked = run_blocked(ctx.config, slot)
    if blocked:
        # A disabled (or removed) schedule's occurrences are not run, whoever asks: an
        # execution message already on its way is dropped and the stall rules end the slot.
        ctx.log("warning", "cell not run: its schedule is disabled or no longer configured",
                event="cell.execution_refused", slot_id=slot_id, target_id=target_id,
                schedule_id=slot.schedule_id, reason=blocked)
        return ExecutionResult(slot_id, target_id, "refused")
    if target_id not in slot.target_ids:
        # Membership is frozen at admission: a message naming another target (a
        # forged or stale one) never creates a cell.
        return ExecutionResult(slot_id, target_id, "missing")
    configured = ctx.config.target(target_id)
    unwritten = unwritten_cell(slot, target_id)
    unwritten.work_type = configured.type if configured else None
    # The cell's first claim writes its item (admission wrote only the slot): one conditional write.
    cell = ctx.leases.claim_cell(slot_id, target_id, owner, now, LEASE_TTL_MS, unwritten=unwritten)
    if cell is None:
        current = ctx.occurrences.get_cell(slot_id, target_id)
        action = "missing" if current is None else "claimed_by_other"
        ctx.log("info", "cell not claimed", event="cell.claim_skipped", slot_id=slot_id, target_id=target_id,
                cell_status=current.status if current else None)
        return ExecutionResult(slot_id, target_id, action, current.status if current else None)
    if slot.status == "pending":
        ctx.occurrences.mark_slot_running(slot_id, now)
    return slot, cell


def _run_source_work(ctx: Executions, run: CellRun) -> ExecutionResult:
    """Run the cell's source work under its account's permit, and apply what it came to."""
    governor = ctx.source.governor
    if governor is not None:
        # The account's maxConcurrency permits, held for the cell's whole source work.
        admission = governor.admit(run.owner)
        if not admission.granted:
            return _defer(ctx, run.cell, run.owner, admission)
        run.governor = governor
    try:
        outcome = run_target(run)
    except PermitLost:
        return _defer(ctx, run.cell, run.owner, Admission(False, ctx.now(), "pixiv_account_busy"))
    except DownloadIncomplete as exc:
        # Not an attempt-burning failure: the next invocation resumes at the first
        # missing file, on the same binding.
        ctx.log("info", "work partly stored; the cell resumes it in the next invocation",
                event="cell.download_incomplete", slot_id=run.slot.slot_id, target_id=run.target.id,
                work_id=run.cell.work_id, files_stored=exc.stored, files=exc.total)
        return _defer(ctx, run.cell, run.owner, Admission(False, ctx.now(), "download_incomplete"),
                      progress={"files_stored": exc.stored, "files": exc.total})
    finally:
        if governor is not None:
            governor.release(run.owner)
    return _apply(ctx, run.slot, run.cell, run.owner, outcome, run)


BUSY_POLL_FIRST_MS = 2_000  # a cell waiting for a permit asks again after 2 s, 4 s, 8 s, ...
BUSY_POLL_MAX_MS = 64_000


def busy_poll_ms(times_waited: int) -> int:
    """How long a cell that found every permit held waits before asking again: the holder's lease
    end is only the latest its permit can be free (a holder that dies stops renewing; one that
    finishes releases at once, usually within seconds), so the waiter asks again after 2 s,
    doubling each time it is refused again, never later than the lease end. Each ask is one
    invocation and one conditional take: the permits still decide."""
    return int(min(BUSY_POLL_MAX_MS, BUSY_POLL_FIRST_MS * 2 ** max(0, times_waited)))


def _defer(ctx: Executions, cell: Cell, owner: str, admission: Admission, *,
           progress: dict[str, int] | None = None) -> ExecutionResult:
    """Hand the cell back to its queue until its account can take it: no attempt used,
    the due time recorded (the sweep's recovery never re-dispatches it earlier), and the candidate
    report says what it waited for."""
    now = ctx.now()
    report = dict(cell.candidate_report or {})
    waited = before if isinstance(before := report.get("waited"), dict) else {}
    due = max(admission.wait_until, now + 1000)
    if admission.reason == "pixiv_account_busy":
        due = min(due, now + busy_poll_ms(int(waited.get("times") or 0) if waited.get("reason") == admission.reason else 0))
    delay_s = min(MAX_QUEUE_DELAY_S, -(-(due - now) // 1000))
    report["waited"] = {"reason": admission.reason, "until": due, "times": int(waited.get("times") or 0) + 1,
                        **(progress or {})}
    slot_id, target_id = cell.slot_id, cell.target_id
    if not ctx.leases.defer_cell(slot_id, target_id, owner, now, due, candidate_report=report, reason_code=admission.cause):
        return ExecutionResult(slot_id, target_id, "no_change", cell.status)
    wake_cells(ctx.queues, ctx.log, [(slot_id, target_id)], delay_s=delay_s, event="cell.retry_send_failed",
               slot_id=slot_id, target_id=target_id)
    ctx.log("info", "cell waits for its source account", event="cell.deferred", slot_id=slot_id, target_id=target_id,
            reason=admission.reason, due_at=due, delay_s=delay_s)
    return ExecutionResult(slot_id, target_id, "deferred", cell.status)


def _settle_from_ledger(ctx: Executions, run: CellRun) -> ExecutionResult | None:
    """Settle a delivery_pending single-work cell from the delivery ledger. None means: run it.
    A claim that only settles (or leaves the cell to the outbox) started no execution: it gives its
    attempt back, so a job's ``attempt`` counts the executions that really started (a duplicated or
    re-driven message never adds one)."""
    state = ctx.occurrences.load(run.slot.slot_id)
    verdict = cell_delivery_state(ctx.rollup, state, run.target.id) if state else delivery_state(run.target.routes(), [])
    now = ctx.now()
    slot_id, target_id = run.slot.slot_id, run.target.id
    if verdict.state == "live":
        ctx.leases.release_cell(slot_id, target_id, run.owner, now, no_attempt=True)
        return ExecutionResult(slot_id, target_id, "left_to_outbox", run.cell.status)
    if verdict.state == "confirmed":
        ctx.cells.move_cell_as_owner(slot_id, target_id, CellStatus.SUBMITTED, now, run.owner,
                                     work_id=verdict.work_id, work_type=verdict.work_type, no_attempt=True)
        rollup(ctx.rollup, slot_id)
        return ExecutionResult(slot_id, target_id, "applied", CellStatus.SUBMITTED, "submitted")
    if verdict.state == "lost":
        return _apply(ctx, run.slot, run.cell, run.owner, TargetOutcome.failed(LOST_REASON, retryable=False,
                                                                                   reason_code="delivery_failed"), run)
    return None


def _apply(ctx: Executions, slot: Slot, cell: Cell, owner: str, outcome: TargetOutcome, run: CellRun | None) -> ExecutionResult:
    """Write an outcome onto the cell, then dispatch what it implies."""
    effect = decide(outcome, cell.work_id)
    now = ctx.now()
    report = bounded_report(outcome.scan) if outcome.scan is not None else None
    waited = (cell.candidate_report or {}).get("waited")
    if waited:
        report = {**(report or {}), "waited": waited}  # the report keeps that the cell waited
    slot_id, target_id = slot.slot_id, cell.target_id
    if effect.retry:
        delay = retry_delay_s(cell.attempt_count)
        cooling = run.governor.cooldown_until() - now if run is not None and run.governor is not None else 0
        if cooling > 0:
            # A cell blocked by its account's cooldown is retried once, when it ends,
            # not every 30 s meanwhile (each early retry would only be refused again).
            delay = min(MAX_QUEUE_DELAY_S, -(-cooling // 1000) + 1)
        # dispatchedAt marks when the delayed retry is due, so the sweep's recovery waits for it.
        recorded = ctx.leases.record_cell_error(slot_id, target_id, effect.last_error or "retryable failure", now,
                                                owner=owner, candidate_report=report, dispatched_at=now + delay * 1000,
                                                reason_code=effect.reason_code)
        if not recorded:
            # The lease was lost or the cell ended meanwhile: whoever holds it now owns its future.
            return ExecutionResult(slot_id, target_id, "no_change", cell.status, "failed_retryable")
        wake_cells(ctx.queues, ctx.log, [(slot_id, target_id)], delay_s=delay, event="cell.retry_send_failed",
                   slot_id=slot_id, target_id=target_id)
        ctx.log("warning", "cell failed, will retry the same work", event="cell.retry_scheduled",
                slot_id=slot_id, target_id=target_id, work_id=cell.work_id, delay_s=delay, error=effect.last_error)
        return ExecutionResult(slot_id, target_id, "applied", cell.status, "failed_retryable")
    if effect.to_status is None:
        ctx.leases.release_cell(slot_id, target_id, owner, now)
        return ExecutionResult(slot_id, target_id, "no_change", cell.status, outcome.kind)
    if effect.to_status == cell.status:
        # A same-state move is a no-op, but what it implies still happens: a resumed
        # delivery_pending cell re-sends the messages of its still-actionable outbox rows.
        ctx.leases.release_cell(slot_id, target_id, owner, now)
        if effect.to_status == CellStatus.DELIVERY_PENDING and run is not None:
            _send_outbox(ctx, run.outbox_keys)
        return ExecutionResult(slot_id, target_id, "no_change", cell.status, outcome.kind)
    moved = ctx.cells.move_cell_as_owner(
        slot_id, target_id, effect.to_status, now, owner,
        work_id=effect.work_id, work_type=effect.work_type, last_error=effect.last_error,
        reason_code=effect.reason_code, reason_message=effect.reason_message, candidate_report=report,
    )
    if not moved:
        # Lost the lease or the cell moved on (e.g. an ACK settled it first): never force it.
        ctx.leases.release_cell(slot_id, target_id, owner, now)
        current = ctx.occurrences.get_cell(slot_id, target_id)
        ctx.log("info", "cell transition refused", event="cell.transition_refused", slot_id=slot_id,
                target_id=target_id, wanted=effect.to_status, cell_status=current.status if current else None)
        if current and current.terminal:
            if effect.to_status == CellStatus.DELIVERY_PENDING and run is not None:
                _hand_over_rows_of_ended_cell(ctx, slot_id, target_id, run.outbox_keys)
            rollup(ctx.rollup, slot_id)
        return ExecutionResult(slot_id, target_id, "no_change", current.status if current else None, outcome.kind)
    ctx.log("info", "cell outcome applied", event="cell.outcome", slot_id=slot_id, target_id=target_id,
            outcome=outcome.kind, cell_status=effect.to_status, work_id=effect.work_id or cell.work_id,
            terminal_reason_code=effect.reason_code)
    ctx.metric("ExecutionResults", outcome=outcome.kind)
    if effect.to_status == CellStatus.DELIVERY_PENDING and run is not None:
        _send_outbox(ctx, run.outbox_keys)
    if effect.to_status in (CellStatus.SUBMITTED, CellStatus.NO_CANDIDATE, CellStatus.DUPLICATE, CellStatus.FAILED):
        rollup(ctx.rollup, slot_id)
    return ExecutionResult(slot_id, target_id, "applied", effect.to_status, outcome.kind)


def _hand_over_rows_of_ended_cell(ctx: Executions, slot_id: str, target_id: str, keys: list[str]) -> None:
    """The cell ended (a consumer's cancel, the timeout) while this run was writing its delivery
    rows: a cancel that read the slot before the rows existed commits without them, and may close
    the slot before this run sees the refusal. The rows are still ``pending``, and nothing else
    would ever end them: the sweep re-drives only rows of open slots and indexed rows. So index
    them (the sweep finds them even if the messages are lost) and send them; the deliverer that
    claims one re-reads the cell, sees it ended and dead-letters the row unposted, so no post
    follows the committed cancel."""
    if not keys:
        return
    state = ctx.occurrences.load(slot_id)
    if state is None:
        return
    wanted = set(keys)
    for intent in state.intents_for(target_id):
        if intent.idempotency_key in wanted and intent.actionable:
            ctx.rows.index_due(intent)  # refused only if the row moved: then its mover owns it
    _send_outbox(ctx, keys)


def _send_outbox(ctx: Executions, keys: list[str]) -> None:
    if not keys:
        return
    wake_outbox(ctx.queues, ctx.log, [("delivery", k) for k in keys], event="outbox.send_failed")
