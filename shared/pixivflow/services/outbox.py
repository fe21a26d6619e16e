"""The generic outbox rows' worker (items ``OUTBOX#<kind>#<key>``).

Delivery intents carry their own outbox row (``services.delivery``). Every OTHER kind of row —
``notification`` and ``event_callback`` — is an :class:`OutboxRow` of the ``OutboxRows`` port,
processed here with one discipline: one message names one row by ``{kind, key}``, the row is
claimed under a 120 s lease by a conditional write that also COUNTS the attempt, one attempt is
one call of the kind's sender, and the attempt budget lives on the row, never in SQS's receive
count.

Every attempt ends. Its deadline is the smaller of the kind's own timeout and the
invocation's remaining time minus :data:`SETTLE_MARGIN_MS` (the time to record the result); a
record that cannot get :data:`MIN_ATTEMPT_MS` is handed back to its queue BEFORE the claim
(:class:`NoTimeLeft`, a batch item failure), so it uses no attempt. Because the claim counts the
attempt, a worker that dies or hangs mid-send has used it; a claim that finds the budget already
spent that way dead-letters the row without sending again.

Each kind of row is a :class:`RowKind`, which the composition root builds with its sender bound
to what that sender uses (:attr:`Outbox.kinds`). A sender is ``send(row, timeout_s) -> None``:
returning is success; raising ``NotReady``
releases the row without consuming an attempt; a :class:`SecretStoreUnavailable` (the secret
store did not answer: never "no secret") releases it too and fails the record so SQS retries it;
any other exception is classified (an ``OutboxAttemptError`` carries the endpoint's
status, or its own verdict) into retry with backoff or dead, by the outbox's one retry rule
(``domain.outbox.after_failed_attempt``), which the delivery rows follow too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from ..domain.ack import ErrorClass, classify_outbox_error
from ..domain.errors import ConfigError, LedgerUnavailable, NotReady, NoTimeLeft, OutboxAttemptError, SecretStoreUnavailable
from ..clock import Entropy
from ..ports import Clock, Log, Metrics, OutboxRows, Queues, TimeLeft
from ..domain.outbox import MAX_SQS_DELAY_S, OutboxRow, after_failed_attempt
from .context import Measured
from .timing import OUTBOX_LEASE_MS, REDRIVE_GRACE_MS
from .messages import wake_outbox

RowSender = Callable[[OutboxRow, float], None]
READINESS_DEFER_MS = 60_000  # a deferred row is offered again after a minute (one `outbox.deferred` per minute)
SECRET_RETRY_MS = 30_000  # a row whose secret store did not answer is offered again after this
SETTLE_MARGIN_MS = 5_000  # kept back from the invocation's remaining time to record the result
MIN_ATTEMPT_MS = 200  # an attempt with less than this is not started at all (NoTimeLeft)


@dataclass(frozen=True)
class RowKind:
    """How one kind of row is attempted and shown. ``send`` makes one attempt; ``timeout_s`` bounds
    it end to end; ``shown`` is what of the target a log line or a view may carry (a callback
    URL's path and query may hold a consumer's secret: only its host is shown); ``events``
    prefixes the log events (``<events>.delivered`` / ``.retry_scheduled`` / ``.dead``)."""

    send: RowSender
    timeout_s: float
    events: str = "outbox"
    shown: Callable[[str], str] = str


@dataclass(frozen=True)
class Outbox(Measured):
    """What the generic rows' worker takes: the rows and the outbox queue, the clock, entropy
    (claim owners, retry jitter), the log and metrics, the retry backoff (the config's
    ``delivery.outboxRetryBaseMs`` / ``outboxRetryMaxMs``) and the kinds of row it serves, each
    with its sender bound to what that sender uses."""

    rows: OutboxRows
    queues: Queues
    clock: Clock
    entropy: Entropy
    log: Log
    metrics: Metrics | None
    retry_base_ms: int
    retry_max_ms: int
    kinds: Mapping[str, RowKind]


def attempt_timeout_s(own_timeout_s: float, time_left: TimeLeft | None) -> float:
    """The deadline of one attempt starting now: its own timeout, cut to the invocation's
    remaining time (``time_left``, Lambda's context) minus the settle margin. Raises
    :class:`NoTimeLeft` when that leaves less than :data:`MIN_ATTEMPT_MS` (the caller has not
    claimed anything yet)."""
    budget_ms = own_timeout_s * 1000.0
    if time_left is not None:
        budget_ms = min(budget_ms, float(time_left()) - SETTLE_MARGIN_MS)
    if budget_ms < MIN_ATTEMPT_MS:
        raise NoTimeLeft(f"{max(0, int(budget_ms))} ms left for an attempt; the record goes back to its queue")
    return budget_ms / 1000.0


@dataclass
class RowResult:
    kind: str
    key: str
    action: str  # done | retried | dead | deferred | skipped
    detail: str | None = None


def enqueue_row(ctx: Outbox, row: OutboxRow, *, revive: bool = False) -> bool:
    """Record the row (insert-if-absent: once per key) and send its message. True when new.

    The message is only a wake-up: if it is lost, or this process dies right after the write, the
    sweep re-drives the durable row (:func:`redrive_rows`)."""
    stored, created = ctx.rows.enqueue(row, revive=revive)
    if stored.actionable:
        wake_outbox(ctx.queues, ctx.log, [(row.kind, row.key)], event="outbox.send_failed", kind=row.kind, key=row.key)
    if created:
        ctx.log("info", "outbox row enqueued", event="outbox.enqueued", kind=row.kind, key=row.key,
                target=_shown(ctx, row))
    return created


def _shown(ctx: Outbox, row: OutboxRow) -> str:
    kind = ctx.kinds.get(row.kind)
    return kind.shown(row.target) if kind is not None else "?"


def deliver_row_message(ctx: Outbox, kind: str, key: str, *, time_left: TimeLeft | None = None) -> RowResult:
    if kind not in ctx.kinds:
        ctx.log("warning", "outbox message of an unknown kind ignored", event="outbox.unknown_kind", kind=kind, key=key)
        return RowResult(kind, key, "skipped", f"unknown kind {kind}")
    row = ctx.rows.get(kind, key)
    if row is None:
        return RowResult(kind, key, "skipped", "no such row")
    return deliver_row(ctx, row, time_left=time_left)


def deliver_row(ctx: Outbox, row: OutboxRow, *, time_left: TimeLeft | None = None) -> RowResult:
    kind = ctx.kinds.get(row.kind)
    if kind is None or not row.actionable:
        return RowResult(row.kind, row.key, "skipped", f"row is {row.status}")
    try:
        timeout_s = attempt_timeout_s(kind.timeout_s, time_left)
    except NoTimeLeft as exc:  # back to the queue (a batch item failure), nothing claimed
        ctx.log("info", "too little time left to start an attempt; the record goes back to its queue",
                event="outbox.no_time_left", kind=row.kind, key=row.key, detail=str(exc))
        raise
    owner = ctx.entropy.token("obx")
    claimed = ctx.rows.claim(row, owner, ctx.now(), OUTBOX_LEASE_MS)
    if claimed is None:
        return RowResult(row.kind, row.key, "skipped", "not due or claimed by another worker")
    if claimed.attempts > claimed.max_attempts:
        # Every attempt of the budget was started and the last one never reported back (its
        # worker died or hung into its timeout): the row ends here, nothing is sent again.
        # The claim that found it so sent nothing: it is not counted (the row says "dead after 8/8").
        return _dead(ctx, kind, claimed, owner, f"attempt budget exhausted after {claimed.max_attempts} attempts: "
                                                   "the last attempt never reported back", claimed.max_attempts, unsent=True)
    try:
        kind.send(claimed, timeout_s)
    except LedgerUnavailable:
        raise
    except NotReady as exc:
        return _defer(ctx, kind, claimed, owner, str(exc))
    except SecretStoreUnavailable as exc:
        _give_back(ctx, kind, claimed, owner, exc)
        raise  # the record fails; SQS offers it again and the row keeps its whole budget
    except Exception as exc:  # every failure of the attempt is classified, never raised
        return _failed(ctx, kind, claimed, owner, exc)
    now = ctx.now()
    if ctx.rows.settle(claimed, owner, now, status="done") is None:
        return RowResult(row.kind, row.key, "skipped", "lease lost before recording the result")
    ctx.log("info", "outbox row delivered", event=f"{kind.events}.delivered", kind=row.kind, key=row.key,
            target=kind.shown(row.target), job_id=row.slot_id, attempts=claimed.attempts)
    ctx.metric("OutboxResults", kind=row.kind, result="delivered")
    return RowResult(row.kind, row.key, "done")


def _defer(ctx: Outbox, kind: RowKind, row: OutboxRow, owner: str, reason: str) -> RowResult:
    now = ctx.now()
    if ctx.rows.release(row, owner, now, now + READINESS_DEFER_MS) is None:
        return RowResult(row.kind, row.key, "skipped", "lease lost before the deferral")
    wake_outbox(ctx.queues, ctx.log, [(row.kind, row.key)], delay_s=READINESS_DEFER_MS // 1000, event="outbox.send_failed",
                kind=row.kind, key=row.key)
    ctx.log("info", "destination not ready; row deferred without consuming an attempt", event="outbox.deferred",
            kind=row.kind, key=row.key, target=kind.shown(row.target), reason=reason[:200])
    return RowResult(row.kind, row.key, "deferred", reason)


def _give_back(ctx: Outbox, kind: RowKind, row: OutboxRow, owner: str, exc: Exception) -> None:
    """The secret store did not answer: nothing was sent, the attempt is given back, and the row
    is due again shortly (the sweep re-drives it even if SQS's retry is lost). Nothing of the
    failure is cached: the next attempt reads the store again."""
    now = ctx.now()
    ctx.rows.release(row, owner, now, now + SECRET_RETRY_MS)
    ctx.log("warning", "secret store unavailable; row released without consuming an attempt",
            event=f"{kind.events}.secret_unavailable", kind=row.kind, key=row.key, target=kind.shown(row.target),
            error=type(exc).__name__)


def _verdict(exc: Exception) -> tuple[ErrorClass, str]:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, OutboxAttemptError) and exc.retryable is not None:
        return ErrorClass(exc.code or ("transient" if exc.retryable else "refused"), exc.retryable), str(exc)
    name = "ConfigError" if isinstance(exc, ConfigError) else type(exc).__name__
    return classify_outbox_error(text, exc.status if isinstance(exc, OutboxAttemptError) else None, name), text


def _failed(ctx: Outbox, kind: RowKind, row: OutboxRow, owner: str, exc: Exception) -> RowResult:
    now = ctx.now()
    verdict, text = _verdict(exc)
    error = f"{verdict.code}: {text}"[:1000]
    attempt = row.attempts  # counted by the claim
    then = after_failed_attempt(attempt, row.max_attempts, retryable=verdict.retryable, error=error,
                                uniform=ctx.entropy.uniform, base_ms=ctx.retry_base_ms, max_ms=ctx.retry_max_ms)
    if not then.dead:
        delay_ms = then.delay_ms
        if ctx.rows.settle(row, owner, now, status="retry_wait", error=error, next_attempt_at=now + delay_ms) is None:
            return RowResult(row.kind, row.key, "skipped", "lease lost before recording the retry")
        delay_s = math.ceil(delay_ms / 1000)
        if delay_s <= MAX_SQS_DELAY_S:
            wake_outbox(ctx.queues, ctx.log, [(row.kind, row.key)], delay_s=delay_s, event="outbox.send_failed",
                        kind=row.kind, key=row.key)
        ctx.log("warning", "outbox attempt failed; retry scheduled", event=f"{kind.events}.retry_scheduled",
                kind=row.kind, key=row.key, job_id=row.slot_id, target=kind.shown(row.target), attempt=attempt,
                delay_ms=delay_ms, error=error, counts_as_attempt=1)
        return RowResult(row.kind, row.key, "retried", error)
    return _dead(ctx, kind, row, owner, then.error, attempt)


def _dead(ctx: Outbox, kind: RowKind, row: OutboxRow, owner: str, error: str, attempts: int, *,
          unsent: bool = False) -> RowResult:
    error = error[:1000]
    if ctx.rows.settle(row, owner, ctx.now(), status="dead", error=error, unsent=unsent) is None:
        return RowResult(row.kind, row.key, "skipped", "lease lost before dead-lettering")
    ctx.log("error", "outbox row dead-lettered; the job is unchanged", event=f"{kind.events}.dead", kind=row.kind,
            key=row.key, job_id=row.slot_id, target=kind.shown(row.target), error=error, attempts=attempts)
    ctx.metric("DeadLetters", route=f"{row.kind}")
    return RowResult(row.kind, row.key, "dead", error)


def redrive_rows(ctx: Outbox, *, limit_per_shard: int = 100) -> int:
    """The sweep's re-drive of generic rows: rows due more than 120 s ago, or
    processing past their lease, get their message again."""
    send = due_row_keys(ctx, ctx.now(), REDRIVE_GRACE_MS, limit_per_shard=limit_per_shard)
    if not send:
        return 0
    failed = wake_outbox(ctx.queues, ctx.log, send, event="sweep.redrive_send_failed")
    sent = len(send) - len(failed)
    ctx.log("warning", "outbox rows re-driven", event="sweep.outbox_rows_redriven", count=sent)
    return sent


def due_row_keys(ctx: Outbox, now: int, grace_ms: int, *, limit_per_shard: int = 100) -> list[tuple[str, str]]:
    """The generic rows to (re-)send now: due ``grace_ms`` ago, or processing past their lease.
    One rule for the sweep (grace 120 s) and the drain route (grace 0). A row under a live claim
    is left to its worker; index hits are re-read first (the index may lag)."""
    send: list[tuple[str, str]] = []
    for kind, key in ctx.rows.due(now - grace_ms, limit_per_shard=limit_per_shard):
        row = ctx.rows.get(kind, key)
        if row is None or not row.actionable:
            continue
        if row.status == "processing":
            if row.lease_until is not None and row.lease_until > now:
                continue
        elif row.next_attempt_at > now - grace_ms:
            continue
        send.append((kind, key))
    return send


def drain_rows(ctx: Outbox, *, limit_per_shard: int = 25) -> list[RowResult]:
    """Process due generic rows now, in this process (``services.delivery.drain``)."""
    results = []
    for kind, key in ctx.rows.due(ctx.now(), limit_per_shard=limit_per_shard):
        row = ctx.rows.get(kind, key)
        if row is not None and row.actionable and kind in ctx.kinds:
            try:
                results.append(deliver_row(ctx, row))
            except (NoTimeLeft, SecretStoreUnavailable) as exc:  # the row stays due: a later drain or the sweep
                results.append(RowResult(kind, key, "skipped", type(exc).__name__))
    return results
