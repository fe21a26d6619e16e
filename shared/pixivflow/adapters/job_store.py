"""The job event stream on the ledger table: lifecycle events and the ack cursor.

Items, all in the job's slot partition so one Query reads the whole stream:

  SLOT#<jobId> / EVT#L#<kind>               a lifecycle event stored at most once (job.requested,
                                            job.execution_started, job.outcome_*): ``seq``, ``ts``;
                                            ``job.requested`` also keeps the declared ``callbackUrl``
                                            and, until the terminal event exists, the sparse
                                            ``callbackPk``/``callbackSk`` of the OpenCallbacks index
  SLOT#<jobId> / EVT#L#job.progressed#<seq>  a progress event (may repeat)
  SLOT#<jobId> / EVT#HEAD                   the stream head: last ``seq`` and its ``ts``
  SLOT#<jobId> / EVT#CURSOR                 the durable ack cursor (``ackedTs``, ``ackedSeq``)

(The cursor and head live under ``EVT#`` too, so the whole stream is one ``begins_with`` range read.)

An event is appended in ONE transaction: the head moves from the seq the writer read to the next
one (so seq is dense and ts never moves backwards), the event is put if absent, its callback
outbox row (if the job declared a callback) is put if absent, and a terminal event takes the
job out of the OpenCallbacks index. "The event is durable" and "its callback is owed" cannot
diverge.
"""

from __future__ import annotations

import zlib
from typing import Any

from botocore.exceptions import ClientError

from .dynamodb_base import DynamoItems, refused_item
from ..domain.errors import LedgerUnavailable
from ..domain.protocol import ONCE_KINDS, REQUESTED
from ..domain.event_stream import AppendResult, EventStream, StoredEvent
from ..domain.outbox import OutboxRow
from .dynamo_ledger.keys import CALLBACK_INDEX
from .outbox_rows import DynamoOutboxRows

SHARDS = 16
HEAD_SK = "EVT#HEAD"
CURSOR_SK = "EVT#CURSOR"
EVENT_PREFIX = "EVT#L#"


def _pk(job_id: str) -> str:
    return f"SLOT#{job_id}"


def event_sk(kind: str, seq: int) -> str:
    return f"{EVENT_PREFIX}{kind}" if kind in ONCE_KINDS else f"{EVENT_PREFIX}{kind}#{int(seq):010d}"


def callback_index_keys(job_id: str, created_at: int) -> tuple[str, str]:
    return f"CALLBACK#{zlib.crc32(job_id.encode('utf-8')) % SHARDS:02d}", f"{max(0, int(created_at)):013d}#{job_id}"


