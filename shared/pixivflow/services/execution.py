"""Execute one cell (DESIGN §2, §5; spec §3.3, §3.6, §5, §6).

Order of one execution, each step safe to interrupt:
  claim the cell lease -> (delivery_pending: ask the delivery ledger first) -> select a work
  -> bind it (CAS) and reserve it on its routes BEFORE any side effect -> download -> store
  -> record one intent per route (= its outbox row) -> move the cell -> send outbox messages.
A crash anywhere leaves a prefix that the next run of the same message, or the sweep's
re-dispatch, completes on the SAME work: a bound work is never replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..ports import OutgoingMessage
from ..config import TargetConfig
from ..domain.ack import idempotency_key
from ..domain.apply import decide, retry_delay_s
from ..domain.assets import artifact_prefix
from ..domain.cells import CellStatus
from ..domain.delivery_state import LOST_REASON, delivery_state
from ..domain.errors import (FatalSourceError, LedgerUnavailable, PaginationError, SourceError, SourceOutage,
                             TransientSourceError)
from ..domain.language import verdict as language_verdict
from ..domain.model import Cell, Intent, Slot, cell_key, unwritten_cell
from ..domain.outcomes import CandidateScan, CandidateSkip, JobLevelOutage, SkipCode, TargetOutcome
from ..domain.selection import (
    RESTRICTED,
    Plan,
    Query,
    Selection,
    has_ai_file_markers,
    page_cap_decline,
    plan_selection,
    select,
    select_pinned,
)
from ..domain.task import job_target
from ..domain.scan import bounded_report, classify_candidate_failure, effective_scan_bound, no_candidate_reason
from ..ports import SearchRequest, StoredFile, Work
from .assets import previews_for
from .delivery import delivery_payload
from .engine import HEARTBEAT_MS, LEASE_TTL_MS, Engine
from .messages import execution_body, outbox_body, send_logged
from .plans import run_blocked
from .rollup import cell_delivery_state, rollup
from .topic import LIGHT, SelectionSuspended, run_topic


class LeaseLost(Exception):
    """This executor no longer holds the cell's lease: stop, touch nothing, leave it to the holder."""


@dataclass
class ExecutionResult:
    slot_id: str
    target_id: str
    action: str  # claimed_by_other | left_to_outbox | applied | no_change | missing | refused | continued (topic checkpoint)
    cell_status: str | None = None
    outcome: str | None = None


@dataclass
class CellRun:
    """The execution context of one cell (spec §5.2) plus the lease it runs under."""

    engine: Engine
    slot: Slot
    cell: Cell
    target: TargetConfig
    owner: str
    last_beat: int = 0
    outbox_keys: list[str] = field(default_factory=list)
    lost_bind: str | None = None  # set when another executor bound a different work first
    excluded: frozenset[str] = frozenset()  # work ids a protocol job excluded (spec §12.3)

    @property
    def locked_work_id(self) -> str | None:
        return self.cell.work_id

    @property
    def owner_key(self) -> str:
        return cell_key(self.slot.slot_id, self.target.id)

    def heartbeat(self) -> None:
        """Renew the lease every 30 s. A refused renewal means another executor owns the cell now."""
        now = self.engine.now()
        if now - self.last_beat >= HEARTBEAT_MS:
            if not self.engine.ledger.heartbeat_cell(self.slot.slot_id, self.target.id, self.owner, now, LEASE_TTL_MS):
                raise LeaseLost(f"lease on {self.slot.slot_id}/{self.target.id} was lost")
            self.last_beat = now

    def bind(self, work_id: str, work_type: str) -> tuple[bool, str | None]:
        won, current = self.engine.ledger.bind_work(self.slot.slot_id, self.target.id, work_id, work_type, self.engine.now())
        if won:
            self.cell.work_id = work_id
            self.cell.work_type = self.cell.work_type or work_type
            self.cell.status = CellStatus.SELECTED
        return won, current

    def release(self, work_id: str) -> bool:
        ok = self.engine.ledger.release_work(self.slot.slot_id, self.target.id, work_id, self.engine.now())
        if ok:
            self.cell.work_id = None
            self.cell.status = CellStatus.PENDING
        return ok


