"""Execute: one SQS message per cell (DESIGN §2)."""

from __future__ import annotations

from typing import Any

from ._sqs import PartialItemFailureResponse, process


def _execute(body: str, context: Any = None) -> None:
    from .. import runtime
    from ..services.execution import execute_cell
    from ..services.messages import ExecutionMessage

    message = ExecutionMessage.model_validate_json(body)  # an unparsable body is a batchItemFailure
    # Issue 24: the invocation's time left, read from the Lambda context, guards each file download.
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    execute_cell(runtime.get().engine, message.slotId, message.targetId, time_left=remaining)


def handle(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    """Infrastructure errors and unparsable bodies become batchItemFailures; outcomes never do."""
    return process(event, context, lambda body: _execute(body, context))
