"""Execute one cell.

Order of one execution, each step safe to interrupt:
  claim the cell lease -> (delivery_pending: ask the delivery ledger first) -> select a work
  -> bind it (CAS) and reserve it on its routes BEFORE any side effect -> download -> store
  -> record one intent per route (= its outbox row) -> move the cell -> send outbox messages.
A crash anywhere leaves a prefix that the next run of the same message, or the sweep's
re-dispatch, completes on the SAME work: a bound work is never replaced.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Callable, ContextManager

from ..clock import Entropy
from ..ports import Settings, TargetSettings
from ..domain.ack import idempotency_key
from ..domain.apply import decide, retry_delay_s
from ..domain.assets import artifact_prefix
from ..domain.cells import CellStatus
from ..domain.delivery_state import LOST_REASON, delivery_state
from ..domain.errors import (FatalSourceError, LedgerUnavailable, PaginationError, SourceError, SourceOutage,
                             TransientSourceError)
from ..domain.language import verdict as language_verdict
from ..domain.model import Cell, Intent, LedgerStatus, OutboxStatus, Slot, cell_key, unwritten_cell
from ..domain.outcomes import CandidateScan, CandidateSkip, JobLevelOutage, SkipCode, TargetOutcome
from ..domain.reasons import reason_of
from ..domain.selection import (
    RESTRICTED,
    Plan,
    Selection,
    has_ai_file_markers,
    page_cap_decline,
    plan_selection,
    select,
    select_pinned,
)
from ..domain.task import job_target
from ..domain.scan import bounded_report, classify_candidate_failure, effective_scan_bound, no_candidate_reason
from ..ports import (ArtifactStore, CellLeases, CellMoves, Clock, DeliveryRows, Log, Metrics, Occurrences, Queues,
                     SourceGovernor, TimeLeft, TopicSpaces, WorkReservations, WorkSource)
from ..domain.accounts import Admission
from ..domain.work import ArtifactFile, FileDownload, Page, SearchRequest, StoredFile, Work
from .assets import file_records, previews_for
from .delivery import delivery_payload
from .context import Measured
from .timing import HEARTBEAT_MS, LEASE_TTL_MS
from .messages import wake_cells, wake_outbox
from .plans import run_blocked
from .rollup import SlotRollup, cell_delivery_state, rollup
from .topic import LIGHT, SelectionSuspended, run_topic


class LeaseLost(Exception):
    """This executor no longer holds the cell's lease: stop, touch nothing, leave it to the holder."""


class PermitLost(Exception):
    """The cell's permit on its source account expired and was taken: stop its source work."""


MAX_QUEUE_DELAY_S = 900  # SQS's DelaySeconds cap; a later due time is re-deferred, never run early


@dataclass
class ExecutionResult:
    slot_id: str
    target_id: str
    action: str  # claimed_by_other | left_to_outbox | applied | no_change | missing | refused | deferred | continued (topic checkpoint)
    cell_status: str | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class Executions(Measured):
    """What running a cell takes: the slot and its cells (reads, leases, moves), the cross-slot
    work reservations, the delivery rows it records, the topic spaces a topic target caches, the
    execution and outbox queues, the work source and the artifact store, the config, entropy
    (lease owners), the slot rollup, the clock, log and metrics."""

    occurrences: Occurrences
    leases: CellLeases
    cells: CellMoves
    reservations: WorkReservations
    rows: DeliveryRows
    topics: TopicSpaces
    queues: Queues
    source: WorkSource
    artifacts: ArtifactStore
    config: Settings
    entropy: Entropy
    rollup: SlotRollup
    clock: Clock
    log: Log
    metrics: Metrics | None


