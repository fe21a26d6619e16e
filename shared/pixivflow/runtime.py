"""The composition root: builds the object graph from env + config once per cold start.

Importing this module creates no AWS client and reads no config; ``get()`` does, once, and
``reset()`` drops the cache (tests, the embedded runtime). ``override()`` injects a clock,
entropy, a work source, a delivery channel or the Pixiv source's ``sleep`` for the next ``get()``.

Every function's cold start loads the config and makes the ledger, queue and outbox-row adapters
and the ``Wiring`` (references only: an AWS client is made on its first call). Everything heavier
is built when a use case first touches it, so each function builds what it uses and nothing else:

- trigger: DynamoDB and SQS clients; no work source, artifact store, route channel or callback sender;
- execute: adds the work source (the Pixiv client and its account store) and the artifact store (S3);
- deliver: the route channel (its HTTP pools) and the artifact store, the callback sender when it
  sends a job's callback; no work source;
- stall sweep: DynamoDB and SQS (a re-driven delivery is a message to the deliver function);
- job events: DynamoDB (the job store).

``tests/unit/test_lazy_clients.py`` holds each function to this list.
"""

from __future__ import annotations

from .domain.text import ascii_digits
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from .clock import Entropy, SystemClock
from .config import PixivFlowConfig, load_config
from .domain.errors import ConfigError
from .services.timing import DEFAULT_SWEEP_INTERVAL_MS
from .wiring import Wiring

_lock = threading.RLock()
_runtime: "Runtime | None" = None
_overrides: dict[str, Any] = {}


@dataclass
class Runtime:
    wiring: Wiring
    secrets: Any
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> PixivFlowConfig:
        return self.wiring.config


class Deferred:
    """A collaborator built on its first use, for a shorter cold start: the first attribute access (a
    call, ``isinstance``) builds it once, then everything is forwarded to it. A trigger fire never
    posts to a route, reads a work or stores a file, so its first invocation imports no route,
    source or artifact adapter; the function that does use one pays for it once per container."""

    __slots__ = ("_build", "_made", "_lock")

    def __init__(self, build: Callable[[], Any]) -> None:
        object.__setattr__(self, "_build", build)
        object.__setattr__(self, "_made", None)
        object.__setattr__(self, "_lock", threading.Lock())

    def _real(self) -> Any:
        real = object.__getattribute__(self, "_made")
        if real is None:
            with object.__getattribute__(self, "_lock"):  # two threads of one container build it once
                real = object.__getattribute__(self, "_made")
                if real is None:
                    real = object.__getattribute__(self, "_build")()
                    object.__setattr__(self, "_made", real)
        return real

    @property  # type: ignore[misc]  # read-only on purpose: isinstance() and type checks see the built object's class
    def __class__(self) -> type:
        return type(self._real())

    @property
    def built(self) -> bool:
        return object.__getattribute__(self, "_made") is not None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real(), name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real()(*args, **kwargs)

    def __repr__(self) -> str:
        made = object.__getattribute__(self, "_made")
        return f"Deferred({made!r})" if made is not None else "Deferred(not built)"


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"environment variable {name} is not set")
    return value


def _sweep_interval_ms() -> int:
    """SWEEP_INTERVAL_MS, which template.yaml sets on the stall sweep from SweepIntervalMinutes;
    unset (every other function, a hand-made environment) it is the template's default minute."""
    raw = (os.environ.get("SWEEP_INTERVAL_MS") or "").strip()
    if not raw:
        return DEFAULT_SWEEP_INTERVAL_MS
    if not ascii_digits(raw):
        raise RuntimeError(f"environment variable SWEEP_INTERVAL_MS: {raw!r} is not a whole number of milliseconds")
    return int(raw)


def _ssm_reader(name: str) -> str:
    """The config document of ``PIXIVFLOW_CONFIG=ssm:<name>``, read as every secret is
    (``secret_refs.ssm_reader``); a parameter that does not exist is a config error naming it."""
    from .adapters.secret_refs import ssm_reader

    text = ssm_reader(name)
    if text is None:
        raise ConfigError(f"PIXIVFLOW_CONFIG: the SSM parameter {name!r} does not exist")
    return text