def execute_cell(engine: Engine, slot_id: str, target_id: str) -> ExecutionResult:
    now = engine.now()
    owner = engine.entropy.token("exec")
    # The slot is read BEFORE the claim: a claim moves the cell's heartbeat (the slot's progress
    # clock), and a cell that may not run must not look alive to the stall rules.
    slot = engine.ledger.get_slot(slot_id)
    if slot is None:  # cannot happen for cells made by admission
        return ExecutionResult(slot_id, target_id, "missing")
    blocked = run_blocked(engine.config, slot)
    if blocked:
        # Spec §1.1: a disabled (or removed) schedule's occurrences are not run, whoever asks: an
        # execution message already on its way is dropped and the stall rules end the slot.
        engine.log("warning", "cell not run: its schedule is disabled or no longer configured",
                   event="cell.execution_refused", slot_id=slot_id, target_id=target_id,
                   schedule_id=slot.schedule_id, reason=blocked)
        return ExecutionResult(slot_id, target_id, "refused")
    if target_id not in slot.target_ids:
        # Membership is frozen at admission (spec §13.7): a message naming another target (a
        # forged or stale one) never creates a cell.
        return ExecutionResult(slot_id, target_id, "missing")
    configured = engine.config.target(target_id)
    unwritten = unwritten_cell(slot, target_id)
    unwritten.work_type = configured.type if configured else None
    # The cell's first claim writes its item (admission wrote only the slot): one conditional write.
    cell = engine.ledger.claim_cell(slot_id, target_id, owner, now, LEASE_TTL_MS, unwritten=unwritten)
    if cell is None:
        current = engine.ledger.get_cell(slot_id, target_id)
        action = "missing" if current is None else "claimed_by_other"
        engine.log("info", "cell not claimed", event="cell.claim_skipped", slot_id=slot_id, target_id=target_id,
                   cell_status=current.status if current else None)
        return ExecutionResult(slot_id, target_id, action, current.status if current else None)
    if slot.status == "pending":
        engine.ledger.mark_slot_running(slot_id, now)
    target = engine.config.target(target_id)
    excluded: frozenset[str] = frozenset()
    if target is not None and slot.params:
        # A protocol job's stored params drive its run, on every (re)run (spec §12.3).
        target, excluded = job_target(target, slot.params)
    run = CellRun(engine, slot, cell, target, owner, last_beat=now, excluded=excluded) if target else None
    try:
        if run is None:
            outcome = TargetOutcome.failed(f"target {target_id} is not configured (configuration error)", retryable=False)
            return _apply(engine, slot, cell, owner, outcome, None)
        if cell.status == CellStatus.DELIVERY_PENDING and target.single_work:
            settled = _settle_from_ledger(engine, run)
            if settled is not None:
                return settled
        outcome = run_target(run)
        return _apply(engine, slot, run.cell, owner, outcome, run)
    except LeaseLost as exc:
        engine.log("warning", "lease lost mid-run; leaving the cell to its new holder", event="cell.lease_lost",
                   slot_id=slot_id, target_id=target_id, error=str(exc))
        return ExecutionResult(slot_id, target_id, "claimed_by_other")
    except SelectionSuspended:
        # The selection's progress is on the cell (services/topic.py): give the lease back and
        # hand the cell to a fresh invocation. A lost message leaves a pending, lease-less cell
        # the sweep re-dispatches; the checkpoint is read again either way.
        engine.ledger.release_cell(slot_id, target_id, owner, engine.now())
        send_logged(engine, "execution", [OutgoingMessage(execution_body(slot_id, target_id))],
                    event="cell.continue_send_failed", slot_id=slot_id, target_id=target_id)
        return ExecutionResult(slot_id, target_id, "continued", CellStatus.PENDING)
    except BaseException:
        # Infrastructure failure: give the lease back so the SQS retry can claim at once.
        try:
            engine.ledger.release_cell(slot_id, target_id, owner, engine.now())
        except LedgerUnavailable:
            pass
        raise


