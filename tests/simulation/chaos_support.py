"""Seeded fault injection over the real handlers (DESIGN §10 "tests/simulation"; spec §13).

``Chaos(rt, downstream, seed).install()`` wraps, on a started ``EmbeddedRuntime``:

* the two queue consumers' handlers: each record the pump hands over may be LOST (deleted
  without handling), DUPLICATED (handled twice in the same batch, or re-sent for a later one),
  DELAYED (re-sent with a virtual ``notBefore``, so it arrives after later messages); every
  batch is shuffled (reordering);
* the engine's adapters (ledger, queues, work source, artifacts): a chosen call raises
  ``InjectedCrash`` BEFORE or AFTER doing its work (after = the write is durable, the process
  died). A "hard" crash also swallows the best-effort lease release that follows it, like a
  process that is gone;
* the downstream endpoint: scripted 500/429/503, lost ACKs ("drop": committed, connection cut)
  and rare remote failures (200 with a FAILED record, never for a key already recorded);
* the clock: fires retried after an injected crash (Scheduler's retry policy), duplicated at
  once (concurrent duplicate invocation) or again after the occurrence settled (late duplicate);
* the sweep: an invocation that crashed is simply the next minute's job.

Every decision comes from ``random.Random`` streams derived from the seed and the run is
single-threaded (the downstream answers synchronously), so a seed replays exactly.
``stop()`` disables every injection and restores the real collaborators.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

INJECTED = "injected crash"


class InjectedCrash(RuntimeError):
    def __init__(self) -> None:
        super().__init__(INJECTED)


@dataclass(frozen=True)
class Rates:
    sqs_lose: float = 0.10
    sqs_duplicate: float = 0.10
    sqs_delay: float = 0.08
    crash: float = 0.05  # per wrapped adapter call
    crash_hard: float = 0.4  # share of crashes that also skip the lease release
    http_retryable: float = 0.12  # 500 / 429 / 503
    http_drop: float = 0.08  # committed downstream, ACK lost
    http_remote_failed: float = 0.02  # 200 {"data": {"status": "FAILED"}}
    fire_duplicate_now: float = 0.25
    fire_duplicate_late: float = 0.20
    clock_jump: float = 0.02  # per sweep tick: the clock leaps 2-20 min (a paused or throttled sweep)


def port_methods(port: type) -> tuple[str, ...]:
    """The crash points of an adapter: every method its port declares (the ledger: every method of its roles), so a method added
    to the port is a crash point at once, with no hand-kept list to forget it in."""
    import inspect

    return tuple(sorted(n for n, v in vars(port).items() if inspect.isfunction(v) and not n.startswith("_")))


LEDGER_CALLS = tuple(sorted({m for role in __import__("pixivflow.ports", fromlist=["LEDGER_ROLES"]).LEDGER_ROLES
                            for m in port_methods(role)}))
QUEUE_CALLS = ("send_execution", "send_outbox")
SOURCE_CALLS = ("download", "get_work", "search_page")
ARTIFACT_CALLS = ("put",)


class CrashProxy:
    """Delegates to ``inner``; the methods in ``methods`` may crash before or after their work."""

    def __init__(self, inner: Any, chaos: "Chaos", adapter: str, methods: tuple[str, ...]) -> None:
        self._inner = inner
        self._chaos = chaos
        self._adapter = adapter
        self._methods = frozenset(methods)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._methods or not callable(attr):
            return attr
        chaos, label = self._chaos, f"{self._adapter}.{name}"

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if label == "ledger.release_cell" and chaos.swallow_release:
                chaos.swallow_release = False  # the process is gone: its best-effort release never runs
                chaos.count("crash.release_skipped")
                return False
            mode = chaos.crash_mode(label, args)
            if mode == "before":
                raise InjectedCrash()
            result = attr(*args, **kwargs)
            if mode == "after":
                raise InjectedCrash()
            return result

        return wrapped


class Chaos:
    def __init__(self, rt: Any, downstream: Any, seed: int, rates: Rates | None = None) -> None:
        self.rt = rt
        self.downstream = downstream
        self.seed = seed
        self.rates = rates or Rates()
        self.active = False
        self.counts: Counter[str] = Counter()
        self.swallow_release = False
        self.remote_failed: set[str] = set()  # keys the downstream answered with a FAILED record
        self.trace: list[str] = []  # every injected crash, for diagnosing a failing seed
        self._rng = {name: random.Random(f"{seed}:{name}") for name in ("sqs", "crash", "http", "fire", "clock")}
        self._saved: dict[str, Any] = {}
        self._handlers: dict[str, Callable[..., Any]] = {}

    # -- lifecycle ----------------------------------------------------------------------------
    def install(self) -> "Chaos":
        wiring = self.rt.wiring
        self._saved = {name: getattr(wiring, name) for name in ("ledger", "queues", "source", "artifacts")}
        wiring.ledger = CrashProxy(self._saved["ledger"], self, "ledger", LEDGER_CALLS)
        wiring.queues = CrashProxy(self._saved["queues"], self, "queues", QUEUE_CALLS)
        wiring.source = CrashProxy(self._saved["source"], self, "source", SOURCE_CALLS)
        wiring.artifacts = CrashProxy(self._saved["artifacts"], self, "artifacts", ARTIFACT_CALLS)
        for name, pump in self.rt.pumps.items():
            self._handlers[name] = pump._handler  # noqa: SLF001 - the pump is the Lambda event source mapping
            pump._handler = self._consumer(name, pump, pump._handler)  # noqa: SLF001
        self._real_fire = self.rt.fire
        self._real_sweep = self.rt.sweep
        self.rt.fire = self._fire  # instance attributes shadow the methods run_schedules/settle call
        self.rt.sweep = self._sweep
        self.downstream.state.responder = self._respond
        self.active = True
        return self

    def stop(self) -> None:
        """No more faults: restore every real collaborator (messages already re-sent stay queued)."""
        self.active = False
        self.swallow_release = False
        wiring = self.rt.wiring
        for name, value in self._saved.items():
            setattr(wiring, name, value)
        for name, handler in self._handlers.items():
            self.rt.pumps[name]._handler = handler  # noqa: SLF001
        self.rt.__dict__.pop("fire", None)
        self.rt.__dict__.pop("sweep", None)
        self.downstream.state.responder = None

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] += n

    # -- crashes ------------------------------------------------------------------------------
    def crash_mode(self, label: str, args: tuple = ()) -> str | None:
        if not self.active:
            return None
        rng = self._rng["crash"]
        if rng.random() >= self.rates.crash:
            return None
        mode = "after" if rng.random() < 0.5 else "before"
        if rng.random() < self.rates.crash_hard:
            self.swallow_release = True
        self.count("crash")
        self.count(f"crash.{mode}")
        self.count(f"crash@{label}")
        subject = _subject(args)
        self.trace.append(f"t={self.rt.clock.now_ms()} {mode} {label}({subject}){' hard' if self.swallow_release else ''}")
        return mode

    def _end_invocation(self) -> None:
        self.swallow_release = False  # a hard crash only ever kills its own invocation

    # -- SQS ------------------------------------------------------------------------------------
    def _consumer(self, name: str, pump: Any, real: Callable[[dict, Any], Any]) -> Callable[[dict, Any], Any]:
        def handler(event: dict, context: Any) -> Any:
            if not self.active:
                return real(event, context)
            rng, r = self._rng["sqs"], self.rates
            records: list[dict] = []
            for record in event["Records"]:
                roll = rng.random()
                if roll < r.sqs_lose:
                    self.count(f"sqs.{name}.lost")
                    continue  # the pump deletes it: never handled
                roll -= r.sqs_lose
                if roll < r.sqs_duplicate:
                    records.append(record)
                    if rng.random() < 0.5:
                        records.append(dict(record))
                        self.count(f"sqs.{name}.dup_same_batch")
                    else:
                        self._resend(pump, record["body"], 0)
                        self.count(f"sqs.{name}.dup_later")
                    continue
                roll -= r.sqs_duplicate
                if roll < r.sqs_delay:
                    self._resend(pump, record["body"], rng.randint(1, 600) * 1000)
                    self.count(f"sqs.{name}.delayed")
                    continue
                records.append(record)
            rng.shuffle(records)
            try:
                if not records:
                    return {"batchItemFailures": []}
                return real({"Records": records}, context)
            finally:
                self._end_invocation()

        return handler

    def _resend(self, pump: Any, body: str, delay_ms: int) -> None:
        kwargs: dict[str, Any] = {"QueueUrl": pump.url, "MessageBody": body}
        if delay_ms:
            not_before = self.rt.clock.now_ms() + delay_ms
            kwargs["MessageAttributes"] = {"notBefore": {"DataType": "Number", "StringValue": str(not_before)}}
        pump._sqs.send_message(**kwargs)  # noqa: SLF001

    # -- clock ----------------------------------------------------------------------------------
    def _fire(self, schedule_id: str, at_ms: int | None = None, *, iso: str | None = None) -> Any:
        result = self._fire_until_accepted(schedule_id, at_ms, iso)
        if self.active and self._rng["fire"].random() < self.rates.fire_duplicate_now:
            self.count("fire.duplicate_now")
            self._fire_until_accepted(schedule_id, at_ms, iso)
        return result

    def _fire_until_accepted(self, schedule_id: str, at_ms: int | None, iso: str | None) -> Any:
        """EventBridge Scheduler retries a failed invocation (its retry policy); here at once."""
        for _ in range(50):
            try:
                return self._real_fire(schedule_id, at_ms, iso=iso)
            except InjectedCrash:
                self.count("fire.crashed_retried")
            finally:
                self._end_invocation()
        raise AssertionError(f"fire of {schedule_id} crashed 50 times in a row")

    def on_fire(self, schedule_id: str, at_ms: int, result: Any) -> None:
        """run_schedules' callback (after the occurrence settled): sometimes the same fire again, late."""
        if self.active and self._rng["fire"].random() < self.rates.fire_duplicate_late:
            self.count("fire.duplicate_late")
            self._fire_until_accepted(schedule_id, at_ms, None)

    def cut_minutes(self) -> int:
        """How many virtual minutes the last occurrence runs under chaos before the faults stop."""
        return self._rng["fire"].randint(0, 12)

    # -- sweep ----------------------------------------------------------------------------------
    def _sweep(self) -> Any:
        if self.active and self._rng["clock"].random() < self.rates.clock_jump:
            self.count("clock.jump")
            self.rt.clock.advance(self._rng["clock"].randint(2, 20) * 60_000)
        try:
            return self._real_sweep()
        except InjectedCrash:
            self.count("sweep.crashed")  # the invocation failed; the next minute's sweep runs anyway
            return None
        finally:
            self._end_invocation()

    # -- downstream -----------------------------------------------------------------------------
    def _respond(self, req: Any) -> Any:
        if not self.active:
            return None
        rng, r = self._rng["http"], self.rates
        roll = rng.random()
        if roll < r.http_retryable:
            status = rng.choice((500, 429, 503))
            self.count(f"http.{status}")
            return status, {"error": {"code": "injected", "status": status}}
        roll -= r.http_retryable
        if roll < r.http_drop:
            self.count("http.drop")
            return "drop"
        roll -= r.http_drop
        if roll < r.http_remote_failed:
            key = _key(req)
            if key in self.downstream.state.records:
                return None  # a recorded key answers with its record; it never turns failed later
            self.remote_failed.add(key)
            self.count("http.remote_failed")
            return 200, {"data": {"review_id": f"rf-{len(self.remote_failed)}", "status": "FAILED", "reused": False}}
        return None

    def summary(self) -> str:
        groups: Counter[str] = Counter()
        for key, n in self.counts.items():
            if key.startswith("crash@"):
                continue
            groups[key] += n
        return " ".join(f"{k}={v}" for k, v in sorted(groups.items()))


