"""The outbox worker for ``event_callback`` rows (spec §10.9; DESIGN §11).

One row is one POST of one Event document to the job's declared ``callback_url``. It is claimed
with a conditional write and a lease like a delivery intent, so at most one worker sends it; the
same ``X-Idempotency-Key`` and ``webhook-id`` travel on every attempt. 2xx or 409 ends the row;
5xx, 429 and transport errors retry with the outbox backoff until 8 attempts; any other status,
a refused URL (vetted again at send time against the address actually connected to) or a missing
signing secret dead-letters it. A callback never changes the job: the pull channel (events page
and ack) stays the source of truth.

Each request is signed the Standard Webhooks way: ``webhook-id`` (the row key), ``webhook-timestamp``
(seconds, fresh per attempt) and ``webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>``.
"""

from __future__ import annotations

import json
import math
from urllib.parse import urlsplit

from ..domain.ack import retry_delay_ms
from ..domain.callbacks import CallbackRefused, header_value, sign
from ..domain.errors import LedgerUnavailable
from ..ports import MAX_SQS_DELAY_S, CallbackRow, OutgoingMessage
from .delivery import DeliveryResult
from .engine import OUTBOX_LEASE_MS, Engine
from .messages import outbox_body

CALLBACK_KIND = "event_callback"
CALLBACK_TIMEOUT_S = 30.0  # spec §10.9


def _host(url: str) -> str:
    """Only the host of a consumer URL is ever logged: its path or query may carry a secret."""
    try:
        return urlsplit(url).hostname or "?"
    except ValueError:
        return "?"


def callback_headers(secret: str, key: str, body: bytes, now_ms: int) -> dict[str, str]:
    message_id = header_value(key)
    timestamp = now_ms // 1000
    return {
        "Content-Type": "application/json",
        "X-PixivFlow-Delivery": "job-event",
        "X-Idempotency-Key": message_id,
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }


def deliver_callback(engine: Engine, key: str, *, ignore_due: bool = False) -> DeliveryResult:
    store = engine.jobs
    if store is None:
        return DeliveryResult(key, "skipped", detail="no job store in this runtime")
    row = store.get_callback_row(key)
    if row is None:
        return DeliveryResult(key, "skipped", detail="no such callback row")
    if not row.actionable:
        return DeliveryResult(key, "skipped", detail=f"row is {row.status}")
    owner = engine.entropy.token("cb")
    claimed = store.claim_callback_row(key, owner, engine.now(), OUTBOX_LEASE_MS, ignore_due=ignore_due)
    if claimed is None:
        return DeliveryResult(key, "skipped", detail="not due or claimed by another worker")
    secret = engine.callback_secret() if engine.callback_secret else None
    if not secret or engine.callbacks is None:
        return _dead(engine, claimed, owner, "configuration_error: no callback signing secret or sender is configured")
    body = json.dumps(claimed.payload.get("event"), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    try:
        response = engine.callbacks.post(claimed.url, body, callback_headers(secret, key, body, engine.now()), CALLBACK_TIMEOUT_S)
    except CallbackRefused as exc:
        return _dead(engine, claimed, owner, f"callback_url refused at send time: {exc.reason}")
    except LedgerUnavailable:
        raise
    except Exception as exc:  # transport failures (and a host that stopped resolving) retry
        return _retry(engine, claimed, owner, f"transport: {type(exc).__name__}")
    status = response.status
    if 200 <= status < 300 or status == 409:
        settled = store.settle_callback_row(claimed, owner, engine.now(), status="done")
        if settled is None:
            return DeliveryResult(key, "skipped", detail="lease lost before recording the answer")
        engine.log("info", "job event callback delivered", event="callback.delivered", key=key, job_id=claimed.job_id,
                   http_status=status, host=_host(claimed.url), attempts=settled.attempts)
        engine.metric("CallbackResults", result="delivered")
        return DeliveryResult(key, "done", detail=str(status))
    if status == 429 or status >= 500:
        return _retry(engine, claimed, owner, f"HTTP {status}")
    return _dead(engine, claimed, owner, f"HTTP {status}")


def _retry(engine: Engine, row: CallbackRow, owner: str, error: str) -> DeliveryResult:
    attempt = row.attempts + 1
    if attempt >= row.max_attempts:
        return _dead(engine, row, owner, f"attempt budget exhausted after {attempt} attempts: {error}")
    now = engine.now()
    delay_ms = retry_delay_ms(attempt, engine.entropy.uniform(), engine.config.delivery.outboxRetryBaseMs,
                              engine.config.delivery.outboxRetryMaxMs)
    settled = engine.jobs.settle_callback_row(row, owner, now, status="retry_wait", error=error, next_attempt_at=now + delay_ms)
    if settled is None:
        return DeliveryResult(row.key, "skipped", detail="lease lost before recording the retry")
    delay_s = math.ceil(delay_ms / 1000)
    if delay_s <= MAX_SQS_DELAY_S:  # longer waits are left to the sweep's re-drive
        engine.queues.send_outbox([OutgoingMessage(outbox_body(CALLBACK_KIND, row.key), delay_s=delay_s)])
    engine.log("warning", "job event callback failed; retry scheduled", event="callback.retry_scheduled", key=row.key,
               job_id=row.job_id, attempt=attempt, delay_ms=delay_ms, error=error, host=_host(row.url))
    return DeliveryResult(row.key, "retried", detail=error)


def _dead(engine: Engine, row: CallbackRow, owner: str, error: str) -> DeliveryResult:
    settled = engine.jobs.settle_callback_row(row, owner, engine.now(), status="dead", error=error)
    if settled is None:
        return DeliveryResult(row.key, "skipped", detail="lease lost before dead-lettering")
    engine.log("error", "job event callback dead-lettered; the job is unchanged and its events stay readable",
               event="callback.dead", key=row.key, job_id=row.job_id, error=error, host=_host(row.url),
               attempts=settled.attempts)
    engine.metric("CallbackResults", result="dead")
    return DeliveryResult(row.key, "dead", detail=error)


__all__ = ["CALLBACK_KIND", "callback_headers", "deliver_callback"]
