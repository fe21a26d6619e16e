"""The in-memory twin of ``adapters.job_store.DynamoJobStore`` (``ports.JobStore``).

Same conditions, same atomicity: an append either writes the head, the event, its callback row
(into the ``MemoryOutboxRows`` it was given: one row model for every kind) and the index change
together, or nothing. The open-callback index may lag on purpose
(``index_lag``) like a GSI does, so callers are forced to re-read before deciding.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..adapters.outbox_rows import MemoryOutboxRows
from ..domain.protocol import ONCE_KINDS, REQUESTED
from ..domain.event_stream import AppendResult, EventStream, StoredEvent
from ..domain.outbox import OutboxRow


@dataclass
class _Job:
    events: dict[str, StoredEvent]
    head_seq: int = 0
    head_ts: int = 0
    cursor: tuple[int, int] | None = None
    open_since: int | None = None  # in the open-callback index while set


class InMemoryJobStore:
    def __init__(self, *, rows: MemoryOutboxRows | None = None, index_lag: bool = False) -> None:
        self._lock = threading.RLock()
        self._jobs: dict[str, _Job] = {}
        self.rows = rows if rows is not None else MemoryOutboxRows()
        self._index_lag = index_lag
        self._visible_index: dict[str, int] = {}  # what the lagging index shows

    def _job(self, job_id: str) -> _Job:
        return self._jobs.setdefault(job_id, _Job(events={}))

    def stream(self, job_id: str) -> EventStream:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return EventStream(job_id)
            events = tuple(sorted(job.events.values(), key=lambda e: e.position))
            return EventStream(job_id, events, job.head_seq, job.head_ts, job.cursor)

    def append(self, event: StoredEvent, *, expected_head: int, callback: OutboxRow | None = None,
               open_callback_since: int | None = None, close_callback_index: bool = False, now_ms: int = 0) -> str:
        if event.seq != expected_head + 1:
            raise ValueError("an event's seq must follow the head it was computed from")
        with self._lock:
            job = self._job(event.job_id)
            slot_key = event.kind if event.kind in ONCE_KINDS else f"{event.kind}#{event.seq:010d}"
            if slot_key in job.events:
                return AppendResult.EXISTS
            if job.head_seq != expected_head:
                return AppendResult.HEAD_MOVED
            if callback is not None and not self.rows.insert(callback):
                return AppendResult.HEAD_MOVED
            job.events[slot_key] = event
            job.head_seq, job.head_ts = event.seq, event.ts
            if event.kind == REQUESTED and event.callback_url and open_callback_since is not None:
                job.open_since = open_callback_since
            if close_callback_index:
                job.open_since = None
            if not self._index_lag:
                self.sync_index()
            return AppendResult.APPENDED

    def sync_index(self) -> None:
        """Let the lagging index catch up (a test decides when)."""
        with self._lock:
            self._visible_index = {job_id: j.open_since for job_id, j in self._jobs.items() if j.open_since is not None}

    def advance_cursor(self, job_id: str, position: tuple[int, int], now_ms: int) -> tuple[int, int] | None:
        with self._lock:
            job = self._job(job_id)
            wanted = (int(position[0]), int(position[1]))
            if job.cursor is None or wanted > job.cursor:
                job.cursor = wanted
            return job.cursor

    def open_callbacks(self, limit: int) -> list[str]:
        with self._lock:
            ordered = sorted(self._visible_index.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            return [job_id for job_id, _ in ordered[:limit]]


__all__ = ["InMemoryJobStore"]