@dataclass
class CellRun:
    """The execution context of one cell plus the lease it runs under."""

    ctx: Executions
    slot: Slot
    cell: Cell
    target: TargetSettings
    owner: str
    last_beat: int = 0
    outbox_keys: list[str] = field(default_factory=list)
    lost_bind: str | None = None  # set when another executor bound a different work first
    excluded: frozenset[str] = frozenset()  # work ids a protocol job excluded
    governor: SourceGovernor | None = None  # the source account's permits, held for this run
    time_left: TimeLeft | None = None  # ms left in this invocation (the Lambda context's)
    time_budget: int | None = None  # ms the invocation had when it began (the same context's, read then)

    @property
    def locked_work_id(self) -> str | None:
        return self.cell.work_id

    @property
    def owner_key(self) -> str:
        return cell_key(self.slot.slot_id, self.target.id)

    def heartbeat(self) -> None:
        """Renew the lease every 30 s. A refused renewal means another executor owns the cell now."""
        now = self.ctx.now()
        if now - self.last_beat >= HEARTBEAT_MS:
            if not self.ctx.leases.heartbeat_cell(self.slot.slot_id, self.target.id, self.owner, now, LEASE_TTL_MS):
                raise LeaseLost(f"lease on {self.slot.slot_id}/{self.target.id} was lost")
            if self.governor is not None and not self.governor.renew(self.owner):
                raise PermitLost(f"permit on the source account lapsed during {self.slot.slot_id}/{self.target.id}")
            self.last_beat = now

    def bind(self, work_id: str, work_type: str) -> tuple[bool, str | None]:
        won, current = self.ctx.cells.bind_work(self.slot.slot_id, self.target.id, work_id, work_type, self.ctx.now())
        if won:
            self.cell.work_id = work_id
            self.cell.work_type = self.cell.work_type or work_type
            self.cell.status = CellStatus.SELECTED
        return won, current

    def release(self, work_id: str) -> bool:
        ok = self.ctx.cells.release_work(self.slot.slot_id, self.target.id, work_id, self.ctx.now())
        if ok:
            self.cell.work_id = None
            self.cell.status = CellStatus.PENDING
        return ok


def execute_cell(ctx: Executions, slot_id: str, target_id: str, *,
                 time_left: TimeLeft | None = None, time_budget: int | None = None) -> ExecutionResult:
    """Run one cell. ``time_left``: the Lambda context's remaining time; ``time_budget``: what it
    was when the invocation began (default: what it is now, for a caller running one cell)."""
    if time_budget is None and time_left is not None:
        time_budget = int(time_left())
    now = ctx.now()
    owner = ctx.entropy.token("exec")
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
    target = ctx.config.target(target_id)
    excluded: frozenset[str] = frozenset()
    if target is not None and slot.params:
        # A protocol job's stored params drive its run, on every (re)run.
        target, excluded = job_target(target, slot.params)
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
        governor = ctx.source.governor
        if governor is not None:
            # The account's maxConcurrency permits, held for the cell's whole source work.
            admission = governor.admit(owner)
            if not admission.granted:
                return _defer(ctx, run.cell, owner, admission)
            run.governor = governor
        try:
            outcome = run_target(run)
        except PermitLost:
            return _defer(ctx, run.cell, owner, Admission(False, ctx.now(), "pixiv_account_busy"))
        except DownloadIncomplete as exc:
            # Not an attempt-burning failure: the next invocation resumes at the first
            # missing file, on the same binding.
            ctx.log("info", "work partly stored; the cell resumes it in the next invocation",
                    event="cell.download_incomplete", slot_id=slot_id, target_id=target_id,
                    work_id=run.cell.work_id, files_stored=exc.stored, files=exc.total)
            return _defer(ctx, run.cell, owner, Admission(False, ctx.now(), "download_incomplete"),
                          progress={"files_stored": exc.stored, "files": exc.total})
        finally:
            if governor is not None:
                governor.release(owner)
        return _apply(ctx, slot, run.cell, owner, outcome, run)
    except LeaseLost as exc:
        ctx.log("warning", "lease lost mid-run; leaving the cell to its new holder", event="cell.lease_lost",
                slot_id=slot_id, target_id=target_id, error=str(exc))
        return ExecutionResult(slot_id, target_id, "claimed_by_other")
    except SelectionSuspended:
        # The selection's progress is on the cell (services/topic.py): give the lease back and
        # hand the cell to a fresh invocation. A lost message leaves a pending, lease-less cell
        # the sweep re-dispatches; the checkpoint is read again either way.
        ctx.leases.release_cell(slot_id, target_id, owner, ctx.now())
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
    if not ctx.leases.defer_cell(slot_id, target_id, owner, now, due, candidate_report=report):
        return ExecutionResult(slot_id, target_id, "no_change", cell.status)
    wake_cells(ctx.queues, ctx.log, [(slot_id, target_id)], delay_s=delay_s, event="cell.retry_send_failed",
               slot_id=slot_id, target_id=target_id)
    ctx.log("info", "cell waits for its source account", event="cell.deferred", slot_id=slot_id, target_id=target_id,
            reason=admission.reason, due_at=due, delay_s=delay_s)
    return ExecutionResult(slot_id, target_id, "deferred", cell.status)


