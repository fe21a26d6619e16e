"""The job event stream: reconcile, page, ack, repair.

The stream is a projection of the ledger: whatever the job's durable state implies
(``job.requested``; ``job.execution_started`` once it started; the terminal kind once it ended)
is materialised at most once, by whoever looks first: admission, a page read, an ack, a cancel,
the rollup that made the slot terminal, or the sweep's repair pass. So a terminal job always has
its terminal event, whichever path ended it, and nothing depends on a timer.

A job that declared a ``callback_url`` gets one ``event_callback`` outbox row per event, written
in the same atomic step as the event (``JobStore.append``); its message is then sent, and a lost
message is re-driven by the sweep like any due outbox row. The declared URL is read back from the
durable ``job.requested`` event, so every event of a job goes to the same endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..domain.errors import LedgerUnavailable
from ..domain.model import SlotState
from ..domain.protocol import (
    EVENTS_PAGE_LIMIT, REQUESTED, TERMINAL_EVENT_KINDS, ImpliedEvent, after_position, build_event, count_after,
    event_id, implied_events, is_projected, parse_ack_body, parse_event_id, parse_event_query,
    project_job, unknown_job,
)
from ..domain.event_stream import AppendResult, EventStream, StoredEvent
from ..domain.outbox import OutboxRow
from ..ports import Clock, JobStore, Log, Occurrences, Queues, RequestKeys
from .context import Clocked
from .messages import wake_outbox

CALLBACK_KIND = "event_callback"
CALLBACK_MAX_ATTEMPTS = 8  # a flaky consumer URL must converge, not retry forever
REPAIR_LIMIT = 50  # jobs one repair pass looks at
APPEND_RETRIES = 25


@dataclass(frozen=True)
class JobEvents(Clocked):
    """What the event stream's use cases take: the job store, the slot a job is, the request key that declared its callback,
    the outbox queue a callback's message goes to, the clock and the log."""

    jobs: JobStore
    occurrences: Occurrences
    request_keys: RequestKeys
    queues: Queues
    clock: Clock
    log: Log


def callback_key(job_id: str, evt_id: str) -> str:
    return f"job-event:{job_id}:{evt_id}"


def load_job(ctx: JobEvents, job_id: str) -> tuple[SlotState, dict[str, Any]]:
    """The slot and its Job projection; 404 for an unknown job, 500 job_cell_missing."""
    state = ctx.occurrences.load(job_id)
    if state is None:
        raise unknown_job(job_id)
    return state, project_job(state.slot, state.first_cell(), state.intents, ctx.now())


UNKNOWN: Any = object()  # the caller does not know the declared callback: read it from the request item


def reconcile(ctx: JobEvents, job: Mapping[str, Any], *, stream: EventStream | None = None, fresh: bool = False,
              callback_url: Any = UNKNOWN) -> EventStream:
    """Materialise every event ``job`` implies. ``fresh`` means the caller just created the job (no
    read needed: the head condition catches a concurrent writer). ``callback_url`` (None: none was
    declared) is recorded on ``job.requested`` only if this call creates that event."""
    job_id = job["job_id"]
    if stream is None:
        stream = EventStream(job_id) if fresh else ctx.jobs.stream(job_id)
    for implied in implied_events(job):
        stream = _ensure(ctx, job, stream, implied, callback_url)
    return stream


def _declared_callback(ctx: JobEvents, job: Mapping[str, Any]) -> str | None:
    """The callback the first Task for this key declared (kept on its request item), so an
    admission that died before writing ``job.requested`` still never loses it."""
    key = job.get("idempotency_key")
    if not key:
        return None
    record = ctx.request_keys.get_request_key(key)
    if record and record.get("slotRef") == job["job_id"] and record.get("requestKey") == key:
        return record.get("callbackUrl") or None
    return None


def _ensure(ctx: JobEvents, job: Mapping[str, Any], stream: EventStream, implied: ImpliedEvent,
            callback_url: Any) -> EventStream:
    store = ctx.jobs
    assert store is not None
    job_id = job["job_id"]
    for _ in range(APPEND_RETRIES):
        if implied.kind in stream.kinds():
            return stream
        requested = stream.find(REQUESTED)
        if implied.kind == REQUESTED:
            if callback_url is UNKNOWN:
                callback_url = _declared_callback(ctx, job)
            url = callback_url or None
        else:
            url = requested.callback_url if requested else None
        seq = stream.head_seq + 1
        ts = max(int(implied.at), stream.head_ts)  # time never moves backwards along the stream
        event = StoredEvent(job_id, implied.kind, seq, ts, url if implied.kind == REQUESTED else None)
        now = ctx.now()
        row = None
        if url:
            body = build_event(job, implied.kind, ts, seq)
            assert body is not None
            row = OutboxRow(kind=CALLBACK_KIND, key=callback_key(job_id, body["event_id"]), target=url, slot_id=job_id,
                            payload={"event": body, "job_id": job_id, "context": {"slotId": job_id}},
                            max_attempts=CALLBACK_MAX_ATTEMPTS, next_attempt_at=now, created_at=now, updated_at=now)
        closes = implied.kind in TERMINAL_EVENT_KINDS and bool(requested and requested.callback_url)
        result = store.append(event, expected_head=stream.head_seq, callback=row,
                              open_callback_since=int(job["created_at"]) if implied.kind == REQUESTED and url else None,
                              close_callback_index=closes, now_ms=now)
        if result == AppendResult.APPENDED:
            ctx.log("info", "job event recorded", event="job.event_recorded", job_id=job_id, kind=implied.kind,
                    event_id=event_id(ts, seq), callback=bool(row))
            if row is not None:
                _send(ctx, row.key)
            return EventStream(job_id, stream.events + (event,), seq, ts, stream.cursor)
        stream = store.stream(job_id)  # another writer got there first: read what it wrote
    raise LedgerUnavailable(f"could not append {implied.kind} to the event stream of {job_id}")


