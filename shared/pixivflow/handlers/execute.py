"""Execute: one SQS message per cell (DESIGN §2)."""

from __future__ import annotations

from typing import Any

from ._sqs import process


def _execute(body: str) -> None:
    from .. import runtime
    from ..services.execution import execute_cell
    from ..services.messages import ExecutionMessage

    message = ExecutionMessage.model_validate_json(body)  # an unparsable body is a batchItemFailure
    execute_cell(runtime.get().engine, message.slotId, message.targetId)


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Infrastructure errors and unparsable bodies become batchItemFailures; outcomes never do."""
    return process(event, context, _execute)