class DynamoJobStore(DynamoItems):
    """``ports.JobStore`` on DynamoDB. ``client`` is a low-level boto3 DynamoDB client."""

    def __init__(self, client: Any, table: str, *, retention_days: int = 30) -> None:
        super().__init__(client, table, retention_days=retention_days)
        self.rows = DynamoOutboxRows(client, table, retention_days=retention_days)  # the callback row's Put

    def _key(self, job_id: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": _pk(job_id)}, "sk": {"S": sk}}

    # -- reads -------------------------------------------------------------------------------
    def stream(self, job_id: str) -> EventStream:
        kwargs: dict[str, Any] = {
            "TableName": self._table, "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :evt)",
            "ExpressionAttributeValues": {":pk": {"S": _pk(job_id)}, ":evt": {"S": "EVT#"}},
        }
        events: list[StoredEvent] = []
        head_seq = head_ts = 0
        cursor: tuple[int, int] | None = None
        while True:
            resp = self._call("query", **kwargs)
            for raw in resp.get("Items", []):
                item = {k: self._de.deserialize(v) for k, v in raw.items()}
                sk = item["sk"]
                if sk == HEAD_SK:
                    head_seq, head_ts = int(item.get("seq", 0)), int(item.get("ts", 0))
                elif sk == CURSOR_SK:
                    cursor = (int(item["ackedTs"]), int(item["ackedSeq"]))
                elif sk.startswith(EVENT_PREFIX) and "seq" in item:  # execution.summary has no seq: internal only
                    events.append(StoredEvent(job_id, str(item["kind"]), int(item["seq"]), int(item["ts"]),
                                              item.get("callbackUrl")))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        events.sort(key=lambda e: e.position)
        return EventStream(job_id, tuple(events), head_seq, head_ts, cursor)

    # -- append ------------------------------------------------------------------------------
    def append(self, event: StoredEvent, *, expected_head: int, callback: OutboxRow | None = None,
               open_callback_since: int | None = None, close_callback_index: bool = False, now_ms: int = 0) -> str:
        if event.seq != expected_head + 1:
            raise ValueError("an event's seq must follow the head it was computed from")
        job_id = event.job_id
        head = {
            "Update": {
                "TableName": self._table, "Key": self._key(job_id, HEAD_SK),
                # the head expires with the stream's newest event (retention from it)
                "UpdateExpression": "SET #seq = :seq, #ts = :ts, #e = :entity, #slot = :slot, #x = :x",
                "ConditionExpression": "attribute_not_exists(pk)" if expected_head == 0 else "#seq = :prev",
                "ExpressionAttributeNames": {"#seq": "seq", "#ts": "ts", "#e": "entity", "#slot": "slotId", "#x": "expiresAt"},
                "ExpressionAttributeValues": {":seq": {"N": str(event.seq)}, ":ts": {"N": str(event.ts)},
                                              ":x": {"N": str(self._expires(event.ts))},
                                              ":entity": {"S": "stream"}, ":slot": {"S": job_id},
                                              **({":prev": {"N": str(expected_head)}} if expected_head else {})},
            }
        }
        item: dict[str, Any] = {
            "pk": _pk(job_id), "sk": event_sk(event.kind, event.seq), "entity": "event", "slotId": job_id,
            "kind": event.kind, "seq": event.seq, "ts": event.ts, "expiresAt": self._expires(event.ts),
        }
        if event.callback_url:
            item["callbackUrl"] = event.callback_url
            if open_callback_since is not None:
                item["callbackPk"], item["callbackSk"] = callback_index_keys(job_id, open_callback_since)
        actions: list[dict[str, Any]] = [head, {"Put": {
            "TableName": self._table, "Item": {k: self._ser.serialize(v) for k, v in item.items()},
            "ConditionExpression": "attribute_not_exists(pk)"}}]
        if callback is not None:
            actions.append(self.rows.put_action(callback))
        if close_callback_index:
            actions.append({"Update": {
                "TableName": self._table, "Key": self._key(job_id, event_sk(REQUESTED, 0)),
                "UpdateExpression": "REMOVE callbackPk, callbackSk", "ConditionExpression": "attribute_exists(pk)"}})
        try:
            self._call("transact_write_items", TransactItems=actions)
            return AppendResult.APPENDED
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise LedgerUnavailable("DynamoDB transact_write_items failed") from exc
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons") or []]
            if len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed":
                return AppendResult.EXISTS
            if reasons and reasons[0] == "ConditionalCheckFailed":
                return AppendResult.HEAD_MOVED
            if any(r not in (None, "None", "ConditionalCheckFailed") for r in reasons):
                raise LedgerUnavailable(f"DynamoDB transaction cancelled: {reasons}") from exc
            return AppendResult.HEAD_MOVED  # a lost race on another item: re-read and decide again

    # -- cursor ------------------------------------------------------------------------------
    def advance_cursor(self, job_id: str, position: tuple[int, int], now_ms: int) -> tuple[int, int] | None:
        ts, seq = int(position[0]), int(position[1])
        try:
            resp = self._call(
                "update_item", TableName=self._table, Key=self._key(job_id, CURSOR_SK),
                # The cursor expires one retention after its newest ack: by then every event it
                # covers (ts <= the ack time) has expired too, so losing it re-delivers nothing.
                UpdateExpression="SET ackedTs = :ts, ackedSeq = :seq, updatedAt = :now, entity = :e, slotId = :slot, "
                                 "expiresAt = :x",
                # Only strictly later in (ts, seq) order: an older or repeated ack leaves the stored cursor.
                ConditionExpression="attribute_not_exists(pk) OR ackedTs < :ts OR (ackedTs = :ts AND ackedSeq < :seq)",
                ExpressionAttributeValues={":ts": {"N": str(ts)}, ":seq": {"N": str(seq)}, ":now": {"N": str(now_ms)},
                                           ":e": {"S": "cursor"}, ":slot": {"S": job_id},
                                           ":x": {"N": str(self._expires(now_ms))}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            del resp
            return (ts, seq)
        except ClientError as exc:
            old = refused_item(exc)
            if old and "ackedTs" in old:
                return (int(old["ackedTs"]["N"]), int(old["ackedSeq"]["N"]))
            return self.stream(job_id).cursor

    # -- the open-callback index ---------------------------------------------------------------
    def open_callbacks(self, limit: int) -> list[str]:
        """Newest first across shards. The index may lag: callers re-read the job before deciding."""
        found: list[tuple[str, str]] = []
        for shard in range(SHARDS):
            resp = self._call("query", TableName=self._table, IndexName=CALLBACK_INDEX,
                              KeyConditionExpression="callbackPk = :p",
                              ExpressionAttributeValues={":p": {"S": f"CALLBACK#{shard:02d}"}},
                              ScanIndexForward=False, Limit=limit)
            for raw in resp.get("Items", []):
                sort_key = raw["callbackSk"]["S"]
                found.append((sort_key, sort_key.partition("#")[2]))
        found.sort(reverse=True)
        return [job_id for _, job_id in found[:limit]]


__all__ = ["CALLBACK_INDEX", "DynamoJobStore", "callback_index_keys", "event_sk"]
