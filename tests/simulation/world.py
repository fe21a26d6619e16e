"""One seed of the concurrent simulation (issue 20): the real handlers as concurrent Lambda
invocations under ``baton.Baton``, with deaths, on the in-memory twins.

The world of one seed, on the virtual clock:

* **EventBridge Scheduler** fires every occurrence of ``SIM_SCHEDULES`` in the seed's window (four
  schedules that fire within minutes of each other, two of them at the same instant with the same
  targets, so their cells compete for the same works on the same route), sometimes twice at once
  (a duplicate invocation), sometimes again later; a fire that died or failed is retried 1-3
  minutes later (its retry policy).
* **The sweep** runs on every minute tick, sometimes twice at once; it races the executors and
  deliverers that run at the same moment.
* **Lambda's SQS event source mappings** (``Esm``) receive batches of up to 10 with the queue's
  visibility timeout from ``template.yaml`` (360 s) and run up to ``MAX_CONCURRENCY`` batches of a
  queue at once. Records that succeed are deleted; records reported as failures, and every record of
  a batch whose invocation raised or died, are left alone: they come back when the 360 s lapse, and
  after ``maxReceiveCount`` receives the queue moves them to its DLQ. Records may also be lost,
  duplicated or delayed on their way (any message may be lost, duplicated or reordered).
* **The downstream** answers 5xx/429, loses ACKs and sometimes fails a record (``Chaos._respond``).

Every AWS call is a step (``baton``) where the seeded scheduler may switch invocations, advance the
clock a little (or, rarely, minutes), or kill the invocation. Then the faults stop, the live
invocations finish, the runtime settles (serially) and ``oracle.check_invariants`` holds the result
to spec §13. The dead threads are released after the oracle has read the world.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from baton import Baton, Invocation, stepped_factory
from chaos_support import Chaos, Rates, dlq_depths
from jobs_world import JobsActor
from oracle import CONVERGE_MS, SeedResult, check_invariants, check_missed_fires, check_outcome_lines, still_ledger
from oracle_jobs import check_jobs

MINUTE_MS = 60_000
VISIBILITY_S = 360  # template.yaml: both queues' VisibilityTimeout (>= 6 x the function timeout)
MAX_CONCURRENCY = 3  # batches of one queue handled at once (the ESM's MaximumConcurrency is 10)
# template.yaml: Globals Timeout 60 (ExecuteFunction, DeliverFunction, StallSweepFunction); TriggerFunction
# and JobEventsFunction 30. The baton kills an invocation that reaches a step past its timeout.
FUNCTION_TIMEOUT_MS = {"execute": 60_000, "deliver": 60_000, "sweep": 60_000, "trigger": 30_000, "job_events": 30_000}
WINDOW_MS = 20 * MINUTE_MS  # fires are taken from [start, start + WINDOW_MS)
IDLE_JUMP_MS = 5 * MINUTE_MS  # when nothing runs, the clock jumps at most this far (one sweep per jump)

# Schedules that make every seed a contest: two occurrences at the same instant sharing targets
# (cats, ranking-daily: its ranking has ONE work, so exactly one of the two cells may get it), a
# third five minutes later while they may still run, and the flaky one that only times out.
SIM_SCHEDULES = [
    {"id": "morning-tokyo", "name": "Morning picks (Tokyo)", "cron": "0 8 * * *", "timezone": "Asia/Tokyo",
     "targetIds": ["cats", "landscape", "ranking-daily"]},
    {"id": "morning-rival", "name": "Morning rival (Tokyo)", "cron": "0 8 * * *", "timezone": "Asia/Tokyo",
     "targetIds": ["cats", "ranking-daily", "fantasy-novels"]},
    {"id": "late-tokyo", "name": "Five past (Tokyo)", "cron": "5 8 * * *", "timezone": "Asia/Tokyo",
     "targetIds": ["cats", "dogs", "sky-topic"]},
    {"id": "noon-flaky", "name": "Flaky source", "cron": "10 8 * * *", "timezone": "Asia/Tokyo", "timeout": 600000,
     "targetIds": ["flaky"]},
]
FIRST_FIRE_UTC_H = 23  # 08:00 Asia/Tokyo


_configs: dict[str, Any] = {}


def _config(path: str) -> tuple[Any, Any, Any]:
    """The parsed config, its catalogue source and an HTTP transport, once per worker (read-only once
    built; a new httpx client per seed loaded the CA bundle each time, a third of a seed's time)."""
    if path not in _configs:
        import httpx

        from pixivflow.adapters.catalog_source import CatalogSource
        from pixivflow.config import load_config

        config = load_config(path)
        catalog = CatalogSource(config.source.path, page_size=config.source.pageSize) if config.source.kind == "catalog" else None
        _configs[path] = (config, catalog, httpx.HTTPTransport())  # a Pixiv world builds its source per seed
    return _configs[path]


def sim_config(cfg: dict) -> None:
    """``write_config`` mutator: the demo config with the simulation's schedules, and the loopback
    host the consumers' callback receiver lives on (``jobs_world``; local development only)."""
    cfg["schedules"] = [dict(s) for s in SIM_SCHEDULES]
    cfg["jobs"] = {"callbackAllowHosts": ["127.0.0.1"]}


class SimLambdaContext:
    """A Lambda context whose remaining time runs on the virtual clock from the invocation's start
    (``get_remaining_time_in_millis``): an invocation paused for minutes has no time left, so the
    outbox worker hands its records back unclaimed (issue 21: "cannot start in time"). The deliver
    handler keeps the method on the shared engine while it runs; in the simulation several
    deliverers share one engine, so the method answers for whichever invocation calls it."""

    def __init__(self, name: str, clock: Any, timeout_ms: int, started: dict[int, int]) -> None:
        from pixivflow.local.lambda_context import context_for

        self._base = context_for(name)
        self._clock = clock
        self._timeout_ms = timeout_ms
        self._started = started  # thread id -> virtual ms its invocation started (the world's, shared)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)

    def get_remaining_time_in_millis(self) -> int:
        import threading

        started = self._started.get(threading.get_ident())
        if started is None:
            return self._timeout_ms
        return started + self._timeout_ms - self._clock.now_ms()


@dataclass(frozen=True)
class WorldRates:
    switch: float = 0.5  # a step hands the baton back
    death: float = 0.004  # per step, before and after the call
    pause: float = 0.002  # a call that takes 30 s - 4 min
    fire_duplicate_now: float = 0.3
    fire_duplicate_late: float = 0.2
    fire_lost: float = 0.1  # Scheduler never delivers the fire: only the sweep's missed-fire check says so
    sweep_twice: float = 0.15
    poll_eagerly: float = 0.3  # an ESM polls while other invocations still run
    chaos: Rates = field(default_factory=Rates)


@dataclass(order=True)
class _Event:
    at: int
    seq: int
    kind: str = field(compare=False)
    payload: Any = field(compare=False, default=None)


class Esm:
    """Lambda's SQS event source mapping for one queue, concurrent (see the module docstring)."""

    def __init__(self, world: "World", name: str) -> None:
        self.world = world
        self.name = name
        self.pump = world.rt.pumps[name]  # its url, its twin client (not stepped), its notBefore hold
        self.handler = self.pump._handler  # noqa: SLF001 - the function the mapping invokes

    def poll(self) -> bool:
        """Receive one batch and start an invocation for it. False when nothing was received."""
        world, pump = self.world, self.pump
        if world.baton.running(self.name) >= MAX_CONCURRENCY:
            return False
        pump.release_due()
        resp = pump._sqs.receive_message(QueueUrl=pump.url, MaxNumberOfMessages=10, VisibilityTimeout=VISIBILITY_S,  # noqa: SLF001
                                         MessageAttributeNames=["All"], AttributeNames=["All"])
        messages = resp.get("Messages", [])
        if not messages:
            return False
        now = world.clock.now_ms()
        ready = []
        for m in messages:
            nb = m.get("MessageAttributes", {}).get("notBefore", {}).get("StringValue")
            if nb is not None and int(nb) > now:
                pump._hold(m, int(nb))  # noqa: SLF001 - SQS DelaySeconds on the virtual clock
            else:
                ready.append(m)
        records = world.on_the_way(self, ready)
        if not records:
            return True
        event = {"Records": records}
        handler, name = self.handler, self.name
        context = SimLambdaContext(name, world.clock, FUNCTION_TIMEOUT_MS[name], world.started)
        inv = world.baton.spawn(name, lambda: handler(event, context), on_end=lambda inv: self._ended(inv, records))
        world.started[inv.thread.ident] = now
        return True

    def _ended(self, inv: Invocation, records: list[dict]) -> None:
        """Delete what succeeded; everything else lapses back after the visibility timeout."""
        if inv.state != "done" or inv.error is not None or not isinstance(inv.result, dict):
            self.world.counts[f"esm.{self.name}.{'died' if inv.state == 'dead' else 'raised'}"] += 1
            return
        failed = {f["itemIdentifier"] for f in inv.result.get("batchItemFailures", [])}
        done: dict[str, str] = {}
        for r in records:
            if r["messageId"] not in failed:
                done[r["messageId"]] = r["receiptHandle"]
        if failed:
            self.world.counts[f"esm.{self.name}.failed"] += len(failed)
        if done:
            self.pump._sqs.delete_message_batch(QueueUrl=self.pump.url, Entries=[  # noqa: SLF001
                {"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(done.values())])


class World:
    def __init__(self, rt: Any, downstream: Any, seed: int, rates: WorldRates | None = None) -> None:
        self.rt = rt
        self.clock = rt.clock
        self.downstream = downstream
        self.seed = seed
        self.rates = rates or WorldRates()
        self.rng = {name: random.Random(f"{seed}:{name}") for name in ("baton", "world", "sqs", "jobs", "callbacks", "fires")}
        self.baton = Baton(self.clock, self.rng["baton"], switch=self.rates.switch, death=self.rates.death,
                           pause=self.rates.pause,
                           timeouts=FUNCTION_TIMEOUT_MS)
        self.chaos = Chaos(rt, downstream, seed, self.rates.chaos)  # the downstream's faults and the trace
        self.counts: Counter[str] = Counter()
        self.events: list[_Event] = []
        self._seq = itertools.count()
        self.esms: dict[str, Esm] = {}
        self.fired: list[tuple[str, int, Any]] = []
        self.scheduled: list[tuple[str, int]] = []  # every fire of the window (schedule id, fire ms), lost or not
        self.faulty = True
        self.jobs = JobsActor(self)  # the Protocol v1 consumers and their callback receiver
        self.started: dict[int, int] = {}  # SimLambdaContext: invocation thread -> its start (virtual ms)

    # -- set-up ----------------------------------------------------------------------------------
    def install(self) -> "World":
        from pixivflow import aws

        cloud = self.rt.cloud
        self._previous_factory = aws.set_factory(stepped_factory(cloud.client))
        import pixivflow.runtime as runtime

        # The engine is built anew, on stepped clients; the config is parsed once per worker process
        # (a YAML parse per seed was a fifth of a seed's time).
        config, source, transport = _config(self.rt.config_path)
        runtime.override(**{"clock": self.clock, "config": config, "source": source, "transport": transport,
                            **self.jobs.overrides(), **self.collaborators(transport)})
        self.rt.wiring  # noqa: B018 - built here, in the main thread, before any invocation runs
        self.jobs.spy(self.rt.wiring)
        self.esms = {name: Esm(self, name) for name in ("execute", "deliver")}
        self.downstream.state.responder = self._respond
        self.chaos.active = True
        return self

    def _respond(self, req: Any) -> Any:
        """The downstream's answer: noted (time, key) for the cancel rule, then the chaos's faults."""
        self.jobs.on_downstream(req)
        return self.chaos._respond(req)  # noqa: SLF001 - None (the default answer) once the faults stop

    def uninstall(self) -> None:
        from pixivflow import aws

        aws.set_factory(self._previous_factory)
        self.jobs.unspy()

    # -- hooks of a world variant (world_routes, world_pixiv) ---------------------------------------
    def collaborators(self, transport: Any) -> dict[str, Any]:
        """runtime.override values of the variant (its route transport, its work source), given the
        worker's HTTP transport; called with the stepped clients installed, before the engine is built."""
        return {}

    def delivered(self) -> Any:
        """What the oracle reads as the downstream's records (``.records``: idempotency key -> record)."""
        return self.downstream

    def check(self) -> list[str]:
        """The variant's own invariants, after the common ones."""
        return []

    # -- events ----------------------------------------------------------------------------------
    def at(self, when: int, kind: str, payload: Any = None) -> None:
        heapq.heappush(self.events, _Event(when, next(self._seq), kind, payload))

    def schedule_fires(self, start: int, until: int) -> int:
        from pixivflow.domain.occurrence import fires_between

        n = 0
        for s in self.rt.wiring.config.schedules:
            if s.enabled and s.cron:
                for at in fires_between(s.cron, s.timezone, start - 1, until):
                    self.at(at, "fire", (s.id, at))
                    self.scheduled.append((s.id, at))
                    n += 1
        return n

    def _fire(self, schedule_id: str, at_ms: int, *, retry: int = 0) -> None:
        iso = datetime.fromtimestamp(at_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        handler = self.rt.handlers["trigger"]
        from pixivflow.local.lambda_context import context_for

        def ended(inv: Invocation) -> None:
            if inv.state == "done" and inv.error is None:
                self.fired.append((schedule_id, at_ms, inv.result))
                return
            self.counts["fire.retried"] += 1  # Scheduler retries a failed (or timed-out) invocation
            if retry < 50:
                self.at(self.clock.now_ms() + self.rng["world"].randint(1, 3) * MINUTE_MS, "retry", (schedule_id, at_ms, retry + 1))

        self.baton.spawn("trigger", lambda: handler({"scheduleId": schedule_id, "scheduledTime": iso}, context_for("trigger")),
                         on_end=ended)

    def _sweep(self) -> None:
        handler = self.rt.handlers["stall_sweep"]
        from pixivflow.local.lambda_context import context_for

        self.rt.sweeps += 1
        self.baton.spawn("sweep", lambda: handler({"source": "aws.scheduler", "detail-type": "Scheduled Event"},
                                                  context_for("stall_sweep")))

    def _dispatch(self, ev: _Event) -> None:
        rng = self.rng["world"]
        if ev.kind == "fire":
            schedule_id, at = ev.payload
            if self.faulty and self.rng["fires"].random() < self.rates.fire_lost:
                self.counts["fire.lost"] += 1  # never delivered, nor any copy of it
                return
            self._fire(schedule_id, at)
            if self.faulty and rng.random() < self.rates.fire_duplicate_now:
                self.counts["fire.duplicate_now"] += 1
                self._fire(schedule_id, at)
            if self.faulty and rng.random() < self.rates.fire_duplicate_late:
                self.counts["fire.duplicate_late"] += 1
                self.at(ev.at + rng.randint(1, 30) * MINUTE_MS, "late", (schedule_id, at))
        elif ev.kind == "late":
            self._fire(*ev.payload)
        elif ev.kind == "retry":
            schedule_id, at, retry = ev.payload
            self._fire(schedule_id, at, retry=retry)
        elif ev.kind.startswith("job."):
            self.jobs.dispatch(ev.kind, ev.payload)

    # -- SQS on the way --------------------------------------------------------------------------
    def on_the_way(self, esm: Esm, messages: list[dict]) -> list[dict]:
        """The records handed to the function: some lost, some duplicated, some delayed; shuffled."""
        rng, r, pump = self.rng["sqs"], self.rates.chaos, esm.pump
        records: list[dict] = []
        for m in messages:
            record = pump._record(m)  # noqa: SLF001
            roll = rng.random() if self.faulty else 1.0
            if roll < r.sqs_lose:
                self.counts[f"sqs.{esm.name}.lost"] += 1
                pump._sqs.delete_message(QueueUrl=pump.url, ReceiptHandle=m["ReceiptHandle"])  # noqa: SLF001
                continue
            roll -= r.sqs_lose
            if roll < r.sqs_duplicate:
                records.append(record)
                if rng.random() < 0.5:
                    records.append(dict(record))
                    self.counts[f"sqs.{esm.name}.dup_same_batch"] += 1
                else:
                    pump._sqs.send_message(QueueUrl=pump.url, MessageBody=m["Body"])  # noqa: SLF001
                    self.counts[f"sqs.{esm.name}.dup_later"] += 1
                continue
            roll -= r.sqs_duplicate
            if roll < r.sqs_delay:
                pump._hold(m, self.clock.now_ms() + rng.randint(1, 600) * 1000)  # noqa: SLF001
                self.counts[f"sqs.{esm.name}.delayed"] += 1
                continue
            records.append(record)
        rng.shuffle(records)
        return records

    # -- the loop ----------------------------------------------------------------------------------
    def run(self, until: int) -> None:
        """Run the world until ``until`` (and every event due by then); new fires stop at ``until``."""
        rng = self.rng["world"]
        next_tick = (self.clock.now_ms() // MINUTE_MS + 1) * MINUTE_MS
        while True:
            now = self.clock.now_ms()
            while self.events and self.events[0].at <= now:
                self._dispatch(heapq.heappop(self.events))
            if now >= next_tick:
                self._sweep()
                if self.faulty and rng.random() < self.rates.sweep_twice:
                    self.counts["sweep.twice"] += 1
                    self._sweep()
                next_tick = (now // MINUTE_MS + 1) * MINUTE_MS
            if self.baton.live and rng.random() >= self.rates.poll_eagerly:
                self.baton.run_one()
                continue
            polled = False
            for name in ("execute", "deliver") if rng.random() < 0.5 else ("deliver", "execute"):
                polled = self.esms[name].poll() or polled
            if polled or self.baton.live:
                if self.baton.live:
                    self.baton.run_one()
                continue
            # Nothing runs and nothing is visible: time passes to the next event, or to a sweep tick
            # a few minutes on (a sweep that skips quiet minutes; one on every tick costs seeds/s).
            if now >= until and not (self.events and self.events[0].at <= until):
                return
            upcoming = next_tick + rng.randint(0, IDLE_JUMP_MS // MINUTE_MS - 1) * MINUTE_MS
            if self.events:
                upcoming = min(upcoming, self.events[0].at)
            if now < until:
                upcoming = min(upcoming, until)
            self.clock.set(max(now + 1, upcoming))

    def stop_faults(self) -> None:
        self.faulty = False
        self.baton.death = 0.0
        self.baton.pause = 0.0
        self.chaos.active = False
        self.jobs.receiver.active = False
        # A retry owed is still owed: Scheduler's, and a consumer's retried POST or cancel.
        self.events = [e for e in self.events if e.kind in ("retry", "job.post", "job.cancel")]
        heapq.heapify(self.events)


def run_world(rt: Any, downstream: Any, seed: int, *, start_ms: int, outcomes: Callable[[str], list[dict]],
              rates: WorldRates | None = None, world_cls: type[World] | None = None) -> SeedResult:
    """One seed: the window's fires under faults, then convergence, then the §13 oracle."""
    world = (world_cls or World)(rt, downstream, seed, rates).install()
    try:
        rng = world.rng["world"]
        world.schedule_fires(start_ms, start_ms + WINDOW_MS)
        world.jobs.schedule(start_ms, start_ms + WINDOW_MS)
        cut = start_ms + WINDOW_MS + rng.randint(0, 15) * MINUTE_MS  # faults stop mid-flight
        world.run(cut)
        world.stop_faults()
        world.baton.drain()
        world.run(world.clock.now_ms() + 10 * MINUTE_MS)  # concurrent, without faults: owed retries fire
        world.baton.drain()
        settled_ms = rt.settle(max_ms=CONVERGE_MS)
        world.chaos.trace.extend(world.baton.deaths)
        with still_ledger(rt):
            problems, by_status, budget_rows = check_invariants(rt, world.delivered(), world.chaos)
            problems += check_outcome_lines(rt, world.chaos, outcomes)
        problems += check_jobs(rt, world.jobs)  # its API reads may reconcile: outside the still view
        with still_ledger(rt):
            problems += world.check()
            admitted = {r["slot_id"] for _, _, r in world.fired if isinstance(r, dict) and r.get("status") == "admitted"}
            slots = sum(1 for s in rt.wiring.ledger.slot_ids() if "@manual-" not in s)  # jobs and refetches: check_jobs
            if slots != len(admitted):
                problems.append(f"[0] {len(admitted)} admitted occurrences made {slots} slots")
        problems += check_missed_fires(rt, world.scheduled)  # last: its own sweep ticks come after every other check
        with still_ledger(rt):
            involved = {s for s in rt.wiring.ledger.slot_ids() if any(s in p for p in problems)}
        faults = Counter(world.counts) + Counter({k: v for k, v in world.baton.counts.items() if not k.startswith("spawn.")})
        faults.update({k: v for k, v in world.chaos.counts.items() if not k.startswith("crash@")})
        line = (f"seed={seed} fires={len(world.fired)} slots={dict(sorted((str(k), v) for k, v in by_status.items()))} "
                f"deliveries={len(downstream.records)} posts={len(downstream.requests)} converge={settled_ms // MINUTE_MS}min "
                f"deaths={world.baton.counts['death']} budget_rows={len(budget_rows)} dlq={dlq_depths(rt)} | "
                + " ".join(f"{k}={v}" for k, v in sorted(faults.items())))
        trace = [t for t in world.chaos.trace if any(s in t for s in involved)] or world.chaos.trace[-20:] if problems else []
        return SeedResult(seed, problems, len(world.fired), slots, line, faults, trace)
    finally:
        world.baton.dead.extend(world.baton.live)  # after a harness error: whatever still waits is released too
        world.baton.live.clear()
        world.baton.release_dead()
        world.uninstall()
