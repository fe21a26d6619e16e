"""Opt-in, seeded models of DynamoDB's weaker guarantees: the one knob a test turns to see them.

Off by default (``TwinFaults()`` changes nothing): a test or the simulation asks for exactly the
behaviours it wants, e.g. ``TwinCloud(faults=TwinFaults(seed=7, stale_reads=0.2, index_lag_ms=500))``.
Each model draws from its own random stream (``f"{seed}:{model}"``), so switching one on never shifts the
draws of another, and a seed replays the same answers for the same sequence of calls.

What each knob models (DynamoDB Developer Guide: "Read consistency", "Global secondary indexes — data
synchronization", "Using time to live", "BatchWriteItem", "TransactWriteItems — transaction conflict
handling", "Throttling"):

``stale_reads``
    The chance that an eventually consistent read (GetItem, BatchGetItem, Query or Scan of the base table
    without ``ConsistentRead``) of an item written in the last ``stale_window_ms`` returns the version
    before that write (possibly "no item"). Strongly consistent reads are always current.
``index_lag_ms``
    Every write reaches each global secondary index after its own seeded lag in ``[0, index_lag_ms]``.
    Per item, as DynamoDB orders them: two writes of one item reach the index in write order; writes of
    different items may overtake each other.
``unprocessed``
    The chance that each request item of a BatchWriteItem / BatchGetItem comes back in
    ``UnprocessedItems`` / ``UnprocessedKeys`` instead of being processed (DynamoDB does this under load).
``transaction_conflict``
    The chance that a TransactWriteItems is cancelled with ``TransactionCanceledException`` whose reason for
    one action is ``TransactionConflict`` (another request held the item), having written nothing.
``throttle``
    The chance that a data-plane call is throttled: ``ProvisionedThroughputExceededException`` or
    ``ThrottlingException`` (a transaction: ``TransactionCanceledException`` with ``ThrottlingError``), as
    they reach the caller once the SDK's own retries are spent (the twin sits where botocore would).
``ttl_delete_within_ms``
    ``None``: TTL never deletes (the default). A number: an item whose TTL attribute has passed stays
    readable until the twin's sweep deletes it, at a seeded moment within that many ms of its expiry
    (DynamoDB: "typically within a few days"); ``TwinDynamoDB.sweep_ttl()`` deletes every expired item now.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class TwinFaults:
    seed: int | str = 0
    stale_reads: float = 0.0
    stale_window_ms: int = 1_000
    index_lag_ms: int = 0
    unprocessed: float = 0.0
    transaction_conflict: float = 0.0
    throttle: float = 0.0
    ttl_delete_within_ms: int | None = None

    def __post_init__(self) -> None:
        for name in ("stale_reads", "unprocessed", "transaction_conflict", "throttle"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"TwinFaults.{name} is a probability in [0, 1], not {p!r}")
        for name in ("stale_window_ms", "index_lag_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"TwinFaults.{name} must be >= 0")
        if self.ttl_delete_within_ms is not None and self.ttl_delete_within_ms < 0:
            raise ValueError("TwinFaults.ttl_delete_within_ms must be >= 0 or None")

    def stream(self, model: str) -> random.Random:
        """The random stream of one model (independent of the others)."""
        return random.Random(f"{self.seed}:{model}")


class Dice:
    """The draws the DynamoDB twin makes, one stream per model; every chance 0 draws nothing."""

    def __init__(self, faults: TwinFaults) -> None:
        self.faults = faults
        self._streams: dict[str, random.Random] = {}

    def _rng(self, model: str) -> random.Random:
        rng = self._streams.get(model)
        if rng is None:
            rng = self._streams[model] = self.faults.stream(model)
        return rng

    def hit(self, model: str, p: float) -> bool:
        return p > 0.0 and self._rng(model).random() < p

    def upto(self, model: str, most: int) -> int:
        return self._rng(model).randint(0, most) if most > 0 else 0

    def pick(self, model: str, options: list) -> object:
        return self._rng(model).choice(options)
