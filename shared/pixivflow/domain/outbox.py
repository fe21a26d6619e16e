"""Outbox values: a queue message, and an outbox row that belongs to no delivery intent
(notifications and event callbacks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


SQS_BATCH = 10  # SendMessageBatch takes at most ten entries


@dataclass(frozen=True)
class OutgoingMessage:
    body: dict[str, Any]
    delay_s: int = 0
