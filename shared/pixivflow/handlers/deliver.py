"""Deliver: one SQS message per outbox row."""

from __future__ import annotations

from typing import Any

from ._sqs import PartialItemFailureResponse, process


def _deliver(body: str) -> None:
    from .. import runtime
    from ..services.delivery import deliver_message
    from ..services.messages import OutboxMessage

    message = OutboxMessage.model_validate_json(body)  # an unparsable body is a batchItemFailure
    deliver_message(runtime.get().engine, message.kind, message.key)


def handle(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    from .. import runtime

    # Every outbox attempt of this invocation ends before the invocation does: the
    # generic rows' worker cuts each attempt's deadline to this remaining time minus a margin, and
    # hands a record that cannot start in time back to SQS unclaimed.
    engine = runtime.get().engine
    engine.remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    try:
        return process(event, context, _deliver)
    finally:
        engine.remaining_ms = None
