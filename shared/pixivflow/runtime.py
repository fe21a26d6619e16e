"""Builds the object graph from env + config once per cold start (DESIGN §3, §12).

Importing this module creates no AWS client and reads no config; ``get()`` does, once, and
``reset()`` drops the cache (tests, the embedded runtime). ``override()`` injects a clock,
entropy, a work source, a delivery channel or the Pixiv source's ``sleep`` for the next ``get()``.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from .clock import Entropy, SystemClock
from .config import PixivFlowConfig, load_config
from .services.engine import Engine

_lock = threading.RLock()
_runtime: "Runtime | None" = None
_overrides: dict[str, Any] = {}


@dataclass
class Runtime:
    engine: Engine
    secrets: Any
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> PixivFlowConfig:
        return self.engine.config


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"environment variable {name} is not set")
    return value


def _ssm_reader(name: str) -> str:
    from aws_lambda_powertools.utilities import parameters

    return parameters.get_parameter(name, decrypt=True)


def build() -> Runtime:
    from . import aws
    from botocore.config import Config

    from .adapters.dynamo_ledger import DynamoLedger
    from .adapters.outbox_rows import DynamoOutboxRows
    from .adapters.routes import RouteChannel
    from .adapters.s3_artifacts import MemoryArtifacts, S3Artifacts
    from .adapters.sqs_queues import SqsQueues
    from .adapters.sweep_state import DynamoSweepState
    from .adapters.secret_store import SecretStore
    from .observability import logger, metrics, start_tracing

    start_tracing()  # X-Ray only when the stack enabled it; patches botocore before any client exists
    config = _overrides.get("config") or load_config(ssm_reader=_ssm_reader)
    for warning in config.warnings:  # a repaired value is said once per cold start (spec §1.1, §7.2)
        field_path, _, detail = warning.partition(": ")
        logger.warning(f"configuration warning: {warning}", extra={"event": "config.warning", "field": field_path, "detail": detail})
    clock = _overrides.get("clock") or SystemClock()
    entropy = _overrides.get("entropy") or Entropy()
    retention = int(os.environ.get("RETENTION_DAYS", "30") or 30)
    # Every client is made on its first use (issue 25: a trigger fire never touches S3, a sweep tick on an
    # idle ledger never sends a message); one DynamoDB client serves every adapter on the table.
    dynamodb = aws.lazy_client("dynamodb")
    ledger = DynamoLedger(dynamodb, _env("LEDGER_TABLE"), retention_days=retention)
    sweep_state = _overrides.get("sweep_state") or DynamoSweepState(dynamodb, _env("LEDGER_TABLE"), retention_days=retention)
    outbox_rows = DynamoOutboxRows(dynamodb, _env("LEDGER_TABLE"), retention_days=retention)
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
    s3_config = Config(signature_version="s3v4")
    # Every stored object is tagged with the retention class storage.cacheRetentionDays picks (issue 25).
    artifacts = (S3Artifacts(aws.lazy_client("s3", config=s3_config), bucket, retention=config.storage.retention_class)
                 if bucket else MemoryArtifacts())
    secrets = _overrides.get("secrets") or SecretStore()
    channel = _overrides.get("channel") or RouteChannel(
        config.route, lookup=secrets.lookup, route_token=secrets.route_token, artifacts=artifacts, now_ms=clock.now_ms,
        transport=_overrides.get("transport"),
    )
    metrics_on = os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() not in ("1", "true", "yes")
    # The source is built from the engine (its clock, entropy and log): None only until the next line.
    engine = Engine(config, ledger, queues, None, artifacts, channel, clock, entropy, logger,  # type: ignore[arg-type]
                    metrics if metrics_on else None, sweep_state=sweep_state, outbox_rows=outbox_rows)
    engine.source = _overrides.get("source") or _build_source(config, engine, dynamodb)
    ledger.log = engine.log  # a cell item it cannot read is one logged error, never a failed read (issue 21)
    _wire_jobs(engine, ledger._client, _env("LEDGER_TABLE"), retention, secrets)
    return Runtime(engine=engine, secrets=secrets)


def _wire_jobs(engine: Engine, client: Any, table: str, retention: int, secrets: Any) -> None:
    """Workflow Protocol v1: the event stream on the ledger table and signed, vetted callbacks.
    Overrides: ``job_store``, ``resolver`` (callback host -> addresses), ``callback_transport``
    (an httpx transport factory)."""
    from .adapters.callback_http import HttpCallbackSender, system_resolver
    from .adapters.job_store import DynamoJobStore

    config = engine.config
    resolver = _overrides.get("resolver") or system_resolver
    engine.jobs = _overrides.get("job_store") or DynamoJobStore(client, table, retention_days=retention)
    engine.resolver = resolver
    engine.callbacks = HttpCallbackSender(lambda: config.jobs.callbackAllowHosts, resolver=resolver,
                                          transport=_overrides.get("callback_transport"))
    engine.callback_secret = secrets.callback_secret  # raises SecretStoreUnavailable: never "no secret"


def _build_source(config: PixivFlowConfig, engine: Engine, dynamodb: Any):
    if config.source.kind == "catalog":
        from .adapters.catalog_source import CatalogSource

        assert config.source.path is not None  # a catalog source's path is required (config.pixiv.SourceConfig)
        return CatalogSource(config.source.path, page_size=config.source.pageSize)
    if config.source.kind == "pixiv":
        import time

        from .adapters.pixiv import DynamoPixivAccounts, build_source
        from .adapters.pixiv.secrets import SecretResolver

        # Issue 10: the account's shared gate and rotation guard live on the ledger table; the
        # refresh token's ${VAR} resolves from env, then SSM below PIXIV_SECRETS_PATH (ROUTE_SECRETS_PATH when unset).
        return build_source(
            config, now_ms=engine.clock.now_ms, uniform=engine.entropy.uniform,
            store=DynamoPixivAccounts(dynamodb, _env("LEDGER_TABLE")),
            sleep=_overrides.get("sleep") or time.sleep,
            resolver=SecretResolver(ssm=_ssm_client), log=engine.log,
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


def reset() -> None:
    """Drop the cached graph (and any overrides)."""
    global _runtime
    with _lock:
        dropped, _runtime = _runtime, None
        _overrides.clear()
    _close(dropped)


def _close(dropped: Any) -> None:
    """The routes' pooled connections go with the graph that used them: a torn-down runtime (the dev
    server's stop, a test's teardown) leaves no kept-alive connection, and so no request thread of
    a downstream, behind it."""
    close = getattr(getattr(getattr(dropped, "engine", None), "channel", None), "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # closing is best effort: the process may be going away anyway
            pass


def override(**values: Any) -> None:
    """Inject collaborators for the next ``get()``: clock, entropy, source, channel, config, secrets, sweep_state,
    transport (an httpx transport for every route, e.g. a MockTransport)."""
    global _runtime
    with _lock:
        _overrides.update({k: v for k, v in values.items() if v is not None})
        _runtime = None
