"""The embedded runtime: moto + template-provisioned resources + the real Lambda handlers.

moto never fires schedules and cannot run Lambda code without Docker, so this
module plays the missing parts: EventBridge Scheduler's fires on a virtual clock, Lambda's SQS
event source mappings (``QueuePump``), API Gateway's HTTP API v2 events, and the sweep's
schedule (every ``SweepIntervalMinutes``: the template's default, or the runtime's override). Everything else (table, queues, handlers, services) is the production code path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import runtime
from ..clock import Entropy, VirtualClock
from ..domain.occurrence import fires_between
from .lambda_context import context_for
from .provision import provision
from .template import sweep_interval
from .pump import QueuePump

FUNCTIONS = ("trigger", "execute", "deliver", "stall_sweep", "job_events")
MINUTE_MS = 60_000


_REPOSITORY_FUNCTIONS = Path(__file__).resolve().parents[3] / "functions"  # once: resolve() walks every component


def functions_dir() -> Path:
    override = os.environ.get("PIXIVFLOW_FUNCTIONS_DIR")
    if override:
        return Path(override)
    return _REPOSITORY_FUNCTIONS


_modules: dict[tuple[str, int], Any] = {}


def load_handler(name: str, *, reuse: bool = False) -> Callable[[dict, Any], Any]:
    """Import ``functions/<name>/app.py`` exactly as Lambda would, and return its ``handler``.

    ``reuse`` keeps one module per file (a warm container): the simulation builds a runtime per seed."""
    path = functions_dir() / name / "app.py"
    key = (str(path), path.stat().st_mtime_ns)
    if reuse and key in _modules:
        return _modules[key].handler
    spec = importlib.util.spec_from_file_location(f"pixivflow_fn_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _modules[key] = module
    return module.handler


def http_event(method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None,
               query: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event, as the trigger and job_events functions receive."""
    raw_query = "&".join(f"{k}={v}" for k, v in (query or {}).items())
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": {k.lower(): v for k, v in (headers or {}).items()} | {"content-type": "application/json"},
        "queryStringParameters": dict(query) if query else None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": "localhost",
            "domainPrefix": "localhost",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "pixivflow-local"},
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": "30/Nov/2026:00:00:00 +0000",
            "timeEpoch": 0,
        },
        "body": None if body is None else (body if isinstance(body, str) else json.dumps(body)),
        "isBase64Encoded": False,
    }


_SWEEP_READ_COUNTERS = frozenset({"scanned", "activeSlots", "unrecoverable"})


def _sweep_acted(result: Any) -> bool:
    """Whether a sweep invocation changed anything (a crashed or skipped one counts as acting)."""
    if not isinstance(result, Mapping) or result.get("skipped"):
        return True
    return any(isinstance(v, int) and not isinstance(v, bool) and v > 0 for k, v in result.items()
               if k not in _SWEEP_READ_COUNTERS and k not in ("leaseUntil",))