def _settle_from_ledger(engine: Engine, run: CellRun) -> ExecutionResult | None:
    """Spec §3.6 / §10.8 for a delivery_pending single-work cell. None means: run it."""
    state = engine.ledger.load(run.slot.slot_id)
    verdict = cell_delivery_state(engine, state, run.target.id) if state else delivery_state(run.target.routes(), [])
    now = engine.now()
    slot_id, target_id = run.slot.slot_id, run.target.id
    if verdict.state == "live":
        engine.ledger.release_cell(slot_id, target_id, run.owner, now)
        return ExecutionResult(slot_id, target_id, "left_to_outbox", run.cell.status)
    if verdict.state == "confirmed":
        engine.ledger.move_cell_as_owner(slot_id, target_id, CellStatus.SUBMITTED, now, run.owner,
                                         work_id=verdict.work_id, work_type=verdict.work_type)
        rollup(engine, slot_id)
        return ExecutionResult(slot_id, target_id, "applied", CellStatus.SUBMITTED, "submitted")
    if verdict.state == "lost":
        return _apply(engine, run.slot, run.cell, run.owner, TargetOutcome.failed(LOST_REASON, retryable=False), run)
    return None


def _apply(engine: Engine, slot: Slot, cell: Cell, owner: str, outcome: TargetOutcome, run: CellRun | None) -> ExecutionResult:
    """Write an outcome onto the cell (spec §3.3), then dispatch what it implies."""
    effect = decide(outcome, cell.work_id)
    now = engine.now()
    report = bounded_report(outcome.scan) if outcome.scan is not None else None
    slot_id, target_id = slot.slot_id, cell.target_id
    if effect.retry:
        delay = retry_delay_s(cell.attempt_count)
        # dispatchedAt marks when the delayed retry is due, so the sweep's recovery waits for it.
        recorded = engine.ledger.record_cell_error(slot_id, target_id, effect.last_error or "retryable failure", now,
                                                   owner=owner, candidate_report=report, dispatched_at=now + delay * 1000)
        if not recorded:
            # The lease was lost or the cell ended meanwhile: whoever holds it now owns its future.
            return ExecutionResult(slot_id, target_id, "no_change", cell.status, "failed_retryable")
        send_logged(engine, "execution", [OutgoingMessage(execution_body(slot_id, target_id), delay_s=delay)],
                    event="cell.retry_send_failed", slot_id=slot_id, target_id=target_id)
        engine.log("warning", "cell failed, will retry the same work", event="cell.retry_scheduled",
                   slot_id=slot_id, target_id=target_id, work_id=cell.work_id, delay_s=delay, error=effect.last_error)
        return ExecutionResult(slot_id, target_id, "applied", cell.status, "failed_retryable")
    if effect.to_status is None:
        engine.ledger.release_cell(slot_id, target_id, owner, now)
        return ExecutionResult(slot_id, target_id, "no_change", cell.status, outcome.kind)
    if effect.to_status == cell.status:
        # A same-state move is a no-op (spec §3.2), but what it implies still happens: a resumed
        # delivery_pending cell re-sends the messages of its still-actionable outbox rows.
        engine.ledger.release_cell(slot_id, target_id, owner, now)
        if effect.to_status == CellStatus.DELIVERY_PENDING and run is not None:
            _send_outbox(engine, run.outbox_keys)
        return ExecutionResult(slot_id, target_id, "no_change", cell.status, outcome.kind)
    moved = engine.ledger.move_cell_as_owner(
        slot_id, target_id, effect.to_status, now, owner,
        work_id=effect.work_id, work_type=effect.work_type, last_error=effect.last_error,
        reason_code=effect.reason_code, reason_message=effect.reason_message, candidate_report=report,
    )
    if not moved:
        # Lost the lease or the cell moved on (e.g. an ACK settled it first): never force it.
        engine.ledger.release_cell(slot_id, target_id, owner, now)
        current = engine.ledger.get_cell(slot_id, target_id)
        engine.log("info", "cell transition refused", event="cell.transition_refused", slot_id=slot_id,
                   target_id=target_id, wanted=effect.to_status, cell_status=current.status if current else None)
        if current and current.terminal:
            rollup(engine, slot_id)
        return ExecutionResult(slot_id, target_id, "no_change", current.status if current else None, outcome.kind)
    engine.log("info", "cell outcome applied", event="cell.outcome", slot_id=slot_id, target_id=target_id,
               outcome=outcome.kind, cell_status=effect.to_status, work_id=effect.work_id or cell.work_id,
               terminal_reason_code=effect.reason_code)
    engine.metric("ExecutionResults", outcome=outcome.kind)
    if effect.to_status == CellStatus.DELIVERY_PENDING and run is not None:
        _send_outbox(engine, run.outbox_keys)
    if effect.to_status in (CellStatus.SUBMITTED, CellStatus.NO_CANDIDATE, CellStatus.DUPLICATE, CellStatus.FAILED):
        rollup(engine, slot_id)
    return ExecutionResult(slot_id, target_id, "applied", effect.to_status, outcome.kind)


