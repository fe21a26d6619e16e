"""What an operator looks at: the read model behind ``pixivflow slots|schedules|outbox|jobs``
and the ``/ui`` page, plus the one write an operator makes on purpose (a dead row's redrive).

Everything here reads through the ports only, so the same views come out of a deployed stack (the
CLI with plain boto3 adapters), the dev server and the embedded runtime. A view is a plain,
JSON-ready dict: the CLI prints it as a table or as ``--json``, the page renders it as HTML, and
both show the same facts. Times are epoch milliseconds in the dicts; renderers format them.

Listing slots and dead rows scans the table (``Ledger.find_slots`` / ``dead_*``): an operator's
read, never a hot path.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping
from zoneinfo import ZoneInfo

from ..domain.ack import parse_idempotency_key
from ..domain.cells import TERMINAL_SLOT_STATES, CellStatus
from ..domain.model import Cell, Intent, OutboxStatus, Slot, SlotState, lease_is_live
from ..domain.occurrence import occurrence_for_fire, previous_fire
from ..domain.protocol import EVENT_TYPE_FOR_KIND, event_id, project_job
from .job_events import callback_key
from .messages import wake_outbox
from .notifications import KIND as NOTIFICATION, refetch_key, summary_key
from ..ports import Log, Settings

DELIVERY = "delivery"
EVENT_CALLBACK = "event_callback"
INTENT_PREFIX = "pixivflow:"
CALLBACK_PREFIX = "job-event:"


class InspectionError(Exception):
    """A request an operator made that cannot be answered: ``code`` is ``not_found`` or ``refused``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Reads:
    """The ports a view needs. ``config`` is optional (schedules, notification keys); ``queues``
    too (a redriven row is then sent at once instead of waiting for the sweep)."""

    ledger: Any
    now_ms: Callable[[], int]
    jobs: Any = None
    outbox_rows: Any = None
    queues: Any = None
    config: Settings | None = None
    log: Log | None = None
    sweep_state: Any = None  # the missed-fire items (``MISSED#``), for the history strip


# -- formatting helpers shared by the renderers ---------------------------------------------------


def iso(ms: int | None) -> str:
    """``2026-11-30T23:00:00.000Z``, or ``-`` for no time."""
    if ms is None:
        return "-"
    dt = datetime.fromtimestamp(int(ms) / 1000, tz=timezone.utc)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{int(ms) % 1000:03d}Z"


def local(ms: int | None, zone: str | None) -> str:
    """``2026-12-01 08:00 JST`` in ``zone`` (UTC when the zone is unknown)."""
    if ms is None:
        return "-"
    try:
        tz = ZoneInfo(zone or "UTC")
    except Exception:
        tz = ZoneInfo("UTC")
    dt = datetime.fromtimestamp(int(ms) / 1000, tz=tz)
    return f"{dt:%Y-%m-%d %H:%M} {dt.tzname()}"


def _lease(owner: str | None, until: int | None, now: int) -> dict[str, Any] | None:
    if not owner and until is None:
        return None
    return {"owner": owner, "until": until, "live": lease_is_live(owner, until, now)}


# -- slots ------------------------------------------------------------------------------------------


def slot_summary(state_or_slot: Any) -> dict[str, Any]:
    slot = state_or_slot.slot if isinstance(state_or_slot, SlotState) else state_or_slot
    return {
        "slotId": slot.slot_id, "scheduleId": slot.schedule_id, "status": slot.status, "triggerSource": slot.trigger_source,
        "name": slot.slot_name, "timezone": slot.timezone, "occurrenceAt": slot.occurrence_at,
        "targetIds": list(slot.target_ids), "createdAt": slot.created_at, "startedAt": slot.started_at,
        "completedAt": slot.completed_at, "lastError": slot.last_error, "manualRequestId": slot.manual_request_id,
        "correlationId": slot.correlation_id, "open": slot.open, "job": slot.is_job, "trigger": trigger_kind(slot),
        "retryMode": slot.retry_mode, "retryOf": slot.retry_of,
    }