def _settle_from_ledger(ctx: Executions, run: CellRun) -> ExecutionResult | None:
    """Settle a delivery_pending single-work cell from the delivery ledger. None means: run it."""
    state = ctx.occurrences.load(run.slot.slot_id)
    verdict = cell_delivery_state(ctx.rollup, state, run.target.id) if state else delivery_state(run.target.routes(), [])
    now = ctx.now()
    slot_id, target_id = run.slot.slot_id, run.target.id
    if verdict.state == "live":
        ctx.leases.release_cell(slot_id, target_id, run.owner, now)
        return ExecutionResult(slot_id, target_id, "left_to_outbox", run.cell.status)
    if verdict.state == "confirmed":
        ctx.cells.move_cell_as_owner(slot_id, target_id, CellStatus.SUBMITTED, now, run.owner,
                                     work_id=verdict.work_id, work_type=verdict.work_type)
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
                                                owner=owner, candidate_report=report, dispatched_at=now + delay * 1000)
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


# -- the target handler ----------------------------------------------------------------------


def run_target(run: CellRun) -> TargetOutcome:
    try:
        return _run_target(run)
    except FatalSourceError as exc:
        return _fatal(exc)


def _fatal(exc: FatalSourceError) -> TargetOutcome:
    """A source that cannot work until an operator acts ends the cell at once, with the reason the
    error carries (``auth_failed`` also as the scan's ``pixiv_auth_failure`` outage); the
    reason heads the error text an operator reads."""
    outages = [JobLevelOutage.PIXIV_AUTH_FAILURE.value] if exc.reason == "auth_failed" else []
    text = str(exc) if str(exc).startswith(f"{exc.reason}:") else f"{exc.reason}: {exc}"
    return TargetOutcome.failed(text, retryable=False, scan=CandidateScan(outages=outages), reason_code=exc.reason)


def _run_target(run: CellRun) -> TargetOutcome:
    target = run.target
    if target.single_work and run.locked_work_id:
        return _continue_locked(run, run.locked_work_id)
    # Every selection rule is the domain's; the source only answers the plan's queries.
    # The seed makes a random target shuffle the same way every time this cell is re-run.
    plan = plan_selection(target.criteria(), occurrence_date=run.slot.occurrence_date, seed=run.owner_key)
    if plan.pinned_id is not None:
        return _run_pinned(run, plan)
    try:
        if target.mode == "topic":
            # Topic mode's own walk (services/topic.py): Japan day, tag space, lookback days.
            return run_topic(run, _select)
        selection = _search(run, plan)
    except PaginationError as exc:
        # Never downgraded to "no results". A pager that does not advance is a
        # deterministic fault: retrying would only spin until the timeout, so fail plainly.
        return TargetOutcome.failed(f"{PaginationError.code}: {exc}", retryable=False, reason_code="internal_error")
    except FatalSourceError:
        raise
    except TransientSourceError as exc:
        return TargetOutcome.failed(f"search failed: {exc}", retryable=True)
    except SourceError as exc:
        verdict = classify_candidate_failure(exc, exc.status)
        return TargetOutcome.failed(f"search failed: {exc}", retryable=bool(verdict.retryable or verdict.outage),
                                    reason_code=reason_of(exc.reason, str(exc)))
    return _select(run, selection)


def _search(run: CellRun, plan: Plan) -> Selection:
    """Page the plan's queries. Paging is bounded by the plan's over-fetch bound,
    never by the source running out: a popular tag has thousands of works."""
    source = run.ctx.source

    def fetch(query: SearchRequest, cursor: str | None) -> Page:
        run.heartbeat()
        return source.search_page(query, cursor)

    return select(plan, fetch)


def _run_pinned(run: CellRun, plan: Plan) -> TargetOutcome:
    """``illustId`` / ``novelId``: that work alone, fetched by id. It is never searched
    for and never replaced: when it is gone the cell fails LOCKED_WORK_UNAVAILABLE-style."""
    target, work_id = run.target, str(plan.pinned_id)
    try:
        run.heartbeat()
        work = run.ctx.source.get_work(target.type, work_id)
    except FatalSourceError:
        raise
    except SourceError as exc:
        return _fetch_failed("pinned", work_id, exc)
    selection = select_pinned(plan, work)
    if selection.supply.reasons.get(RESTRICTED):
        # A placeholder (private, deleted or hidden by Pixiv) is not the work: never deliver it.
        return TargetOutcome.failed(
            f"LOCKED_WORK_UNAVAILABLE: pinned work {work_id} is restricted (Pixiv answers a placeholder)",
            retryable=False, scan=CandidateScan(supply=selection.supply), reason_code="internal_error",
        )
    outcome = _select(run, selection)
    if outcome.kind == "no_candidate" and outcome.scan is not None:
        # Downloading it found it gone (or forbidden, or unusable): the same verdict as a lookup
        # that fails. A duplicate (already delivered on the route) or a rule stays no_candidate.
        gone = [s for s in outcome.scan.skipped if s.code != SkipCode.DUPLICATE and not s.retryable]
        if gone:
            return TargetOutcome.failed(
                f"LOCKED_WORK_UNAVAILABLE: pinned work {work_id} is no longer fetchable: {gone[0].reason}",
                retryable=False, scan=outcome.scan, reason_code=reason_of(None, gone[0].reason),
            )
    return outcome