def _send_outbox(engine: Engine, keys: list[str]) -> None:
    if not keys:
        return
    # The rows are durable and due now: a message SQS did not take is re-driven by the sweep.
    send_logged(engine, "outbox", [OutgoingMessage(outbox_body("delivery", k)) for k in keys], event="outbox.send_failed")


# -- the target handler (spec §5.6) ----------------------------------------------------------


def run_target(run: CellRun) -> TargetOutcome:
    try:
        return _run_target(run)
    except FatalSourceError as exc:
        return _fatal(exc)


def _fatal(exc: FatalSourceError) -> TargetOutcome:
    """A source that cannot work until an operator acts ends the cell at once (issue 10).

    Explicit mapping: ``AuthenticationError`` -> scan outage ``pixiv_auth_failure`` -> terminal
    ``auth_failed`` (spec §8.1 policy: not retryable); any other -> its own ``reason`` as the
    head of the error text (e.g. ``configuration_error``)."""
    outages = [JobLevelOutage.PIXIV_AUTH_FAILURE.value] if exc.reason == "auth_failed" else []
    text = str(exc) if str(exc).startswith(f"{exc.reason}:") else f"{exc.reason}: {exc}"
    return TargetOutcome.failed(text, retryable=False, scan=CandidateScan(outages=outages))


def _run_target(run: CellRun) -> TargetOutcome:
    target = run.target
    if target.single_work and run.locked_work_id:
        return _continue_locked(run, run.locked_work_id)
    # Every selection rule is the domain's (spec §6.1); the source only answers the plan's queries.
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
        # Never downgraded to "no results" (spec §6.4). A pager that does not advance is a
        # deterministic fault: retrying would only spin until the timeout, so fail plainly.
        return TargetOutcome.failed(f"{PaginationError.code}: {exc}", retryable=False)
    except FatalSourceError:
        raise
    except TransientSourceError as exc:
        return TargetOutcome.failed(f"search failed: {exc}", retryable=True)
    except SourceError as exc:
        verdict = classify_candidate_failure(exc, exc.status)
        return TargetOutcome.failed(f"search failed: {exc}", retryable=bool(verdict.retryable or verdict.outage))
    return _select(run, selection)


def _search(run: CellRun, plan: Plan) -> Selection:
    """Page the plan's queries. Paging is bounded by the plan's over-fetch bound (spec §6.4),
    never by the source running out: a popular tag has thousands of works."""
    source = run.engine.source

    def fetch(query: Query, cursor: str | None):
        run.heartbeat()
        return source.search_page(SearchRequest(**query.fields()), cursor)

    return select(plan, fetch)


