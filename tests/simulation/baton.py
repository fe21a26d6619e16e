"""A deterministic scheduler of concurrent Lambda invocations (issue 20; the FoundationDB approach).

Each invocation (a trigger fire, an executor or deliverer batch, a sweep tick) runs the real handler
in a thread of its own, but only ONE thread runs at a time: it holds the baton. Every AWS call the
invocation makes goes through ``SteppedClient`` (a wrapper around the twin's boto3-level client),
and each call is a *step*: before it, the scheduler's seeded RNG may take the baton back and hand it
to another live invocation, which runs until its own next step. Because every decision is drawn
from one ``random.Random`` while exactly one thread runs, a seed replays exactly.

A crash is a DEATH (issue 20 §3): at a step, before or after the call, the invocation's thread is
simply never resumed again. None of its code runs after that point: no ``finally``, no lease
release, no batch processor finishing the other records; the messages it was handed stay
in flight until the queue's visibility timeout lapses. The scheduler releases its dead threads at
the end of the seed (``release_dead``): each is woken with ``Released``, a ``BaseException`` that
no ``except Exception`` catches, and from then on every AWS call it attempts raises ``Released``
again before touching the twin, so what a released thread's ``finally`` blocks try changes nothing.

Time passes in steps too: each AWS call takes a few virtual milliseconds, and now and then one
takes minutes (a paused container). An invocation never outlives its function's timeout
(``timeouts``, from ``template.yaml``): Lambda kills it there, so a step that finds the invocation's
deadline passed is its death (the product's "its writer is dead by now" rules, e.g. the orphaned
outcome record after a minute, rest on that; make sim seeds 158 and 738 were a sweep and an
executor frozen for minutes that woke up and carried on, which Lambda never lets happen).
"""

from __future__ import annotations

import _thread
import os
import sys
import threading
from collections import Counter
from random import Random
from typing import Any, Callable

# Client attributes that are not AWS requests (no step): botocore's helpers and the twin's own.
NOT_REQUESTS = frozenset({"meta", "exceptions", "generate_presigned_url", "get_paginator", "can_paginate", "close",
                          "get_waiter", "waiter_names"})
STUCK_S = 60.0  # real seconds an invocation may run without reaching a step before the harness calls it stuck

_local = threading.local()


class _Gate:
    """A one-way handoff between two threads: ``set`` opens it, ``wait`` passes it and closes it behind
    (an Event's wait-then-clear). A bare lock, not a ``threading.Event`` (whose Condition costs twice
    as much): a seed hands the baton over about a thousand times, and every handoff crosses two gates."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()  # closed

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already open: opening twice is opening once (as Event.set)
            pass

    def wait(self, timeout: float | None = None) -> bool:
        """Pass (and close) the gate once it is open; False when ``timeout`` seconds passed first."""
        return self._lock.acquire(True, -1 if timeout is None else timeout)

    def clear(self) -> None:
        self._lock.acquire(False)


class Released(BaseException):
    """Wakes a dead invocation's thread at seed end; not an Exception, so no handler swallows it."""


class Stuck(RuntimeError):
    """An invocation neither reached a step nor finished: it blocks on something outside the baton."""