def _subject(args: tuple) -> str:
    """What a crashed call was about: a slot id, an intent's key, a work id (for the trace)."""
    if not args:
        return ""
    first = args[0]
    for attr in ("idempotency_key", "slot_id", "work_id"):
        if hasattr(first, attr):
            return str(getattr(first, attr))
    if isinstance(first, (list, tuple)):
        return f"{len(first)} message(s)"
    return ", ".join(str(a) for a in args[:2] if isinstance(a, (str, int)))


def _key(req: Any) -> str:
    body = req.body if isinstance(req.body, dict) else {}
    return req.headers.get("idempotency-key") or str(body.get("idempotency_key"))


def dlq_depths(rt: Any) -> dict[str, int]:
    """Messages parked on each queue's DLQ (informational: the ledger, not SQS, must converge)."""
    from pixivflow import aws

    sqs = aws.client("sqs")
    out: dict[str, int] = {}
    for env_name in ("EXECUTION_QUEUE_URL", "OUTBOX_QUEUE_URL"):
        url = rt.env[env_name]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
        policy = attrs.get("RedrivePolicy")
        if not policy:
            continue
        arn = json.loads(policy)["deadLetterTargetArn"]
        dlq_url = sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[1])["QueueUrl"]
        depth = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
        out[env_name.split("_")[0].lower()] = int(depth.get("ApproximateNumberOfMessages", "0"))
    return out