def build() -> Runtime:
    from . import aws
    from botocore.config import Config

    from .adapters.dynamo_ledger import DynamoLedger
    from .adapters.outbox_rows import DynamoOutboxRows
    from .adapters.sqs_queues import SqsQueues
    from .adapters.sweep_state import DynamoSweepState
    from .adapters.secret_store import SecretStore
    from .observability import EmfMetrics, StructuredLog, logger, start_tracing

    start_tracing()  # X-Ray only when the stack enabled it; patches botocore before any client exists
    config = _overrides.get("config") or load_config(ssm_reader=_ssm_reader)
    for warning in config.warnings:  # a repaired value is said once per cold start
        field_path, _, detail = warning.partition(": ")
        logger.warning(f"configuration warning: {warning}", extra={"event": "config.warning", "field": field_path, "detail": detail})
    clock = _overrides.get("clock") or SystemClock()
    entropy = _overrides.get("entropy") or Entropy()
    retention = int(os.environ.get("RETENTION_DAYS", "30") or 30)
    # Every client is made on its first use (a trigger fire never touches S3, a sweep tick on an
    # idle ledger never sends a message); one DynamoDB client serves every adapter on the table.
    dynamodb = aws.lazy_client("dynamodb")
    log = StructuredLog(logger)
    # A cell item the ledger cannot read is one logged error, never a failed read.
    table = _env("LEDGER_TABLE")
    ledger = DynamoLedger(dynamodb, table, retention_days=retention, log=log)
    sweep_state = _overrides.get("sweep_state") or DynamoSweepState(dynamodb, table, retention_days=retention)
    outbox_rows = DynamoOutboxRows(dynamodb, table, retention_days=retention)
    queues = SqsQueues(
        aws.lazy_client("sqs"),
        _env("EXECUTION_QUEUE_URL"),
        _env("OUTBOX_QUEUE_URL"),
        now_ms=clock.now_ms,
        virtual_delays=os.environ.get("PIXIVFLOW_VIRTUAL_DELAYS") == "1",
        dead_letter_urls=[u.strip() for u in os.environ.get("DEAD_LETTER_QUEUE_URLS", "").split(",") if u.strip()],
    )
    bucket = os.environ.get("ARTIFACT_BUCKET")
    # SigV4 presigned URLs for delivery assets (SigV2 is refused by regions opened after 2014).
    s3 = aws.lazy_client("s3", config=Config(signature_version="s3v4")) if bucket else None
    artifacts = Deferred(lambda: _build_artifacts(s3, bucket, config.storage.retention_class))
    secrets = _overrides.get("secrets") or SecretStore()
    # The overrides in force now are the ones a collaborator built later uses (as an eager build would).
    transport, sleep = _overrides.get("transport"), _overrides.get("sleep")
    channel = _overrides.get("channel") or Deferred(lambda: _build_channel(config, secrets, artifacts, clock, transport))
    metrics_on = os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() not in ("1", "true", "yes")
    source = _overrides.get("source") or Deferred(lambda: _build_source(config, clock, entropy, log, dynamodb, sleep))
    # Workflow Protocol v1: the event stream on the ledger table, and signed callbacks to URLs vetted
    # with ``resolver`` (overrides: ``job_store``, ``resolver`` (callback host -> addresses),
    # ``callback_transport`` (an httpx transport)). The store and the sender are built on first use.
    resolver = _overrides.get("resolver") or _system_resolver
    callback_transport = _overrides.get("callback_transport")
    wiring = Wiring(config, ledger, queues, source, artifacts, channel, clock, entropy, log,
                    EmfMetrics() if metrics_on else None, sweep_state=sweep_state, outbox_rows=outbox_rows,
                    jobs=_overrides.get("job_store") or Deferred(lambda: _job_store(dynamodb, table, retention)),
                    callbacks=Deferred(lambda: _callback_sender(lambda: config.jobs.callbackAllowHosts, resolver,
                                                                callback_transport)),
                    resolver=resolver,
                    callback_secret=secrets.callback_secret,  # raises SecretStoreUnavailable: never "no secret"
                    sweep_interval_ms=_sweep_interval_ms())
    return Runtime(wiring=wiring, secrets=secrets)


