"""Workflow Protocol v1 jobs: admission, lookup, cancel.

A job IS a manual slot. ``POST /jobs`` and the legacy refetch route share ONE identity space:
the request item ``REQUEST#<key>`` (written first, insert-if-absent) names the
slot ``<plan>@manual-<key lower-cased>`` forever, so the same key through either route, in either
order, across restarts and concurrent calls, names the same slot and the same job. The first
writer of the key also fixes its params and its declared callback.

Refusals are :class:`ProtocolError` raised BEFORE anything is written: validation, account,
target resolution, work types and the callback URL are all checked first. Only the identity
conflict is discovered after the request item is read, and it writes nothing either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..ports import Settings, ScheduleSettings, TargetSettings
from ..domain.callbacks import CallbackRefused, CallbackUnresolvable, vet_callback_url
from ..domain.cells import CellStatus
from ..domain.errors import LedgerUnavailable
from ..domain.model import Cell, Intent, OutboxStatus, SlotState, cell_key
from ..domain.protocol import CANCELLED_REASON, ProtocolError, invalid, project_job, unknown_job
from ..domain.reasons import reason_message
from ..domain.task import Task, canonical_json, parse_task
from ..ports import CellMoves, Clock, Log, Occurrences, RequestKeys, WorkReservations
from .context import Clocked
from .admission import Admissions, admit
from .job_events import JobEvents, load_job, reconcile
from .manual import manual_slot, manual_slot_id
from .rollup import SlotRollup, close

JOB_KIND = "job"
CANCEL_RETRIES = 10
MAX_TRANSACTION_ITEMS = 99  # DynamoDB allows 100 items per transaction


@dataclass(frozen=True)
class JobControl(Clocked):
    """What submitting, reading and cancelling a job take: admission, the request keys that name a
    job's slot forever, the slot and its cells, the work reservations a cancel releases, the
    resolver a callback URL is vetted with, the config, the event stream,
    the rollup that closes a cancelled slot, clock and log."""

    admissions: Admissions
    request_keys: RequestKeys
    occurrences: Occurrences
    cells: CellMoves
    reservations: WorkReservations
    resolver: Callable[[str, int], Sequence[str]]
    config: Settings
    job_events: JobEvents
    rollup: SlotRollup
    clock: Clock
    log: Log


# -- target resolution -------------------------------------------------------------------------


def carries_refetch_correlation(config: Settings, target: TargetSettings) -> bool:
    """Can a manual job's outcome be correlated downstream? The primary route must carry the
    request id: a ``kind: webhook`` route always does (it adds ``refetch_request_id``)."""
    routes = target.routes()
    route = config.route(routes[0]) if routes else None
    overrides = (target.delivery.fields if target.delivery else None) or {}
    return route is not None and route.carries_refetch_id(overrides)


def _plans_selecting(config: Settings, target_id: str) -> list[ScheduleSettings]:
    return [s for s in config.schedules if s.enabled and any(t.id == target_id for t in config.targets_for(s))]


def resolve_target(config: Settings, target_id: str | None) -> tuple[ScheduleSettings, TargetSettings]:
    if target_id is not None:
        target = config.target(target_id)
        plans = _plans_selecting(config, target_id) if target else []
        if not plans:
            raise invalid("unknown target", reason="unknown_target", target_id=target_id, stage="target")
        assert target is not None  # no target selects no plan
        if len(plans) > 1:
            raise invalid("ambiguous target", 409, reason="ambiguous_target", targets=[target_id],
                          schedules=sorted(p.id for p in plans), stage="target")
        return plans[0], target
    pairs = [(plan, target) for plan in config.schedules if plan.enabled for target in config.targets_for(plan)
             if carries_refetch_correlation(config, target)]
    if not pairs:
        raise invalid("no candidate search target is configured", reason="no_eligible_target", stage="target")
    if len(pairs) > 1:
        raise invalid("more than one candidate search target is configured; select one with params.target_id", 409,
                      reason="ambiguous_target", targets=sorted({t.id for _, t in pairs}), stage="target")
    return pairs[0]


def _configured_account(config: Settings) -> str | None:
    value = config.pixiv.accountId.strip() if config.pixiv is not None else ""
    return value or None


def _check_account(config: Settings, account: str | None) -> None:
    if account is None:
        return
    configured = _configured_account(config)
    if account == "default" or (configured is not None and account == configured):
        return
    raise invalid("params.source.account is not available", reason="account_unavailable", requested=account,
                  configured=configured or "default", stage="account")


def _check_callback(ctx: JobControl, url: str | None) -> None:
    if url is None:
        return
    try:
        vet_callback_url(url, ctx.config.jobs.callbackAllowHosts, ctx.resolver)
    except CallbackRefused as exc:
        raise invalid(exc.message, field="callback_url", reason=exc.reason, stage="callback_url") from None
    except CallbackUnresolvable:
        raise invalid("callback_url host does not resolve", field="callback_url", reason="unresolvable_host",
                      stage="callback_url") from None


# -- admission ----------------------------------------------------------------------------------


@dataclass
class Submission:
    job: dict[str, Any]
    created: bool  # this call created the job's slot (202); else a replay (200)
    disposition: str


def _conflict(message: str, slot_id: str | None) -> ProtocolError:
    return ProtocolError("idempotency_conflict", 409, message, {"reason": "idempotency_conflict", "slot_id": slot_id},
                         stage="identity")


def submit(ctx: JobControl, body: Any) -> Submission:
    """``POST /jobs``: admit a Task, or re-answer the job its key already names."""
    task = parse_task(body)
    config = ctx.config
    _check_account(config, task.account)
    plan, target = resolve_target(config, task.target_id)
    if task.work_types and target.type not in task.work_types:
        raise invalid("params.constraints.work_types does not include the target's work type",
                      reason="work_type_not_available", target_type=target.type, stage="work_types")
    _check_callback(ctx, task.callback_url)

    key = task.idempotency_key
    slot_id = manual_slot_id(plan.id, key)
    created_key, record = ctx.request_keys.claim_request_key(key, {
        "kind": JOB_KIND, "requestKey": key, "slotRef": slot_id, "planId": plan.id, "targetId": target.id,
        "paramsJson": task.params_json, "callbackUrl": task.callback_url, "correlationId": task.correlation_id,
        "createdAt": ctx.now(),
    })
    if not created_key:
        _check_identity(record, task, slot_id, target.id)
    admission = admit(ctx.admissions, manual_slot(ctx.admissions, plan, target.id, key, task.correlation_id, params=task.params))
    slot = admission.slot
    if slot.manual_request_id != key or slot.schedule_id != plan.id or list(slot.target_ids) != [target.id]:
        # The derived slot id is owned by another spelling of the key.
        raise _conflict("idempotency key already names another job", slot.slot_id)
    if slot.params is not None and canonical_json(slot.params) != task.params_json:
        raise _conflict("idempotency key was first used with different params", slot.slot_id)
    callback = (record.get("callbackUrl") if not created_key else None) or task.callback_url
    if admission.created:
        cell = admission.cells[0]
        job = project_job(slot, cell, [], ctx.now())
        reconcile(ctx.job_events, job, fresh=True, callback_url=callback)
    else:
        _, job = load_job(ctx.job_events, slot.slot_id)
        reconcile(ctx.job_events, job, callback_url=callback)
    return Submission(job, admission.created, admission.disposition)


def _check_identity(record: dict[str, Any], task: Task, slot_id: str, target_id: str) -> None:
    """The key is already known: it must name this very job, with the same params."""
    if record.get("requestKey") != task.idempotency_key or record.get("slotRef") != slot_id or record.get("targetId") != target_id:
        raise _conflict("idempotency key already names another job", record.get("slotRef"))
    stored = record.get("paramsJson")
    if stored is not None and stored != task.params_json:
        raise _conflict("idempotency key was first used with different params", slot_id)


# -- lookups --------------------------------------------------------------------------------------


def get_job(ctx: JobControl, job_id: str) -> dict[str, Any]:
    return load_job(ctx.job_events, job_id)[1]


def jobs_by_key(ctx: JobControl, key: Any) -> list[dict[str, Any]]:
    """``GET /jobs?idempotency_key=``: 0 or 1 job, for the key trimmed as ``POST /jobs`` trims it."""
    if not isinstance(key, str) or not key.strip():
        raise invalid("idempotency_key is required", field="idempotency_key")
    key = key.strip()
    record = ctx.request_keys.get_request_key(key)
    if record is None or not record.get("slotRef"):
        return []
    state = ctx.occurrences.load(str(record["slotRef"]))
    if state is None or state.slot.manual_request_id != key:
        return []
    return [project_job(state.slot, state.first_cell(), state.intents, ctx.now())]


# -- cancel ------------------------------------------------------------------------------------------


@dataclass
class Cancellation:
    job: dict[str, Any]
    cells_cancelled: int
    rows_cancelled: int


def cancel(ctx: JobControl, job_id: str) -> Cancellation:
    """Fail every open cell with ``cancelled_by_consumer`` and cancel every actionable outbox row
    of theirs, in one atomic commit conditioned on the state read; idempotent; never waits for a
    post in flight.

    A row a worker holds right now (``processing``, lease live) is cancelled like any other; the
    post it may be making settles afterwards by these rules (README "Cancel"):

    * no claim can succeed after the commit (the row is ``cancelled``), and a worker that claimed
      before it re-reads the cell after its claim and posts nothing if it sees the
      cancel;
    * a post already under way may still reach the downstream; its answer is not recorded (the
      lease holder's settle is refused: the row stays ``cancelled``, the cell ``failed``, the job
      ``cancelled``, one outcome record);
    * a Telegram review row that began posting (marked ``sending``, or with posts saved and not yet
      recorded: ``Intent.began_posting``) is not cancelled: the route's uncertain path records the
      review ``uncertain`` and dead-letters the row (part of it may be in the chat);
    * the work of such a row stays reserved (the downstream may hold it), so no other slot sends
      it again; so does the work of a row an earlier attempt posted (its answer was lost or
      failed), and of a row a worker claimed and never settled (it may have died right after its
      post: ``Intent.may_be_downstream``); the works of rows no attempt can have posted are given back.
    """
    message = reason_message(CANCELLED_REASON) or CANCELLED_REASON
    refused = 0
    cells_cancelled = rows_cancelled = 0
    cancelled_rows: list[Intent] = []
    in_flight: list[Intent] = []
    while True:
        state = ctx.occurrences.load(job_id)
        if state is None:
            raise unknown_job(job_id)
        cells = state.snapshot_cells()  # a never-claimed cell is cancelled by writing it failed
        open_cells = [c for c in cells if not c.terminal]
        if not open_cells:
            break
        now = ctx.now()
        # A Telegram review row that began posting is left out: an earlier attempt marked it
        # ``sending`` and saved nothing, or saved its posts and the control plane refused the
        # record, so the review may be in the chat with no record of it; cancelled, no attempt
        # would ever come to record it ``uncertain``. The route's uncertain path settles it
        # (delivery._settle_ended_post).
        rows = [i for c in open_cells for i in state.intents_for(c.target_id) if i.actionable and not i.began_posting]
        submitted = any(c.status == CellStatus.SUBMITTED for c in cells)
        if _cancel_in_chunks(ctx, state, open_cells, rows, "partial" if submitted else "failed", message, now):
            cells_cancelled += len(open_cells)
            rows_cancelled += len(rows)
            cancelled_rows.extend(rows)
            in_flight = [i for i in rows if i.outbox_status == OutboxStatus.PROCESSING and (i.lease_until or 0) > now]
            break
        refused += 1  # something moved between the read and the transaction (a claim, a settle): decide again
        if refused > CANCEL_RETRIES:
            raise LedgerUnavailable(f"cancel of {job_id} kept losing races")
    # The downstream may hold the work of a row in flight now, of a row whose worker died between
    # its post and its settle (still ``processing``, its lease lapsed), and of a row an earlier
    # attempt already posted (its answer was lost, or failed after the downstream took it): they
    # keep their works reserved (one delivery per work and route: freed, another slot could send
    # the same work again). Only the works of rows no attempt can have posted go back to the pool.
    held = {i.idempotency_key for i in cancelled_rows if i.may_be_downstream}
    for intent in cancelled_rows:  # never posted: other slots may pick these works again
        if intent.idempotency_key not in held:
            ctx.reservations.release_work_reservation(intent.route, intent.work_type, intent.work_id,
                                                      cell_key(intent.slot_id, intent.target_id))
    if in_flight:
        ctx.log("warning", "job cancelled while a delivery was being posted; its answer will not be recorded and its "
                   "work stays reserved", event="job.cancelled_during_post", job_id=job_id,
                keys=sorted(i.idempotency_key for i in in_flight))
    state = ctx.occurrences.load(job_id)
    if state is None:
        raise unknown_job(job_id)
    if cells_cancelled and state.slot.open:
        close(ctx.rollup, state)  # its one outcome record, then out of the active index
    _, job = load_job(ctx.job_events, job_id)
    reconcile(ctx.job_events, job)
    return Cancellation(job, cells_cancelled, rows_cancelled)


def _cancel_in_chunks(ctx: JobControl, state: SlotState, open_cells: list[Cell], rows: list[Intent], slot_status: str, message: str,
                      now: int) -> bool:
    """One transaction per job; a slot too large for one transaction is cancelled cell group by
    cell group, the slot last, each group conditioned on what was read (a re-run completes it)."""
    groups: list[tuple[list[str], list[Intent]]] = [([], [])]
    size = 1  # the slot update
    for cell in open_cells:
        mine = [i for i in rows if i.target_id == cell.target_id]
        if size + 1 + len(mine) > MAX_TRANSACTION_ITEMS and groups[-1][0]:
            groups.append(([], []))
            size = 1
        groups[-1][0].append(cell.target_id)
        groups[-1][1].extend(mine)
        size += 1 + len(mine)
    for n, (cell_ids, intents) in enumerate(groups):
        last = n == len(groups) - 1
        ok = ctx.cells.cancel_cells(state, cells=cell_ids, intents=intents, slot_status=slot_status if last else None,
                                    reason_code=CANCELLED_REASON, reason_message=message, now_ms=now)
        if not ok:
            return False
    return True


__all__ = ["Cancellation", "Submission", "cancel", "carries_refetch_correlation", "get_job", "jobs_by_key",
           "resolve_target", "submit"]
