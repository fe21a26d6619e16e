"""An in-memory twin of the DynamoDB low-level client, for the simulation and fast tests.

It speaks boto3's low-level shapes (``{"S": ...}`` attribute values, ``ClientError`` codes), so the
production adapter (``adapters.dynamo_ledger``) runs on it unchanged. It refuses what DynamoDB refuses
(``rules.py``, ``reserved.py``; each case pinned by ``tests/contract`` against moto): malformed attribute
values and numbers, empty-string or oversized keys (table and index keys, on reads as on writes), keys
that do not match the schema, every key-condition rule, bare reserved words, duplicate keys in batch
calls, updates of key attributes (in transactions too), items over 400 KB, transactions over 100 actions
or 4 MB. What it honours, because the ledger's guarantees rest on it:

* conditional ``PutItem`` / ``UpdateItem`` / ``DeleteItem`` with DynamoDB's expression language,
  ``ReturnValuesOnConditionCheckFailure``;
* ``TransactWriteItems``: all-or-nothing, never two actions on one item,
  ``TransactionCanceledException`` with one ``CancellationReasons`` entry per action;
* sparse global secondary indexes (an item is in an index only while it carries the index keys)
  with KEYS_ONLY / INCLUDE / ALL projections — and, on purpose, *eventually consistent*: with
  ``index_lag_ms`` an index sees a write only that many (virtual) milliseconds later, in write
  order per item (writes of different items may overtake each other), which moto never does.
  ``ConsistentRead`` on an index is refused, as by DynamoDB;
* ``Query`` / ``Scan`` with ``Limit`` applied before the filter, pages of at most 1 MB,
  ``ExclusiveStartKey`` / ``LastEvaluatedKey`` (a start key whose item is gone continues after its
  position), ``ScanIndexForward``, ``Select=COUNT``, projections;
* DynamoDB's placeholder rules (undefined or unused ones are errors).

Opt-in and seeded (``faults.TwinFaults``): TTL deletion, stale eventually consistent reads,
``UnprocessedItems`` / ``UnprocessedKeys``, ``TransactionConflict`` and throttling.
Not modelled: streams, PartiQL, LSIs.
"""

from __future__ import annotations

import heapq
import marshal
import threading
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping

from . import rules
from .errors import Exceptions, Meta, client_error
from .expressions import (
    Context,
    ExpressionError,
    apply_update,
    clone,
    evaluate,
    parse_condition,
    parse_projection,
    parse_update,
    project,
    updated_roots,
)
from .faults import Dice, TwinFaults

MAX_ITEM_BYTES = 400 * 1024
MAX_TRANSACT_ITEMS = 100
MAX_TRANSACT_BYTES = 4 * 1024 * 1024
MAX_PAGE_BYTES = 1024 * 1024  # a Query/Scan page reads at most 1 MB (moto cuts at 1,000,000 bytes)


def _kv(value: Mapping[str, Any]) -> tuple[str, Any]:
    (t, raw), = value.items()
    if t == "N":
        return t, Decimal(raw)
    if t == "B":
        return t, bytes(raw)
    return t, raw


def _size(value: Any) -> int:
    (t, raw), = value.items()
    if t == "S":
        return len(raw) if raw.isascii() else len(raw.encode("utf-8"))
    if t == "N":
        return len(raw) // 2 + 1
    if t == "B":
        return len(raw)
    if t in ("BOOL", "NULL"):
        return 1
    if t == "M":
        return 3 + sum(len(k.encode("utf-8")) + _size(v) for k, v in raw.items())
    if t == "L":
        return 3 + sum(_size(v) + 1 for v in raw)
    return sum(len(str(x)) for x in raw)


def canon(value: Any) -> Any:
    """An attribute value as it would come back from the wire: plain str/bytes/bool, nested the same way
    (boto3's serializer keeps a ``str`` subclass such as a StrEnum; JSON on the wire would not)."""
    (t, raw), = value.items()
    if t in ("S", "N"):
        return {t: str(raw)}
    if t == "B":
        return {t: bytes(raw)}
    if t == "M":
        return {t: {str(k): canon(v) for k, v in raw.items()}}
    if t == "L":
        return {t: [canon(v) for v in raw]}
    if t in ("SS", "NS"):
        return {t: [str(x) for x in raw]}
    if t == "BS":
        return {t: [bytes(x) for x in raw]}
    if t == "BOOL":
        return {t: bool(raw)}
    return {t: raw}


