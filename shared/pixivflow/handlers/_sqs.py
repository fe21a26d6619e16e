"""The SQS side of the execute and deliver functions: ReportBatchItemFailures semantics
(template.yaml lists ``FunctionResponseTypes: [ReportBatchItemFailures]`` on both event source
mappings). A record whose body does not parse, or whose handling raises (an infrastructure error),
becomes a batchItemFailure; an outcome never does.

Written here rather than with Powertools' BatchProcessor, for a shorter cold start: its module loads
asyncio and the Kinesis/DynamoDB/Kafka event classes, about a fifth of these functions' INIT, for a
loop of a dozen lines. The behaviour is the one it had: each record's body handed over in order, a
record that raises reported by its ``messageId``, the others deleted by Lambda; an event without a
``Records`` list is refused as a whole (Lambda then retries the batch).

A record that failed says so in one log line (``sqs.record_failed``, level error): its
``messageId``, how many times SQS has handed it out, and the exception's type (with the AWS error
code of a ``ClientError``). Not the exception's text nor the body: an httpx error quotes the URL it
failed on, and a Telegram route's URL carries its bot token (nothing secret in a log).
Without the line a record that keeps failing was visible only as a queue's age and, at last, as a
dead letter."""

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
        except Exception as exc:  # this record only: Lambda makes it visible again, the batch's others are deleted
            failures.append({"itemIdentifier": record["messageId"]})
            _report(record, exc)
    return {"batchItemFailures": failures}


def _report(record: dict[str, Any], exc: Exception) -> None:
    fields: dict[str, Any] = {"event": "sqs.record_failed", "message_id": record.get("messageId"),
                              "error_type": type(exc).__name__}
    response = getattr(exc, "response", None)  # botocore's ClientError: its code names the refusal
    if isinstance(response, dict):
        fields["error_code"] = (response.get("Error") or {}).get("Code")
    attributes = record.get("attributes")
    if isinstance(attributes, dict) and attributes.get("ApproximateReceiveCount"):
        fields["receive_count"] = attributes["ApproximateReceiveCount"]
    try:
        from .. import runtime

        runtime.get().wiring.log("error", "record failed; SQS hands it out again", **fields)
    except Exception:  # the runtime itself cannot be built (its config, say): the failure is that
        import logging

        logging.getLogger("pixivflow").error("record failed; SQS hands it out again %s", fields)
