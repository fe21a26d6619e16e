"""Outbox values: a queue message, and an outbox row that belongs to no delivery intent
(notifications and event callbacks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class OutboxRow:
    """One outbox row that belongs to no delivery intent: a ``notification`` (its target is a
    route name) or an ``event_callback`` (its target is the consumer's callback URL, which may
    carry a secret in its path or query: shown and logged by host only).

    ``attempts`` counts the attempts STARTED: a claim uses one (a worker
    that dies mid-send has used its attempt, so a receiver that hangs every attempt still ends in
    a dead row), and a release that sends nothing gives it back."""

    kind: str  # notification | event_callback
    key: str  # the idempotency key, unique per kind
    target: str  # the route name (notifications) or the callback URL (event callbacks)
    payload: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"  # pending | processing | retry_wait | done | dead | cancelled
    attempts: int = 0
    max_attempts: int = 12
    next_attempt_at: int = 0
    lease_owner: str | None = None
    lease_until: int | None = None
    last_error: str | None = None
    created_at: int = 0
    updated_at: int = 0
    completed_at: int | None = None
    slot_id: str | None = None  # the slot / job the row belongs to, when it belongs to one

    @property
    def actionable(self) -> bool:
        return self.status in ("pending", "processing", "retry_wait")


MAX_SQS_DELAY_S = 900  # SQS DelaySeconds ceiling; longer backoffs are left to the sweep


@dataclass(frozen=True)
class AfterFailure:
    """What a failed attempt leaves: the row is dead, or due again in ``delay_ms``."""

    dead: bool
    error: str
    delay_ms: int = 0


def after_failed_attempt(attempt: int, max_attempts: int, *, retryable: bool, error: str, uniform: Callable[[], float],
                         base_ms: int, max_ms: int, retry_after_ms: int | None = None) -> AfterFailure:
    """The outbox's one retry rule, for every kind of row (delivery intents, notifications, event
    callbacks). ``attempt`` is the number of the attempt that just failed (1 for the first):
    ``max_attempts`` N means at most N sends of a row, then dead. A failure that cannot be
    retried is dead at once. The wait grows exponentially with jitter (``retry_delay_ms``; the
    jitter is drawn only for a retry), unless the route said when (``retry_after_ms``, Telegram's
    ``retry_after``): no sooner, no later."""
    if not retryable:
        return AfterFailure(True, error)
    if attempt >= max_attempts:
        return AfterFailure(True, f"attempt budget exhausted after {attempt} attempts: {error}")
    from .ack import retry_delay_ms  # (domain.ack loads pydantic: a handler importing this module does not)

    delay_ms = retry_delay_ms(attempt, uniform(), base_ms, max_ms)
    return AfterFailure(False, error, retry_after_ms if retry_after_ms is not None else delay_ms)


SQS_BATCH = 10  # SendMessageBatch takes at most ten entries


@dataclass(frozen=True)
class OutgoingMessage:
    body: dict[str, Any]
    delay_s: int = 0