def _build_artifacts(s3: Any, bucket: str | None, retention: str) -> Any:
    from .adapters.s3_artifacts import MemoryArtifacts, S3Artifacts

    # Every stored object is tagged with the retention class storage.cacheRetentionDays picks.
    return S3Artifacts(s3, bucket, retention=retention) if bucket else MemoryArtifacts()


def _build_channel(config: PixivFlowConfig, secrets: Any, artifacts: Any, clock: Any, transport: Any) -> Any:
    from .adapters.routes import RouteChannel

    return RouteChannel(config.route, lookup=secrets.lookup, route_token=secrets.route_token, artifacts=artifacts,
                        now_ms=clock.now_ms, transport=transport)


def _job_store(client: Any, table: str, retention: int) -> Any:
    from .adapters.job_store import DynamoJobStore

    return DynamoJobStore(client, table, retention_days=retention)


def _callback_sender(allow_hosts: Callable[[], Any], resolver: Any, transport: Any) -> Any:
    from .adapters.callback_http import HttpCallbackSender

    return HttpCallbackSender(allow_hosts, resolver=resolver, transport=transport)


def _system_resolver(host: str, port: int) -> Any:
    """The system's address lookup, with callback_http imported when a callback URL is first vetted."""
    from .adapters.callback_http import system_resolver

    return system_resolver(host, port)


def _build_source(config: PixivFlowConfig, clock: Any, entropy: Entropy, log: Any, dynamodb: Any, sleep: Any = None):
    if config.source.kind == "catalog":
        from .adapters.catalog_source import CatalogSource

        assert config.source.path is not None  # a catalog source's path is required (config.pixiv.SourceConfig)
        return CatalogSource(config.source.path, page_size=config.source.pageSize)
    if config.source.kind == "pixiv":
        import time

        from .adapters.pixiv import DynamoPixivAccounts, build_source
        from .adapters.pixiv.secrets import SecretResolver

        # The account's shared gate and rotation guard live on the ledger table; the
        # refresh token's ${VAR} resolves from env, then SSM below PIXIV_SECRETS_PATH (ROUTE_SECRETS_PATH when unset).
        return build_source(
            config, now_ms=clock.now_ms, uniform=entropy.uniform,
            store=DynamoPixivAccounts(dynamodb, _env("LEDGER_TABLE")),
            sleep=sleep or time.sleep,
            resolver=SecretResolver(ssm=_ssm_client), log=log,
        )
    raise RuntimeError(f"source kind {config.source.kind!r} is not available in this build")


def _ssm_client():
    from . import aws

    return aws.client("ssm")


def get() -> Runtime:
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = build()
        return _runtime


def cold_start() -> None:
    """Drop the built graph and keep the overrides: the next ``get()`` builds what a new container of
    the same deployment would (the tests of what each function's first invocation builds)."""
    global _runtime
    with _lock:
        dropped, _runtime = _runtime, None
    _close(dropped)


def reset() -> None:
    """Drop the cached graph (and any overrides)."""
    with _lock:
        _overrides.clear()
    cold_start()


def _close(dropped: Runtime | None) -> None:
    """The routes' pooled connections go with the graph that used them: a torn-down runtime (the dev
    server's stop, a test's teardown) leaves no kept-alive connection, and so no request thread of
    a downstream, behind it."""
    if dropped is None:
        return
    channel = dropped.wiring.channel
    if type(channel) is Deferred and not channel.built:
        return  # never built: nothing to close (and nothing to build just to close it)
    try:
        channel.close()
    except Exception:  # closing is best effort: the process may be going away anyway
        pass


def override(**values: Any) -> None:
    """Inject collaborators for the next ``get()``: clock, entropy, source, channel, config, secrets, sweep_state,
    transport (an httpx transport for every route, e.g. a MockTransport)."""
    global _runtime
    with _lock:
        _overrides.update({k: v for k, v in values.items() if v is not None})
        _runtime = None
