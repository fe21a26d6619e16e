"""Select and bind a cell's work: search (or walk the topic, or fetch the pinned work), pick the
first acceptable candidate no route already holds, bind it to the cell and reserve it on its
routes BEFORE any side effect, store it, and record one delivery intent per route. A cell with a
bound work (a re-run) continues that work and never another."""

from __future__ import annotations

from ..domain.text import ascii_digits
from dataclasses import replace
from typing import Any

from ..domain.ack import idempotency_key
from ..domain.assets import artifact_prefix
from ..domain.errors import FatalSourceError, PaginationError, SourceError, SourceOutage, TransientSourceError
from ..domain.model import Intent, LedgerStatus, OutboxStatus
from ..domain.outcomes import CandidateScan, CandidateSkip, JobLevelOutage, SkipCode, TargetOutcome
from ..domain.reasons import reason_of
from ..domain.templates import canonical_refetch_request_id
from ..domain.reservation import HOLDS, ORPHANED, PENDING, UNCERTAIN, holder_of, holder_verdict
from ..domain.scan import classify_candidate_failure, effective_scan_bound, no_candidate_reason
from ..domain.selection import (
    RESTRICTED,
    Plan,
    Selection,
    page_cap_decline,
    plan_selection,
    select,
    select_pinned,
)
from ..domain.work import Page, SearchRequest, StoredFile, Work
from .assets import file_records
from .cell_run import CellRun
from .payload import delivery_payload
from .storing import AI_MARKED, WorkFiltered, store_work
from .topic import LIGHT, run_topic

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
        return TargetOutcome.failed(f"search failed: {exc}", retryable=True, reason_code=reason_of(exc.reason, str(exc)))
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
        work, files = store_work(run, work, prefix, resumed=False, filters=True)
    except FatalSourceError:
        _undo(run, work, reserved)
        raise
    except WorkFiltered as exc:
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
    renders = any((c := ctx.config.route(r)) is not None and c.renders_templates for r in routes)
    if renders and slot.manual_request_id and not canonical_refetch_request_id(slot.manual_request_id):
        # A protocol job's key that is not a UUID: a route rendering {{refetchRequestId}} gets it empty.
        ctx.log("warning", "the request id is not a UUID: {{refetchRequestId}} is delivered empty",
                event="delivery.provenance_dropped", slot_id=slot.slot_id, target_id=run.target.id)
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
                                    retryable=True, reason_code=reason_of(exc.reason, str(exc)))
    return TargetOutcome.failed(f"LOCKED_WORK_UNAVAILABLE: {which} work {work_id} is no longer fetchable: {exc}",
                                retryable=False, reason_code=reason_of(exc.reason, str(exc)))


