"""The SQS side of the execute and deliver functions: ReportBatchItemFailures semantics (DESIGN §5;
template.yaml lists ``FunctionResponseTypes: [ReportBatchItemFailures]`` on both event source
mappings). A record whose body does not parse, or whose handling raises (an infrastructure error),
becomes a batchItemFailure; an outcome never does.

Written here rather than with Powertools' BatchProcessor (issue 25, cold start): its module loads
asyncio and the Kinesis/DynamoDB/Kafka event classes, about a fifth of these functions' INIT, for a
loop of a dozen lines. The behaviour is the one it had: each record's body handed over in order, a
record that raises reported by its ``messageId``, the others deleted by Lambda; an event without a
``Records`` list is refused as a whole (Lambda then retries the batch)."""

from __future__ import annotations

from typing import Any, Callable, TypedDict


class PartialItemFailure(TypedDict):
    itemIdentifier: str


class PartialItemFailureResponse(TypedDict):
    batchItemFailures: list[PartialItemFailure]


class NotAnSqsBatch(ValueError):
    """The event carries no non-empty ``Records`` list: no record can be reported, so the
    invocation fails and Lambda retries the whole batch."""


def process(event: dict[str, Any], context: Any, handle_body: Callable[[str], None]) -> PartialItemFailureResponse:
    """Run ``handle_body(record["body"])`` for each record of an SQS batch; the partial batch response."""
    records = event.get("Records") if isinstance(event, dict) else None
    if not records or not isinstance(records, list):
        raise NotAnSqsBatch("not an SQS batch event: it carries no non-empty 'Records' list")
    failures: list[PartialItemFailure] = []
    for record in records:
        try:
            handle_body(record["body"])
        except Exception:  # this record only: Lambda makes it visible again, the batch's others are deleted
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
