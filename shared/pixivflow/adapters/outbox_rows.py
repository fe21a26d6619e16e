"""Generic outbox rows (``OUTBOX#<kind>#<key>`` / ``META``).

Notification and event-callback rows belong to no delivery intent, so they live in partitions of
their own on the ledger table, one item layout for every kind (``domain.outbox.OutboxRow``). Their
lifecycle mirrors the intent rows (``dynamo_ledger``):

* created with ``attribute_not_exists`` (UNIQUE (kind, key): the first writer wins), alone or as
  one ``Put`` of a caller's transaction (:meth:`DynamoOutboxRows.put_action`: a job event and its
  callback row are written together);
* claimed by a conditional update (pending/retry_wait and due, or processing past its lease) that
  also counts the attempt (``ADD attempts 1``): a worker that dies mid-send has used it;
* settled only by the lease holder (``leaseOwner = :owner``);
* released by the lease holder with the attempt given back (nothing was sent);
* present in the sparse ``DueOutbox`` index (``ODUE#<shard>`` / ``<nextAttemptAt 13 digits>#...``)
  only while actionable, so the sweep's cost follows live rows. Their index partitions are
  distinct from the intents' ``DUE#<shard>``, so neither family's queries ever see the other.

``MemoryOutboxRows`` is the same contract in a dict, for unit tests and tooling.
"""

from __future__ import annotations

import copy
import json
import threading
import zlib
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from .dynamodb_base import DynamoItems, refused_item
from ..domain.outbox import OutboxRow
from .dynamo_ledger.keys import DEAD_PK, dead_sk

SHARDS = 4  # notifications and callbacks are a few rows per slot: few index partitions to query
DUE_INDEX = "DueOutbox"
PK_PREFIX = "OUTBOX#"
DUE_PREFIX = "ODUE#"
ACTIONABLE = ("pending", "processing", "retry_wait")
TERMINAL = ("done", "dead", "cancelled")
MAX_ERROR_CHARS = 1000

_FIELDS = {
    "kind": "kind",
    "key": "key",
    "target": "target",
    "payload": "payload",
    "status": "status",
    "attempts": "attempts",
    "max_attempts": "maxAttempts",
    "next_attempt_at": "nextAttemptAt",
    "lease_owner": "leaseOwner",
    "lease_until": "leaseUntil",
    "last_error": "lastError",
    "created_at": "createdAt",
    "updated_at": "updatedAt",
    "completed_at": "completedAt",
    "slot_id": "slotId",
}


def row_pk(kind: str, key: str) -> str:
    if not kind or "#" in kind:
        raise ValueError(f"outbox kind must be a non-empty name without '#': {kind!r}")
    return f"{PK_PREFIX}{kind}#{key}"


def parse_pk(pk: str) -> tuple[str, str]:
    kind, _, key = pk[len(PK_PREFIX):].partition("#")
    return kind, key


def _ms13(value: int) -> str:
    return f"{max(0, int(value)):013d}"


def _due_keys(row: OutboxRow, next_attempt_at: int) -> tuple[str, str]:
    shard = zlib.crc32(f"{row.kind}#{row.key}".encode("utf-8")) % SHARDS
    return f"{DUE_PREFIX}{shard:02d}", f"{_ms13(next_attempt_at)}#{row.kind}#{row.key}"


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def from_item(item: dict[str, Any]) -> OutboxRow:
    kwargs: dict[str, Any] = {}
    for attr, name in _FIELDS.items():
        if name in item:
            value = _plain(item[name])
            if name == "payload" and isinstance(value, str):
                value = json.loads(value)
            kwargs[attr] = value
    return OutboxRow(**kwargs)


