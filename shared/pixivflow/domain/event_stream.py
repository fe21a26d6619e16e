"""A job's stored lifecycle events, as the event stream keeps them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoredEvent:
    """One lifecycle event of a job: stored once, with a per-job ``seq`` and a ``ts`` that never
    moves backwards along ``seq``. ``callback_url`` is set on ``job.requested`` only."""

    job_id: str
    kind: str
    seq: int
    ts: int
    callback_url: str | None = None

    @property
    def position(self) -> tuple[int, int]:
        return (self.ts, self.seq)


@dataclass(frozen=True)
class EventStream:
    """Everything a job's stream holds: its events (ascending), the head and the ack cursor."""

    job_id: str
    events: tuple[StoredEvent, ...] = ()
    head_seq: int = 0
    head_ts: int = 0
    cursor: tuple[int, int] | None = None  # (ts, seq) of the newest acknowledged event

    def kinds(self) -> set[str]:
        return {e.kind for e in self.events}

    def find(self, kind: str) -> StoredEvent | None:
        return next((e for e in self.events if e.kind == kind), None)


class AppendResult:
    APPENDED = "appended"
    EXISTS = "exists"  # the event (kind) is already stored: nothing was written
    HEAD_MOVED = "head_moved"  # another writer appended first: re-read and retry
