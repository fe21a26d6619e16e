"""Deliver: one SQS message per outbox row."""

from __future__ import annotations

from typing import Any, Callable

from ._sqs import PartialItemFailureResponse, process


def _deliver(body: str, remaining: Callable[[], int] | None) -> None:
    from .. import runtime
    from ..services.delivery import deliver_message
    from ..services.messages import OutboxMessage

    message = OutboxMessage.model_validate_json(body)  # an unparsable body is a batchItemFailure
    deliver_message(runtime.get().wiring.deliveries, message.kind, message.key, time_left=remaining)


def handle(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    # Every outbox attempt of this invocation ends before the invocation does: the generic rows'
    # worker cuts each attempt's deadline to the context's remaining time minus a margin, and
    # hands a record that cannot start in time back to SQS unclaimed.
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return process(event, context, lambda body: _deliver(body, remaining))