def _run_pinned(run: CellRun, plan: Plan) -> TargetOutcome:
    """``illustId`` / ``novelId``: that work alone, fetched by id (spec §6.1). It is never searched
    for and never replaced: when it is gone the cell fails LOCKED_WORK_UNAVAILABLE-style."""
    target, work_id = run.target, str(plan.pinned_id)
    try:
        run.heartbeat()
        work = run.engine.source.get_work(target.type, work_id)
    except TransientSourceError as exc:
        return TargetOutcome.failed(f"pinned work {work_id} could not be fetched (will retry the SAME work): {exc}", retryable=True)
    except SourceError as exc:
        verdict = classify_candidate_failure(exc, exc.status)
        if verdict.outage or (verdict.skip_code == SkipCode.UNAVAILABLE and exc.retryable):
            return TargetOutcome.failed(f"pinned work {work_id} could not be fetched (will retry the SAME work): {exc}", retryable=True)
        return TargetOutcome.failed(f"LOCKED_WORK_UNAVAILABLE: pinned work {work_id} is no longer fetchable: {exc}", retryable=False)
    selection = select_pinned(plan, work)
    if selection.supply.reasons.get(RESTRICTED):
        # A placeholder (private, deleted or hidden by Pixiv) is not the work: never deliver it.
        return TargetOutcome.failed(
            f"LOCKED_WORK_UNAVAILABLE: pinned work {work_id} is restricted (Pixiv answers a placeholder)",
            retryable=False, scan=CandidateScan(supply=selection.supply),
        )
    outcome = _select(run, selection)
    if outcome.kind == "no_candidate" and outcome.scan is not None:
        # Downloading it found it gone (or forbidden, or unusable): the same verdict as a lookup
        # that fails. A duplicate (already delivered on the route) or a rule stays no_candidate.
        gone = [s for s in outcome.scan.skipped if s.code != SkipCode.DUPLICATE and not s.retryable]
        if gone:
            return TargetOutcome.failed(
                f"LOCKED_WORK_UNAVAILABLE: pinned work {work_id} is no longer fetchable: {gone[0].reason}",
                retryable=False, scan=outcome.scan,
            )
    return outcome