class DynamoOutboxRows(DynamoItems):
    """The OutboxRows port on the ledger table (low-level client, conditional writes only)."""

    # -- low level ---------------------------------------------------------------------------
    def _key(self, kind: str, key: str) -> dict[str, Any]:
        return {"pk": {"S": row_pk(kind, key)}, "sk": {"S": "META"}}

    def _values(self, values: dict[str, Any]) -> dict[str, Any]:
        return {k: self._ser.serialize(v) for k, v in values.items()}

    def _update(self, row: OutboxRow, sets: dict[str, Any], removes: list[str], condition: str,
                values: dict[str, Any], *, add_attempt: int = 0) -> OutboxRow | None:
        names: dict[str, str] = {}
        vals: dict[str, Any] = dict(values)
        parts = []
        for i, (attr, value) in enumerate(sets.items()):
            names[f"#s{i}"] = attr
            vals[f":s{i}"] = value
            parts.append(f"#s{i} = :s{i}")
        expression = "SET " + ", ".join(parts)
        if removes:
            for i, attr in enumerate(removes):
                names[f"#r{i}"] = attr
            expression += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removes)))
        if add_attempt:
            names["#attempts"] = "attempts"
            vals[":one"] = add_attempt
            expression += " ADD #attempts :one"
        for attr in ("status", "leaseOwner", "leaseUntil", "nextAttemptAt"):
            names.setdefault(f"#{attr}", attr)
        try:
            resp = self._call(
                "update_item", TableName=self._table, Key=self._key(row.kind, row.key),
                UpdateExpression=expression, ConditionExpression=f"attribute_exists(pk) AND ({condition})",
                ExpressionAttributeNames={k: v for k, v in names.items() if k in expression or k in condition},
                ExpressionAttributeValues=self._values(vals), ReturnValues="ALL_NEW",
            )
        except ClientError:
            return None
        return from_item({k: self._de.deserialize(v) for k, v in resp.get("Attributes", {}).items()})

    def _item(self, row: OutboxRow) -> dict[str, Any]:
        item: dict[str, Any] = {"pk": row_pk(row.kind, row.key), "sk": "META", "entity": "outbox"}
        for attr, name in _FIELDS.items():
            value = getattr(row, attr)
            if value is None:
                continue
            item[name] = json.dumps(value, separators=(",", ":"), ensure_ascii=False) if name == "payload" else value
        if row.actionable:
            item["duePk"], item["dueSk"] = _due_keys(row, row.next_attempt_at)
        return {k: self._ser.serialize(v) for k, v in item.items()}

    def put_action(self, row: OutboxRow) -> dict[str, Any]:
        """The insert-if-absent ``Put`` of a new row, for a caller's transaction."""
        return {"Put": {"TableName": self._table, "Item": self._item(row), "ConditionExpression": "attribute_not_exists(pk)"}}

    # -- the port ----------------------------------------------------------------------------
    def enqueue(self, row: OutboxRow, *, revive: bool = False) -> tuple[OutboxRow, bool]:
        try:
            self._call("put_item", TableName=self._table, Item=self._item(row),
                       ConditionExpression="attribute_not_exists(pk)", ReturnValuesOnConditionCheckFailure="ALL_OLD")
            return row, True
        except ClientError as exc:
            old = refused_item(exc)
            existing = from_item({k: self._de.deserialize(v) for k, v in old.items()}) if old else self.get(row.kind, row.key)
        if existing is None:  # deleted in between (TTL): the next enqueue creates it
            return row, False
        if revive and existing.status in ("dead", "cancelled"):
            due_pk, due_sk = _due_keys(existing, row.next_attempt_at)
            revived = self._update(
                existing,
                {"status": "pending", "attempts": 0, "nextAttemptAt": row.next_attempt_at, "updatedAt": row.updated_at,
                 "duePk": due_pk, "dueSk": due_sk},
                ["lastError", "completedAt", "expiresAt", "leaseOwner", "leaseUntil", "deadPk", "deadSk"],
                "#status IN (:dead, :cancelled)", {":dead": "dead", ":cancelled": "cancelled"},
            )
            return (revived or existing), False
        return existing, False

    def get(self, kind: str, key: str) -> OutboxRow | None:
        resp = self._call("get_item", TableName=self._table, Key=self._key(kind, key), ConsistentRead=True)
        item = resp.get("Item")
        return from_item({k: self._de.deserialize(v) for k, v in item.items()}) if item else None

    def claim(self, row: OutboxRow, owner: str, now_ms: int, lease_ms: int) -> OutboxRow | None:
        # The attempt is counted HERE, in the same conditional write as the lease: a
        # worker that dies (or hangs into its Lambda timeout) after this write has used it.
        return self._update(
            row, {"status": "processing", "leaseOwner": owner, "leaseUntil": now_ms + lease_ms, "updatedAt": now_ms}, [],
            "(#status IN (:p, :r) AND #nextAttemptAt <= :now) OR (#status = :proc AND #leaseUntil <= :now)",
            {":p": "pending", ":r": "retry_wait", ":proc": "processing", ":now": now_ms}, add_attempt=1,
        )

    def settle(self, row: OutboxRow, owner: str, now_ms: int, *, status: str, error: str | None = None,
               next_attempt_at: int | None = None, unsent: bool = False) -> OutboxRow | None:
        sets: dict[str, Any] = {"status": status, "updatedAt": now_ms}
        removes = ["leaseOwner", "leaseUntil"]
        if error is not None:
            sets["lastError"] = error[:MAX_ERROR_CHARS]
        elif status == "done":
            removes.append("lastError")
        if status in ACTIONABLE:
            if next_attempt_at is None:
                raise ValueError("a row left actionable needs its next attempt time")
            sets["nextAttemptAt"] = next_attempt_at
            sets["duePk"], sets["dueSk"] = _due_keys(row, next_attempt_at)
        else:
            sets["completedAt"] = now_ms
            sets["expiresAt"] = self._expires(now_ms)
            removes += ["duePk", "dueSk"]
        if status == "dead":  # listed on the dead-letter page until a redrive or a revive re-arms it
            sets["deadPk"], sets["deadSk"] = DEAD_PK, dead_sk(now_ms, row_pk(row.kind, row.key), "META")
        return self._update(row, sets, removes, "#status = :proc AND #leaseOwner = :owner",
                            {":proc": "processing", ":owner": owner}, add_attempt=-1 if unsent else 0)

    def release(self, row: OutboxRow, owner: str, now_ms: int, next_attempt_at: int) -> OutboxRow | None:
        due_pk, due_sk = _due_keys(row, next_attempt_at)
        return self._update(
            row, {"status": "pending", "nextAttemptAt": next_attempt_at, "updatedAt": now_ms, "duePk": due_pk, "dueSk": due_sk},
            ["leaseOwner", "leaseUntil"], "#status = :proc AND #leaseOwner = :owner", {":proc": "processing", ":owner": owner},
            add_attempt=-1,  # nothing was sent: the attempt the claim counted is given back
        )

    def due(self, before_ms: int, limit_per_shard: int = 100) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for shard in range(SHARDS):
            resp = self._call(
                "query", TableName=self._table, IndexName=DUE_INDEX,
                KeyConditionExpression="duePk = :p AND dueSk <= :t",
                ExpressionAttributeValues={":p": {"S": f"{DUE_PREFIX}{shard:02d}"}, ":t": {"S": f"{_ms13(before_ms)}#~"}},
                Limit=limit_per_shard,
            )
            for raw in resp.get("Items", []):
                found.append(parse_pk(raw["pk"]["S"]))
        return found


    # -- the operator's view ----------------------------------------------------------------------
    def dead_rows(self) -> list[OutboxRow]:
        """Every ``dead`` row of every kind (a scan: dead rows are out of the due index; operator
        tooling only)."""
        return self.find_rows("dead")

    def find_rows(self, status: str | None = None) -> list[OutboxRow]:
        """Every row of every kind, or those in ``status``, newest first (a scan; operator tooling only)."""
        kwargs: dict[str, Any] = {"TableName": self._table, "ConsistentRead": True, "FilterExpression": "entity = :outbox",
                                  "ExpressionAttributeValues": self._values({":outbox": "outbox"})}
        if status is not None:
            kwargs["FilterExpression"] += " AND #status = :status"
            kwargs["ExpressionAttributeNames"] = {"#status": "status"}
            kwargs["ExpressionAttributeValues"] = self._values({":outbox": "outbox", ":status": status})
        found: list[OutboxRow] = []
        while True:
            resp = self._call("scan", **kwargs)
            found.extend(from_item({k: self._de.deserialize(v) for k, v in raw.items()}) for raw in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        found.sort(key=lambda r: (-r.updated_at, r.kind, r.key))
        return found

    def redrive(self, row: OutboxRow, now_ms: int) -> OutboxRow | None:
        """The operator's re-arm of a ``dead`` row (a requeue): ``retry_wait``, a fresh
        attempt budget, due now. Refused (None) unless the row is still ``dead``."""
        due_pk, due_sk = _due_keys(row, now_ms)
        return self._update(
            row, {"status": "retry_wait", "attempts": 0, "nextAttemptAt": now_ms, "updatedAt": now_ms, "redrivenAt": now_ms,
                  "duePk": due_pk, "dueSk": due_sk},
            ["completedAt", "expiresAt", "leaseOwner", "leaseUntil", "deadPk", "deadSk"], "#status = :dead", {":dead": "dead"},
        )


class MemoryOutboxRows:
    """The same contract in memory (unit tests, tooling). Thread-safe."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], OutboxRow] = {}
        self._lock = threading.Lock()

    def rows(self) -> list[OutboxRow]:
        with self._lock:
            return [copy.deepcopy(r) for r in self._rows.values()]

    def insert(self, row: OutboxRow) -> bool:
        """Insert if absent (the memory job store's transaction step). True when inserted."""
        row_pk(row.kind, row.key)
        with self._lock:
            if (row.kind, row.key) in self._rows:
                return False
            self._rows[(row.kind, row.key)] = copy.deepcopy(row)
            return True

    def has(self, kind: str, key: str) -> bool:
        with self._lock:
            return (kind, key) in self._rows

    def enqueue(self, row: OutboxRow, *, revive: bool = False) -> tuple[OutboxRow, bool]:
        row_pk(row.kind, row.key)
        with self._lock:
            existing = self._rows.get((row.kind, row.key))
            if existing is None:
                self._rows[(row.kind, row.key)] = copy.deepcopy(row)
                return copy.deepcopy(row), True
            if revive and existing.status in ("dead", "cancelled"):
                existing.status, existing.attempts = "pending", 0
                existing.next_attempt_at, existing.updated_at = row.next_attempt_at, row.updated_at
                existing.last_error = existing.completed_at = existing.lease_owner = existing.lease_until = None
            return copy.deepcopy(existing), False

    def get(self, kind: str, key: str) -> OutboxRow | None:
        with self._lock:
            row = self._rows.get((kind, key))
            return copy.deepcopy(row) if row else None

    def claim(self, row: OutboxRow, owner: str, now_ms: int, lease_ms: int) -> OutboxRow | None:
        with self._lock:
            cur = self._rows.get((row.kind, row.key))
            if cur is None:
                return None
            due = cur.status in ("pending", "retry_wait") and cur.next_attempt_at <= now_ms
            expired = cur.status == "processing" and cur.lease_until is not None and cur.lease_until <= now_ms
            if not (due or expired):
                return None
            cur.status, cur.lease_owner, cur.lease_until, cur.updated_at = "processing", owner, now_ms + lease_ms, now_ms
            cur.attempts += 1  # counted at claim, like the DynamoDB adapter
            return copy.deepcopy(cur)

    def _held(self, row: OutboxRow, owner: str) -> OutboxRow | None:
        cur = self._rows.get((row.kind, row.key))
        if cur is None or cur.status != "processing" or cur.lease_owner != owner:
            return None
        return cur

    def settle(self, row: OutboxRow, owner: str, now_ms: int, *, status: str, error: str | None = None,
               next_attempt_at: int | None = None, unsent: bool = False) -> OutboxRow | None:
        with self._lock:
            cur = self._held(row, owner)
            if cur is None:
                return None
            if status in ACTIONABLE and next_attempt_at is None:
                raise ValueError("a row left actionable needs its next attempt time")
            cur.status, cur.updated_at = status, now_ms
            cur.attempts -= 1 if unsent else 0
            cur.lease_owner = cur.lease_until = None
            if error is not None:
                cur.last_error = error[:MAX_ERROR_CHARS]
            elif status == "done":
                cur.last_error = None
            if status in ACTIONABLE:
                cur.next_attempt_at = int(next_attempt_at)  # type: ignore[arg-type]  # not None: refused above when actionable
            else:
                cur.completed_at = now_ms
            return copy.deepcopy(cur)

    def release(self, row: OutboxRow, owner: str, now_ms: int, next_attempt_at: int) -> OutboxRow | None:
        with self._lock:
            cur = self._held(row, owner)
            if cur is None:
                return None
            cur.status, cur.next_attempt_at, cur.updated_at = "pending", next_attempt_at, now_ms
            cur.attempts -= 1
            cur.lease_owner = cur.lease_until = None
            return copy.deepcopy(cur)

    def due(self, before_ms: int, limit_per_shard: int = 100) -> list[tuple[str, str]]:
        with self._lock:
            rows = sorted((r for r in self._rows.values() if r.actionable and r.next_attempt_at <= before_ms),
                          key=lambda r: r.next_attempt_at)
            return [(r.kind, r.key) for r in rows[: limit_per_shard * SHARDS]]


    def dead_rows(self) -> list[OutboxRow]:
        return self.find_rows("dead")

    def find_rows(self, status: str | None = None) -> list[OutboxRow]:
        with self._lock:
            rows = [copy.deepcopy(r) for r in self._rows.values() if status is None or r.status == status]
        return sorted(rows, key=lambda r: (-r.updated_at, r.kind, r.key))

    def redrive(self, row: OutboxRow, now_ms: int) -> OutboxRow | None:
        with self._lock:
            cur = self._rows.get((row.kind, row.key))
            if cur is None or cur.status != "dead":
                return None
            cur.status, cur.attempts, cur.next_attempt_at, cur.updated_at = "retry_wait", 0, now_ms, now_ms
            cur.completed_at = cur.lease_owner = cur.lease_until = None
            return copy.deepcopy(cur)

__all__ = ["DynamoOutboxRows", "MemoryOutboxRows", "parse_pk", "row_pk"]
