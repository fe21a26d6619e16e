"""Clocks and entropy: injected everywhere so tests and the demo control time and randomness."""

from __future__ import annotations

import random
import threading
import time
import uuid


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class VirtualClock:
    """A clock that only moves when told to (tests, the demo)."""

    def __init__(self, start_ms: int) -> None:
        self._now = int(start_ms)
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        # No lock to read: rebinding an int attribute is atomic (the writers below hold the lock
        # only so that advance's read-add-write is), and this read is the engine's most frequent call.
        return self._now

    def set(self, ms: int) -> None:
        with self._lock:
            self._now = int(ms)

    def advance(self, ms: int) -> int:
        with self._lock:
            self._now += int(ms)
            return self._now


class Entropy:
    """Seedable randomness: jitter and owner ids. A seed replays a run exactly."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def uniform(self) -> float:
        with self._lock:
            return self._rng.random()

    def token(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128)).hex[:12]}"