def _send(ctx: JobEvents, key: str) -> None:
    wake_outbox(ctx.queues, ctx.log, [(CALLBACK_KIND, key)], event="callback.send_failed", key=key)


def on_slot_terminal(ctx: JobEvents, state: SlotState) -> None:
    """The rollup or the sweep just made a job's slot terminal: write its terminal event (and owe
    its callback) now instead of at the next read. Never raises: the next read, or the repair
    pass for a job with a callback, completes what this could not."""
    if not state.slot.manual_request_id:
        return
    try:
        job = project_job(state.slot, state.first_cell(), state.intents, ctx.now())
        reconcile(ctx, job)
    except Exception as exc:
        ctx.log("warning", "job event reconcile failed; the next read or the sweep completes it",
                event="job.reconcile_failed", job_id=state.slot.slot_id, error=repr(exc)[:300])


def _projected(stream: EventStream) -> list[StoredEvent]:
    return [e for e in stream.events if is_projected(e.kind.split("#", 1)[0])]


def _resolve(events: list[StoredEvent], value: str | None) -> tuple[int, int] | None:
    """An event id of THIS job's projected stream, or None (unknown, foreign, internal)."""
    position = parse_event_id(value) if value else None
    if position is None:
        return None
    return position if any(e.position == position for e in events) else None


def events_page(ctx: JobEvents, job_id: str, query: Mapping[str, Any] | None) -> dict[str, Any]:
    """``$defs/EventPage``."""
    after, unacked_only = parse_event_query(query)
    _, job = load_job(ctx, job_id)
    stream = reconcile(ctx, job)
    events = _projected(stream)
    start = stream.cursor if unacked_only else _resolve(events, after)
    remaining = [e for e in events if after_position(start, e.ts, e.seq)]
    page = remaining[:EVENTS_PAGE_LIMIT]
    body: dict[str, Any] = {"job_id": job_id, "events": [build_event(job, e.kind, e.ts, e.seq) for e in page]}
    if len(remaining) > len(page):
        body["next_after"] = event_id(page[-1].ts, page[-1].seq)
    # Counted from the durable cursor, never from ``after``: paging must not move the count.
    body["unacked"] = count_after((e.position for e in events), stream.cursor)
    body["server_time"] = ctx.now()
    return body


def ack(ctx: JobEvents, job_id: str, payload: Any) -> dict[str, Any]:
    """``$defs/AckResult``: monotonic, idempotent; unknown/foreign/older ids are no-ops."""
    ack_through = parse_ack_body(payload)
    _, job = load_job(ctx, job_id)
    stream = reconcile(ctx, job)
    events = _projected(stream)
    cursor = stream.cursor
    position = _resolve(events, ack_through)
    if position is not None and (cursor is None or position > cursor):
        cursor = ctx.jobs.advance_cursor(job_id, position, ctx.now())
    unacked = count_after((e.position for e in events), cursor)
    return {"job_id": job_id, "acked": len(events) - unacked, "unacked": unacked, "server_time": ctx.now()}


def reconcile_outstanding(ctx: JobEvents, limit: int = REPAIR_LIMIT) -> tuple[int, int]:
    """The sweep's repair pass: jobs that declared a callback and have no terminal event yet
    (sparse index, newest first). Returns (examined, errors); one bad job never stops it."""
    examined = errors = 0
    for job_id in ctx.jobs.open_callbacks(max(1, min(500, limit))):
        examined += 1
        try:
            _, job = load_job(ctx, job_id)  # the index may lag: decide from a consistent read
            reconcile(ctx, job)
        except Exception as exc:
            errors += 1
            ctx.log("warning", "job event repair failed", event="job.repair_failed", job_id=job_id, error=repr(exc)[:300])
    return examined, errors


__all__ = ["CALLBACK_KIND", "CALLBACK_MAX_ATTEMPTS", "ack", "callback_key", "events_page", "load_job", "on_slot_terminal",
           "reconcile", "reconcile_outstanding"]