def _select(run: CellRun, selection: Selection) -> TargetOutcome:
    engine, target = run.engine, run.target
    candidates: list[Work] = selection.candidates
    routes = target.routes()
    limit = 1 if target.single_work else target.effective_limit
    bound = effective_scan_bound(limit, target.candidateScanLimit, engine.config.download.candidateScanLimit)
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
    """Which candidates another cell already holds on one of the routes (spec §10.1), read in
    chunks as the scan reaches them, not all at once: a limit-1 cell usually takes one of its first
    few candidates, and each unread key would cost a read unit (issue 14). The reads are eventually
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
                    owners = self._run.engine.ledger.work_owners(route, self._run.target.type, ids, consistent=False)
                    for wid, owner in owners.items():
                        if owner != self._run.owner_key:
                            self._held.setdefault(wid, route)
        return self._held.get(work_id)


def _held_intents(run: CellRun) -> list[Intent]:
    state = run.engine.ledger.load(run.slot.slot_id)
    return sorted(state.intents_for(run.target.id), key=lambda i: (i.created_at, i.work_id)) if state else []


def _try_candidate(run: CellRun, work: Work, routes: list[str], scan: CandidateScan) -> str:
    """Bind, reserve, download and enqueue one candidate. Returns taken|skipped|outage|lost_bind."""
    engine, target = run.engine, run.target
    if target.single_work:
        won, current = run.bind(work.work_id, work.work_type)
        if not won:
            # Another executor bound a different work first: decline ours; the next run continues theirs.
            run.lost_bind = f"cell already bound to work {current}; declined candidate {work.work_id}"
            engine.log("warning", "lost the bind race; declining candidate", event="cell.bind_lost",
                       slot_id=run.slot.slot_id, target_id=target.id, candidate=work.work_id, bound=current)
            return "lost_bind"
    reserved: list[str] = []
    for route in routes:
        ok, owner = engine.ledger.reserve_work(route, work.work_type, work.work_id, run.owner_key, engine.now(), executor=run.owner)
        if not ok:
            _undo(run, work, reserved)
            scan.skipped.append(CandidateSkip(SkipCode.DUPLICATE, work.work_id, f"already held on route {route} by {owner}"))
            return "skipped"
        reserved.append(route)
    prefix = artifact_prefix(run.slot.slot_id, target.id, work.work_id)
    stored = _stored(engine, prefix)  # a re-run after a crash re-uses what is already stored
    try:
        if (work.raw or {}).get(LIGHT):
            # Restored from a topic checkpoint: only its id and rank were kept; fetch it whole.
            extra = {k: v for k, v in work.raw.items() if k != LIGHT}
            full = engine.source.get_work(work.work_type, work.work_id)
            work = replace(full, raw={**dict(full.raw or {}), **extra})
        files = [] if stored else engine.source.download(work)
        if not files and not stored:
            raise SourceError("no files produced")
    except FatalSourceError:
        _undo(run, work, reserved)
        raise
    except SourceError as exc:
        verdict = classify_candidate_failure(exc, exc.status)
        if verdict.outage or isinstance(exc, SourceOutage):
            # The source as a whole is down or cooling down (issue 10): the next candidate would
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
    if target.aiMetadataCheck and work.work_type == "illustration" and files and has_ai_file_markers(files[0].content):
        # PixivFlow's content-side AI check (note §5): nothing is stored or delivered, but the work
        # is remembered as seen so it is never fetched again. Its route reservations stay (that is
        # what "seen" is here: a later cell finds it held and skips it as a duplicate without a
        # download); only a single-work cell's binding is given back, so the scan can go on.
        _undo(run, work, [])
        scan.skipped.append(CandidateSkip(SkipCode.FILTERED, work.work_id,
                                          "excluded by aiMetadataCheck: the first page carries AI generator metadata"))
        return "skipped"
    if target.languageFilter and work.work_type == "novel":
        # Note §3: the title and text are checked once the text is fetched; a mismatch is a
        # filtered skip and the scan moves on (nothing was stored yet).
        text = _novel_text(engine, files, stored)
        verdict = language_verdict(work.work_id, work.title, text, target.languageFilter,
                                   strict=target.strictLanguageFilter, detect_language=target.detectLanguage)
        if not verdict.keep:
            _undo(run, work, reserved)
            scan.skipped.append(CandidateSkip(SkipCode.FILTERED, work.work_id, str(verdict.reason)[:200]))
            return "skipped"
        if verdict.detected is not None:
            work = replace(work, raw={**dict(work.raw or {}), "language": verdict.detected.label})
    # From here an artifact exists: the binding is never released, whatever fails next.
    if not stored:
        engine.artifacts.put(prefix, files + previews_for(engine, target, work, files))
    run.heartbeat()
    if routes:
        _enqueue(run, work, routes)
    elif engine.config.dry_run(target):
        # pixivflow.shadow.json (issue 23): selected and stored, the choice recorded, nothing posted.
        engine.log("info", "dry run: the work is stored and would be delivered; no route, nothing sent",
                   event="delivery.dry_run", slot_id=run.slot.slot_id, target_id=target.id, work_id=work.work_id,
                   work_type=work.work_type, artifact_key=prefix)
    return "taken"


def _novel_text(engine: Engine, files: list, stored: list[StoredFile]) -> str:
    """The novel's body: the fetched text file, or the stored one on a re-run after a crash."""
    for file in files:
        if getattr(file, "role", None) == "text":
            return bytes(file.content).decode("utf-8", "replace")
    for file in stored:
        if getattr(file, "role", None) == "text" or str(getattr(file, "name", "")).endswith(".txt"):
            return engine.artifacts.read(file).decode("utf-8", "replace")
    return ""


