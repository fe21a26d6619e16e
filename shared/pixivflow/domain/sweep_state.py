"""The stall sweep's own state: its lease and cursor, the sparse indexes it reads, and the
schedule watches of the missed-fire check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class SweepCursor:
    """Where the sweep's walk over the live slots resumes (the incremental sweep).

    ``shard`` is an ActiveSlots shard; ``after`` the index position inside it already walked
    ("" = the shard's start). It rides on the lease item, so only the lease holder moves it."""

    shard: int = 0
    after: str = ""


@dataclass(frozen=True)
class SweepLease:
    """The answer to one attempt at the sweep lease: who holds it now, and until when; when
    acquired, the cursor the previous holder left."""

    acquired: bool
    owner: str  # the holder after the attempt (ours when ``acquired``)
    until_ms: int
    cursor: SweepCursor = field(default_factory=SweepCursor)


# The sparse indexes the sweep reads: live slots (ActiveSlots), outbox rows no open
# slot covers (DueOutbox: delivery intents and generic rows), jobs owing a callback (OpenCallbacks).
SparseIndex = Literal["active", "due", "callbacks"]


SPARSE_INDEXES: frozenset[SparseIndex] = frozenset(("active", "due", "callbacks"))


@dataclass(frozen=True)
class ActiveRow:
    """One row of the ActiveSlots index: a live slot, and its opaque position in its shard."""

    slot_id: str
    created_at: int
    position: str


@dataclass(frozen=True)
class ScheduleWatch:
    """What the sweep remembers about one schedule while it watches it for missed fires.

    A watch starts the first time the sweep sees the schedule enabled with a given cron and zone
    (``fingerprint``); only fires after ``first_seen_ms`` can ever be missed. ``checked_through_ms``
    is the cursor: every fire at or before it has been checked once. A disabled schedule's watch is
    ``paused``; enabling it again starts a new watch, so its disabled stretch is never "missed".
    """

    schedule_id: str
    fingerprint: str
    first_seen_ms: int
    checked_through_ms: int
    paused: bool = False