def _select(run: CellRun, selection: Selection) -> TargetOutcome:
    ctx, target = run.ctx, run.target
    candidates: list[Work] = selection.candidates
    routes = target.routes()
    limit = 1 if target.single_work else target.effective_limit
    bound = effective_scan_bound(limit, target.candidateScanLimit, ctx.config.download.candidateScanLimit)
    scan = CandidateScan(bound=bound, supply=selection.supply)
    criteria = target.criteria()
    taken = _RouteOwners(run, routes, candidates, limit)
    # A multi-work cell that already handed works to delivery (a re-run after a crash, or a
    # resumed delivery_pending cell) keeps them: they count toward its limit and are re-sent,
    # never re-selected, so the cell can never exceed its limit.
    held = _held_intents(run) if routes and not target.single_work else []
    held_ids = list(dict.fromkeys(i.work_id for i in held))
    run.outbox_keys.extend(i.idempotency_key for i in held if i.actionable and i.idempotency_key not in run.outbox_keys)
    chosen: list[Work] = []
    for work in candidates:
        if len(chosen) + len(held_ids) >= limit or scan.attempted >= bound:
            break
        if work.work_id in held_ids:
            continue
        if work.work_id in run.excluded:
            scan.skipped.append(CandidateSkip(SkipCode.FILTERED, work.work_id, "excluded by the job's constraints"))
            continue
        holder = taken.route_holding(work.work_id)
        if holder is not None:
            # Delivered or pending on a route already: excluded at selection time; advances the scan.
            scan.skipped.append(CandidateSkip(SkipCode.DUPLICATE, work.work_id, f"already delivered or pending on route {holder}"))
            continue
        scan.attempted += 1
        declined = page_cap_decline(work, criteria)
        if declined:
            scan.skipped.append(CandidateSkip(SkipCode.FILTERED, work.work_id, declined))
            continue
        result = _try_candidate(run, work, routes, scan)
        if result == "taken":
            chosen.append(work)
        elif result == "outage" or result == "lost_bind":
            break
    if chosen or held_ids:
        works = [(i.work_id, i.work_type) for i in held] + [(w.work_id, w.work_type) for w in chosen]
        first_id, first_type = works[0]
        if routes:
            return TargetOutcome.delivery_pending(first_id, first_type, scan, tuple(dict.fromkeys(w for w, _ in works)))
        return TargetOutcome.stored(first_id, first_type, scan)
    if scan.outages or any(s.retryable for s in scan.skipped):
        return TargetOutcome.failed(
            "candidate scan hit a job-level outage or a transient failure: "
            + ", ".join(scan.outages + [s.reason for s in scan.skipped if s.retryable][-3:]),
            retryable=True, scan=scan,
        )
    if run.lost_bind:
        return TargetOutcome.failed(run.lost_bind, retryable=True, scan=scan)
    return TargetOutcome.no_candidate(no_candidate_reason(scan, selection.note), scan)


class _RouteOwners:
    """Which candidates another cell already holds on one of the routes, read in
    chunks as the scan reaches them, not all at once: a limit-1 cell usually takes one of its first
    few candidates, and each unread key would cost a read unit. The reads are eventually
    consistent: they only spare a doomed attempt; the conditional route reservation decides."""

    def __init__(self, run: CellRun, routes: list[str], candidates: list[Work], limit: int) -> None:
        self._run = run
        self._routes = routes
        self._order = [w.work_id for w in candidates]
        self._chunk = max(4, 2 * limit)
        self._read = 0
        self._held: dict[str, str] = {}

    def route_holding(self, work_id: str) -> str | None:
        if not self._routes:
            return None
        if work_id not in self._order[: self._read]:
            at = self._order.index(work_id) if work_id in self._order else len(self._order)
            while self._read <= at and self._read < len(self._order):
                ids = self._order[self._read : self._read + self._chunk]
                self._read += len(ids)
                self._chunk *= 2  # the top of the list was taken: read further ahead next time
                for route in self._routes:
                    owners = self._run.ctx.reservations.work_owners(route, self._run.target.type, ids, consistent=False)
                    for wid, owner in owners.items():
                        if owner != self._run.owner_key:
                            self._held.setdefault(wid, route)
        return self._held.get(work_id)


def _held_intents(run: CellRun) -> list[Intent]:
    state = run.ctx.occurrences.load(run.slot.slot_id)
    return sorted(state.intents_for(run.target.id), key=lambda i: (i.created_at, i.work_id)) if state else []


