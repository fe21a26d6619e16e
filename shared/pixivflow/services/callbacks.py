"""The outbox worker for ``event_callback`` rows.

One row is one POST of one Event document to the job's declared ``callback_url``: an
``event_callback`` :class:`OutboxRow`, claimed, counted, settled and re-driven by the one outbox
worker (``services.outbox``); this module is only its sender. The same ``X-Idempotency-Key`` and
``webhook-id`` travel on every attempt. 2xx or 409 ends the row; 5xx, 429, transport errors and
an attempt that ran out of its deadline (connect + headers + body) retry with the outbox backoff
until 8 attempts; any other status, a refused URL (vetted again at send time against the address
actually connected to) or a signing secret that does not exist dead-letters it. A secret store
that does not answer is neither: the row is released unsent and retried. A callback never
changes the job: the pull channel (events page and ack) stays the source of truth.

Each request is signed the Standard Webhooks way: ``webhook-id`` (the row key), ``webhook-timestamp``
(seconds, fresh per attempt) and ``webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Callable
from urllib.parse import urlsplit

from ..domain.ack import classify_outbox_error
from ..domain.callbacks import CallbackRefused, header_value, sign
from ..domain.errors import LedgerUnavailable, OutboxAttemptError, SecretStoreUnavailable
from ..domain.outbox import OutboxRow
from ..ports import CallbackSender, Clock
from .outbox import RowKind

CALLBACK_KIND = "event_callback"
CALLBACK_TIMEOUT_S = 30.0  # one attempt, end to end


@dataclass(frozen=True)
class Callbacks:
    """What sending a callback takes: the vetting HTTP sender, the signing secret (the callable
    raises SecretStoreUnavailable when the store did not answer, and answers None when the secret
    does not exist) and the clock."""

    sender: CallbackSender
    secret: Callable[[], str | None]
    clock: Clock


def callback_host(url: str) -> str:
    """Only the host of a consumer URL is ever logged or shown: its path or query may carry a secret."""
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


def send_callback(ctx: Callbacks, row: OutboxRow, timeout_s: float) -> None:
    """One attempt of an ``event_callback`` row within ``timeout_s`` (the outbox worker's deadline)."""
    secret = ctx.secret()  # SecretStoreUnavailable propagates: released, retried, never dead
    if not secret:
        raise OutboxAttemptError("the callback signing secret does not exist", code="configuration_error",
                                 retryable=False)
    body = json.dumps(row.payload.get("event"), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    try:
        response = ctx.sender.post(row.target, body, callback_headers(secret, row.key, body, ctx.clock.now_ms()), timeout_s)
    except CallbackRefused as exc:
        raise OutboxAttemptError(f"callback_url refused at send time: {exc.reason}", code="refused",
                                 retryable=False) from None
    except (LedgerUnavailable, SecretStoreUnavailable):
        raise
    except Exception as exc:  # transport failures, the deadline, a host that stopped resolving: retry
        raise OutboxAttemptError(type(exc).__name__, code="transport", retryable=True) from None
    status = response.status
    if 200 <= status < 300 or status == 409:
        return
    if status == 429 or status >= 400:  # 429/5xx retry, other 4xx dead-letter
        verdict = classify_outbox_error("", status)
        raise OutboxAttemptError(f"HTTP {status}", status=status, code=verdict.code, retryable=verdict.retryable)
    raise OutboxAttemptError(f"HTTP {status}", status=status, code="remote_http", retryable=False)  # 1xx/3xx: never followed


def callback_row_kind(ctx: Callbacks) -> RowKind:
    """The ``event_callback`` rows: sent with ``ctx``, shown and logged by the callback URL's host only."""
    return RowKind(partial(send_callback, ctx), CALLBACK_TIMEOUT_S, events="callback", shown=callback_host)

__all__ = ["CALLBACK_KIND", "CALLBACK_TIMEOUT_S", "Callbacks", "callback_headers", "callback_host", "callback_row_kind",
           "send_callback"]
