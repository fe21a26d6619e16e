"""Deliver: one SQS message per outbox row (DESIGN §2)."""

from __future__ import annotations

from typing import Any

from ._sqs import process


def _deliver(body: str) -> None:
    from .. import runtime
    from ..services.delivery import deliver_message
    from ..services.messages import OutboxMessage

    message = OutboxMessage.model_validate_json(body)  # an unparsable body is a batchItemFailure
    deliver_message(runtime.get().engine, message.kind, message.key)


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process(event, context, _deliver)