def _try_candidate(run: CellRun, work: Work, routes: list[str], scan: CandidateScan) -> str:
    """Bind, reserve, download and enqueue one candidate. Returns taken|skipped|outage|lost_bind."""
    ctx, target = run.ctx, run.target
    if target.single_work:
        won, current = run.bind(work.work_id, work.work_type)
        if not won:
            # Another executor bound a different work first: decline ours; the next run continues theirs.
            run.lost_bind = f"cell already bound to work {current}; declined candidate {work.work_id}"
            ctx.log("warning", "lost the bind race; declining candidate", event="cell.bind_lost",
                    slot_id=run.slot.slot_id, target_id=target.id, candidate=work.work_id, bound=current)
            return "lost_bind"
    reserved: list[str] = []
    for route in routes:
        ok, owner = ctx.reservations.reserve_work(route, work.work_type, work.work_id, run.owner_key, ctx.now(), executor=run.owner)
        if not ok:
            _undo(run, work, reserved)
            scan.skipped.append(CandidateSkip(SkipCode.DUPLICATE, work.work_id, f"already held on route {route} by {owner}"))
            return "skipped"
        reserved.append(route)
    prefix = artifact_prefix(run.slot.slot_id, target.id, work.work_id)
    try:
        if (work.raw or {}).get(LIGHT):
            # Restored from a topic checkpoint: only its id and rank were kept; fetch it whole.
            extra = {k: v for k, v in work.raw.items() if k != LIGHT}
            full = ctx.source.get_work(work.work_type, work.work_id)
            work = replace(full, raw={**dict(full.raw or {}), **extra})
        work, files = _store_work(run, work, prefix, resumed=False, filters=True)
    except FatalSourceError:
        _undo(run, work, reserved)
        raise
    except _Filtered as exc:
        # A content-side rule (aiMetadataCheck, the novel language filter): nothing was committed,
        # so the candidate is given back and the scan goes on. An aiMetadataCheck hit keeps its
        # route reservations: that is "remembered as seen" here (as PixivFlow does), so a later
        # cell skips it as a duplicate without downloading it again; only the binding is given back.
        _undo(run, work, [] if str(exc) == AI_MARKED else reserved)
        scan.skipped.append(CandidateSkip(SkipCode.FILTERED, work.work_id, str(exc)[:200]))
        return "skipped"
    except SourceError as exc:
        verdict = classify_candidate_failure(exc, exc.status)
        if verdict.outage or isinstance(exc, SourceOutage):
            # The source as a whole is down or cooling down: the next candidate would
            # fail the same way. Stop the scan and KEEP the binding, so the retry continues THIS
            # work after the cooldown; only the route reservations are given back.
            _undo(run, work, reserved, keep_binding=True)
            if verdict.outage:
                scan.outages.append(verdict.outage)
            # The source's own reason (rate_limited, remote_http_error, ...) goes into the report.
            scan.skipped.append(CandidateSkip(SkipCode.UNAVAILABLE, work.work_id, str(exc)[:200], True))
            return "outage"
        _undo(run, work, reserved)
        scan.skipped.append(CandidateSkip(verdict.skip_code or SkipCode.UNAVAILABLE, work.work_id, str(exc)[:200], verdict.retryable))
        return "skipped"
    # From here an artifact exists: the binding is never released, whatever fails next.
    run.heartbeat()
    if routes:
        _enqueue(run, work, routes, files)
    elif target.dry_run:
        # pixivflow.shadow.json: selected and stored, the choice recorded, nothing posted.
        ctx.log("info", "dry run: the work is stored and would be delivered; no route, nothing sent",
                event="delivery.dry_run", slot_id=run.slot.slot_id, target_id=target.id, work_id=work.work_id,
                work_type=work.work_type, artifact_key=prefix)
    return "taken"


class _Filtered(Exception):
    """A content-side rule excludes the work once its files are fetched (aiMetadataCheck, the
    novel language filter); the message is the skip's reason."""


AI_MARKED = "excluded by aiMetadataCheck: the first page carries AI generator metadata"


class DownloadIncomplete(Exception):
    """The invocation has no time left for the next file's worst case; the files stored so
    far stay, the cell keeps its binding and is handed back to its queue to resume there."""

    def __init__(self, stored: int, total: int) -> None:
        super().__init__(f"download_incomplete: {stored} of {total} files stored; the rest in the next invocation")
        self.stored = stored
        self.total = total


GUARD_SLACK_MS = 1_000  # what storing one file and recording it takes beyond its fetch
AI_CHECK_BYTES = 2 * 1024 * 1024  # PixivFlow scans the first 2 MiB of an image for generator markers


