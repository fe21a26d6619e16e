"""What each Lambda handler calls: one function per entry point (DESIGN §3, §12).

Handlers in ``functions/`` stay a few lines: Powertools decorators plus one call here.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from pydantic import Json

from . import runtime
from .services.messages import ExecutionMessage, OutboxMessage


class ExecutionRecord(SqsRecordModel):
    body: Json[ExecutionMessage]  # type: ignore[assignment]


class OutboxRecord(SqsRecordModel):
    body: Json[OutboxMessage]  # type: ignore[assignment]


def trigger(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """HTTP API events go to the resolver; anything else is EventBridge Scheduler's input."""
    if isinstance(event, dict) and "requestContext" in event and "routeKey" in event:
        from .http.trigger_api import handle_http

        return handle_http(event, context)
    from .services.trigger import handle_scheduled_fire

    return handle_scheduled_fire(runtime.get().engine, event if isinstance(event, dict) else {}).as_dict()


def _execute_record(record: ExecutionRecord) -> None:
    from .services.execution import execute_cell

    message = record.body
    execute_cell(runtime.get().engine, message.slotId, message.targetId)


def _deliver_record(record: OutboxRecord) -> None:
    from .services.delivery import deliver_message

    message = record.body
    deliver_message(runtime.get().engine, message.kind, message.key)


def execute_batch(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Infrastructure errors and unparsable bodies become batchItemFailures; outcomes never do."""
    processor = BatchProcessor(event_type=EventType.SQS, model=ExecutionRecord, raise_on_entire_batch_failure=False)
    return process_partial_response(event=event, record_handler=_execute_record, processor=processor, context=context)


def deliver_batch(event: dict[str, Any], context: Any) -> dict[str, Any]:
    processor = BatchProcessor(event_type=EventType.SQS, model=OutboxRecord, raise_on_entire_batch_failure=False)
    return process_partial_response(event=event, record_handler=_deliver_record, processor=processor, context=context)


def stall_sweep(event: Any, context: Any) -> dict[str, Any]:
    """The content of the event is ignored (DESIGN §12). One tick: lease, sweep, missed fires."""
    from .services.sweep import tick

    return tick(runtime.get().engine).as_dict()


def job_events(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from .http.jobs_api import handle_http

    return handle_http(event, context)
