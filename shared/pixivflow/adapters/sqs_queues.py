"""SQS as transport only: execution messages and outbox messages.

Any message may be lost, duplicated or reordered; the ledger decides. Every message
carries a ``notBefore`` attribute (epoch ms on the injected clock) when it is delayed, so the
embedded runtime can honour delays on a virtual clock (``virtual_delays=True`` sends with no
SQS delay and lets the local pump hold the message until the virtual clock passes it).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from botocore.exceptions import BotoCoreError, ClientError

from ..domain.outbox import MAX_SQS_DELAY_S, SQS_BATCH as BATCH, OutgoingMessage

__all__ = ["MAX_SQS_DELAY_S", "OutgoingMessage", "SqsQueues"]


class SqsQueues:
    def __init__(
        self,
        client: Any,
        execution_url: str,
        outbox_url: str,
        *,
        now_ms: Callable[[], int],
        virtual_delays: bool = False,
        dead_letter_urls: Sequence[str] = (),
    ) -> None:
        self._client = client
        self._dead_letter_urls = tuple(u for u in dead_letter_urls if u)
        self._execution_url = execution_url
        self._outbox_url = outbox_url
        self._now_ms = now_ms
        self._virtual = virtual_delays

    def send_execution(self, messages: Sequence[OutgoingMessage]) -> list[int]:
        """Send execution messages in batches of 10. Returns the indexes that failed."""
        return self._send_batch(self._execution_url, messages)

    def send_outbox(self, messages: Sequence[OutgoingMessage]) -> list[int]:
        return self._send_batch(self._outbox_url, messages)

    def dead_letter_depth(self) -> int:
        """Visible plus in-flight messages of every dead-letter queue (one GetQueueAttributes each)."""
        depth = 0
        for url in self._dead_letter_urls:
            attrs = self._client.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
            values = attrs.get("Attributes", {})
            depth += int(values.get("ApproximateNumberOfMessages", 0)) + int(values.get("ApproximateNumberOfMessagesNotVisible", 0))
        return depth

    def _send_batch(self, url: str, messages: Sequence[OutgoingMessage]) -> list[int]:
        failed: list[int] = []
        for start in range(0, len(messages), BATCH):
            chunk = messages[start : start + BATCH]
            entries = [self._entry(str(start + i), m) for i, m in enumerate(chunk)]
            try:
                resp = self._client.send_message_batch(QueueUrl=url, Entries=entries)
            except (ClientError, BotoCoreError):
                failed.extend(range(start, start + len(chunk)))
                continue
            failed.extend(int(f["Id"]) for f in resp.get("Failed", []))
        return failed

    def _entry(self, entry_id: str, message: OutgoingMessage) -> dict[str, Any]:
        delay = max(0, min(MAX_SQS_DELAY_S, int(message.delay_s)))
        entry: dict[str, Any] = {"Id": entry_id, "MessageBody": json.dumps(message.body, separators=(",", ":"))}
        if delay:
            not_before = self._now_ms() + delay * 1000
            entry["MessageAttributes"] = {"notBefore": {"DataType": "Number", "StringValue": str(not_before)}}
            if not self._virtual:
                entry["DelaySeconds"] = delay
        return entry