def _store_work(run: CellRun, work: Work, prefix: str, *, resumed: bool, filters: bool = False) -> tuple[Work, list[StoredFile]]:
    """The work's files in the store, all of them (before any intent is recorded; the intents
    then record what was stored); the work as the content rules left it (a detected language).
    ``filters``: apply the content-side rules (a fresh candidate; raises ``_Filtered``).

    A ``resumed`` work (a bound cell run again: a hand-back, or a crash before its intents)
    re-uses every file an earlier run stored whole (the store checks each object's checksum), so
    a retry PUTs only what is missing and downloads nothing a streamed run already stored.
    A source that plans its files (the Pixiv source: an illustration's pages and the previews its
    routes send, a ugoira's zip, a novel's text, inline images, Markdown and cover) has them
    streamed one at a time, a resumed work starting at its first missing file; each starts only
    when the invocation's time left covers its worst case. Other sources hand over the whole work."""
    ctx, target = run.ctx, run.target
    previews = any(route.takes_previews for route in map(ctx.config.route, target.routes()) if route is not None)
    artifacts = ctx.artifacts
    have: dict[str, StoredFile] | None = None  # what an earlier run stored: listed once, for a planned work only

    def stored_files() -> dict[str, StoredFile]:
        nonlocal have
        if have is None:
            have = artifacts.partial(prefix) if resumed else {}
        return have

    def stored_bytes(stem: str) -> bytes | None:  # a resumed novel's text answer, read back, not asked again
        stored = stored_files()
        return artifacts.read(stored[stem]) if stem in stored else None

    planned = ctx.source.plan(work, previews=previews, stored=stored_bytes)
    if planned is None:
        files = ctx.source.download(work)
        if not files:
            raise SourceError("no files produced")
        if filters:
            work = _content_rules(run, work, files)
        extra = previews_for(ctx.source, ctx.log, work, files, target_id=target.id) if previews else []
        return work, ctx.artifacts.put(prefix, files + extra, reuse=resumed)
    if filters and work.work_type == "novel":
        work = _language_rule(run, work, _novel_text(planned))  # on the text in hand, before anything is stored
    have = stored_files()
    out: list[StoredFile] = []
    kept: list[StoredFile] = []  # transient files: deleted once the work's own files are all stored
    names: dict[str, str] = {}  # a file's stem -> its stored name (a preview's name and a Markdown follow them)
    total = sum(1 for f in planned if not f.transient)
    # Files are stored in plan order: an optional one missing before a stored one was left out by
    # the invocation that stored the later ones (a novel's Markdown was made without it), so it
    # stays out rather than be asked for again (it would not be in that Markdown).
    last_stored = max((i for i, f in enumerate(planned) if f.pairs_with is None and f.stem in have), default=-1)
    no_previews = False
    for index, planned_file in enumerate(planned):
        page = planned_file.pairs_with
        if page is not None and (no_previews or page not in names):
            continue
        stem = planned_file.stem if page is None else f"{names[page]}.preview"
        if stem in have:
            # Stored by an earlier invocation: resume after it. What S3 metadata could not carry
            # (a ugoira's frame delays, over its 2 KB) comes from the plan.
            found = replace(have[stem], meta={**dict(planned_file.meta), **dict(have[stem].meta)})
            (kept if planned_file.transient else out).append(found)
            names[planned_file.stem] = have[stem].name
            continue
        if planned_file.optional and index < last_stored:
            continue
        content = planned_file.render(names) if planned_file.render is not None else planned_file.content
        if planned_file.render is not None and content is None:
            continue  # the work has no such file (a novel's Markdown when no inline image was stored)
        if not _file_fits(run, planned_file.worst_case_ms):
            raise DownloadIncomplete(len(out), total)
        check = filters and run.target.aiMetadataCheck and work.work_type == "illustration" and index == 0
        head = bytearray()
        describe = planned_file.describe if page is None else _after_name(names[page], planned_file.describe)
        try:
            with _opened(planned_file, content) as (chunks, header_type):
                stored = artifacts.put_stream(prefix, _watched(chunks, head if check else None), describe,
                                              header_type=header_type, role=planned_file.role, meta=planned_file.meta)
        except SourceError as exc:
            if planned_file.optional and exc.status == 404 and not exc.retryable:
                # Pixiv no longer has it (a novel's cover or inline image): the work goes without
                # it, the Markdown keeps its marker (as PixivFlow does). Asked again on a resume.
                ctx.log("info", "a file the work can go without is not on Pixiv; left out", event="artifacts.file_left_out",
                        work_id=work.work_id, target_id=target.id, file=stem, error=str(exc)[:200])
                continue
            if page is None or isinstance(exc, TransientSourceError):
                raise  # a page, or a preview the retry may get: the cell resumes here
            out = _drop_previews(run, work, prefix, out, exc)
            no_previews = True
            continue
        (kept if planned_file.transient else out).append(stored)
        names[planned_file.stem] = stored.name
        if check and has_ai_file_markers(bytes(head)):
            ctx.artifacts.delete(prefix)
            raise _Filtered(AI_MARKED)
        run.heartbeat()
    if kept:
        ctx.artifacts.delete(prefix, kept)
    return work, out