def _cell_counts(state: SlotState) -> dict[str, int]:
    counts: dict[str, int] = {}
    for cell in state.snapshot_cells():
        counts[cell.status] = counts.get(cell.status, 0) + 1
    return dict(sorted(counts.items()))


def _reasons(state: SlotState) -> list[str]:
    return sorted({c.terminal_reason_code for c in state.snapshot_cells() if c.terminal_reason_code})


def list_slots(reads: Reads, *, schedule_id: str | None = None, status: str | None = None, since_ms: int | None = None,
               limit: int | None = 50) -> list[dict[str, Any]]:
    """The newest slots matching the filters, each with its cell counts and terminal reasons."""
    found = reads.ledger.find_slots(schedule_id=schedule_id, status=status, since_ms=since_ms)[: limit or None]
    # a slot that expired (TTL) between the scan and the read is left out
    return slot_rows([st for st in (reads.ledger.load(s.slot_id) for s in found) if st is not None])


def recent_states(reads: Reads, *, per_schedule: int = 5, schedule_id: str | None = None) -> list[SlotState]:
    """The latest occurrences WITHOUT a scan (what the deployed page may read: its IAM grants are
    item-level): the slots of each enabled schedule's last ``per_schedule`` fires, plus every slot
    still in the active index (running jobs and refetches included). Newest first."""
    now = reads.now_ms()
    ids: list[str] = []
    config = reads.config
    for schedule in (config.schedules if config is not None else []):
        if not schedule.enabled or not schedule.cron or (schedule_id and schedule.id != schedule_id):
            continue
        before = now + 1
        for _ in range(per_schedule):
            try:
                fire = previous_fire(schedule.cron, schedule.timezone, before)
            except ValueError:
                break
            ids.append(occurrence_for_fire(schedule.id, schedule.cron, schedule.timezone, fire).slot_id)
            before = fire
    for slot_id, _created in reads.ledger.active_slots(limit_per_shard=25):
        if schedule_id is None or slot_id.split("@", 1)[0] == schedule_id:
            ids.append(slot_id)
    states = []
    for slot_id in dict.fromkeys(ids):
        if reads.ledger.get_slot(slot_id) is None:  # one GetItem for a fire that made no slot
            continue
        state = reads.ledger.load(slot_id)
        if state is not None:
            states.append(state)
    states.sort(key=lambda st: (-int(st.slot.created_at or 0), st.slot.slot_id))
    return states


def slot_rows(states: list[SlotState]) -> list[dict[str, Any]]:
    rows = []
    for state in states:
        row = slot_summary(state)
        row["cells"] = _cell_counts(state)
        row["reasons"] = _reasons(state)
        rows.append(row)
    return rows


SCHEDULED, REFETCH, JOB = "scheduled", "refetch", "job"
TRIGGER_KINDS = (SCHEDULED, REFETCH, JOB)


def trigger_kind(slot: Slot) -> str:
    """What opened a slot, as an operator names it: ``job`` (a protocol job's slot), ``refetch`` (any
    other manual slot: an operator's refetch, or a Failure Center retry) or ``scheduled`` (a cron
    fire or a run of the schedule)."""
    return JOB if slot.is_job else REFETCH if slot.manual_request_id else SCHEDULED


