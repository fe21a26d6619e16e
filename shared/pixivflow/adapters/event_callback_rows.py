"""``event_callback`` outbox rows on the ledger table (spec §10.4, §10.9; DESIGN §4 "other outbox rows").

Item: ``OUTBOX#event_callback#<key>`` / ``META`` with ``key = job-event:<jobId>:<eventId>``. The
partition key IS the uniqueness of (kind, key): a row is created with ``attribute_not_exists``
(inside the same transaction as its event, see ``adapters.job_store``), so a replayed admission
or a repeated sweep can never queue a second copy. While a row is actionable it carries
``duePk``/``dueSk`` and shows up in the shared sparse ``DueOutbox`` index next to delivery
intents, so the sweep's re-drive finds it; a terminal row leaves the index.

This module is deliberately minimal (one kind, the claim/settle the callback worker needs); a
generic outbox-row port for ``OUTBOX#<kind>#<key>`` rows may absorb it.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Mapping

from botocore.exceptions import ClientError

from .dynamodb_base import DynamoItems
from ..ports import CallbackRow

KIND = "event_callback"
PK_PREFIX = f"OUTBOX#{KIND}#"
SHARDS = 16  # same sharding as DueOutbox entries of delivery intents
ACTIONABLE = ("pending", "processing", "retry_wait")
TERMINAL = ("done", "dead", "cancelled")


def row_pk(key: str) -> str:
    return f"{PK_PREFIX}{key}"


def _due(key: str, next_attempt_at: int) -> tuple[str, str]:
    return f"DUE#{zlib.crc32(key.encode('utf-8')) % SHARDS:02d}", f"{max(0, int(next_attempt_at)):013d}#{key}"


class DynamoCallbackRows(DynamoItems):
    # -- codec ---------------------------------------------------------------------------
    def item(self, row: CallbackRow) -> dict[str, Any]:
        due_pk, due_sk = _due(row.key, row.next_attempt_at)
        item: dict[str, Any] = {
            "pk": row_pk(row.key), "sk": "META", "entity": "outbox", "kind": KIND, "idempotencyKey": row.key,
            "slotId": row.job_id, "deliveryTarget": row.url,
            "payload": json.dumps(row.payload, separators=(",", ":"), ensure_ascii=False),
            "status": row.status, "attempts": row.attempts, "maxAttempts": row.max_attempts,
            "nextAttemptAt": row.next_attempt_at, "createdAt": row.created_at, "updatedAt": row.updated_at,
            "duePk": due_pk, "dueSk": due_sk,
        }
        return item

    def marshal(self, item: Mapping[str, Any]) -> dict[str, Any]:
        return {k: self._ser.serialize(v) for k, v in item.items() if v is not None}

    def put_action(self, row: CallbackRow) -> dict[str, Any]:
        """The insert-if-absent ``Put`` of a new row, for a caller's transaction."""
        return {"Put": {"TableName": self._table, "Item": self.marshal(self.item(row)),
                        "ConditionExpression": "attribute_not_exists(pk)"}}

    def row(self, raw: Mapping[str, Any]) -> CallbackRow:
        item = {k: self._de.deserialize(v) for k, v in raw.items()}

        def num(name: str) -> int | None:
            value = item.get(name)
            return None if value is None else int(value)

        return CallbackRow(
            key=item["idempotencyKey"], job_id=item.get("slotId", ""), url=item.get("deliveryTarget", ""),
            payload=json.loads(item.get("payload") or "{}"), status=item.get("status", "pending"),
            attempts=num("attempts") or 0, max_attempts=num("maxAttempts") or 8, next_attempt_at=num("nextAttemptAt") or 0,
            lease_owner=item.get("leaseOwner"), lease_until=num("leaseUntil"), last_error=item.get("lastError"),
            created_at=num("createdAt") or 0, updated_at=num("updatedAt") or 0, completed_at=num("completedAt"),
        )

    # -- reads and writes ------------------------------------------------------------------
    def get(self, key: str) -> CallbackRow | None:
        resp = self._call("get_item", TableName=self._table, Key={"pk": {"S": row_pk(key)}, "sk": {"S": "META"}},
                          ConsistentRead=True)
        return self.row(resp["Item"]) if resp.get("Item") else None

    def key_of(self, pk: str, sk: str) -> str | None:
        return pk[len(PK_PREFIX):] if pk.startswith(PK_PREFIX) and sk == "META" else None

    def _update(self, key: str, expression: str, condition: str, values: Mapping[str, Any],
                names: Mapping[str, str]) -> CallbackRow | None:
        try:
            resp = self._call(
                "update_item", TableName=self._table, Key={"pk": {"S": row_pk(key)}, "sk": {"S": "META"}},
                UpdateExpression=expression, ConditionExpression=f"attribute_exists(pk) AND ({condition})",
                ExpressionAttributeValues={k: self._ser.serialize(v) for k, v in values.items()},
                ExpressionAttributeNames=dict(names), ReturnValues="ALL_NEW",
            )
        except ClientError:
            return None
        return self.row(resp["Attributes"])

    def claim(self, key: str, owner: str, now_ms: int, lease_ms: int, *, ignore_due: bool = False) -> CallbackRow | None:
        """pending/retry_wait and due (or ``ignore_due``), or processing with an expired lease."""
        names = {"#s": "status", "#lo": "leaseOwner", "#lu": "leaseUntil", "#u": "updatedAt"}
        if ignore_due:
            waiting = "#s IN (:p, :r)"
        else:
            waiting = "(#s IN (:p, :r) AND #n <= :now)"
            names["#n"] = "nextAttemptAt"  # DynamoDB refuses a declared name the expressions do not use
        return self._update(
            key, "SET #s = :proc, #lo = :owner, #lu = :until, #u = :now",
            f"{waiting} OR (#s = :proc AND #lu <= :now)",
            {":p": "pending", ":r": "retry_wait", ":proc": "processing", ":owner": owner, ":until": now_ms + lease_ms,
             ":now": now_ms},
            names,
        )

    def settle(self, row: CallbackRow, owner: str, now_ms: int, *, status: str, error: str | None = None,
               next_attempt_at: int | None = None) -> CallbackRow | None:
        """Record one attempt's result as the lease holder: done, retry_wait (due again) or dead."""
        names = {"#s": "status", "#a": "attempts", "#lo": "leaseOwner", "#lu": "leaseUntil", "#u": "updatedAt",
                 "#e": "lastError"}
        values: dict[str, Any] = {":s": status, ":one": 1, ":now": now_ms, ":owner": owner, ":proc": "processing"}
        sets = ["#s = :s", "#u = :now"]
        removes = ["#lo", "#lu"]
        if error is not None:
            sets.append("#e = :e")
            values[":e"] = error[:1000]
        else:
            removes.append("#e")
        if status in ACTIONABLE:
            assert next_attempt_at is not None
            names.update({"#n": "nextAttemptAt", "#dp": "duePk", "#ds": "dueSk"})
            due_pk, due_sk = _due(row.key, next_attempt_at)
            sets += ["#n = :n", "#dp = :dp", "#ds = :ds"]
            values.update({":n": next_attempt_at, ":dp": due_pk, ":ds": due_sk})
        else:
            names.update({"#dp": "duePk", "#ds": "dueSk", "#c": "completedAt", "#x": "expiresAt"})
            removes += ["#dp", "#ds"]
            sets += ["#c = :now", "#x = :x"]
            values[":x"] = self._expires(now_ms)
        expression = f"SET {', '.join(sets)} REMOVE {', '.join(removes)} ADD #a :one"
        return self._update(row.key, expression, "#s = :proc AND #lo = :owner", values, names)


    # -- the operator's view (issue 12) -----------------------------------------------------------
    def dead(self) -> list[CallbackRow]:
        """Every ``dead`` callback row (a scan: dead rows are out of the due index; tooling only)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table, "ConsistentRead": True,
            "FilterExpression": "entity = :outbox AND kind = :kind AND #s = :dead",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":outbox": {"S": "outbox"}, ":kind": {"S": KIND}, ":dead": {"S": "dead"}},
        }
        found: list[CallbackRow] = []
        while True:
            resp = self._call("scan", **kwargs)
            found.extend(self.row(raw) for raw in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        found.sort(key=lambda r: (-r.updated_at, r.key))
        return found

    def redrive(self, key: str, now_ms: int) -> CallbackRow | None:
        """The operator's re-arm of a ``dead`` row (spec §10.4 ``requeue``): ``retry_wait``, a fresh
        attempt budget, due now, back in the due index. Refused (None) unless it is still ``dead``."""
        due_pk, due_sk = _due(key, now_ms)
        names = {"#s": "status", "#a": "attempts", "#n": "nextAttemptAt", "#u": "updatedAt", "#r": "redrivenAt",
                 "#dp": "duePk", "#ds": "dueSk", "#c": "completedAt", "#x": "expiresAt", "#lo": "leaseOwner",
                 "#lu": "leaseUntil"}
        return self._update(
            key, "SET #s = :rw, #a = :zero, #n = :now, #u = :now, #r = :now, #dp = :dp, #ds = :ds REMOVE #c, #x, #lo, #lu",
            "#s = :dead", {":rw": "retry_wait", ":zero": 0, ":now": now_ms, ":dp": due_pk, ":ds": due_sk, ":dead": "dead"},
            names,
        )

__all__ = ["DynamoCallbackRows", "KIND", "PK_PREFIX", "row_pk"]