def _opened(planned_file: FileDownload, content: bytes | None) -> ContextManager[tuple[Iterator[bytes], str]]:
    """A planned file's chunks: the bytes in hand (a novel's text, its Markdown), else the source's stream."""
    if content is not None:
        return nullcontext((iter((content,)), ""))
    assert planned_file.open is not None  # a fetched file: the source gives its stream
    return planned_file.open()


def _after_name(name: str, describe: Callable[..., tuple[str, str, int | None, int | None]] | None) -> Callable[
        [bytes, str], tuple[str, str, int | None, int | None]]:
    """A preview's describe: its page's stored name + what the source names (``.preview.jpg``)."""
    assert describe is not None

    def named(head: bytes, header_type: str) -> tuple[str, str, int | None, int | None]:
        suffix, content_type, width, height = describe(head, header_type)
        return f"{name}{suffix}", content_type, width, height
    return named


def _drop_previews(run: CellRun, work: Work, prefix: str, out: list[StoredFile], exc: SourceError) -> list[StoredFile]:
    """All previews or none (a receiver refuses previews that do not pair one-to-one with the
    pages; assets.previews_for's rule): a preview Pixiv does not have drops those stored so far."""
    stored = [f for f in out if f.role == "preview"]
    if stored:
        run.ctx.artifacts.delete(prefix, stored)
    run.ctx.log("warning", "previews could not be fetched; the work is delivered without them", event="artifacts.no_previews",
                work_id=work.work_id, target_id=run.target.id, error=str(exc)[:300])
    return [f for f in out if f.role != "preview"]


def _content_rules(run: CellRun, work: Work, files: list[ArtifactFile]) -> Work:
    """aiMetadataCheck and the novel language filter on the fetched files."""
    target = run.target
    if target.aiMetadataCheck and work.work_type == "illustration" and files and has_ai_file_markers(files[0].content):
        raise _Filtered(AI_MARKED)
    if work.work_type == "novel":
        work = _language_rule(run, work, _novel_text(files))
    return work


def _language_rule(run: CellRun, work: Work, text: str) -> Work:
    """The novel language filter on the novel's text."""
    target = run.target
    if target.languageFilter:
        verdict = language_verdict(work.work_id, work.title, text, target.languageFilter,
                                   strict=target.strictLanguageFilter, detect_language=target.detectLanguage)
        if not verdict.keep:
            raise _Filtered(str(verdict.reason))
        if verdict.detected is not None:
            work = replace(work, raw={**dict(work.raw or {}), "language": verdict.detected.label})
    return work


def _watched(chunks: Iterable[bytes], head: bytearray | None) -> Iterator[bytes]:
    for chunk in chunks:
        if head is not None and len(head) < AI_CHECK_BYTES:
            head += chunk[: AI_CHECK_BYTES - len(head)]
        yield chunk


def _file_fits(run: CellRun, worst_case_ms: int) -> bool:
    """Start a file only when the time left covers its worst case plus a second. A file
    whose worst case no invocation could cover (more than this invocation's whole budget, both
    read from the Lambda context) is started anyway: waiting would never help."""
    if run.time_left is None:
        return True
    need = worst_case_ms + GUARD_SLACK_MS
    return (run.time_budget is not None and need > run.time_budget) or run.time_left() >= need


def _novel_text(files: Sequence[ArtifactFile | FileDownload]) -> str:
    """The novel's body: the fetched text file (or the planned one, held whole)."""
    for file in files:
        if file.role == "text" and file.content is not None:
            return bytes(file.content).decode("utf-8", "replace")
    return ""


def _undo(run: CellRun, work: Work, routes: list[str], *, keep_binding: bool = False) -> None:
    """Give a candidate back: the binding first, then its route reservations, each only if still ours.

    A zombie executor (lease expired, another executor took over and may already have delivered
    this work) is refused at both steps: the binding moved on, and the reservation now names the
    executor that holds it."""
    if run.target.single_work and not keep_binding and not run.release(work.work_id):
        return
    for route in routes:
        run.ctx.reservations.release_work_reservation(route, work.work_type, work.work_id, run.owner_key, executor=run.owner)