def occurrence_page(reads: Reads, *, schedule_id: str | None = None, status: str | None = None, trigger: str | None = None,
                    before: str | None = None, limit: int = 50) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the ledger's slots, newest first, and the next page's cursor (None: the last): one
    Query of the SlotsByCreated index, then batched reads of that page's slots and cells, whatever
    the ledger holds. The status and trigger filters apply to the page read (a filtered page may
    show fewer rows and still have older ones)."""
    ids, cursor = reads.ledger.slot_page(limit, before, schedule_id=schedule_id)
    rows = []
    for row in slot_rows(reads.ledger.slot_heads(ids)):
        if (status is None or row["status"] == status) and (trigger is None or row["trigger"] == trigger):
            rows.append(row)
    return rows, cursor


JOBS_PAGE = 50


def list_jobs(reads: Reads, before: str | None = None, limit: int = JOBS_PAGE) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the protocol jobs, newest first, older than the cursor ``before``, and the next
    page's cursor (None: the last page). Its reads are bounded by the page, never by how many jobs
    the ledger holds: one Query of the JobsByCreated index, then one batched read of the page's
    slots and one of their cells. Each row is the job's projection (what ``GET /jobs/{jobId}``
    answers); its events and callbacks are on the job's own page."""
    ids, cursor = reads.ledger.job_page(limit, before)
    now = reads.now_ms()
    rows = []
    for state in reads.ledger.slot_heads(ids):
        # The one first-cell rule (SlotState.first_cell): an unwritten cell is the pending one it stands for.
        job = project_job(state.slot, state.first_cell(), [], now)
        error = job.get("error") or {}
        rows.append({"jobId": job["job_id"], "status": job["status"], "key": job.get("idempotency_key"),
                     "createdAt": job["created_at"], "updatedAt": job["updated_at"], "attempt": job["attempt"],
                     "cancelled": job["status"] == "cancelled", "error": error.get("message") or error.get("code")})
    return rows, cursor


def job_row(view: Mapping[str, Any]) -> dict[str, Any]:
    job = view["job"]
    callbacks: dict[str, int] = {}
    for event in view["events"]:
        if event.get("callback"):
            status = event["callback"]["status"]
            callbacks[status] = callbacks.get(status, 0) + 1
    error = job.get("error") or {}
    return {"jobId": job["job_id"], "status": job["status"], "key": job.get("idempotency_key"),
            "createdAt": job["created_at"], "updatedAt": job["updated_at"], "events": len(view["events"]),
            "callbacks": dict(sorted(callbacks.items())), "cancelled": job["status"] == "cancelled",
            "error": error.get("message") or error.get("code")}


def dead_among(reads: Reads, states: list[SlotState]) -> list[dict[str, Any]]:
    """The dead outbox rows of these occurrences: their intents, notifications and job callbacks
    (item reads only; ``dead_letters`` is the whole-table list the CLI prints)."""
    rows: list[dict[str, Any]] = []
    for state in states:
        for i in state.intents:
            if i.outbox_status == "dead":
                view = _row_view(DELIVERY, i.idempotency_key, i.route, i.outbox_status, i.attempts, i.max_attempts,
                                 i.last_error, i.created_at, i.updated_at, None, None)
                view["slotId"], view["targetId"] = i.slot_id, i.target_id
                rows.append(view)
        rows += [dict(n, slotId=state.slot.slot_id) for n in _notifications(reads, state) if n["status"] == "dead"]
        for event in _events(reads, state):
            callback = event.get("callback")
            if callback and callback["status"] == "dead":
                rows.append(dict(callback, slotId=state.slot.slot_id))
    rows.sort(key=lambda r: (-int(r["updatedAt"] or 0), r["kind"], r["key"]))
    return rows


def _cell_view(cell: Cell, now: int) -> dict[str, Any]:
    return {
        "targetId": cell.target_id, "status": cell.status, "workType": cell.work_type, "workId": cell.work_id,
        "attempts": cell.attempt_count, "lease": _lease(cell.lease_owner, cell.lease_until, now),
        "heartbeatAt": cell.heartbeat_at, "createdAt": cell.created_at, "dispatchedAt": cell.dispatched_at,
        "startedAt": cell.started_at, "updatedAt": cell.updated_at, "completedAt": cell.completed_at,
        "lastError": cell.last_error, "terminalReasonCode": cell.terminal_reason_code,
        "terminalReasonMessage": cell.terminal_reason_message, "candidateReport": cell.candidate_report,
    }


