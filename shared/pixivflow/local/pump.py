"""Plays Lambda's SQS event source mapping against a (moto) queue.

Batches of up to 10, partial batch responses (``batchItemFailures`` go back to the queue and
are retried; the queue's redrive policy moves a poison message to its DLQ), and delays on a
VIRTUAL clock: a message whose ``notBefore`` attribute lies in the virtual future is held
here and re-sent once the clock passes it, exactly as SQS's DelaySeconds would release it.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from ..clock import VirtualClock
from .lambda_context import context_for


@dataclass
class PumpStats:
    batches: int = 0
    delivered: int = 0
    failed: int = 0
    held: int = 0


@dataclass(order=True)
class _Held:
    not_before: int
    seq: int
    body: str = field(compare=False)
    attributes: dict[str, Any] = field(compare=False, default_factory=dict)


class QueuePump:
    def __init__(self, sqs: Any, queue_url: str, queue_arn: str, handler: Callable[[dict, Any], Any], clock: VirtualClock,
                 *, name: str, batch_size: int = 10) -> None:
        self._sqs = sqs
        self.url = queue_url
        self._arn = queue_arn
        self._handler = handler
        self._clock = clock
        self._name = name
        self._batch = batch_size
        self._held: list[_Held] = []
        self._seq = itertools.count()
        self.stats = PumpStats()

    def next_release(self) -> int | None:
        return self._held[0].not_before if self._held else None

    def lose_held(self) -> int:
        """Drop every delayed message still held (any message may be lost): what is left
        is the durable row, for the sweep or the drain route to send again. Returns how many."""
        lost = len(self._held)
        self._held.clear()
        return lost

    def visible(self) -> int:
        attrs = self._sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"])
        return int(attrs["Attributes"].get("ApproximateNumberOfMessages", "0"))

    def release_due(self) -> int:
        now = self._clock.now_ms()
        released = 0
        while self._held and self._held[0].not_before <= now:
            held = heapq.heappop(self._held)
            self._sqs.send_message(QueueUrl=self.url, MessageBody=held.body)
            released += 1
        return released

    def poll(self) -> int:
        """Receive one batch and run the handler on it. Returns how many records were handed over.

        Like Lambda's event source mapping: one ReceiveMessage per batch, then one
        DeleteMessageBatch for the records that succeeded. Failed records are made visible again
        at once (the ESM lets their visibility lapse; on the virtual clock that is the same)."""
        self.release_due()
        resp = self._sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=self._batch, VisibilityTimeout=30,
                                         MessageAttributeNames=["All"], AttributeNames=["All"])
        messages = resp.get("Messages", [])
        now = self._clock.now_ms()
        ready = []
        for m in messages:
            nb = m.get("MessageAttributes", {}).get("notBefore", {}).get("StringValue")
            if nb is not None and int(nb) > now:
                self._hold(m, int(nb))
            else:
                ready.append(m)
        if not ready:
            return 0
        event = {"Records": [self._record(m) for m in ready]}
        self.stats.batches += 1
        try:
            response = self._handler(event, context_for(self._name)) or {}
            failures = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception:
            failures = {m["MessageId"] for m in ready}  # a crashed invocation returns the whole batch
        done = [m for m in ready if m["MessageId"] not in failures]
        failed = [m for m in ready if m["MessageId"] in failures]
        self.stats.delivered += len(done)
        self.stats.failed += len(failed)
        if done:
            self._sqs.delete_message_batch(QueueUrl=self.url, Entries=[
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(done)])
        if failed:
            self._sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=[
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for n, m in enumerate(failed)])
        return len(ready)

    def _hold(self, m: dict[str, Any], not_before: int) -> None:
        """A message whose virtual delay has not passed: kept here until the clock reaches it (the
        emulation of DelaySeconds on a virtual clock, not a request Lambda would make)."""
        heapq.heappush(self._held, _Held(not_before, next(self._seq), m["Body"]))
        self._sqs.delete_message(QueueUrl=self.url, ReceiptHandle=m["ReceiptHandle"])
        self.stats.held += 1

    def _record(self, m: dict[str, Any]) -> dict[str, Any]:
        attrs = m.get("Attributes", {})
        message_attributes = {
            k: {"stringValue": v.get("StringValue"), "binaryValue": None, "stringListValues": [], "binaryListValues": [],
                "dataType": v.get("DataType", "String")}
            for k, v in m.get("MessageAttributes", {}).items()
        }
        return {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": {
                "ApproximateReceiveCount": attrs.get("ApproximateReceiveCount", "1"),
                "SentTimestamp": attrs.get("SentTimestamp", "0"),
                "SenderId": attrs.get("SenderId", "local"),
                "ApproximateFirstReceiveTimestamp": attrs.get("ApproximateFirstReceiveTimestamp", "0"),
            },
            "messageAttributes": message_attributes,
            "md5OfBody": m.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self._arn,
            "awsRegion": "us-east-1",
        }
