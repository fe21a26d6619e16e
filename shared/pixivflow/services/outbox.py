"""The generic outbox rows' worker (spec §10.4, §10.5; DESIGN §4 ``OUTBOX#<kind>#<key>``, §5).

Delivery intents carry their own outbox row (``services.delivery``). Every OTHER kind of row —
``notification`` now, ``event_callback`` next — is an :class:`OutboxRow` of the ``OutboxRows``
port, processed here with the same discipline: one message names one row by ``{kind, key}``,
the row is claimed under a 120 s lease by a conditional write, one attempt is one call of the
kind's sender, and the attempt budget lives on the row, never in SQS's receive count.

A sender is ``sender(engine, row) -> None``: returning is success; raising ``NotReady`` releases
the row without consuming an attempt; any other exception is classified (spec §10.7; an
``OutboxAttemptError`` carries the endpoint's status) into retry with backoff or dead.
Register a kind with :func:`register_row_kind`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..ports import MAX_SQS_DELAY_S, OutgoingMessage
from ..domain.ack import classify_outbox_error, retry_delay_ms
from ..domain.errors import ConfigError, LedgerUnavailable, NotReady, OutboxAttemptError
from ..ports import OutboxRow
from .engine import OUTBOX_LEASE_MS, REDRIVE_GRACE_MS, Engine
from .messages import outbox_body

RowSender = Callable[[Engine, OutboxRow], None]
ROW_SENDERS: dict[str, RowSender] = {}
READINESS_DEFER_MS = 60_000  # a deferred row is offered again after a minute (one `outbox.deferred` per minute)


def register_row_kind(kind: str, sender: RowSender) -> None:
    ROW_SENDERS[kind] = sender


@dataclass
class RowResult:
    kind: str
    key: str
    action: str  # done | retried | dead | deferred | skipped
    detail: str | None = None


def enqueue_row(engine: Engine, row: OutboxRow, *, revive: bool = False) -> bool:
    """Record the row (insert-if-absent: once per key) and send its message. True when new.

    The message is only a wake-up: if it is lost, or this process dies right after the write, the
    sweep re-drives the durable row (:func:`redrive_rows`)."""
    stored, created = engine.outbox_rows.enqueue(row, revive=revive)
    if stored.actionable:
        failed = engine.queues.send_outbox([OutgoingMessage(outbox_body(row.kind, row.key))])
        if failed:
            engine.log("warning", "outbox message not sent; the sweep will re-drive it", event="outbox.send_failed",
                       kind=row.kind, key=row.key)
    if created:
        engine.log("info", "outbox row enqueued", event="outbox.enqueued", kind=row.kind, key=row.key, target=row.target)
    return created


def deliver_row_message(engine: Engine, kind: str, key: str) -> RowResult:
    sender = ROW_SENDERS.get(kind)
    if sender is None:
        engine.log("warning", "outbox message of an unknown kind ignored", event="outbox.unknown_kind", kind=kind, key=key)
        return RowResult(kind, key, "skipped", f"unknown kind {kind}")
    row = engine.outbox_rows.get(kind, key)
    if row is None:
        return RowResult(kind, key, "skipped", "no such row")
    return deliver_row(engine, row, sender)


def deliver_row(engine: Engine, row: OutboxRow, sender: RowSender | None = None) -> RowResult:
    sender = sender or ROW_SENDERS.get(row.kind)
    if sender is None or not row.actionable:
        return RowResult(row.kind, row.key, "skipped", f"row is {row.status}")
    owner = engine.entropy.token("obx")
    claimed = engine.outbox_rows.claim(row, owner, engine.now(), OUTBOX_LEASE_MS)
    if claimed is None:
        return RowResult(row.kind, row.key, "skipped", "not due or claimed by another worker")
    try:
        sender(engine, claimed)
    except LedgerUnavailable:
        raise
    except NotReady as exc:
        return _defer(engine, claimed, owner, str(exc))
    except Exception as exc:  # every failure of the attempt is classified, never raised
        return _failed(engine, claimed, owner, exc)
    now = engine.now()
    if engine.outbox_rows.settle(claimed, owner, now, status="done") is None:
        return RowResult(row.kind, row.key, "skipped", "lease lost before recording the result")
    engine.log("info", "outbox row delivered", event="outbox.delivered", kind=row.kind, key=row.key, target=row.target)
    return RowResult(row.kind, row.key, "done")


def _defer(engine: Engine, row: OutboxRow, owner: str, reason: str) -> RowResult:
    now = engine.now()
    if engine.outbox_rows.release(row, owner, now, now + READINESS_DEFER_MS) is None:
        return RowResult(row.kind, row.key, "skipped", "lease lost before the deferral")
    engine.queues.send_outbox([OutgoingMessage(outbox_body(row.kind, row.key), delay_s=READINESS_DEFER_MS // 1000)])
    engine.log("info", "destination not ready; row deferred without consuming an attempt", event="outbox.deferred",
               kind=row.kind, key=row.key, target=row.target, reason=reason[:200])
    return RowResult(row.kind, row.key, "deferred", reason)


def _failed(engine: Engine, row: OutboxRow, owner: str, exc: Exception) -> RowResult:
    now = engine.now()
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    name = "ConfigError" if isinstance(exc, ConfigError) else type(exc).__name__
    verdict = classify_outbox_error(text, exc.status if isinstance(exc, OutboxAttemptError) else None, name)
    error = f"{verdict.code}: {text}"[:1000]
    attempt = row.attempts + 1
    if verdict.retryable and attempt < row.max_attempts:
        delay_ms = retry_delay_ms(attempt, engine.entropy.uniform(), engine.config.delivery.outboxRetryBaseMs,
                                  engine.config.delivery.outboxRetryMaxMs)
        if engine.outbox_rows.settle(row, owner, now, status="retry_wait", error=error, next_attempt_at=now + delay_ms) is None:
            return RowResult(row.kind, row.key, "skipped", "lease lost before recording the retry")
        delay_s = math.ceil(delay_ms / 1000)
        if delay_s <= MAX_SQS_DELAY_S:
            engine.queues.send_outbox([OutgoingMessage(outbox_body(row.kind, row.key), delay_s=delay_s)])
        engine.log("warning", "outbox attempt failed; retry scheduled", event="outbox.retry_scheduled", kind=row.kind,
                   key=row.key, attempt=attempt, delay_ms=delay_ms, error=error, counts_as_attempt=1)
        return RowResult(row.kind, row.key, "retried", error)
    if verdict.retryable:
        error = f"attempt budget exhausted after {attempt} attempts: {error}"[:1000]
    if engine.outbox_rows.settle(row, owner, now, status="dead", error=error) is None:
        return RowResult(row.kind, row.key, "skipped", "lease lost before dead-lettering")
    engine.log("error", "outbox row dead-lettered", event="outbox.dead", kind=row.kind, key=row.key, target=row.target,
               error=error, attempts=attempt)
    engine.metric("DeadLetters", route=f"{row.kind}")
    return RowResult(row.kind, row.key, "dead", error)


def redrive_rows(engine: Engine, *, limit_per_shard: int = 100) -> int:
    """The sweep's re-drive of generic rows (DESIGN §5): rows due more than 120 s ago, or
    processing past their lease, get their message again. Index hits are re-read first."""
    now = engine.now()
    send: list[tuple[str, str]] = []
    for kind, key in engine.outbox_rows.due(now - REDRIVE_GRACE_MS, limit_per_shard=limit_per_shard):
        row = engine.outbox_rows.get(kind, key)
        if row is None or not row.actionable:
            continue
        if row.status == "processing":
            if row.lease_until is not None and row.lease_until > now:
                continue
        elif row.next_attempt_at > now - REDRIVE_GRACE_MS:
            continue
        send.append((kind, key))
    if not send:
        return 0
    failed = engine.queues.send_outbox([OutgoingMessage(outbox_body(k, key)) for k, key in send])
    sent = len(send) - len(failed)
    engine.log("warning", "outbox rows re-driven", event="sweep.outbox_rows_redriven", count=sent)
    return sent


def drain_rows(engine: Engine, *, limit_per_shard: int = 25) -> list[RowResult]:
    """Process due generic rows now (POST /internal/outbox/drain)."""
    results = []
    for kind, key in engine.outbox_rows.due(engine.now(), limit_per_shard=limit_per_shard):
        row = engine.outbox_rows.get(kind, key)
        if row is not None and row.actionable and kind in ROW_SENDERS:
            results.append(deliver_row(engine, row))
    return results