def _delivery_view(intent: Intent, now: int) -> dict[str, Any]:
    return {
        "targetId": intent.target_id, "route": intent.route, "workType": intent.work_type, "workId": intent.work_id,
        "key": intent.idempotency_key, "ledgerStatus": intent.status, "outboxStatus": intent.outbox_status,
        "attempts": intent.attempts, "maxAttempts": intent.max_attempts,
        "nextAttemptAt": intent.next_attempt_at if intent.actionable else None,
        "lease": _lease(intent.lease_owner, intent.lease_until, now), "ack": intent.ack_kind,
        "remoteId": intent.remote_id, "remoteStatus": intent.remote_status, "reuseReason": intent.reuse_reason,
        "lastError": intent.last_error, "createdAt": intent.created_at, "updatedAt": intent.updated_at,
        "deliveredAt": intent.delivered_at,
    }


def _row_view(kind: str, key: str, target: str, status: str, attempts: int, max_attempts: int, last_error: str | None,
              created_at: int, updated_at: int, completed_at: int | None, next_attempt_at: int | None) -> dict[str, Any]:
    return {"kind": kind, "key": key, "target": target, "status": status, "attempts": attempts, "maxAttempts": max_attempts,
            "lastError": last_error, "createdAt": created_at, "updatedAt": updated_at, "completedAt": completed_at,
            "nextAttemptAt": next_attempt_at if status in ("pending", "processing", "retry_wait") else None}


def _outbox_view(row: Any) -> dict[str, Any]:
    """The view of one generic outbox row (``domain.outbox.OutboxRow``, any kind): a callback's target is
    the consumer's URL, shown without its query or fragment."""
    target = safe_url(row.target) if row.kind == EVENT_CALLBACK else row.target
    view = _row_view(row.kind, row.key, target, row.status, row.attempts, row.max_attempts, row.last_error,
                     row.created_at, row.updated_at, row.completed_at, row.next_attempt_at)
    if row.slot_id:
        view["slotId"] = row.slot_id
    return view


def safe_url(url: str) -> str:
    """A consumer URL without its query or fragment: those may carry the consumer's own secrets."""
    return url.split("?", 1)[0].split("#", 1)[0]


def _events(reads: Reads, state: SlotState) -> list[dict[str, Any]]:
    slot_id = state.slot.slot_id
    stream = reads.jobs.stream(slot_id) if reads.jobs is not None and state.slot.manual_request_id else None
    stored = {e.kind: e for e in (stream.events if stream else ())}
    out: list[dict[str, Any]] = []
    kinds = set(state.events) | set(stored)
    for kind in kinds:
        event = stored.get(kind)
        ts = event.ts if event is not None else state.events.get(kind, {}).get("ts")
        entry: dict[str, Any] = {"kind": kind, "at": ts, "type": EVENT_TYPE_FOR_KIND.get(kind.split("#", 1)[0])}
        if event is not None:
            entry["seq"] = event.seq
            if entry["type"]:
                entry["eventId"] = event_id(event.ts, event.seq)
                row = (reads.outbox_rows.get(EVENT_CALLBACK, callback_key(slot_id, entry["eventId"]))
                       if reads.outbox_rows is not None else None)
                if row is not None:
                    entry["callback"] = _outbox_view(row)
        out.append(entry)
    out.sort(key=lambda e: (e["at"] if e["at"] is not None else 0, e.get("seq", 0), e["kind"]))
    return out


def _notification_keys(reads: Reads, state: SlotState) -> list[str]:
    slot = state.slot
    keys = [summary_key(slot.slot_id)] + [refetch_key(slot.slot_id, t) for t in slot.target_ids]
    config = reads.config
    if config is not None:  # the keys the config implies (second routes, plain-text notices)
        for target_id in slot.target_ids:
            target = config.target(target_id)
            for route in (target.routes() if target else [])[1:]:
                keys.append(summary_key(slot.slot_id, route))
    return list(dict.fromkeys(keys))


def _notifications(reads: Reads, state: SlotState) -> list[dict[str, Any]]:
    if reads.outbox_rows is None:
        return []
    out = []
    for key in _notification_keys(reads, state):
        row = reads.outbox_rows.get(NOTIFICATION, key)
        if row is not None:
            out.append(_outbox_view(row))
    return out


