"""The in-memory twin of ``adapters.job_store.DynamoJobStore`` (``ports.JobStore``).

Same conditions, same atomicity: an append either writes the head, the event, its callback row
and the index change together, or nothing. The open-callback index may lag on purpose
(``index_lag``) like a GSI does, so callers are forced to re-read before deciding.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

from ..domain.protocol import ONCE_KINDS, REQUESTED
from ..ports import AppendResult, CallbackRow, EventStream, StoredEvent

ACTIONABLE = ("pending", "processing", "retry_wait")
PK_PREFIX = "OUTBOX#event_callback#"


@dataclass
class _Job:
    events: dict[str, StoredEvent]
    head_seq: int = 0
    head_ts: int = 0
    cursor: tuple[int, int] | None = None
    open_since: int | None = None  # in the open-callback index while set


class InMemoryJobStore:
    def __init__(self, *, index_lag: bool = False) -> None:
        self._lock = threading.RLock()
        self._jobs: dict[str, _Job] = {}
        self._rows: dict[str, CallbackRow] = {}
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

    def append(self, event: StoredEvent, *, expected_head: int, callback: CallbackRow | None = None,
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
            if callback is not None and callback.key in self._rows:
                return AppendResult.HEAD_MOVED
            job.events[slot_key] = event
            job.head_seq, job.head_ts = event.seq, event.ts
            if callback is not None:
                self._rows[callback.key] = callback
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

    # -- callback rows ----------------------------------------------------------------------
    def get_callback_row(self, key: str) -> CallbackRow | None:
        with self._lock:
            return self._rows.get(key)

    def callback_key_of(self, pk: str, sk: str) -> str | None:
        return pk[len(PK_PREFIX):] if pk.startswith(PK_PREFIX) and sk == "META" else None

    def due_callback_keys(self, before_ms: int) -> list[str]:
        with self._lock:
            return [r.key for r in self._rows.values() if r.actionable and r.next_attempt_at <= before_ms]

    def claim_callback_row(self, key: str, owner: str, now_ms: int, lease_ms: int, *, ignore_due: bool = False) -> CallbackRow | None:
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                return None
            waiting = row.status in ("pending", "retry_wait") and (ignore_due or row.next_attempt_at <= now_ms)
            expired = row.status == "processing" and (row.lease_until or 0) <= now_ms
            if not (waiting or expired):
                return None
            row = replace(row, status="processing", lease_owner=owner, lease_until=now_ms + lease_ms, updated_at=now_ms)
            self._rows[key] = row
            return row

    def settle_callback_row(self, row: CallbackRow, owner: str, now_ms: int, *, status: str, error: str | None = None,
                            next_attempt_at: int | None = None) -> CallbackRow | None:
        with self._lock:
            current = self._rows.get(row.key)
            if current is None or current.status != "processing" or current.lease_owner != owner:
                return None
            changes: dict[str, Any] = {"status": status, "attempts": current.attempts + 1, "lease_owner": None,
                                       "lease_until": None, "updated_at": now_ms,
                                       "last_error": error[:1000] if error is not None else None}
            if status in ACTIONABLE:
                assert next_attempt_at is not None
                changes["next_attempt_at"] = next_attempt_at
            else:
                changes["completed_at"] = now_ms
            settled = replace(current, **changes)
            self._rows[row.key] = settled
            return settled


    # -- the operator's view (issue 12) -------------------------------------------------------------
    def dead_callback_rows(self) -> list[CallbackRow]:
        with self._lock:
            rows = [r for r in self._rows.values() if r.status == "dead"]
        return sorted(rows, key=lambda r: (-r.updated_at, r.key))

    def redrive_callback_row(self, key: str, now_ms: int) -> CallbackRow | None:
        with self._lock:
            current = self._rows.get(key)
            if current is None or current.status != "dead":
                return None
            revived = replace(current, status="retry_wait", attempts=0, next_attempt_at=now_ms, updated_at=now_ms,
                              completed_at=None, lease_owner=None, lease_until=None)
            self._rows[key] = revived
            return revived

__all__ = ["InMemoryJobStore"]