class _Worker:
    """A pooled invocation thread: it runs one invocation at a time, then waits for the next. A seed
    spawns about ninety invocations; starting a thread for each was a twentieth of its time. A worker
    goes back to the pool (``_POOL``) when its invocation ends or, dead, once released at seed end."""

    __slots__ = ("assign", "inv", "thread")

    def __init__(self) -> None:
        self.assign = _Gate()
        self.inv: Invocation | None = None
        self.thread = threading.Thread(target=self._loop, name="sim-invocation", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self.assign.wait()
            inv, self.inv = self.inv, None
            if inv is not None:
                inv._main(self)


_POOL: list[_Worker] = []
# A forked child has none of its parent's threads: it starts with an empty pool.
os.register_at_fork(after_in_child=_POOL.clear)


class Invocation:
    """One Lambda invocation: ``fn()`` in a (pooled) thread that runs only while it holds the baton."""

    def __init__(self, scheduler: "Baton", name: str, fn: Callable[[], Any],
                 on_end: Callable[["Invocation"], None] | None) -> None:
        self.scheduler = scheduler
        self.name = name
        self.fn = fn
        self.on_end = on_end
        self.state = "runnable"  # runnable | done | dead
        self.result: Any = None
        self.error: BaseException | None = None
        self.released = False
        self.steps = 0
        self.deadline: int | None = None  # virtual ms at which Lambda kills it (Baton.timeouts)
        self.go = _Gate()
        self.unwound = _Gate()  # opened once its code has returned for good (release_dead waits on it)
        self.returned = False  # its code has returned for good (its pooled thread waits for the next)
        self.thread: threading.Thread | None = None  # the worker's, once spawned

    def _main(self, worker: _Worker) -> None:
        self.go.wait()
        if self.released:
            return self._unwind(worker)  # released before it ever ran (a harness error ended the seed)
        _local.invocation = self
        try:
            self.result = self.fn()
        except Released:
            return self._unwind(worker)  # released after its death: the scheduler stopped waiting for it long ago
        except BaseException as exc:  # noqa: BLE001 - an invocation that failed: Lambda reports the error
            self.error = exc
        finally:
            _local.invocation = None
        if self.released:
            return self._unwind(worker)
        self.state = "done"
        self._unwind(worker)  # before the baton goes back: the next spawn may take this worker
        self.scheduler.back.set()

    def _unwind(self, worker: _Worker) -> None:
        self.returned = True
        _POOL.append(worker)
        self.unwound.set()


class Baton:
    """The seeded scheduler. ``spawn`` adds an invocation; ``run_one`` resumes one live invocation
    (picked by the RNG) until its next step, its end or its death."""

    def __init__(self, clock: Any, rng: Random, *, switch: float = 0.5, death: float = 0.0, pause: float = 0.0,
                 latency_ms: tuple[int, int] = (1, 12), timeouts: dict[str, int] | None = None) -> None:
        self.clock = clock
        self.rng = rng
        self.switch = switch  # chance that a step hands the baton back to the scheduler
        self.death = death  # chance of a death at each step (before, and again after, the call)
        self.pause = pause  # chance that a call takes 30 s - 4 min (a frozen container)
        self.latency_ms = latency_ms
        self.timeouts = timeouts or {}  # invocation name -> its function's timeout (ms); none: no limit
        self.back = _Gate()
        self.live: list[Invocation] = []
        self.dead: list[Invocation] = []
        self.counts: Counter[str] = Counter()
        self.deaths: list[str] = []  # "t=... before|after ledger.finish_slot(slot-id) in deliver" per death
        self.current: Invocation | None = None

    # -- the driver's side (main thread) ---------------------------------------------------------
    def spawn(self, name: str, fn: Callable[[], Any], on_end: Callable[[Invocation], None] | None = None) -> Invocation:
        inv = Invocation(self, name, fn, on_end)
        if name in self.timeouts:
            inv.deadline = self.clock.now_ms() + self.timeouts[name]
        worker = _POOL.pop() if _POOL else _Worker()
        worker.thread.name = f"sim-{name}"  # named for what it runs now (tracebacks, profilers, tests)
        inv.thread = worker.thread
        worker.inv = inv
        worker.assign.set()  # the worker waits on the invocation's own gate until run_one picks it
        self.live.append(inv)
        self.counts[f"spawn.{name}"] += 1
        return inv

    def running(self, name: str) -> int:
        return sum(1 for inv in self.live if inv.name == name)

    def run_one(self) -> Invocation | None:
        """Hand the baton to one live invocation (seeded choice) and wait for it to give it back."""
        if not self.live:
            return None
        inv = self.live[self.rng.randrange(len(self.live))] if len(self.live) > 1 else self.live[0]
        self.current = inv
        self.back.clear()
        inv.go.set()
        if not self.back.wait(STUCK_S):
            raise Stuck(f"invocation {inv.name} neither reached an AWS call nor finished in {STUCK_S:.0f} s")
        self.current = None
        if inv.state != "runnable":
            self.live.remove(inv)
            if inv.state == "dead":
                self.dead.append(inv)
            if inv.on_end is not None:
                inv.on_end(inv)
        return inv

    def drain(self) -> None:
        """Run every live invocation to its end (or death)."""
        while self.live:
            self.run_one()

    def release_dead(self) -> None:
        """Seed end: wake each dead thread with Released and wait for it to unwind."""
        for inv in self.dead:
            inv.released = True
            inv.go.set()
        for inv in self.dead:
            inv.unwound.wait(10)
        self.dead.clear()

    # -- the invocation's side (inside a step) ----------------------------------------------------
    def before(self, inv: Invocation, label: str) -> None:
        if inv.released:
            raise Released()
        inv.steps += 1
        rng = self.rng
        self.clock.advance(rng.randint(*self.latency_ms))
        if self.pause and rng.random() < self.pause:
            self.counts["pause"] += 1
            self.clock.advance(rng.randint(30, 240) * 1000)
        self._kill_if_timed_out(inv, "before", label)
        if self.death and rng.random() < self.death:
            self._die(inv, "before", label)
        if rng.random() < self.switch:
            self._yield(inv)
            # Other invocations ran meanwhile and the clock ran on: a Lambda whose timeout passed
            # while it waited is dead before its call goes out (routes world, seed 178: a
            # deliverer resumed 3.5 min after its 60 s deadline and recorded a review over the
            # one the row's next claimer had recorded; no real invocation outlives its claim).
            self._kill_if_timed_out(inv, "before", label)

    def after(self, inv: Invocation, label: str) -> None:
        if inv.released:
            raise Released()
        self._kill_if_timed_out(inv, "after", label)  # the call itself took the time (a slow answer)
        if self.death and self.rng.random() < self.death:
            self._die(inv, "after", label)

    def _kill_if_timed_out(self, inv: Invocation, when: str, label: str) -> None:
        if inv.deadline is not None and self.clock.now_ms() >= inv.deadline:
            self.counts["timeout"] += 1
            self._die(inv, when, label, why=" (function timeout)")

    def _yield(self, inv: Invocation) -> None:
        self.back.set()
        inv.go.wait()
        if inv.released:
            raise Released()

    def _die(self, inv: Invocation, when: str, label: str, why: str = "") -> None:
        inv.state = "dead"
        self.counts["death"] += 1
        self.counts[f"death.{inv.name}"] += 1
        self.deaths.append(f"t={self.clock.now_ms()} {when} {_port_call(label)} in {inv.name}{why}")
        self.back.set()
        inv.go.wait()  # never set again until release_dead
        raise Released()


class SteppedClient:
    """Delegates to a twin client; each request made from an invocation thread is a step."""

    def __init__(self, inner: Any, service: str) -> None:
        self._inner = inner
        self._service = service

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name in NOT_REQUESTS or name.startswith("_") or not callable(attr):
            return attr
        label = f"{self._service}.{name}"

        def request(*args: Any, **kwargs: Any) -> Any:
            inv = getattr(_local, "invocation", None)
            if inv is None:
                return attr(*args, **kwargs)  # the harness's own look (main thread): not a step
            sched = inv.scheduler
            sched.before(inv, label)
            result = attr(*args, **kwargs)
            sched.after(inv, label)
            return result

        self.__dict__[name] = request  # the next call skips __getattr__
        return request


def stepped_factory(make: Callable[..., Any]) -> Callable[..., Any]:
    """An ``aws.set_factory`` factory: ``make``'s clients, each wrapped once in a SteppedClient."""
    cache: dict[str, SteppedClient] = {}

    def factory(service: str, **kwargs: Any) -> Any:
        if service not in cache:
            cache[service] = SteppedClient(make(service, **kwargs), service)
        return cache[service]

    return factory


_PORT_OWNERS = ("DynamoLedger", "DynamoJobStore", "DynamoOutboxRows", "DynamoSweepState", "SqsQueues", "S3Artifacts")


def _port_call(label: str) -> str:
    """Name a death by the adapter method it fell in (``ledger.finish_slot(<slot>)``), read off the
    dying thread's stack: the outcome-line oracle needs to know a death fell inside the close."""
    frame = sys._getframe(3)
    while frame is not None:
        owner = frame.f_locals.get("self")
        kind = type(owner).__name__ if owner is not None else ""
        if kind in _PORT_OWNERS and not frame.f_code.co_name.startswith("_"):
            args = [v for k, v in frame.f_locals.items() if k != "self" and isinstance(v, (str, int))][:1]
            subject = next((getattr(v, a) for v in frame.f_locals.values() for a in ("slot_id", "idempotency_key", "key")
                            if getattr(v, a, None)), None)
            name = "ledger" if kind == "DynamoLedger" else kind
            return f"{name}.{frame.f_code.co_name}({subject or (args[0] if args else '')}) [{label}]"
        frame = frame.f_back
    return label