def show_slot(reads: Reads, slot_id: str) -> dict[str, Any]:
    """One occurrence: the slot, each cell, each delivery intent with its outbox row and ACK, the
    notifications, the job events (with their callbacks), the outcome record, and all of it as
    one timeline. Raises ``InspectionError("not_found")`` for an unknown id."""
    state = reads.ledger.load(slot_id)
    if state is None:
        raise InspectionError("not_found", f"no slot {slot_id!r} in the ledger")
    now = reads.now_ms()
    outcome = reads.ledger.get_event(slot_id, "execution.summary")
    view: dict[str, Any] = {
        "slot": slot_summary(state),
        "cells": [_cell_view(c, now) for c in state.snapshot_cells()],
        "deliveries": [_delivery_view(i, now) for i in sorted(state.intents, key=lambda i: (
            state.slot.target_ids.index(i.target_id) if i.target_id in state.slot.target_ids else 999, i.route, i.work_id))],
        "notifications": _notifications(reads, state),
        "events": _events(reads, state),
        # the persisted outcome record (``schedule.outcome``) and execution summary
        "outcome": ((outcome or {}).get("detail") or {}).get("outcome"),
        "summary": ((outcome or {}).get("detail") or {}).get("summary"),
    }
    view["timeline"] = timeline(view)
    return view


