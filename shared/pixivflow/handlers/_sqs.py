"""The SQS side of the execute and deliver functions: Powertools' BatchProcessor with
ReportBatchItemFailures semantics (DESIGN §5). A record whose body does not parse, or whose handling
raises (an infrastructure error), becomes a batchItemFailure; an outcome never does."""

from __future__ import annotations

from typing import Any, Callable

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse


def process(event: dict[str, Any], context: Any, handle_body: Callable[[str], None]) -> PartialItemFailureResponse:
    """Run ``handle_body(record.body)`` for each record of an SQS batch; the partial batch response."""
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return process_partial_response(event=event, record_handler=lambda record: handle_body(record.body),
                                    processor=processor, context=context)
