"""An in-memory twin of the SQS low-level client (standard queues), on an injected clock.

What the engine's guarantees rest on, honoured here: ``DelaySeconds`` up to 900,
visibility timeouts (a received message is invisible until deleted or its timeout passes), receipt
handles (only the newest one deletes: an older one is accepted and does nothing, as SQS does), and
the redrive policy: a message received ``maxReceiveCount`` times moves to the dead-letter queue
instead of being received again. Standard queues do not keep order; with ``shuffle`` (a seeded
``random.Random``) the twin returns visible messages in a random order, for the simulation.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import Exceptions, Meta, client_error

MAX_DELAY_S = 900
MAX_BATCH = 10
MAX_BODY_BYTES = 256 * 1024


@dataclass
class _Message:
    message_id: str
    body: str
    attributes: dict[str, Any]
    sent_at: int
    visible_at: int
    receive_count: int = 0
    receipt: str | None = None
    first_received: int | None = None


@dataclass
class _Queue:
    name: str
    url: str
    arn: str
    attributes: dict[str, str]
    messages: dict[str, _Message] = field(default_factory=dict)  # in send order
    # (raw RedrivePolicy, parsed): every receive reads it, so it is parsed once per value
    _policy: tuple[str | None, tuple[str, int] | None] = field(default=(None, None), init=False, repr=False)

    @property
    def visibility_s(self) -> int:
        return int(self.attributes.get("VisibilityTimeout", "30"))

    def redrive(self) -> tuple[str, int] | None:
        raw = self.attributes.get("RedrivePolicy")
        if not raw:
            return None
        if self._policy[0] != raw:  # parsed again whenever SetQueueAttributes changed it
            policy = json.loads(raw)
            self._policy = (raw, (policy["deadLetterTargetArn"], int(policy["maxReceiveCount"])))
        return self._policy[1]


class TwinSQS:
    def __init__(self, *, now_ms: Callable[[], int] | None = None, shuffle: random.Random | None = None,
                 region: str = "us-east-1") -> None:
        self._now = now_ms or (lambda: 0)
        self._shuffle = shuffle
        self._queues: dict[str, _Queue] = {}  # by url
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self.meta = Meta("sqs", region)
        self.exceptions = Exceptions()
        self.calls: dict[str, int] = {}

    def _count(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1

    # -- queues ------------------------------------------------------------------------------------
    def create_queue(self, **kw: Any) -> dict[str, Any]:
        with self._lock:
            name = kw["QueueName"]
            url = f"https://sqs.{self.meta.region_name}.twin.local/123456789012/{name}"
            if url not in self._queues:
                attrs = {"VisibilityTimeout": "30", "DelaySeconds": "0", "MessageRetentionPeriod": "345600"}
                attrs.update({k: str(v) for k, v in (kw.get("Attributes") or {}).items()})
                arn = f"arn:aws:sqs:{self.meta.region_name}:123456789012:{name}"
                self._queues[url] = _Queue(name, url, arn, attrs)
            return {"QueueUrl": url}

    def get_queue_url(self, **kw: Any) -> dict[str, Any]:
        for q in self._queues.values():
            if q.name == kw["QueueName"]:
                return {"QueueUrl": q.url}
        raise client_error("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.", "GetQueueUrl",
                           cls="QueueDoesNotExist")

    def list_queues(self, **kw: Any) -> dict[str, Any]:
        prefix = kw.get("QueueNamePrefix", "")
        return {"QueueUrls": [q.url for q in self._queues.values() if q.name.startswith(prefix)]}

    def delete_queue(self, **kw: Any) -> dict[str, Any]:
        with self._lock:
            self._queue(kw["QueueUrl"], "DeleteQueue")
            del self._queues[kw["QueueUrl"]]
            return {}

    def tag_queue(self, **kw: Any) -> dict[str, Any]:
        return {}

    def purge_queue(self, **kw: Any) -> dict[str, Any]:
        with self._lock:
            self._queue(kw["QueueUrl"], "PurgeQueue").messages.clear()
            return {}

    def _queue(self, url: str, operation: str) -> _Queue:
        q = self._queues.get(url)
        if q is None:
            raise client_error("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.", operation,
                               cls="QueueDoesNotExist")
        return q

    def get_queue_attributes(self, **kw: Any) -> dict[str, Any]:
        self._count("GetQueueAttributes")
        with self._lock:
            q = self._queue(kw["QueueUrl"], "GetQueueAttributes")
            self._redrive_due(q)
            now = self._now()
            visible = sum(1 for m in q.messages.values() if m.visible_at <= now)
            delayed = sum(1 for m in q.messages.values() if m.visible_at > now and m.receipt is None)
            inflight = sum(1 for m in q.messages.values() if m.visible_at > now and m.receipt is not None)
            oldest = min((m.sent_at for m in q.messages.values()), default=None)
            attrs = dict(q.attributes)
            attrs.update({
                "QueueArn": q.arn,
                "ApproximateNumberOfMessages": str(visible),
                "ApproximateNumberOfMessagesDelayed": str(delayed),
                "ApproximateNumberOfMessagesNotVisible": str(inflight),
                "ApproximateAgeOfOldestMessage": str(0 if oldest is None else max(0, (now - oldest) // 1000)),
            })
            names = kw.get("AttributeNames") or ["All"]
            if "All" not in names:
                attrs = {k: v for k, v in attrs.items() if k in names}
            return {"Attributes": attrs}

    def set_queue_attributes(self, **kw: Any) -> dict[str, Any]:
        with self._lock:
            self._queue(kw["QueueUrl"], "SetQueueAttributes").attributes.update({k: str(v) for k, v in kw["Attributes"].items()})
            return {}

    # -- messages ------------------------------------------------------------------------------------
    def _put(self, q: _Queue, body: str, delay_s: int | None, attributes: dict[str, Any] | None, operation: str) -> dict[str, Any]:
        if not isinstance(body, str) or not body:
            raise client_error("InvalidParameterValue", "The request must contain the parameter MessageBody.", operation)
        if len(body.encode("utf-8")) > MAX_BODY_BYTES:
            raise client_error("InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be "
                               "shorter than 262144 bytes.", operation)
        delay = int(q.attributes.get("DelaySeconds", "0")) if delay_s is None else int(delay_s)
        if delay < 0 or delay > MAX_DELAY_S:
            raise client_error("InvalidParameterValue", "Value for parameter DelaySeconds is invalid. Reason: must be "
                               "between 0 and 900, if provided.", operation)
        now = self._now()
        mid = f"twin-{next(self._ids):08d}"
        q.messages[mid] = _Message(mid, body, dict(attributes or {}), now, now + delay * 1000)
        return {"MessageId": mid, "MD5OfMessageBody": hashlib.md5(body.encode("utf-8")).hexdigest()}

    def send_message(self, **kw: Any) -> dict[str, Any]:
        self._count("SendMessage")
        with self._lock:
            q = self._queue(kw["QueueUrl"], "SendMessage")
            return self._put(q, kw["MessageBody"], kw.get("DelaySeconds"), kw.get("MessageAttributes"), "SendMessage")

    def send_message_batch(self, **kw: Any) -> dict[str, Any]:
        self._count("SendMessageBatch")
        with self._lock:
            q = self._queue(kw["QueueUrl"], "SendMessageBatch")
            entries = kw["Entries"]
            if not entries:
                raise client_error("AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one "
                                   "SendMessageBatchRequestEntry in the request.", "SendMessageBatch")
            if len(entries) > MAX_BATCH:
                raise client_error("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "Maximum number of entries per "
                                   "request are 10.", "SendMessageBatch")
            ids = [e["Id"] for e in entries]
            if len(set(ids)) != len(ids):
                raise client_error("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Two or more batch entries in the "
                                   "request have the same Id.", "SendMessageBatch")
            ok, failed = [], []
            for e in entries:
                try:
                    sent = self._put(q, e["MessageBody"], e.get("DelaySeconds"), e.get("MessageAttributes"), "SendMessageBatch")
                    ok.append({"Id": e["Id"], **sent})
                except Exception as exc:  # one bad entry fails alone, as in SQS
                    failed.append({"Id": e["Id"], "SenderFault": True, "Code": "InvalidParameterValue", "Message": str(exc)})
            return {"Successful": ok, "Failed": failed}

    def _redrive_due(self, q: _Queue) -> None:
        policy = q.redrive()
        if policy is None:
            return
        dlq_arn, max_receives = policy
        now = self._now()
        due = [mid for mid, m in q.messages.items() if m.visible_at <= now and m.receive_count >= max_receives]
        if not due:
            return
        dlq = next((d for d in self._queues.values() if d.arn == dlq_arn), None)
        for mid in due:
            m = q.messages.pop(mid)
            if dlq is not None:
                # the receive count travels with the message (as moto and SQS keep it)
                dlq.messages[mid] = _Message(mid, m.body, m.attributes, m.sent_at, now, m.receive_count)

    def receive_message(self, **kw: Any) -> dict[str, Any]:
        self._count("ReceiveMessage")
        with self._lock:
            q = self._queue(kw["QueueUrl"], "ReceiveMessage")
            n = int(kw.get("MaxNumberOfMessages", 1))
            if n < 1 or n > MAX_BATCH:
                raise client_error("InvalidParameterValue", "Value for parameter MaxNumberOfMessages is invalid.", "ReceiveMessage")
            self._redrive_due(q)
            now = self._now()
            visible = [m for m in q.messages.values() if m.visible_at <= now]
            if self._shuffle is not None:
                self._shuffle.shuffle(visible)
            chosen = visible[:n]
            timeout = int(kw.get("VisibilityTimeout", q.visibility_s))
            want_attrs = kw.get("MessageAttributeNames") or []
            out = []
            for m in chosen:
                m.receive_count += 1
                m.first_received = m.first_received or now
                m.receipt = f"rh-{m.message_id}-{m.receive_count}"
                m.visible_at = now + timeout * 1000
                msg: dict[str, Any] = {
                    "MessageId": m.message_id,
                    "ReceiptHandle": m.receipt,
                    "MD5OfBody": hashlib.md5(m.body.encode("utf-8")).hexdigest(),
                    "Body": m.body,
                    "Attributes": {
                        "ApproximateReceiveCount": str(m.receive_count),
                        "SentTimestamp": str(m.sent_at),
                        "ApproximateFirstReceiveTimestamp": str(m.first_received),
                    },
                }
                if want_attrs and m.attributes:
                    wanted = m.attributes if ("All" in want_attrs or ".*" in want_attrs) else {
                        k: v for k, v in m.attributes.items() if k in want_attrs}
                    if wanted:
                        msg["MessageAttributes"] = {k: dict(v) for k, v in wanted.items()}
                out.append(msg)
            return {"Messages": out} if out else {}

    def delete_message(self, **kw: Any) -> dict[str, Any]:
        self._count("DeleteMessage")
        with self._lock:
            q = self._queue(kw["QueueUrl"], "DeleteMessage")
            self._delete(q, kw["ReceiptHandle"])
            return {}

    def _delete(self, q: _Queue, receipt: str) -> None:
        for mid, m in q.messages.items():
            if m.receipt == receipt:  # only the newest receipt handle deletes (SQS accepts an old one, silently)
                del q.messages[mid]
                return

    def delete_message_batch(self, **kw: Any) -> dict[str, Any]:
        self._count("DeleteMessageBatch")
        with self._lock:
            q = self._queue(kw["QueueUrl"], "DeleteMessageBatch")
            for e in kw["Entries"]:
                self._delete(q, e["ReceiptHandle"])
            return {"Successful": [{"Id": e["Id"]} for e in kw["Entries"]], "Failed": []}

    def change_message_visibility(self, **kw: Any) -> dict[str, Any]:
        self._count("ChangeMessageVisibility")
        with self._lock:
            q = self._queue(kw["QueueUrl"], "ChangeMessageVisibility")
            for m in q.messages.values():
                if m.receipt == kw["ReceiptHandle"]:
                    m.visible_at = self._now() + int(kw["VisibilityTimeout"]) * 1000
                    return {}
            raise client_error("ReceiptHandleIsInvalid", "The input receipt handle is invalid.", "ChangeMessageVisibility")

    def change_message_visibility_batch(self, **kw: Any) -> dict[str, Any]:
        ok, failed = [], []
        for e in kw["Entries"]:
            try:
                self.change_message_visibility(QueueUrl=kw["QueueUrl"], ReceiptHandle=e["ReceiptHandle"],
                                               VisibilityTimeout=e["VisibilityTimeout"])
                ok.append({"Id": e["Id"]})
            except Exception as exc:
                failed.append({"Id": e["Id"], "SenderFault": True, "Code": "ReceiptHandleIsInvalid", "Message": str(exc)})
        return {"Successful": ok, "Failed": failed}