def timeline(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every dated fact of a slot view, oldest first (ties keep the order the pipeline wrote them)."""
    entries: list[tuple[int, int, int, str, str]] = []  # (at, phase, n, subject, what)

    def add(at: Any, phase: int, subject: str, what: str) -> None:
        if isinstance(at, int):
            entries.append((at, phase, len(entries), subject, what))

    slot = view["slot"]
    add(slot["createdAt"], 0, "slot", f"admitted ({slot['triggerSource']})")
    add(slot["startedAt"], 2, "slot", "running")
    for cell in view["cells"]:
        subject = f"cell {cell['targetId']}"
        add(cell["createdAt"], 1, subject, "pending")
        if cell["dispatchedAt"] != cell["createdAt"]:
            add(cell["dispatchedAt"], 1, subject, "dispatched")
        add(cell["startedAt"], 3, subject, f"claimed (attempt {cell['attempts']})" if cell["attempts"] else "claimed")
        if cell["heartbeatAt"] not in (None, cell["startedAt"]):
            add(cell["heartbeatAt"], 3, subject, "last heartbeat")
        lease = cell["lease"]
        if lease and not lease["live"]:
            add(lease["until"], 3, subject, f"lease of {lease['owner']} expired (no executor holds the cell)")
        if cell["completedAt"] is not None:
            reason = f" [{cell['terminalReasonCode']}] {cell['terminalReasonMessage'] or ''}".rstrip() \
                if cell["terminalReasonCode"] else ""
            add(cell["completedAt"], 6, subject, f"{cell['status']}{reason}")
    for dlv in view["deliveries"]:
        subject = f"delivery {dlv['targetId']} -> {dlv['route']}"
        add(dlv["createdAt"], 4, subject, f"intent recorded ({dlv['workType']} {dlv['workId']})")
        if dlv["deliveredAt"] is not None:
            remote = " ".join(x for x in (dlv["remoteId"], dlv["remoteStatus"]) if x)
            add(dlv["deliveredAt"], 5, subject, f"ACK {dlv['ack'] or dlv['ledgerStatus']}" + (f" ({remote})" if remote else ""))
        elif dlv["outboxStatus"] in ("dead", "cancelled", "done"):
            add(dlv["updatedAt"], 5, subject, f"{dlv['outboxStatus']} after {dlv['attempts']} attempt(s)"
                + (f": {dlv['lastError']}" if dlv["lastError"] else ""))
        elif dlv["nextAttemptAt"] is not None and dlv["attempts"]:
            add(dlv["updatedAt"], 5, subject, f"{dlv['outboxStatus']} after {dlv['attempts']} attempt(s)"
                + (f": {dlv['lastError']}" if dlv["lastError"] else ""))
    for row in view["notifications"]:
        subject = f"notification {row['key']}"
        add(row["createdAt"], 7, subject, f"queued for {row['target']}")
        if row["status"] not in ("pending",):
            add(row["updatedAt"], 8, subject, row["status"] + (f": {row['lastError']}" if row["lastError"] else ""))
    for event in view["events"]:
        label = event["kind"] + (f" ({event['type']}, {event['eventId']})" if event.get("eventId") else "")
        add(event["at"], 7, "event", label)
        callback = event.get("callback")
        if callback and callback["status"] not in ("pending",):
            add(callback["updatedAt"], 8, f"callback {event['eventId']}",
                f"{callback['status']} after {callback['attempts']} attempt(s)"
                + (f": {callback['lastError']}" if callback["lastError"] else ""))
    if slot["completedAt"] is not None and slot["status"] in TERMINAL_SLOT_STATES:
        add(slot["completedAt"], 9, "slot", slot["status"] + (f": {slot['lastError']}" if slot["lastError"] else ""))
    entries.sort()
    return [{"at": at, "subject": subject, "what": what} for at, _, _, subject, what in entries]


# -- jobs -------------------------------------------------------------------------------------------


def show_job(reads: Reads, job_id: str) -> dict[str, Any]:
    """The Job projection (the body ``GET /jobs/{jobId}`` answers) and its stored events, read-only
    (no event is materialised here: the API and the sweep do that)."""
    state = reads.ledger.load(job_id)
    if state is None or not state.slot.manual_request_id:
        raise InspectionError("not_found", f"no job {job_id!r} in the ledger")
    # The one first-cell rule (SlotState.first_cell): a queued job's cell is not written until its
    # first claim, and the pending cell it stands for is what GET /jobs/{jobId} projects too.
    job = project_job(state.slot, state.first_cell(), state.intents, reads.now_ms())
    view = show_slot(reads, job_id)
    return {"job": job, "events": view["events"], "timeline": view["timeline"]}


# -- dead letters and the redrive ------------------------------------------------------------------------


DEAD_PAGE = 50


def dead_page(reads: Reads, before: tuple[str, str, str] | None = None,
              limit: int = DEAD_PAGE) -> tuple[list[dict[str, Any]], tuple[str, str, str] | None]:
    """One page of dead outbox rows (deliveries, notifications, job callbacks), newest death first,
    and the next page's cursor: one Query of the DeadRows index and one batched read of those rows,
    whatever the ledger holds (``dead_letters`` is the whole-table list the CLI prints)."""
    keys, cursor = reads.ledger.dead_page(limit, before)
    rows: list[dict[str, Any]] = []
    for row in reads.ledger.dead_heads(keys):
        if isinstance(row, Intent):
            view = _row_view(DELIVERY, row.idempotency_key, row.route, row.outbox_status, row.attempts, row.max_attempts,
                             row.last_error, row.created_at, row.updated_at, row.delivered_at, row.next_attempt_at)
            view["slotId"], view["targetId"] = row.slot_id, row.target_id
            rows.append(view)
        else:
            rows.append(_outbox_view(row))
    return rows, cursor


def dead_letters(reads: Reads) -> list[dict[str, Any]]:
    """Every dead outbox row: delivery intents, notifications and job event callbacks, newest first."""
    return outbox_list(reads, "dead")


OUTBOX_STATUSES = tuple(str(s) for s in OutboxStatus)


def outbox_list(reads: Reads, status: str | None = None) -> list[dict[str, Any]]:
    """Every outbox row (``pixivflow outbox list``), or those in ``status``: delivery intents,
    notifications and job event callbacks, newest first, each with its attempts and last error.
    Two scans of the table: an operator's read."""
    rows: list[dict[str, Any]] = []
    for i in reads.ledger.find_intents(status):
        view = _row_view(DELIVERY, i.idempotency_key, i.route, i.outbox_status, i.attempts, i.max_attempts, i.last_error,
                         i.created_at, i.updated_at, i.delivered_at, i.next_attempt_at)
        view["slotId"], view["targetId"] = i.slot_id, i.target_id
        rows.append(view)
    if reads.outbox_rows is not None:
        rows += [_outbox_view(r) for r in reads.outbox_rows.find_rows(status)]
    rows.sort(key=lambda r: (-int(r["updatedAt"] or 0), r["kind"], r["key"]))
    return rows


def kind_of(key: str) -> str:
    """The outbox family a key belongs to, by its shape."""
    if key.startswith(INTENT_PREFIX):
        return DELIVERY
    if key.startswith(CALLBACK_PREFIX):
        return EVENT_CALLBACK
    return NOTIFICATION


def redrive(reads: Reads, key: str, kind: str | None = None) -> dict[str, Any]:
    """Re-arm one ``dead`` outbox row on purpose, conditionally.

    Refused (``InspectionError("refused")``) when the row is not dead, or when it is a delivery
    whose cell already ended without a submission: that cell's outcome is final (its record was
    written, maybe notified), so delivering now would leave a downstream record for an
    occurrence that says it failed. A refetch is the way to deliver a new work then.
    When the queues are known the row is sent at once; otherwise the sweep re-drives it (at its
    first tick past the 120 s re-drive grace: about three minutes with a minute sweep)."""
    kind = kind or kind_of(key)
    now = reads.now_ms()
    if kind == DELIVERY:
        try:
            route, work_type, work_id, slot_id, target_id = parse_idempotency_key(key)
        except ValueError as exc:
            raise InspectionError("not_found", str(exc)) from None
        intent = reads.ledger.get_intent(slot_id, target_id, route, work_type, work_id) if slot_id and target_id else None
        if intent is None:
            raise InspectionError("not_found", f"no outbox row {key!r}")
        if intent.outbox_status != "dead":
            raise InspectionError("refused", f"outbox row {key} is {intent.outbox_status}, not dead: nothing to redrive")
        cell = reads.ledger.get_cell(slot_id, target_id)
        # A Telegram review recorded uncertain is the exception: its dead-letter hint
        # says a redrive re-sends it on purpose; the cell's outcome stays as it ended.
        if cell is not None and cell.terminal and cell.status != CellStatus.SUBMITTED and intent.remote_status != "uncertain":
            reason = f" ({cell.terminal_reason_code})" if cell.terminal_reason_code else ""
            raise InspectionError("refused", f"cell {target_id} of {slot_id} ended {cell.status}{reason}: its outcome is final, "
                                             "so this delivery is not re-armed; request a refetch to deliver a new work")
        done = reads.ledger.redrive_intent(intent, now)
        before, where = (intent.attempts, intent.last_error), slot_id
        after = None if done is None else _delivery_view(done, now)
    else:
        row = reads.outbox_rows.get(kind, key) if reads.outbox_rows is not None else None
        if row is None:
            raise InspectionError("not_found", f"no outbox row {key!r} of kind {kind}")
        if row.status != "dead":
            raise InspectionError("refused", f"outbox row {key} is {row.status}, not dead: nothing to redrive")
        before, where = (row.attempts, row.last_error), row.slot_id
        done = reads.outbox_rows.redrive(row, now)
        after = None if done is None else _outbox_view(done)
    if after is None:  # another operator (or a worker) changed it between our read and our write
        raise InspectionError("refused", f"outbox row {key} changed while it was being re-armed: not dead any more")
    sent = False
    if reads.queues is not None:
        log = reads.log or (lambda *args, **fields: None)
        sent = not wake_outbox(reads.queues, log, [(kind, key)], event="outbox.send_failed", kind=kind, key=key)
    return {"kind": kind, "key": key, "slotId": where, "previousAttempts": before[0], "previousError": before[1],
            "row": after, "sent": sent, "redrivenAt": now}


__all__ = ["InspectionError", "Reads", "TRIGGER_KINDS", "dead_among", "dead_letters", "iso", "job_row", "kind_of", "list_jobs",
           "dead_page", "list_slots", "local", "OUTBOX_STATUSES", "outbox_list", "occurrence_page", "redrive", "recent_states", "safe_url", "show_job", "show_slot", "slot_rows", "slot_summary",
           "timeline"]