def _stored(engine: Engine, prefix: str) -> list[StoredFile]:
    try:
        return list(engine.artifacts.stored(prefix))
    except NotImplementedError:
        return []


def _undo(run: CellRun, work: Work, routes: list[str], *, keep_binding: bool = False) -> None:
    """Give a candidate back: the binding first, then its route reservations, each only if still ours.

    A zombie executor (lease expired, another executor took over and may already have delivered
    this work) is refused at both steps: the binding moved on, and the reservation now names the
    executor that holds it."""
    if run.target.single_work and not keep_binding and not run.release(work.work_id):
        return
    for route in routes:
        run.engine.ledger.release_work_reservation(route, work.work_type, work.work_id, run.owner_key, executor=run.owner)


def _enqueue(run: CellRun, work: Work, routes: list[str]) -> None:
    """One intent per route, created insert-if-absent: a re-run finds the same rows."""
    engine, slot = run.engine, run.slot
    now = engine.now()
    for route in routes:
        key = idempotency_key(route, work.work_type, work.work_id, slot.slot_id, run.target.id)
        config = engine.config.route(route)
        payload = delivery_payload(slot, run.target, work, config)
        intent = Intent(
            slot_id=slot.slot_id, target_id=run.target.id, route=route, work_type=work.work_type,
            work_id=work.work_id, idempotency_key=key, max_attempts=config.attempt_budget if config else 12,
            next_attempt_at=now, created_at=now, updated_at=now, payload=payload,
        )
        stored, _ = engine.ledger.put_intent(intent)
        if stored.actionable:
            run.outbox_keys.append(key)


def _continue_locked(run: CellRun, work_id: str) -> TargetOutcome:
    """Recovery (spec §5.6): process only the bound work; never search, never substitute."""
    engine, target = run.engine, run.target
    work_type = run.cell.work_type or target.type
    if not work_id.isdigit():
        kind = "novel" if work_type == "novel" else "illustration"
        return TargetOutcome.failed(f'LOCKED_WORK_UNAVAILABLE: cell work id "{work_id}" is not a valid {kind} id', retryable=False)
    prefix = artifact_prefix(run.slot.slot_id, target.id, work_id)
    stored = _stored(engine, prefix)  # stored before a crash: never downloaded twice
    try:
        work = engine.source.get_work(work_type, work_id)
        files = [] if stored else engine.source.download(work)
    except FatalSourceError:
        raise
    except TransientSourceError as exc:
        return TargetOutcome.failed(f"locked work {work_id} could not be fetched (will retry the SAME work): {exc}", retryable=True)
    except SourceError as exc:
        verdict = classify_candidate_failure(exc, exc.status)
        if verdict.outage or (verdict.retryable and verdict.skip_code == SkipCode.UNAVAILABLE and exc.retryable):
            return TargetOutcome.failed(f"locked work {work_id} could not be fetched (will retry the SAME work): {exc}", retryable=True)
        return TargetOutcome.failed(f"LOCKED_WORK_UNAVAILABLE: locked work {work_id} is no longer fetchable: {exc}", retryable=False)
    if not stored:
        engine.artifacts.put(prefix, files + previews_for(engine, target, work, files))
    routes = target.routes()
    if not routes:
        return TargetOutcome.stored(work.work_id, work.work_type)
    held, taken = [], []
    for route in routes:
        ok, owner = engine.ledger.reserve_work(route, work.work_type, work.work_id, run.owner_key, engine.now(), executor=run.owner)
        (held if ok else taken).append((route, owner))
    if not held:
        # Another slot took this work on every route while we were down (it was bound, never
        # reserved): it is delivered or pending there. Never deliver it twice, never substitute.
        where = ", ".join(f"{r} by {o}" for r, o in taken)
        return TargetOutcome.duplicate(work.work_id, f"locked work {work.work_id} is already delivered or pending on {where}")
    _enqueue(run, work, [r for r, _ in held])
    return TargetOutcome.delivery_pending(work.work_id, work.work_type)