def _continue_locked(run: CellRun, work_id: str) -> TargetOutcome:
    """Recovery: process only the bound work; never search, never substitute."""
    ctx, target = run.ctx, run.target
    work_type = run.cell.work_type or target.type
    if not ascii_digits(work_id):
        kind = "novel" if work_type == "novel" else "illustration"
        return TargetOutcome.failed(f'LOCKED_WORK_UNAVAILABLE: cell work id "{work_id}" is not a valid {kind} id', retryable=False,
                                    reason_code="internal_error")
    prefix = artifact_prefix(run.slot.slot_id, target.id, work_id)
    try:
        work = ctx.source.get_work(work_type, work_id)
        work, files = store_work(run, work, prefix, resumed=True)
    except FatalSourceError:
        raise
    except SourceError as exc:
        return _fetch_failed("locked", work_id, exc)
    routes = target.routes()
    if not routes:
        return TargetOutcome.stored(work.work_id, work.work_type)
    held: list[str] = []
    trusted: list[tuple[str, str | None]] = []  # held by a cell that has, or will have, delivered it
    unknown: list[tuple[str, str | None]] = []  # held by a cell whose row ended after a post that may have reached it
    waiting: list[tuple[str, str | None]] = []  # held by a running cell that has not recorded its row yet
    for route in routes:
        ok, owner = ctx.reservations.reserve_work(route, work.work_type, work.work_id, run.owner_key, ctx.now(), executor=run.owner)
        if ok:
            held.append(route)
            continue
        # Refused: another cell holds it (or a refusal that did not say who: decide again later).
        verdict = PENDING if owner is None else _holder(run, work, route, owner)
        if verdict == HOLDS:
            trusted.append((route, owner))
        elif verdict == UNCERTAIN:
            unknown.append((route, owner))
        elif verdict == ORPHANED and owner is not None and _take_over(run, work, route, owner):
            held.append(route)
        else:  # a holder still running, or one that moved while we judged it
            waiting.append((route, owner))
    if unknown:
        _record_uncertain(run, work, unknown)
    if not held and not waiting:
        if unknown:
            where = ", ".join(f"{r} by {o}" for r, o in unknown)
            return TargetOutcome.failed(f"locked work {work.work_id} may already be on {where}: that cell's delivery ended "
                                        "unconfirmed after a post that may have reached the route; not sent again",
                                        retryable=False, reason_code="delivery_failed")
        # Other cells hold this work on every route, each with a row that delivers it (or did).
        # Never deliver it twice, never substitute.
        where = ", ".join(f"{r} by {o}" for r, o in trusted)
        return TargetOutcome.duplicate(work.work_id, f"locked work {work.work_id} is already delivered or pending on {where}")
    # A route another cell holds and delivers is recorded on this cell as a duplicate BEFORE the
    # held routes are queued, so that the cell's delivery verdict (every configured route
    # confirmed) can complete when their ACKs come. The held routes are queued before this cell
    # waits for any holder: two recovering cells that split a work's routes each queue theirs
    # first, so each finds the other's row on its next run and neither waits on the other forever.
    _record_taken(run, work, trusted)
    _enqueue(run, work, held, files)
    if waiting:
        where = ", ".join(f"{r} by {o}" for r, o in waiting)
        return TargetOutcome.failed(f"locked work {work.work_id}: waiting for the cell holding it on {where} to record "
                                    "its delivery", retryable=True)
    return TargetOutcome.delivery_pending(work.work_id, work.work_type)


def _holder(run: CellRun, work: Work, route: str, owner: str) -> str:
    """What the cell holding ``work`` on ``route`` will do with it (``domain.reservation``)."""
    slot_id, target_id = holder_of(owner)
    row = run.ctx.rows.get_intent(slot_id, target_id, route, work.work_type, work.work_id)
    cell = run.ctx.occurrences.get_cell(slot_id, target_id) if row is None else None
    return holder_verdict(cell, row)


def _take_over(run: CellRun, work: Work, route: str, holder: str) -> bool:
    """Take the route over from a holder that can never deliver it; refused if the holder moved."""
    taken = run.ctx.reservations.take_over_work(route, work.work_type, work.work_id, holder, run.owner_key, run.ctx.now(),
                                                executor=run.owner)
    if taken:
        run.ctx.log("warning", "a work reserved by a cell that can never deliver it was taken over",
                    event="reservation.taken_over", slot_id=run.slot.slot_id, target_id=run.target.id, route=route,
                    work_id=work.work_id, holder=holder)
    return taken


def _record_uncertain(run: CellRun, work: Work, routes: list[tuple[str, str | None]]) -> None:
    """One settled row per route whose holder's delivery ended unconfirmed after a post that may have
    reached it: ledger ``failed``, outbox ``dead``, never sent, the holder named; insert-if-absent.
    The cell says plainly why the route did not get the work from it."""
    now = run.ctx.now()
    for route, owner in routes:
        run.ctx.rows.put_intent(_row(run, work, route, now, status=LedgerStatus.FAILED, outbox_status=OutboxStatus.DEAD,
                                     attempts=0, last_error=f"may already be on route {route} from {owner}, whose delivery "
                                     "ended unconfirmed after a post that may have reached it; not sent again"))


def _record_taken(run: CellRun, work: Work, taken: list[tuple[str, str | None]]) -> None:
    """One settled row per route another cell holds this work on: ledger ``duplicate``, outbox
    ``done`` (never queued, never sent), the holder named; insert-if-absent, so a re-run finds it."""
    now = run.ctx.now()
    for route, owner in taken:
        run.ctx.rows.put_intent(_row(run, work, route, now, status=LedgerStatus.DUPLICATE, outbox_status=OutboxStatus.DONE,
                                     attempts=0, reuse_reason=f"held on route {route} by {owner}"))