def canon_item(item: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if item is None else {str(k): canon(v) for k, v in item.items()}


def item_size(item: Mapping[str, Any]) -> int:
    return sum((len(k) if k.isascii() else len(k.encode("utf-8"))) + _size(v) for k, v in item.items())


class _Index:
    def __init__(self, spec: Mapping[str, Any], types: Mapping[str, str]) -> None:
        self.name = spec["IndexName"]
        keys = {k["KeyType"]: k["AttributeName"] for k in spec["KeySchema"]}
        self.hash_key = keys["HASH"]
        self.range_key = keys.get("RANGE")
        self.hash_role = rules.KeyRole(self.hash_key, types.get(self.hash_key, "S"), True, self.name)
        self.range_role = rules.KeyRole(self.range_key, types.get(self.range_key, "S"), False, self.name) if self.range_key else None
        projection = spec.get("Projection") or {}
        self.projection = projection.get("ProjectionType", "ALL")
        self.non_key = list(projection.get("NonKeyAttributes") or [])
        self.partitions: dict[Any, dict[Any, dict[str, Any]]] = {}
        self.located: dict[Any, Any] = {}  # base key -> index hash value where it currently sits
        self.sizes: dict[Any, int] = {}  # base key -> size of its index entry (for 1 MB pages; filled on first read)

    def describe(self) -> dict[str, Any]:
        schema = [{"AttributeName": self.hash_key, "KeyType": "HASH"}]
        if self.range_key:
            schema.append({"AttributeName": self.range_key, "KeyType": "RANGE"})
        projection: dict[str, Any] = {"ProjectionType": self.projection}
        if self.non_key:
            projection["NonKeyAttributes"] = list(self.non_key)
        return {"IndexName": self.name, "KeySchema": schema, "Projection": projection, "IndexStatus": "ACTIVE"}


class _Table:
    def __init__(self, name: str, spec: Mapping[str, Any], region: str) -> None:
        self.name = name
        keys = {k["KeyType"]: k["AttributeName"] for k in spec["KeySchema"]}
        self.hash_key = keys["HASH"]
        self.range_key = keys.get("RANGE")
        self.attribute_definitions = list(spec.get("AttributeDefinitions") or [])
        types = {d["AttributeName"]: d["AttributeType"] for d in self.attribute_definitions}
        self.hash_role = rules.KeyRole(self.hash_key, types.get(self.hash_key, "S"), True, None)
        self.range_role = rules.KeyRole(self.range_key, types.get(self.range_key, "S"), False, None) if self.range_key else None
        self.key_roles = (self.hash_role,) + ((self.range_role,) if self.range_role else ())
        self.billing = spec.get("BillingMode", "PROVISIONED")
        self.indexes = {g["IndexName"]: _Index(g, types) for g in spec.get("GlobalSecondaryIndexes") or []}
        self.index_roles = tuple(r for i in self.indexes.values() for r in (i.hash_role, i.range_role) if r is not None)
        self.lsis = list(spec.get("LocalSecondaryIndexes") or [])
        self.items: dict[Any, dict[Any, dict[str, Any]]] = {}  # hash kv -> range kv -> item
        self.sizes: dict[Any, int] = {}  # base key -> item size (for 1 MB pages; filled on first read)
        # index writes not yet visible: a heap of (due ms, seq, base key, item or None); per item in order
        self.pending: list[tuple[int, int, Any, dict[str, Any] | None]] = []
        self.pending_due: dict[Any, int] = {}  # base key -> due of its newest pending index write
        # stale-read model: base key -> (ms of the newest write, the version before it); only with stale_reads
        self.history: dict[Any, tuple[int, dict[str, Any] | None]] = {}
        self.arn = f"arn:aws:dynamodb:{region}:123456789012:table/{name}"
        self.ttl: dict[str, Any] = {"TimeToLiveStatus": "DISABLED"}
        self.deletion_protection = bool(spec.get("DeletionProtectionEnabled", False))

    def key_of(self, item: Mapping[str, Any], operation: str) -> tuple[Any, Any]:
        try:
            hv = _kv(item[self.hash_key])
            rv = _kv(item[self.range_key]) if self.range_key else None
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise client_error("ValidationException", "The provided key element does not match the schema", operation) from exc
        # DynamoDB's key size limits hold on every operation, reads included: a
        # partition key of at most 2,048 bytes, a sort key of at most 1,024.
        value: Any  # a key's attribute value: str, bytes or a number's text
        for key, limit, what in ((hv, 2048, "Size of hashkey has exceeded the maximum size limit of2048 bytes"),  # sic: DynamoDB's wording
                                 (rv, 1024, "Aggregated size of all range keys has exceeded the size limit "
                                            "of 1024 bytes")):
            kind, value = key or (None, None)
            if kind == "S" and len(str(value).encode("utf-8", "surrogatepass")) > limit or \
                    kind == "B" and len(value) > limit:
                raise client_error("ValidationException", f"One or more parameter values were invalid: {what}", operation)
        return hv, rv

    def get(self, key: tuple[Any, Any]) -> dict[str, Any] | None:
        return self.items.get(key[0], {}).get(key[1])

    def ttl_attribute(self) -> str | None:
        return self.ttl.get("AttributeName") if self.ttl.get("TimeToLiveStatus") == "ENABLED" else None

    def describe(self) -> dict[str, Any]:
        schema = [{"AttributeName": self.hash_key, "KeyType": "HASH"}]
        if self.range_key:
            schema.append({"AttributeName": self.range_key, "KeyType": "RANGE"})
        out: dict[str, Any] = {
            "TableName": self.name,
            "TableStatus": "ACTIVE",
            "KeySchema": schema,
            "AttributeDefinitions": self.attribute_definitions,
            "TableArn": self.arn,
            "ItemCount": sum(len(p) for p in self.items.values()),
            "BillingModeSummary": {"BillingMode": self.billing},
            "DeletionProtectionEnabled": self.deletion_protection,
        }
        if self.indexes:
            out["GlobalSecondaryIndexes"] = [i.describe() for i in self.indexes.values()]
        return out


def _refusal(fn: Callable[[], Any], operation: str) -> Any:
    """Run a check of rules.py; its refusal becomes the operation's ValidationException."""
    try:
        return fn()
    except (rules.Refusal, ExpressionError) as exc:
        raise client_error("ValidationException", str(exc), operation) from exc


_THROTTLED = {
    "ProvisionedThroughputExceededException": "The level of configured provisioned throughput for the table was exceeded. "
                                              "Consider increasing your provisioning level with the UpdateTable API.",
    "ThrottlingException": "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
                           "scaling your table or index so please try again shortly.",
}


class TwinDynamoDB:
    """``boto3.client("dynamodb")`` in memory. ``now_ms`` drives index lag and the fault models;
    ``index_lag_ms`` may be an int or a callable returning the lag of one write (a seeded random source,
    for the simulation); ``faults`` (:class:`TwinFaults`) switches on the opt-in models."""

    def __init__(self, *, now_ms: Callable[[], int] | None = None, index_lag_ms: int | Callable[[], int] = 0,
                 region: str = "us-east-1", faults: TwinFaults | None = None) -> None:
        self._now = now_ms or (lambda: 0)
        self.faults = faults or TwinFaults()
        self._dice = Dice(self.faults)
        if not index_lag_ms and self.faults.index_lag_ms:
            most = self.faults.index_lag_ms
            index_lag_ms = lambda: self._dice.upto("index-lag", most)  # noqa: E731
        self._lag = index_lag_ms
        self._tables: dict[str, _Table] = {}
        # id(stored item) -> (the item, its marshal bytes): see _copy
        self._packed: dict[int, tuple[dict[str, Any], bytes]] = {}
        self._lock = threading.RLock()
        self._seq = 0
        self._ttl_due: list[tuple[int, int, str, Any, str]] = []  # (delete at ms, seq, table, key, expiry as written)
        self.meta = Meta("dynamodb", region)
        self.exceptions = Exceptions()
        self.calls: dict[str, int] = {}

    # -- tables --------------------------------------------------------------------------------
    def create_table(self, **kw: Any) -> dict[str, Any]:
        with self._lock:
            name = kw["TableName"]
            if name in self._tables:
                raise client_error("ResourceInUseException", f"Table already exists: {name}", "CreateTable")
            table = _Table(name, kw, self.meta.region_name)
            self._tables[name] = table
            return {"TableDescription": table.describe()}

    def describe_table(self, **kw: Any) -> dict[str, Any]:
        return {"Table": self._table(kw["TableName"], "DescribeTable").describe()}

    def delete_table(self, **kw: Any) -> dict[str, Any]:
        with self._lock:
            table = self._table(kw["TableName"], "DeleteTable")
            del self._tables[table.name]
            return {"TableDescription": table.describe()}

    def list_tables(self, **kw: Any) -> dict[str, Any]:
        return {"TableNames": sorted(self._tables)}

    def update_time_to_live(self, **kw: Any) -> dict[str, Any]:
        spec = kw["TimeToLiveSpecification"]
        self._table(kw["TableName"], "UpdateTimeToLive").ttl = {
            "TimeToLiveStatus": "ENABLED" if spec.get("Enabled") else "DISABLED", "AttributeName": spec.get("AttributeName")}
        return {"TimeToLiveSpecification": spec}

    def describe_time_to_live(self, **kw: Any) -> dict[str, Any]:
        return {"TimeToLiveDescription": dict(self._table(kw["TableName"], "DescribeTimeToLive").ttl)}

    def update_continuous_backups(self, **kw: Any) -> dict[str, Any]:
        self._table(kw["TableName"], "UpdateContinuousBackups")
        return {"ContinuousBackupsDescription": {"ContinuousBackupsStatus": "ENABLED"}}

    def tag_resource(self, **kw: Any) -> dict[str, Any]:
        return {}

    def update_table(self, **kw: Any) -> dict[str, Any]:
        table = self._table(kw["TableName"], "UpdateTable")
        if "DeletionProtectionEnabled" in kw:
            table.deletion_protection = bool(kw["DeletionProtectionEnabled"])
        return {"TableDescription": table.describe()}

    def get_paginator(self, operation: str) -> Any:
        twin = self

        class _Paginator:
            def paginate(self, **kw: Any):
                kw = dict(kw)
                kw.pop("PaginationConfig", None)
                while True:
                    page = getattr(twin, operation)(**kw)
                    yield page
                    if "LastEvaluatedKey" not in page:
                        return
                    kw["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return _Paginator()

    def get_waiter(self, name: str) -> Any:
        class _Ready:  # tables are ACTIVE at once
            def wait(self, **_: Any) -> None:
                return None
        return _Ready()

    def _table(self, name: str, operation: str) -> _Table:
        table = self._tables.get(name)
        if table is None:
            raise client_error("ResourceNotFoundException", "Requested resource not found", operation)
        return table

    # -- one place every stored change goes through ------------------------------------------------
    def _store(self, table: _Table, key: tuple[Any, Any], new: dict[str, Any] | None) -> None:
        """Make ``new`` (None: nothing) the item under ``key``: the table, the stale-read history, the
        indexes (eventually) and the TTL schedule all see the same change."""
        old = table.get(key)
        table.sizes.pop(key, None)
        if old is not None:
            self._packed.pop(id(old), None)
        if self.faults.stale_reads:
            table.history[key] = (self._now(), old)
        if new is None:
            part = table.items.get(key[0])
            if part is not None and key[1] in part:
                del part[key[1]]
                if not part:
                    del table.items[key[0]]
        else:
            table.items.setdefault(key[0], {})[key[1]] = new
            self._schedule_ttl(table, key, new)
        self._index_write(table, key, new)

    # -- index maintenance (eventually consistent on purpose, per item) --------------------------------
    def _lag_ms(self) -> int:
        lag = self._lag() if callable(self._lag) else self._lag
        return max(0, int(lag or 0))

    def _index_write(self, table: _Table, key: tuple[Any, Any], item: dict[str, Any] | None) -> None:
        if not table.indexes:
            return
        lag = self._lag_ms()
        if lag == 0 and key not in table.pending_due:
            self._index_apply(table, key, item)
            return
        due = self._now() + lag
        # DynamoDB orders the index writes of one item, not across items: never before this item's last one
        due = max(due, table.pending_due.get(key, due))
        table.pending_due[key] = due
        self._seq += 1
        heapq.heappush(table.pending, (due, self._seq, key, clone(item) if item is not None else None))

    def _index_catch_up(self, table: _Table) -> None:
        now = self._now()
        while table.pending and table.pending[0][0] <= now:
            self._index_pop(table)

    def _index_pop(self, table: _Table) -> None:
        due, _, key, item = heapq.heappop(table.pending)
        if table.pending_due.get(key) == due:  # its newest (one with the same due is popped in this same catch-up)
            del table.pending_due[key]
        self._index_apply(table, key, item)

    def _index_apply(self, table: _Table, key: tuple[Any, Any], item: dict[str, Any] | None) -> None:
        for index in table.indexes.values():
            index.sizes.pop(key, None)
            old_hash = index.located.pop(key, None)
            if old_hash is not None:
                part = index.partitions.get(old_hash)
                if part is not None:
                    gone = part.pop(key, None)
                    if gone is not None:
                        self._packed.pop(id(gone), None)
                    if not part:
                        del index.partitions[old_hash]
            if item is None or index.hash_key not in item or (index.range_key and index.range_key not in item):
                continue  # sparse: only items carrying the index keys are in the index
            if index.projection == "ALL":
                entry = clone(item)
            else:
                names = {table.hash_key, index.hash_key}
                if table.range_key:
                    names.add(table.range_key)
                if index.range_key:
                    names.add(index.range_key)
                if index.projection == "INCLUDE":
                    names.update(index.non_key)
                entry = {k: clone(v) for k, v in item.items() if k in names}
            hv = _kv(item[index.hash_key])
            index.partitions.setdefault(hv, {})[key] = entry
            index.located[key] = hv

    def index_pending_until(self) -> int | None:
        """When the last index write not yet visible becomes visible (None when every index is current)."""
        with self._lock:
            dues = [max(t.pending)[0] for t in self._tables.values() if t.pending]
            return max(dues) if dues else None

    def indexes_in_flight(self) -> bool:
        """Whether some index write is not visible yet (it becomes visible once the clock passes its lag)."""
        with self._lock:
            return any(table.pending for table in self._tables.values())

    def settle_indexes(self) -> None:
        """Make every index see every write now (tests that want to look without lag)."""
        with self._lock:
            for table in self._tables.values():
                while table.pending:
                    self._index_pop(table)

    # -- TTL (opt-in: TwinFaults.ttl_delete_within_ms) --------------------------------------------------
    def _schedule_ttl(self, table: _Table, key: tuple[Any, Any], item: dict[str, Any]) -> None:
        within = self.faults.ttl_delete_within_ms
        attr = table.ttl_attribute()
        if within is None or attr is None:
            return
        expiry = item.get(attr)
        if not expiry or "N" not in expiry:
            return  # TTL ignores an attribute that is not a Number
        at_ms = int(Decimal(expiry["N"]) * 1000) + self._dice.upto("ttl", within)
        self._seq += 1
        heapq.heappush(self._ttl_due, (at_ms, self._seq, table.name, key, expiry["N"]))

    def _expired(self, table: _Table, item: dict[str, Any] | None, now_ms: int) -> bool:
        attr = table.ttl_attribute()
        expiry = item.get(attr) if item is not None and attr else None
        if not expiry or "N" not in expiry:
            return False
        at_ms = Decimal(expiry["N"]) * 1000
        # DynamoDB deletes only items whose expiry is past, and never one more than five years past
        return now_ms - _FIVE_YEARS_MS <= at_ms <= now_ms

    def _ttl_tick(self) -> None:
        now = self._now()
        while self._ttl_due and self._ttl_due[0][0] <= now:
            _, _, name, key, written = heapq.heappop(self._ttl_due)
            table = self._tables.get(name)
            if table is None:
                continue
            item = table.get(key)
            attr = table.ttl_attribute()
            # still the expiry this entry was scheduled for (a later write reschedules), and still expired
            if item is not None and attr and item.get(attr, {}).get("N") == written and self._expired(table, item, now):
                self._store(table, key, None)

    def sweep_ttl(self) -> int:
        """Delete every item whose TTL has passed, now (the deterministic sweep); returns how many."""
        with self._lock:
            now = self._now()
            gone = 0
            for table in self._tables.values():
                expired = [(hv, rv) for hv, part in table.items.items() for rv, item in part.items()
                           if self._expired(table, item, now)]
                for key in expired:
                    self._store(table, key, None)
                gone += len(expired)
            return gone

    # -- entry of every data-plane call ------------------------------------------------------------------
    def _count(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1

    def _enter(self, op: str) -> None:
        """Count the call, let TTL deletions that are due happen, and maybe throttle it (opt-in)."""
        self._count(op)
        if self._ttl_due:
            self._ttl_tick()
        if self._dice.hit("throttle", self.faults.throttle):
            code = str(self._dice.pick("throttle", sorted(_THROTTLED)))
            if op == "TransactWriteItems":
                raise self._cancelled([{"Code": "ThrottlingError", "Message": _THROTTLED["ThrottlingException"]}], op)
            raise client_error(code, _THROTTLED[code], op)

    @staticmethod
    def _cancelled(reasons: list[dict[str, Any]], op: str) -> Exception:
        codes = ", ".join(r["Code"] for r in reasons)
        return client_error("TransactionCanceledException",
                            f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
                            op, CancellationReasons=reasons)

    # -- single-item writes --------------------------------------------------------------------
    def _check_item(self, table: _Table, item: Mapping[str, Any], operation: str, *, updated: bool = False) -> None:
        _refusal(lambda: rules.item_keys(item, table.key_roles, table.index_roles, updated=updated), operation)
        if item_size(item) > MAX_ITEM_BYTES:
            raise client_error("ValidationException", f"Item size {'to update ' if updated else ''}has exceeded the maximum "
                               "allowed size", operation)

    def _key(self, table: _Table, key_item: Any, operation: str) -> tuple[Any, Any]:
        _refusal(lambda: rules.key(key_item, table.key_roles), operation)
        return table.key_of(key_item, operation)

    def _condition(self, kw: Mapping[str, Any], old: dict[str, Any] | None, operation: str, *extra: Any) -> bool:
        text = kw.get("ConditionExpression")
        trees = [parse_condition(text)] if text else []
        ctx = Context(kw.get("ExpressionAttributeNames"), canon_item(kw.get("ExpressionAttributeValues")), *trees, *extra)
        return all(evaluate(old, t, ctx) for t in trees)

    def _ctx_or_error(self, fn: Callable[[], Any], operation: str) -> Any:
        return _refusal(fn, operation)

    def _failed(self, operation: str, old: dict[str, Any] | None, kw: Mapping[str, Any]) -> Exception:
        extra: dict[str, Any] = {}
        if kw.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and old is not None:
            extra["Item"] = clone(old)
        return client_error("ConditionalCheckFailedException", "The conditional request failed", operation, **extra)

    @staticmethod
    def _no_key_update(table: _Table, clauses: tuple, ctx: Context) -> None:
        """An update expression may not SET, REMOVE, ADD or DELETE a key attribute of the table."""
        for name in updated_roots(clauses, ctx):
            if name in (table.hash_key, table.range_key):
                raise rules.Refusal(f"One or more parameter values were invalid: Cannot update attribute {name}. "
                                    "This attribute is part of the key")

    def put_item(self, **kw: Any) -> dict[str, Any]:
        self._enter("PutItem")
        with self._lock:
            table = self._table(kw["TableName"], "PutItem")
            _refusal(lambda: rules.values(kw["Item"]), "PutItem")
            _refusal(lambda: rules.values(kw.get("ExpressionAttributeValues")), "PutItem")
            item = canon_item(kw["Item"])
            assert item is not None
            self._check_item(table, item, "PutItem")
            key = table.key_of(item, "PutItem")
            old = table.get(key)
            if not self._ctx_or_error(lambda: self._condition(kw, old, "PutItem"), "PutItem"):
                raise self._failed("PutItem", old, kw)
            self._store(table, key, item)
            out: dict[str, Any] = {}
            if kw.get("ReturnValues") == "ALL_OLD" and old is not None:
                out["Attributes"] = clone(old)
            return out

    def update_item(self, **kw: Any) -> dict[str, Any]:
        self._enter("UpdateItem")
        with self._lock:
            table = self._table(kw["TableName"], "UpdateItem")
            _refusal(lambda: rules.values(kw.get("ExpressionAttributeValues")), "UpdateItem")
            key_item = kw["Key"]
            key = self._key(table, key_item, "UpdateItem")
            old = table.get(key)

            def run() -> tuple[bool, dict[str, Any], set[str]]:
                clauses = parse_update(kw["UpdateExpression"])
                cond = parse_condition(kw["ConditionExpression"]) if kw.get("ConditionExpression") else None
                ctx = Context(kw.get("ExpressionAttributeNames"), canon_item(kw.get("ExpressionAttributeValues")), clauses,
                              *([cond] if cond else []))
                self._no_key_update(table, clauses, ctx)
                if cond is not None and not evaluate(old, cond, ctx):
                    return False, {}, set()
                base = dict(old) if old is not None else canon_item(key_item) or {}
                new, touched = apply_update(base, clauses, ctx)
                return True, new, touched

            ok, new, touched = self._ctx_or_error(run, "UpdateItem")
            if not ok:
                raise self._failed("UpdateItem", old, kw)
            self._check_item(table, new, "UpdateItem", updated=True)
            self._store(table, key, new)
            mode = kw.get("ReturnValues", "NONE")
            if mode == "ALL_NEW":
                return {"Attributes": clone(new)}
            if mode == "ALL_OLD":
                return {"Attributes": clone(old)} if old else {}
            if mode == "UPDATED_NEW":
                return {"Attributes": {k: clone(v) for k, v in new.items() if k in touched}}
            if mode == "UPDATED_OLD":
                return {"Attributes": {k: clone(v) for k, v in (old or {}).items() if k in touched}}
            return {}

    def delete_item(self, **kw: Any) -> dict[str, Any]:
        self._enter("DeleteItem")
        with self._lock:
            table = self._table(kw["TableName"], "DeleteItem")
            _refusal(lambda: rules.values(kw.get("ExpressionAttributeValues")), "DeleteItem")
            key = self._key(table, kw["Key"], "DeleteItem")
            old = table.get(key)
            if not self._ctx_or_error(lambda: self._condition(kw, old, "DeleteItem"), "DeleteItem"):
                raise self._failed("DeleteItem", old, kw)
            if old is not None:
                self._store(table, key, None)
            if kw.get("ReturnValues") == "ALL_OLD" and old is not None:
                return {"Attributes": clone(old)}
            return {}

    # -- reads -----------------------------------------------------------------------------------
    def _projected(self, item: dict[str, Any], kw: Mapping[str, Any], ctx: Context | None) -> dict[str, Any]:
        text = kw.get("ProjectionExpression")
        if not text:
            return self._copy(item)
        assert ctx is not None
        return project(item, parse_projection(text), ctx)

    def _copy(self, item: dict[str, Any]) -> dict[str, Any]:
        """The caller's own copy of a stored item (base table or index entry). A stored item is never
        changed in place (every write stores a new one: ``apply_update``), so its marshal bytes are
        kept from its first read until ``_store`` or ``_index_apply`` replaces it, and each read
        after that only loads them: the same copy as ``clone``, at about half its cost (a slot's
        items are read many times between two writes). The cache holds the item itself, so its id
        cannot be reused while the entry lives."""
        packed = self._packed.get(id(item))
        if packed is None or packed[0] is not item:
            try:
                packed = (item, marshal.dumps(item))
            except ValueError:  # not plain data (marshal refuses it): the general copy
                return clone(item)
            self._packed[id(item)] = packed
        return marshal.loads(packed[1])

    def _seen(self, table: _Table, key: tuple[Any, Any], consistent: bool) -> dict[str, Any] | None:
        """The version of one item a read sees: the current one, or (an eventually consistent read, with
        the stale-read model on) the one before a recent write."""
        current = table.get(key)
        if consistent or not table.history:
            return current
        entry = table.history.get(key)
        if entry is None:
            return current
        at, previous = entry
        if self._now() - at >= self.faults.stale_window_ms:
            del table.history[key]
            return current
        return previous if self._dice.hit("stale", self.faults.stale_reads) else current

    def _stale_rows(self, table: _Table, rows: list[tuple[Any, dict[str, Any]]], consistent: bool,
                    in_scope: Callable[[tuple[Any, Any]], bool]) -> list[tuple[Any, dict[str, Any]]]:
        if consistent or not table.history:
            return rows
        present = {k for k, _ in rows}
        keys = sorted(present | {k for k in table.history if in_scope(k)}, key=str)
        out = []
        for key in keys:
            item = self._seen(table, key, False)
            if item is not None:
                out.append((key, item))
        return out

    def get_item(self, **kw: Any) -> dict[str, Any]:
        self._enter("GetItem")
        with self._lock:
            table = self._table(kw["TableName"], "GetItem")
            key = self._key(table, kw["Key"], "GetItem")
            ctx = self._ctx_or_error(lambda: Context(kw.get("ExpressionAttributeNames"), None, *_projection(kw)), "GetItem")
            item = self._seen(table, key, bool(kw.get("ConsistentRead")))
            return {"Item": self._projected(item, kw, ctx)} if item is not None else {}

    def batch_get_item(self, **kw: Any) -> dict[str, Any]:
        self._enter("BatchGetItem")
        with self._lock:
            total = sum(len(r["Keys"]) for r in kw["RequestItems"].values())
            if total > 100:
                raise client_error("ValidationException", "Too many items requested for the BatchGetItem call", "BatchGetItem")
            plans = []
            for name, request in kw["RequestItems"].items():
                table = self._table(name, "BatchGetItem")
                ctx = self._ctx_or_error(lambda: Context(request.get("ExpressionAttributeNames"), None, *_projection(request)),
                                         "BatchGetItem")
                keys = [self._key(table, k, "BatchGetItem") for k in request["Keys"]]
                if len(set(keys)) != len(keys):
                    raise client_error("ValidationException", "Provided list of item keys contains duplicates", "BatchGetItem")
                plans.append((name, request, table, ctx, keys))
            responses: dict[str, list[dict[str, Any]]] = {}
            unprocessed: dict[str, dict[str, Any]] = {}
            for name, request, table, ctx, keys in plans:
                found = []
                for key_item, key in zip(request["Keys"], keys):
                    if self._dice.hit("unprocessed", self.faults.unprocessed):
                        left = unprocessed.setdefault(name, {**{k: v for k, v in request.items() if k != "Keys"}, "Keys": []})
                        left["Keys"].append(clone(key_item))
                        continue
                    item = self._seen(table, key, bool(request.get("ConsistentRead")))
                    if item is not None:
                        found.append(self._projected(item, request, ctx))
                responses[name] = found
            return {"Responses": responses, "UnprocessedKeys": unprocessed}

    def batch_write_item(self, **kw: Any) -> dict[str, Any]:
        self._enter("BatchWriteItem")
        with self._lock:
            total = sum(len(r) for r in kw["RequestItems"].values())
            if total > 25:
                raise client_error("ValidationException", "Too many items requested for the BatchWriteItem call", "BatchWriteItem")
            plan: list[tuple[str, _Table, tuple[Any, Any], dict[str, Any] | None, Mapping[str, Any]]] = []
            for name, requests in kw["RequestItems"].items():
                table = self._table(name, "BatchWriteItem")
                seen: set[tuple[Any, Any]] = set()
                for request in requests:
                    if "PutRequest" in request:
                        raw = request["PutRequest"]["Item"]
                        _refusal(lambda: rules.values(raw), "BatchWriteItem")
                        item = canon_item(raw)
                        assert item is not None
                        self._check_item(table, item, "BatchWriteItem")
                        key = table.key_of(item, "BatchWriteItem")
                    else:
                        item = None
                        key = self._key(table, request["DeleteRequest"]["Key"], "BatchWriteItem")
                    if key in seen:  # a put and a delete of one item count as duplicates too
                        raise client_error("ValidationException", "Provided list of item keys contains duplicates",
                                           "BatchWriteItem")
                    seen.add(key)
                    plan.append((name, table, key, item, request))
            unprocessed: dict[str, list[Any]] = {}
            for name, table, key, item, request in plan:
                if self._dice.hit("unprocessed", self.faults.unprocessed):
                    unprocessed.setdefault(name, []).append(clone(request))
                    continue
                if item is not None or table.get(key) is not None:
                    self._store(table, key, item)
            return {"UnprocessedItems": unprocessed}

    def _sorted_partition(self, rows: Iterable[tuple[Any, dict[str, Any]]], range_key: str | None) -> list[tuple[Any, dict[str, Any]]]:
        return sorted(rows, key=lambda row: _order(row[0], row[1], range_key))

    def query(self, **kw: Any) -> dict[str, Any]:
        self._enter("Query")
        with self._lock:
            table = self._table(kw["TableName"], "Query")
            index_name = kw.get("IndexName")
            if index_name is not None and index_name not in table.indexes:
                raise client_error("ValidationException", f"The table does not have the specified index: {index_name}", "Query")
            if index_name is not None and kw.get("ConsistentRead"):
                raise client_error("ValidationException", "Consistent reads are not supported on global secondary indexes", "Query")
            index = table.indexes[index_name] if index_name is not None else None
            hash_role, range_role = (index.hash_role, index.range_role) if index else (table.hash_role, table.range_role)

            def parse() -> tuple[Any, tuple | None, tuple | None, Context]:
                _refusal(lambda: rules.values(kw.get("ExpressionAttributeValues")), "Query")
                key_tree = parse_condition(kw["KeyConditionExpression"], "KeyConditionExpression")
                filt = parse_condition(kw["FilterExpression"], "FilterExpression") if kw.get("FilterExpression") else None
                proj = parse_projection(kw["ProjectionExpression"]) if kw.get("ProjectionExpression") else None
                ctx = Context(kw.get("ExpressionAttributeNames"), canon_item(kw.get("ExpressionAttributeValues")), key_tree,
                              *[t for t in (filt, proj) if t is not None])
                hash_value, range_tree = rules.key_condition(key_tree, hash_role, range_role, ctx.names, ctx.value)
                return _kv(hash_value), range_tree, filt, ctx

            hv, range_tree, filt, ctx = self._ctx_or_error(parse, "Query")
            sizes: dict[Any, int] | None
            if index is not None:
                self._index_catch_up(table)
                rows = list(index.partitions.get(hv, {}).items())
                range_key, sizes = index.range_key, index.sizes
            else:
                rows = [((hv, rv), item) for rv, item in table.items.get(hv, {}).items()]
                fresh = bool(kw.get("ConsistentRead")) or not table.history
                rows = self._stale_rows(table, rows, bool(kw.get("ConsistentRead")), lambda k: k[0] == hv)
                range_key, sizes = table.range_key, (table.sizes if fresh else None)
            rows = self._sorted_partition(rows, range_key)
            if range_tree is not None:
                rows = [r for r in rows if evaluate(r[1], range_tree, ctx)]
            forward = kw.get("ScanIndexForward") is not False
            if not forward:
                rows.reverse()
            start = kw.get("ExclusiveStartKey")
            if start:
                rows = self._after(table, index, start, rows, range_key, forward, "Query", hv)
            return self._page(table, rows, kw, filt, ctx, index_name, sizes)

    def _after(self, table: _Table, index: _Index | None, start: Mapping[str, Any], rows: list[tuple[Any, dict[str, Any]]],
               range_key: str | None, forward: bool, operation: str, hv: Any = None) -> list[tuple[Any, dict[str, Any]]]:
        """The rows after an ExclusiveStartKey, by position — the item it names may be gone (DynamoDB, like
        moto, continues after where it would sort)."""
        needed = {table.hash_key, table.range_key} | ({index.hash_key, index.range_key} if index else set())
        needed.discard(None)
        if not isinstance(start, Mapping) or set(start) != needed:
            raise client_error("ValidationException", "The provided starting key is invalid: The provided key element does not "
                               "match the schema", operation)
        _refusal(lambda: rules.values(start), operation)
        base_key = table.key_of(start, operation)
        if hv is not None and _kv(start[index.hash_key if index else table.hash_key]) != hv:
            raise client_error("ValidationException", "The provided starting key is outside query boundaries based on provided "
                               "conditions", operation)
        mark = _order(base_key, start, range_key)
        if forward:
            return [r for r in rows if _order(r[0], r[1], range_key) > mark]
        return [r for r in rows if _order(r[0], r[1], range_key) < mark]

    def _page(self, table: _Table, rows: list[tuple[Any, dict[str, Any]]], kw: Mapping[str, Any], filt: tuple | None,
              ctx: Context, index_name: str | None, sizes: dict[Any, int] | None = None) -> dict[str, Any]:
        """One page: at most ``Limit`` rows and 1 MB read. ``sizes`` caches the sizes of current rows by
        base key (None when a row may be a stale version)."""
        limit = kw.get("Limit")
        taken: list[tuple[Any, dict[str, Any]]] = []
        read = 0
        for row in rows:
            if limit is not None and len(taken) >= limit:
                break
            size = sizes.get(row[0]) if sizes is not None else None
            if size is None:
                size = item_size(row[1])
                if sizes is not None:
                    sizes[row[0]] = size
            if taken and read + size > MAX_PAGE_BYTES:  # 1 MB read per page, before any filter (DynamoDB)
                break
            taken.append(row)
            read += size
        more = len(taken) < len(rows)
        items = [item for _, item in taken if filt is None or evaluate(item, filt, ctx)]
        out: dict[str, Any] = {"Count": len(items), "ScannedCount": len(taken)}
        if kw.get("Select") != "COUNT":
            out["Items"] = [self._projected(i, kw, ctx) for i in items]
        if more and taken:
            _last_key, last_item = taken[-1]
            lek = {table.hash_key: clone(last_item[table.hash_key])}
            if table.range_key:
                lek[table.range_key] = clone(last_item[table.range_key])
            if index_name is not None:
                index = table.indexes[index_name]
                for attr in (index.hash_key, index.range_key):
                    if attr:
                        lek[attr] = clone(last_item[attr])
            out["LastEvaluatedKey"] = lek
        return out

    def scan(self, **kw: Any) -> dict[str, Any]:
        self._enter("Scan")
        with self._lock:
            table = self._table(kw["TableName"], "Scan")

            def parse() -> tuple[tuple | None, Context]:
                _refusal(lambda: rules.values(kw.get("ExpressionAttributeValues")), "Scan")
                filt = parse_condition(kw["FilterExpression"], "FilterExpression") if kw.get("FilterExpression") else None
                proj = parse_projection(kw["ProjectionExpression"]) if kw.get("ProjectionExpression") else None
                ctx = Context(kw.get("ExpressionAttributeNames"), canon_item(kw.get("ExpressionAttributeValues")),
                              *[t for t in (filt, proj) if t is not None])
                return filt, ctx

            filt, ctx = self._ctx_or_error(parse, "Scan")
            index = None
            if kw.get("IndexName"):
                if kw["IndexName"] not in table.indexes:
                    raise client_error("ValidationException", f"The table does not have the specified index: {kw['IndexName']}",
                                       "Scan")
                self._index_catch_up(table)
                index = table.indexes[kw["IndexName"]]
                rows = [r for part in index.partitions.values() for r in part.items()]
                sizes: dict[Any, int] | None = index.sizes
            else:
                rows = [((hv, rv), item) for hv, part in table.items.items() for rv, item in part.items()]
                sizes = table.sizes if (kw.get("ConsistentRead") or not table.history) else None
                rows = self._stale_rows(table, rows, bool(kw.get("ConsistentRead")), lambda k: True)
            rows.sort(key=lambda r: str(r[0]))
            start = kw.get("ExclusiveStartKey")
            if start:
                rows = self._after(table, index, start, rows, None, True, "Scan")
            return self._page(table, rows, kw, filt, ctx, kw.get("IndexName"), sizes)

    # -- transactions ------------------------------------------------------------------------------
    def transact_write_items(self, **kw: Any) -> dict[str, Any]:
        self._enter("TransactWriteItems")
        actions = kw["TransactItems"]
        op = "TransactWriteItems"
        with self._lock:
            if not actions or len(actions) > MAX_TRANSACT_ITEMS:
                raise client_error("ValidationException", "1 validation error detected: Value at 'transactItems' failed to "
                                   "satisfy constraint: Member must have length less than or equal to 100", op)
            plan: list[tuple[str, _Table, tuple[Any, Any], Mapping[str, Any]]] = []
            seen: set[tuple[str, Any]] = set()
            request_bytes = 0
            for action in actions:
                (kind, body), = action.items()
                table = self._table(body["TableName"], op)
                _refusal(lambda: rules.values(body.get("ExpressionAttributeValues")), op)
                if kind == "Put":
                    _refusal(lambda: rules.values(body["Item"]), op)
                    self._check_item(table, canon_item(body["Item"]) or {}, op)
                    key = table.key_of(body["Item"], op)
                    request_bytes += item_size(body["Item"])
                else:
                    key = self._key(table, body["Key"], op)
                    request_bytes += item_size(body["Key"])
                request_bytes += sum(_size(v) for v in (body.get("ExpressionAttributeValues") or {}).values())
                if (table.name, key) in seen:
                    raise client_error("ValidationException", "Transaction request cannot include multiple operations on one item", op)
                seen.add((table.name, key))
                plan.append((kind, table, key, body))
            if request_bytes > MAX_TRANSACT_BYTES:
                raise client_error("ValidationException", "Transaction request cannot be larger than 4 MB", op)
            parsed = []
            for kind, table, key, body in plan:
                def prepare() -> tuple[tuple | None, tuple | None, Context]:
                    cond = parse_condition(body["ConditionExpression"]) if body.get("ConditionExpression") else None
                    clauses = parse_update(body["UpdateExpression"]) if kind == "Update" else None
                    trees = [t for t in (cond, clauses) if t is not None]
                    ctx = Context(body.get("ExpressionAttributeNames"), canon_item(body.get("ExpressionAttributeValues")), *trees)
                    if clauses is not None:
                        self._no_key_update(table, clauses, ctx)
                    return cond, clauses, ctx
                parsed.append(self._ctx_or_error(prepare, op))
            if self._dice.hit("conflict", self.faults.transaction_conflict):
                victim = self._dice.upto("conflict", len(plan) - 1)
                raise self._cancelled([{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
                                       if i == victim else {"Code": "None"} for i in range(len(plan))], op)
            reasons: list[dict[str, Any]] = []
            results: list[dict[str, Any] | None] = []
            failed = False
            for (kind, table, key, body), (cond, clauses, ctx) in zip(plan, parsed):
                old = table.get(key)

                def run() -> tuple[bool, dict[str, Any] | None]:
                    if cond is not None and not evaluate(old, cond, ctx):
                        return False, None
                    if kind == "Put":
                        return True, canon_item(body["Item"])
                    if kind == "Delete":
                        return True, None
                    if kind == "ConditionCheck":
                        return True, old
                    base = dict(old) if old is not None else canon_item(body["Key"]) or {}
                    new, _ = apply_update(base, clauses, ctx)
                    return True, new

                ok, new = self._ctx_or_error(run, op)
                if ok:
                    if new is not None and kind == "Update":
                        self._check_item(table, new, op, updated=True)
                    reasons.append({"Code": "None"})
                else:
                    failed = True
                    reason = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
                    if body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and old is not None:
                        reason["Item"] = clone(old)
                    reasons.append(reason)
                results.append(new)
            if failed:
                raise self._cancelled(reasons, op)
            for (kind, table, key, _body), new in zip(plan, results):
                if kind == "ConditionCheck" or (new is None and table.get(key) is None):
                    continue
                self._store(table, key, new)
            return {}

    def transact_get_items(self, **kw: Any) -> dict[str, Any]:
        self._enter("TransactGetItems")
        with self._lock:
            out = []
            for action in kw["TransactItems"]:
                body = action["Get"]
                table = self._table(body["TableName"], "TransactGetItems")
                item = table.get(self._key(table, body["Key"], "TransactGetItems"))
                out.append({"Item": clone(item)} if item is not None else {})
            return {"Responses": out}

    # -- introspection for tests ---------------------------------------------------------------------
    def items(self, table: str) -> list[dict[str, Any]]:
        t = self._table(table, "Scan")
        return [clone(i) for part in t.items.values() for i in part.values()]


def _projection(kw: Mapping[str, Any]) -> list[tuple]:
    return [parse_projection(kw["ProjectionExpression"])] if kw.get("ProjectionExpression") else []


_FIVE_YEARS_MS = 5 * 365 * 24 * 3600 * 1000


def _order(base_key: tuple[Any, Any], item: Mapping[str, Any], range_key: str | None) -> tuple[Any, str]:
    """Where a row sorts in a partition: by its (index or table) sort key, then by its base key."""
    rk = _kv(item[range_key])[1] if range_key and range_key in item else ""
    return (rk, str(base_key))
