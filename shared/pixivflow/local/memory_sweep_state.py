"""In-memory twin of ``adapters.sweep_state.DynamoSweepState`` (every port has one).

Same conditions, same answers: a refused condition returns False / a lease not acquired. A lock
makes each call atomic, as one conditional write is on DynamoDB.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Sequence

from ..domain.sweep_state import ScheduleWatch, SweepCursor, SweepLease


class MemorySweepState:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.lease: tuple[str, int] | None = None  # (owner, leaseUntil)
        self.cursor = SweepCursor()  # the walk's cursor, left by the last holder
        self.watch_items: dict[str, ScheduleWatch] = {}
        self.missed: dict[str, tuple[str, int, int]] = {}  # slotId -> (scheduleId, fireAt, detectedAt)

    def acquire_lease(self, owner: str, now_ms: int, ttl_ms: int) -> SweepLease:
        with self._lock:
            if self.lease is not None and self.lease[1] > now_ms:
                return SweepLease(False, self.lease[0], self.lease[1])
            self.lease = (owner, now_ms + ttl_ms)
            return SweepLease(True, owner, now_ms + ttl_ms, self.cursor)

    def release_lease(self, owner: str, now_ms: int, cursor: SweepCursor | None = None) -> bool:
        with self._lock:
            if self.lease is None or self.lease[0] != owner or self.lease[1] <= now_ms:
                return False
            self.lease = (owner, now_ms)
            if cursor is not None:
                self.cursor = cursor
            return True

    def watches(self, schedule_ids: Sequence[str]) -> dict[str, ScheduleWatch]:
        with self._lock:
            return {s: self.watch_items[s] for s in schedule_ids if s in self.watch_items}

    def start_watch(self, schedule_id: str, fingerprint: str, now_ms: int,
                    replacing: ScheduleWatch | None = None) -> bool:
        with self._lock:
            if self.watch_items.get(schedule_id) != replacing:
                return False
            self.watch_items[schedule_id] = ScheduleWatch(schedule_id, fingerprint, now_ms, now_ms)
            return True

    def advance_watch(self, watch: ScheduleWatch, checked_through_ms: int) -> bool:
        return self._swap(watch, replace(watch, checked_through_ms=checked_through_ms))

    def pause_watch(self, watch: ScheduleWatch) -> bool:
        return self._swap(watch, replace(watch, paused=True))

    def _swap(self, expected: ScheduleWatch, new: ScheduleWatch) -> bool:
        with self._lock:
            if self.watch_items.get(expected.schedule_id) != expected:
                return False
            self.watch_items[expected.schedule_id] = new
            return True

    def record_missed(self, slot_id: str, schedule_id: str, fire_ms: int, now_ms: int) -> bool:
        with self._lock:
            if slot_id in self.missed:
                return False
            self.missed[slot_id] = (schedule_id, fire_ms, now_ms)
            return True

    def missed_among(self, slot_ids: Sequence[str]) -> set[str]:
        with self._lock:
            return {s for s in slot_ids if s in self.missed}