class EmbeddedRuntime:
    """Context manager: ``with EmbeddedRuntime(config_path, clock) as rt: rt.fire(...); rt.settle()``.

    With ``start_moto=True`` (default) it starts ``moto.mock_aws`` itself; pass False when the
    caller already runs one (tests). With ``backend="twin"`` it runs on the in-memory twins of
    ``pixivflow.local.twins`` instead of moto (no botocore in the loop: the simulation's backend),
    whose indexes may lag by ``index_lag_ms``; ``moto_services`` (e.g. ``("ssm",)``) are then served
    by moto beside the twins, for the services the twins do not model (the Pixiv token and the
    routes' secrets live in SSM): a path that needs SSM runs its DynamoDB, SQS and S3 on the twins
    all the same, at a tenth of moto's cost per request.
    """

    def __init__(self, config_path: str | os.PathLike[str], clock: VirtualClock, *, tokens: Mapping[str, str] | None = None,
                 seed: int = 0, start_moto: bool = True, prefix: str = "pixivflow-local", overrides: Mapping[str, Any] | None = None,
                 backend: str = "moto", index_lag_ms: int | Callable[[], int] = 0,
                 moto_services: Sequence[str] = (), sweep_interval_minutes: int | None = None) -> None:
        if backend not in ("moto", "twin"):
            raise ValueError(f"backend must be 'moto' or 'twin', not {backend!r}")
        if moto_services and backend != "twin":
            raise ValueError("moto_services serve services beside the twins: they need backend='twin'")
        self._moto_services = frozenset(moto_services)
        # The sweep's schedule as template.yaml deploys it (an override must be one of its values)
        self.sweep_interval = sweep_interval(sweep_interval_minutes)
        self.config_path = str(config_path)
        self.clock = clock
        self.tokens = dict(tokens or {})
        self.seed = seed
        self._start_moto = start_moto
        self._prefix = prefix
        self._overrides = dict(overrides or {})
        self.backend = backend
        self._index_lag_ms = index_lag_ms
        self.cloud: Any = None  # the TwinCloud when backend == "twin"
        self._stack = ExitStack()
        self._saved_env: dict[str, str | None] = {}
        self.env: dict[str, str] = {}
        self.handlers: dict[str, Callable[[dict, Any], Any]] = {}
        self.pumps: dict[str, QueuePump] = {}
        self.sweeps = 0
        self.outages: list[tuple[str, int, int]] = []  # (pump name, from ms, until ms): a consumer that is down

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> "EmbeddedRuntime":
        self._set_env({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"})
        if self.backend == "twin":
            from .twins import TwinCloud

            if self._moto_services and self._start_moto:
                from moto import mock_aws

                self._stack.enter_context(mock_aws())
            self.cloud = TwinCloud(now_ms=self.clock.now_ms, index_lag_ms=self._index_lag_ms, seed=self.seed)
            self.cloud.elsewhere = self._moto_services
            self._stack.enter_context(self.cloud)
        elif self._start_moto:
            from moto import mock_aws

            self._stack.enter_context(mock_aws())
        self.env = provision(prefix=self._prefix)
        env = dict(self.env)
        env["PIXIVFLOW_CONFIG"] = self.config_path
        env["PIXIVFLOW_VIRTUAL_DELAYS"] = "1"
        env["POWERTOOLS_METRICS_NAMESPACE"] = "PixivFlowLocal"
        env["SWEEP_INTERVAL_MS"] = str(self.sweep_interval.ms)  # as the template sets it on the sweep function
        env["TRIGGER_TOKEN"] = self.tokens.get("trigger", "")
        env["JOBS_TOKEN"] = self.tokens.get("jobs", "")
        env["CALLBACK_SIGNING_SECRET"] = self.tokens.get("callback", "")
        self._set_env(env)
        runtime.reset()
        runtime.override(clock=self.clock, entropy=Entropy(self.seed), **self._overrides)
        self.handlers = {name: load_handler(name, reuse=self.backend == "twin") for name in FUNCTIONS}
        from .. import aws
        from ..adapters.dynamo_ledger import DynamoLedger

        self._observer_ledger = DynamoLedger(aws.client("dynamodb"), self.env["LEDGER_TABLE"])
        from ..adapters.outbox_rows import DynamoOutboxRows

        # Notifications and job event callbacks: the generic rows, found through their own index.
        self._observer_rows = DynamoOutboxRows(aws.client("dynamodb"), self.env["LEDGER_TABLE"])
        sqs = aws.client("sqs")
        for name, url_env, fn in (("execute", "EXECUTION_QUEUE_URL", "execute"), ("deliver", "OUTBOX_QUEUE_URL", "deliver")):
            url = self.env[url_env]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            self.pumps[name] = QueuePump(sqs, url, arn, self.handlers[fn], self.clock, name=name)
        return self

    def __exit__(self, *exc: Any) -> None:
        runtime.reset()
        self._stack.close()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def _set_env(self, values: Mapping[str, str]) -> None:
        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    # -- entry points ------------------------------------------------------------
    @property
    def wiring(self):
        return runtime.get().wiring

    def fire(self, schedule_id: str, at_ms: int | None = None, *, iso: str | None = None, label: str | None = None) -> dict[str, Any]:
        """Invoke the trigger function with EventBridge Scheduler's input for one fire (``label``: the
        dev server's fire-now names its slot so; a deployed schedule's input never carries one)."""
        if iso is None:
            from datetime import datetime, timezone

            at = self.clock.now_ms() if at_ms is None else at_ms
            iso = datetime.fromtimestamp(at / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {"scheduleId": schedule_id, "scheduledTime": iso, **({"label": label} if label else {})}
        return self.handlers["trigger"](event, context_for("trigger"))

    def http(self, method: str, path: str, body: Any = None, *, token: str | None = None, function: str = "trigger",
             headers: Mapping[str, str] | None = None, query: Mapping[str, str] | None = None) -> tuple[int, Any]:
        hdrs = dict(headers or {})
        if token is not None:
            hdrs["authorization"] = f"Bearer {token}"
        resp = self.handlers[function](http_event(method, path, body, hdrs, query), context_for(function))
        raw = resp.get("body")
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw
        return resp["statusCode"], parsed

    def sweep(self) -> dict[str, Any]:
        self.sweeps += 1
        return self.handlers["stall_sweep"]({"source": "aws.scheduler", "detail-type": "Scheduled Event"}, context_for("stall_sweep"))

    def pump(self, max_batches: int = 10_000) -> int:
        """Run both queue consumers until neither has a visible message. Returns records handled."""
        handled = 0
        for _ in range(max_batches):
            now = self.clock.now_ms()
            live = [p for name, p in self.pumps.items() if not any(o == name and a <= now < b for o, a, b in self.outages)]
            n = sum(p.poll() for p in live)
            if n == 0:
                break
            handled += n
        return handled

    def next_release(self) -> int | None:
        times = [t for t in (p.next_release() for p in self.pumps.values()) if t is not None]
        return min(times) if times else None

    def settle(self, *, max_ms: int = 6 * 3_600_000, sweep_every_ms: int | None = None, jump: bool = True) -> int:
        """Advance the virtual clock (pumping and sweeping each tick) until nothing is pending.

        The sweep runs on whole ticks of ``sweep_every_ms`` from now (default: the runtime's sweep
        interval), as EventBridge Scheduler's rate expression would. With ``jump`` (the default) the clock skips the ticks at which nothing
        can happen: it goes straight to the tick at or after the next due time (a held message, an
        outbox row's due time plus the re-drive grace, a lease expiry, a recovery or stall or timeout
        deadline; ``_next_due``). That time is a lower bound of every time-based rule the sweep
        applies, so a skipped tick is one at which the sweep would have done nothing.

        Returns the virtual milliseconds that passed. Stops at ``max_ms`` regardless."""
        if sweep_every_ms is None:
            sweep_every_ms = self.sweep_interval.ms
        start = self.clock.now_ms()
        active = self.pump() > 0
        while self.clock.now_ms() - start < max_ms:
            if not self._busy():
                break
            now = self.clock.now_ms()
            step = sweep_every_ms
            # Jump only from a quiet tick: a sweep that acted, or messages handled after it, may leave
            # work the very next sweep takes up whatever the time (a confirmed delivery to settle).
            if jump and not active:
                due = self._next_due(now)
                if due is not None and due > now + sweep_every_ms:
                    ticks = -(-(due - now) // sweep_every_ms)  # the first tick at or after `due`
                    step = min(ticks * sweep_every_ms, max(sweep_every_ms, start + max_ms - now))
            self.clock.advance(step)
            handled = self.pump()
            result = self.sweep()
            handled += self.pump()
            active = handled > 0 or _sweep_acted(result)
        return self.clock.now_ms() - start

    def _next_due(self, now: int) -> int | None:
        """The earliest future instant at which a message, a row or a sweep rule can act.

        Every timestamp of every live slot plus every budget the engine measures from one (a
        superset of each rule's threshold: queued and stall budgets, schedule timeouts, the
        recovery delay, the outbox re-drive grace and lease TTLs), the pumps' held messages, and
        the due times of the generic outbox rows. None when nothing is time-based (then step)."""
        from ..services.timing import HEARTBEAT_MS, LEASE_TTL_MS, OUTBOX_LEASE_MS, REDISPATCH_AFTER_MS, REDRIVE_GRACE_MS

        config = self.wiring.config
        budgets = {0, MINUTE_MS, HEARTBEAT_MS, LEASE_TTL_MS, OUTBOX_LEASE_MS, REDISPATCH_AFTER_MS, REDRIVE_GRACE_MS,
                   config.schedulerRuntime.queued_timeout_ms, config.schedulerRuntime.stall_timeout_ms}
        budgets |= {s.timeout_ms for s in config.schedules}
        stamps: set[int] = set()
        candidates: list[int] = [t for t in (self.next_release(), self._index_lag_until()) if t is not None]
        ledger = self._observer()
        for slot_id, _created in ledger.active_slots():
            state = ledger.load(slot_id)
            if state is None:
                continue
            stamps.update(v for v in (state.slot.created_at, state.slot.started_at, state.slot.completed_at) if v)
            for cell in state.cells.values():
                stamps.update(v for v in (cell.created_at, cell.updated_at, cell.started_at, cell.heartbeat_at,
                                          cell.dispatched_at, cell.lease_until, cell.completed_at) if v)
            for intent in state.intents:
                stamps.update(v for v in (intent.created_at, intent.updated_at, intent.next_attempt_at, intent.lease_until) if v)
        for pk, sk in ledger.due_intents(now + 7 * 86_400_000):
            item = ledger._get(pk, sk)  # noqa: SLF001 - the harness's own look at a row
            if item:
                stamps.update(int(item[k]) for k in ("nextAttemptAt", "leaseUntil", "updatedAt") if k in item)
        for kind, key in self._observer_rows.due(now + 7 * 86_400_000):
            row = self._observer_rows.get(kind, key)
            if row is not None:
                stamps.update(v for v in (row.next_attempt_at, row.lease_until, row.updated_at) if v)
        candidates.extend(t + b for t in stamps for b in budgets if t + b > now)
        return min(candidates) if candidates else None

    def _observer(self):
        """A ledger on its own client: the harness's own looks at the table are not the engine's cost."""
        return self._observer_ledger

    def _index_lag_until(self) -> int | None:
        """On the twin, when its lagging indexes will have caught up (the observer reads indexes too,
        and must not mistake a lagging index for an empty one)."""
        return self.cloud.dynamodb.index_pending_until() if self.cloud is not None else None

    def _busy(self) -> bool:
        if self.next_release() is not None or self._index_lag_until() is not None:
            return True
        if self.cloud is not None and self.cloud.dynamodb.indexes_in_flight():
            # A lagging index (GSIs are eventually consistent) may still hide a live slot
            # or a due row from the looks below: time has to pass before "nothing pending" is true.
            return True
        for pump in self.pumps.values():
            if pump.visible() > 0:
                return True
        ledger = self._observer()
        if ledger.active_slots(limit_per_shard=1):
            return True
        if ledger.due_intents(self.clock.now_ms() + 7 * 86_400_000, limit_per_shard=1):
            return True
        return bool(self._observer_rows.due(self.clock.now_ms() + 7 * 86_400_000, limit_per_shard=1))

    def run_schedules(self, until_ms: int, *, on_fire: Callable[[str, int, Any], None] | None = None) -> list[tuple[str, int, Any]]:
        """Fire every enabled schedule's occurrences up to ``until_ms`` like EventBridge Scheduler, settling in between."""
        config = self.wiring.config
        fired: list[tuple[str, int, Any]] = []
        last = {s.id: self.clock.now_ms() - 1 for s in config.schedules if s.enabled and s.cron}
        while True:
            upcoming = []
            for s in config.schedules:
                if s.id in last:
                    nxt = fires_between(s.cron, s.timezone, last[s.id], until_ms)
                    if nxt:
                        upcoming.append((nxt[0], s.id))
            if not upcoming:
                break
            at, schedule_id = min(upcoming)
            last[schedule_id] = at
            if at > self.clock.now_ms():
                self.clock.set(at)
            # A fire that fell while we were settling is delivered late, as Scheduler's own
            # concurrent invocation would have been: its scheduledTime is still the fire.
            result = self.fire(schedule_id, at)
            fired.append((schedule_id, at, result))
            self.settle()
            if on_fire:
                on_fire(schedule_id, at, result)  # called once the fire has settled
        if self.clock.now_ms() < until_ms:
            self.clock.set(until_ms)
        return fired
