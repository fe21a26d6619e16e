"""Fault-injection helpers for the work-identity simulations (spec §5, §13.11–§13.12).

Everything here wraps a real adapter and delegates to it, so the code under test runs its
production path against moto; only the chosen call misbehaves.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Iterator

from pixivflow import aws

from pixivflow.domain.errors import TransientSourceError, WorkGoneError
from pixivflow.domain.work import Page
from pixivflow.ports import WorkSource
from support.builders import cats_catalogue, schedule

SCHEDULE = "cats-only"
FIRE = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo
START = "2026-11-30T22:59:00Z"
SLOT = f"{SCHEDULE}@2026-12-01T0800"
NEXT_DAY_FIRE = "2026-12-01T23:00:00Z"
NEXT_DAY_SLOT = f"{SCHEDULE}@2026-12-02T0800"
TARGET = "cats"
LEASE_TTL_MS = 180_000


# 501 is the newest "cats" work: a fresh search binds it first.
CATALOG = cats_catalogue(tagged=False, novels=False)


def add_schedule(cfg: dict, schedule_id: str = SCHEDULE, targets: tuple[str, ...] = (TARGET,), cron: str = "0 8 * * *") -> None:
    cfg["schedules"].append(schedule(schedule_id, targets, cron, name=schedule_id))


class SteeredSource(WorkSource):
    """A work source that delegates to the catalogue and lets a test change the world.

    ``flip()`` makes ``promote`` the newest work, so a fresh search would select it instead of
    the work bound first; ``gone`` / ``transient`` make ``get_work`` and ``download`` fail for
    chosen ids. Every call is recorded."""

    def __init__(self, inner: Any, promote: str = "502") -> None:
        self.inner = inner
        self.promote = promote
        self.flipped = False
        self.searches = 0
        self.searches_after_flip = 0
        self.gone: set[str] = set()
        self.transient: set[str] = set()
        self.get_calls: list[str] = []
        self.downloads: list[str] = []
        self._lock = threading.Lock()

    def flip(self) -> None:
        self.flipped = True

    def search_page(self, request, cursor):
        page = self.inner.search_page(request, cursor)
        with self._lock:
            self.searches += 1
            if self.flipped:
                self.searches_after_flip += 1
        if not self.flipped:
            return page
        items = tuple(
            replace(w, create_date="2026-11-30T12:00:00+09:00") if w.work_id == self.promote else w for w in page.items
        )
        return Page(items=items, next_cursor=page.next_cursor)

    def _fault(self, work_id: str) -> None:
        if work_id in self.gone:
            raise WorkGoneError(f"work {work_id} not found", status=404)
        if work_id in self.transient:
            raise TransientSourceError("ECONNRESET while fetching")

    def get_work(self, work_type, work_id):
        with self._lock:
            self.get_calls.append(str(work_id))
        self._fault(str(work_id))
        return self.inner.get_work(work_type, work_id)

    def download(self, w):
        with self._lock:
            self.downloads.append(w.work_id)
        self._fault(w.work_id)
        return self.inner.download(w)


class CrashingProxy:
    """Delegates everything to ``inner``; ``method`` raises ``RuntimeError("injected crash")`` once.

    ``after=True`` lets the real call happen first (the write is durable, the process dies
    right after it); ``when(*args, **kwargs)`` picks which call crashes."""

    def __init__(self, inner: Any, method: str, *, after: bool = False, when: Callable[..., bool] | None = None,
                 on_crash: Callable[[], None] | None = None) -> None:
        self._inner = inner
        self._method = method
        self._after = after
        self._when = when
        self._on_crash = on_crash
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self.fired or (self._when is not None and not self._when(*args, **kwargs)):
                return attr(*args, **kwargs)
            if self._after:
                attr(*args, **kwargs)
            self.fired = True
            if self._on_crash is not None:
                self._on_crash()
            raise RuntimeError("injected crash")

        return wrapped


class DeadProcessLedger:
    """A ledger seen by a process that died hard at ``crash``: its best-effort lease release never runs."""

    def __init__(self, inner: Any, crash: CrashingProxy) -> None:
        self._inner = inner
        self._crash = crash

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != "release_cell":
            return attr

        def release_cell(*args: Any, **kwargs: Any) -> bool:
            if self._crash.fired:
                return False
            return attr(*args, **kwargs)

        return release_cell


@contextmanager
def crash_at(wiring: Any, adapter: str, method: str, *, after: bool = False, when=None, on_crash=None,
             hard: bool = False) -> Iterator[CrashingProxy]:
    """Swap ``engine.<adapter>`` for a proxy that crashes once at ``method``; restore on exit."""
    saved = {name: getattr(wiring, name) for name in ("ledger", "source", "artifacts", "queues")}
    proxy = CrashingProxy(saved[adapter], method, after=after, when=when, on_crash=on_crash)
    setattr(wiring, adapter, proxy)
    if hard:
        wiring.ledger = DeadProcessLedger(wiring.ledger, proxy)
    try:
        yield proxy
    finally:
        for name, value in saved.items():
            setattr(wiring, name, value)


class SerializedClient:
    """Each DynamoDB request atomic, as on the real service (moto does not lock an item between
    evaluating a condition and writing it). Requests of different threads still interleave."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


def serialize_ledger_requests(wiring: Any) -> None:
    ledger = wiring.ledger
    if not isinstance(ledger._client, SerializedClient):  # noqa: SLF001 - test-only atomicity shim
        ledger._client = SerializedClient(ledger._client)  # noqa: SLF001


def queued(rt: Any, queue: str) -> int:
    """Messages visible or in flight on a queue (``execution`` or ``outbox``), plus any the pump holds."""
    url = rt.env["EXECUTION_QUEUE_URL" if queue == "execution" else "OUTBOX_QUEUE_URL"]
    attrs = aws.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    pump = rt.pumps["execute" if queue == "execution" else "deliver"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"]) + len(pump._held)  # noqa: SLF001


def delivered_work_ids(downstream: Any) -> list[str]:
    return [str(r.body["work_id"]) for r in downstream.requests]


def cell(rt: Any, slot_id: str = SLOT, target_id: str = TARGET):
    return rt.wiring.ledger.get_cell(slot_id, target_id)


def intents(rt: Any, slot_id: str = SLOT, target_id: str = TARGET):
    state = rt.wiring.ledger.load(slot_id)
    return state.intents_for(target_id) if state else []