def _enqueue(run: CellRun, work: Work, routes: list[str], files: list[StoredFile]) -> None:
    """One intent per route, created insert-if-absent: a re-run finds the same rows. Each records
    the work's stored files (the ledger is the store's commit record)."""
    ctx, slot = run.ctx, run.slot
    now = ctx.now()
    for route in routes:
        config = ctx.config.route(route)
        intent = _row(run, work, route, now, max_attempts=config.attempt_budget if config else 12, next_attempt_at=now,
                      payload=delivery_payload(slot, run.target, work, config), files=file_records(files) or None)
        stored, _ = ctx.rows.put_intent(intent)
        if stored.actionable:
            run.outbox_keys.append(intent.idempotency_key)


def _row(run: CellRun, work: Work, route: str, now: int, **fields: Any) -> Intent:
    """This cell's delivery row of ``work`` on ``route``: its identity, and what the caller adds."""
    slot_id, target_id = run.slot.slot_id, run.target.id
    return Intent(slot_id=slot_id, target_id=target_id, route=route, work_type=work.work_type, work_id=work.work_id,
                  idempotency_key=idempotency_key(route, work.work_type, work.work_id, slot_id, target_id),
                  created_at=now, updated_at=now, **fields)


def _fetch_failed(which: str, work_id: str, exc: SourceError) -> TargetOutcome:
    """The one verdict on a failed fetch of a cell's one work (``pinned`` by the target, or
    ``locked`` by an earlier run): the SAME work is tried again later when the source is down or
    says the work is unavailable for now; otherwise the work is gone and the cell fails with the
    reason the source's error carries. (A fatal source error ends the cell before this.)"""
    verdict = classify_candidate_failure(exc, exc.status)
    if verdict.outage or (verdict.skip_code == SkipCode.UNAVAILABLE and exc.retryable):
        return TargetOutcome.failed(f"{which} work {work_id} could not be fetched (will retry the SAME work): {exc}",
                                    retryable=True)
    return TargetOutcome.failed(f"LOCKED_WORK_UNAVAILABLE: {which} work {work_id} is no longer fetchable: {exc}",
                                retryable=False, reason_code=reason_of(exc.reason, str(exc)))


def _continue_locked(run: CellRun, work_id: str) -> TargetOutcome:
    """Recovery: process only the bound work; never search, never substitute."""
    ctx, target = run.ctx, run.target
    work_type = run.cell.work_type or target.type
    if not work_id.isdigit():
        kind = "novel" if work_type == "novel" else "illustration"
        return TargetOutcome.failed(f'LOCKED_WORK_UNAVAILABLE: cell work id "{work_id}" is not a valid {kind} id', retryable=False,
                                    reason_code="internal_error")
    prefix = artifact_prefix(run.slot.slot_id, target.id, work_id)
    try:
        work = ctx.source.get_work(work_type, work_id)
        work, files = _store_work(run, work, prefix, resumed=True)
    except FatalSourceError:
        raise
    except SourceError as exc:
        return _fetch_failed("locked", work_id, exc)
    routes = target.routes()
    if not routes:
        return TargetOutcome.stored(work.work_id, work.work_type)
    held: list[tuple[str, str | None]] = []
    taken: list[tuple[str, str | None]] = []
    for route in routes:
        ok, owner = ctx.reservations.reserve_work(route, work.work_type, work.work_id, run.owner_key, ctx.now(), executor=run.owner)
        (held if ok else taken).append((route, owner))
    if not held:
        # Another slot took this work on every route while we were down (it was bound, never
        # reserved): it is delivered or pending there. Never deliver it twice, never substitute.
        where = ", ".join(f"{r} by {o}" for r, o in taken)
        return TargetOutcome.duplicate(work.work_id, f"locked work {work.work_id} is already delivered or pending on {where}")
    # Some routes only: the others went to another slot's cell bound to the same work. Each such
    # route is recorded on this cell as a duplicate BEFORE the held routes are queued, so that the
    # cell's delivery verdict (every configured route confirmed) can complete. Without it two
    # recovering cells that split a work's routes between them would wait forever, each for the
    # route the other holds.
    _record_taken(run, work, taken)
    _enqueue(run, work, [r for r, _ in held], files)
    return TargetOutcome.delivery_pending(work.work_id, work.work_type)


def _record_taken(run: CellRun, work: Work, taken: list[tuple[str, str | None]]) -> None:
    """One settled row per route another cell holds this work on: ledger ``duplicate``, outbox
    ``done`` (never queued, never sent), the holder named; insert-if-absent, so a re-run finds it."""
    now = run.ctx.now()
    for route, owner in taken:
        run.ctx.rows.put_intent(_row(run, work, route, now, status=LedgerStatus.DUPLICATE, outbox_status=OutboxStatus.DONE,
                                     attempts=0, reuse_reason=f"held on route {route} by {owner}"))
