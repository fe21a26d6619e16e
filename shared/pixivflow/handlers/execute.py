"""Execute: one SQS message per cell."""

from __future__ import annotations

from typing import Any, Callable

from ._sqs import PartialItemFailureResponse, process


def _execute(body: str, remaining: Callable[[], int] | None, budget: int | None) -> None:
    from .. import runtime
    from ..services.execution import execute_cell
    from ..services.messages import ExecutionMessage

    message = ExecutionMessage.model_validate_json(body)  # an unparsable body is a batchItemFailure
    execute_cell(runtime.get().wiring.executions, message.slotId, message.targetId, time_left=remaining, time_budget=budget)


def handle(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    """Infrastructure errors and unparsable bodies become batchItemFailures; outcomes never do."""
    # The Lambda context is the ONE source of time: its time left guards each file
    # download, and what was left as the invocation began is its budget (the function's timeout,
    # template.yaml, less the init), read here once for the whole batch.
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    budget = int(remaining()) if remaining is not None else None
    return process(event, context, lambda body: _execute(body, remaining, budget))
