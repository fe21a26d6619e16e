"""An in-memory twin of the DynamoDB low-level client, for the simulation and fast tests.

It speaks boto3's low-level shapes (``{"S": ...}`` attribute values, ``ClientError`` codes), so the
production adapter (``adapters.dynamo_ledger``) runs on it unchanged. What it honours, because the
ledger's guarantees rest on it (DESIGN §4, §10):

* conditional ``PutItem`` / ``UpdateItem`` / ``DeleteItem`` with DynamoDB's expression language,
  ``ReturnValuesOnConditionCheckFailure``;
* ``TransactWriteItems``: all-or-nothing, at most 100 actions, never two actions on one item,
  ``TransactionCanceledException`` with one ``CancellationReasons`` entry per action;
* sparse global secondary indexes (an item is in an index only while it carries the index keys)
  with KEYS_ONLY / INCLUDE / ALL projections — and, on purpose, *eventually consistent*: with
  ``index_lag_ms`` an index sees a write only that many (virtual) milliseconds later, in write
  order, which moto never does. ``ConsistentRead`` on an index is refused, as by DynamoDB;
* ``Query`` / ``Scan`` with ``Limit`` applied before the filter, ``ExclusiveStartKey`` /
  ``LastEvaluatedKey``, ``ScanIndexForward``, ``Select=COUNT``, projections;
* the 400 KB item limit and DynamoDB's placeholder rules (undefined or unused ones are errors).

Not modelled: throughput, TTL deletion, streams, PartiQL.
"""

from __future__ import annotations

import threading
from collections import deque
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping

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
)

MAX_ITEM_BYTES = 400 * 1024
MAX_TRANSACT_ITEMS = 100


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
        return len(raw.encode("utf-8"))
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
    return sum(len(k.encode("utf-8")) + _size(v) for k, v in item.items())


class _Index:
    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.name = spec["IndexName"]
        keys = {k["KeyType"]: k["AttributeName"] for k in spec["KeySchema"]}
        self.hash_key = keys["HASH"]
        self.range_key = keys.get("RANGE")
        projection = spec.get("Projection") or {}
        self.projection = projection.get("ProjectionType", "ALL")
        self.non_key = list(projection.get("NonKeyAttributes") or [])
        self.partitions: dict[Any, dict[Any, dict[str, Any]]] = {}
        self.located: dict[Any, Any] = {}  # base key -> index hash value where it currently sits

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
        self.billing = spec.get("BillingMode", "PROVISIONED")
        self.indexes = {g["IndexName"]: _Index(g) for g in spec.get("GlobalSecondaryIndexes") or []}
        self.lsis = list(spec.get("LocalSecondaryIndexes") or [])
        self.items: dict[Any, dict[Any, dict[str, Any]]] = {}  # hash kv -> range kv -> item
        self.pending: deque[tuple[int, Any, dict[str, Any] | None]] = deque()
        self.arn = f"arn:aws:dynamodb:{region}:123456789012:table/{name}"
        self.ttl: dict[str, Any] = {"TimeToLiveStatus": "DISABLED"}
        self.deletion_protection = bool(spec.get("DeletionProtectionEnabled", False))

    def key_of(self, item: Mapping[str, Any], operation: str) -> tuple[Any, Any]:
        try:
            hv = _kv(item[self.hash_key])
            rv = _kv(item[self.range_key]) if self.range_key else None
        except KeyError as exc:
            raise client_error("ValidationException", "The provided key element does not match the schema", operation) from exc
        # DynamoDB's key size limits hold on every operation, reads included (issue 21 item 3): a
        # partition key of at most 2,048 bytes, a sort key of at most 1,024.
        for key, limit, what in ((hv, 2048, "Size of hashkey has exceeded the maximum size limit of 2048 bytes"),
                                 (rv, 1024, "Aggregated size of all range keys has exceeded the size limit "
                                            "of 1024 bytes")):
            kind, value = key or (None, None)
            if kind == "S" and len(str(value).encode("utf-8", "surrogatepass")) > limit or \
                    kind == "B" and len(value) > limit:
                raise client_error("ValidationException", f"One or more parameter values were invalid: {what}", operation)
        return hv, rv

    def get(self, key: tuple[Any, Any]) -> dict[str, Any] | None:
        return self.items.get(key[0], {}).get(key[1])

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


class TwinDynamoDB:
    """``boto3.client("dynamodb")`` in memory. ``now_ms`` drives index lag; ``index_lag_ms`` may be an
    int or a callable returning the lag for one write (a seeded random source, for the simulation)."""

    def __init__(self, *, now_ms: Callable[[], int] | None = None, index_lag_ms: int | Callable[[], int] = 0,
                 region: str = "us-east-1") -> None:
        self._now = now_ms or (lambda: 0)
        self._lag = index_lag_ms
        self._tables: dict[str, _Table] = {}
        self._lock = threading.RLock()
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

    # -- index maintenance (eventually consistent on purpose) ----------------------------------
    def _lag_ms(self) -> int:
        lag = self._lag() if callable(self._lag) else self._lag
        return max(0, int(lag or 0))

    def _index_write(self, table: _Table, key: tuple[Any, Any], item: dict[str, Any] | None) -> None:
        if not table.indexes:
            return
        lag = self._lag_ms()
        if lag == 0 and not table.pending:
            self._index_apply(table, key, item)
            return
        due = self._now() + lag
        if table.pending and table.pending[-1][0] > due:
            due = table.pending[-1][0]  # in write order: an index never sees a newer write before an older one
        table.pending.append((due, key, clone(item) if item is not None else None))

    def _index_catch_up(self, table: _Table) -> None:
        now = self._now()
        while table.pending and table.pending[0][0] <= now:
            _, key, item = table.pending.popleft()
            self._index_apply(table, key, item)

    def _index_apply(self, table: _Table, key: tuple[Any, Any], item: dict[str, Any] | None) -> None:
        for index in table.indexes.values():
            old_hash = index.located.pop(key, None)
            if old_hash is not None:
                part = index.partitions.get(old_hash)
                if part is not None:
                    part.pop(key, None)
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
            dues = [t.pending[-1][0] for t in self._tables.values() if t.pending]
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
                    _, key, item = table.pending.popleft()
                    self._index_apply(table, key, item)

    # -- single-item writes --------------------------------------------------------------------
    def _count(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1

    def _check_size(self, item: Mapping[str, Any], operation: str) -> None:
        if item_size(item) > MAX_ITEM_BYTES:
            raise client_error("ValidationException", "Item size has exceeded the maximum allowed size", operation)

    @staticmethod
    def _validate_values(values: Mapping[str, Any] | None, operation: str) -> None:
        for name, v in (values or {}).items():
            if not isinstance(v, Mapping) or len(v) != 1:
                raise client_error("ValidationException", f"Invalid attribute value for {name}", operation)
            (t, raw), = v.items()
            if t == "S" and isinstance(raw, str):
                try:
                    raw.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise client_error("ValidationException", "One or more parameter values were invalid: "
                                       "a string is not valid UTF-8", operation) from exc

    def _condition(self, kw: Mapping[str, Any], old: dict[str, Any] | None, operation: str, *extra: Any) -> bool:
        text = kw.get("ConditionExpression")
        trees = [parse_condition(text)] if text else []
        ctx = Context(kw.get("ExpressionAttributeNames"), canon_item(kw.get("ExpressionAttributeValues")), *trees, *extra)
        return all(evaluate(old, t, ctx) for t in trees)

    def _ctx_or_error(self, fn: Callable[[], Any], operation: str) -> Any:
        try:
            return fn()
        except ExpressionError as exc:
            raise client_error("ValidationException", str(exc), operation) from exc

    def _failed(self, operation: str, old: dict[str, Any] | None, kw: Mapping[str, Any]) -> Exception:
        extra: dict[str, Any] = {}
        if kw.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and old is not None:
            extra["Item"] = clone(old)
        return client_error("ConditionalCheckFailedException", "The conditional request failed", operation, **extra)

    def put_item(self, **kw: Any) -> dict[str, Any]:
        self._count("PutItem")
        with self._lock:
            table = self._table(kw["TableName"], "PutItem")
            item = canon_item(kw["Item"])
            self._validate_values(item, "PutItem")
            self._validate_values(kw.get("ExpressionAttributeValues"), "PutItem")
            key = table.key_of(item, "PutItem")
            self._check_size(item, "PutItem")
            old = table.get(key)
            if not self._ctx_or_error(lambda: self._condition(kw, old, "PutItem"), "PutItem"):
                raise self._failed("PutItem", old, kw)
            table.items.setdefault(key[0], {})[key[1]] = item
            self._index_write(table, key, item)
            out: dict[str, Any] = {}
            if kw.get("ReturnValues") == "ALL_OLD" and old is not None:
                out["Attributes"] = clone(old)
            return out

    def update_item(self, **kw: Any) -> dict[str, Any]:
        self._count("UpdateItem")
        with self._lock:
            table = self._table(kw["TableName"], "UpdateItem")
            self._validate_values(kw.get("ExpressionAttributeValues"), "UpdateItem")
            key_item = kw["Key"]
            key = table.key_of(key_item, "UpdateItem")
            old = table.get(key)

            def run() -> tuple[bool, dict[str, Any], set[str]]:
                clauses = parse_update(kw["UpdateExpression"])
                cond = parse_condition(kw["ConditionExpression"]) if kw.get("ConditionExpression") else None
                ctx = Context(kw.get("ExpressionAttributeNames"), canon_item(kw.get("ExpressionAttributeValues")), clauses,
                              *([cond] if cond else []))
                if cond is not None and not evaluate(old, cond, ctx):
                    return False, {}, set()
                base = dict(old) if old is not None else canon_item(key_item)
                new, touched = apply_update(base, clauses, ctx)
                return True, new, touched

            ok, new, touched = self._ctx_or_error(run, "UpdateItem")
            if not ok:
                raise self._failed("UpdateItem", old, kw)
            if table.hash_key in touched or (table.range_key and table.range_key in touched):
                raise client_error("ValidationException", "Cannot update attribute pk. This attribute is part of the key", "UpdateItem")
            self._check_size(new, "UpdateItem")
            table.items.setdefault(key[0], {})[key[1]] = new
            self._index_write(table, key, new)
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
        self._count("DeleteItem")
        with self._lock:
            table = self._table(kw["TableName"], "DeleteItem")
            key = table.key_of(kw["Key"], "DeleteItem")
            old = table.get(key)
            if not self._ctx_or_error(lambda: self._condition(kw, old, "DeleteItem"), "DeleteItem"):
                raise self._failed("DeleteItem", old, kw)
            if old is not None:
                del table.items[key[0]][key[1]]
                if not table.items[key[0]]:
                    del table.items[key[0]]
                self._index_write(table, key, None)
            if kw.get("ReturnValues") == "ALL_OLD" and old is not None:
                return {"Attributes": clone(old)}
            return {}

    # -- reads -----------------------------------------------------------------------------------
    def _projected(self, item: dict[str, Any], kw: Mapping[str, Any], ctx: Context | None) -> dict[str, Any]:
        text = kw.get("ProjectionExpression")
        if not text:
            return clone(item)
        assert ctx is not None
        return project(item, parse_projection(text), ctx)

    def get_item(self, **kw: Any) -> dict[str, Any]:
        self._count("GetItem")
        with self._lock:
            table = self._table(kw["TableName"], "GetItem")
            key = table.key_of(kw["Key"], "GetItem")
            proj = [parse_projection(kw["ProjectionExpression"])] if kw.get("ProjectionExpression") else []
            ctx = self._ctx_or_error(lambda: Context(kw.get("ExpressionAttributeNames"), None, *proj), "GetItem")
            item = table.get(key)
            return {"Item": self._projected(item, kw, ctx)} if item is not None else {}

    def batch_get_item(self, **kw: Any) -> dict[str, Any]:
        self._count("BatchGetItem")
        with self._lock:
            total = sum(len(r["Keys"]) for r in kw["RequestItems"].values())
            if total > 100:
                raise client_error("ValidationException", "Too many items requested for the BatchGetItem call", "BatchGetItem")
            responses: dict[str, list[dict[str, Any]]] = {}
            for name, request in kw["RequestItems"].items():
                table = self._table(name, "BatchGetItem")
                proj = [parse_projection(request["ProjectionExpression"])] if request.get("ProjectionExpression") else []
                ctx = self._ctx_or_error(lambda: Context(request.get("ExpressionAttributeNames"), None, *proj), "BatchGetItem")
                found = []
                for key_item in request["Keys"]:
                    item = table.get(table.key_of(key_item, "BatchGetItem"))
                    if item is not None:
                        found.append(self._projected(item, request, ctx))
                responses[name] = found
            return {"Responses": responses, "UnprocessedKeys": {}}

    def batch_write_item(self, **kw: Any) -> dict[str, Any]:
        self._count("BatchWriteItem")
        with self._lock:
            total = sum(len(r) for r in kw["RequestItems"].values())
            if total > 25:
                raise client_error("ValidationException", "Too many items requested for the BatchWriteItem call", "BatchWriteItem")
            for name, requests in kw["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        self.put_item(TableName=name, Item=request["PutRequest"]["Item"])
                    else:
                        self.delete_item(TableName=name, Key=request["DeleteRequest"]["Key"])
            return {"UnprocessedItems": {}}

    def _sorted_partition(self, rows: Iterable[tuple[Any, dict[str, Any]]], range_key: str | None) -> list[tuple[Any, dict[str, Any]]]:
        def order(row: tuple[Any, dict[str, Any]]) -> Any:
            base_key, item = row
            rk = _kv(item[range_key])[1] if range_key and range_key in item else ""
            return (rk, str(base_key))
        return sorted(rows, key=order)

    def query(self, **kw: Any) -> dict[str, Any]:
        self._count("Query")
        with self._lock:
            table = self._table(kw["TableName"], "Query")
            index_name = kw.get("IndexName")
            if index_name is not None and index_name not in table.indexes:
                raise client_error("ValidationException", f"The table does not have the specified index: {index_name}", "Query")
            if index_name is not None and kw.get("ConsistentRead"):
                raise client_error("ValidationException", "Consistent reads are not supported on global secondary indexes", "Query")

            def parse() -> tuple[tuple, tuple | None, Context]:
                key_tree = parse_condition(kw["KeyConditionExpression"])
                filt = parse_condition(kw["FilterExpression"]) if kw.get("FilterExpression") else None
                proj = parse_projection(kw["ProjectionExpression"]) if kw.get("ProjectionExpression") else None
                ctx = Context(kw.get("ExpressionAttributeNames"), canon_item(kw.get("ExpressionAttributeValues")), key_tree,
                              *[t for t in (filt, proj) if t is not None])
                return key_tree, filt, ctx

            key_tree, filt, ctx = self._ctx_or_error(parse, "Query")
            if index_name is not None:
                index = table.indexes[index_name]
                self._index_catch_up(table)
                hash_key, range_key = index.hash_key, index.range_key
                hv = self._hash_value(key_tree, hash_key, ctx)
                rows = list(index.partitions.get(hv, {}).items())
            else:
                hash_key, range_key = table.hash_key, table.range_key
                hv = self._hash_value(key_tree, hash_key, ctx)
                rows = [((hv, rv), item) for rv, item in table.items.get(hv, {}).items()]
            rows = [r for r in self._sorted_partition(rows, range_key) if evaluate(r[1], key_tree, ctx)]
            if kw.get("ScanIndexForward") is False:
                rows.reverse()
            return self._page(table, rows, kw, filt, ctx, index_name)

    def _hash_value(self, tree: tuple, hash_key: str, ctx: Context) -> Any:
        def find(node: tuple) -> Any:
            if node[0] == "and":
                return find(node[1]) or find(node[2])
            if node[0] == "cmp" and node[1] == "=" and node[2][0] == "path" and ctx.name(node[2][1][0]) == hash_key:
                return _kv(ctx.value(node[3][1]))
            return None
        hv = find(tree)
        if hv is None:
            raise client_error("ValidationException", "Query condition missed key schema element", "Query")
        return hv

    def _page(self, table: _Table, rows: list[tuple[Any, dict[str, Any]]], kw: Mapping[str, Any], filt: tuple | None,
              ctx: Context, index_name: str | None) -> dict[str, Any]:
        start = kw.get("ExclusiveStartKey")
        if start:
            start_key = table.key_of(start, "Query")
            for i, (base_key, _item) in enumerate(rows):
                if base_key == start_key:
                    rows = rows[i + 1 :]
                    break
        limit = kw.get("Limit")
        more = False
        if limit is not None and len(rows) > limit:
            rows, more = rows[:limit], True
        evaluated = len(rows)
        items = [item for _, item in rows if filt is None or evaluate(item, filt, ctx)]
        out: dict[str, Any] = {"Count": len(items), "ScannedCount": evaluated}
        if kw.get("Select") != "COUNT":
            out["Items"] = [self._projected(i, kw, ctx) for i in items]
        if more and rows:
            last_key, last_item = rows[-1]
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
        self._count("Scan")
        with self._lock:
            table = self._table(kw["TableName"], "Scan")

            def parse() -> tuple[tuple | None, Context]:
                filt = parse_condition(kw["FilterExpression"]) if kw.get("FilterExpression") else None
                proj = parse_projection(kw["ProjectionExpression"]) if kw.get("ProjectionExpression") else None
                ctx = Context(kw.get("ExpressionAttributeNames"), canon_item(kw.get("ExpressionAttributeValues")),
                              *[t for t in (filt, proj) if t is not None])
                return filt, ctx

            filt, ctx = self._ctx_or_error(parse, "Scan")
            if kw.get("IndexName"):
                self._index_catch_up(table)
                index = table.indexes[kw["IndexName"]]
                rows = [r for part in index.partitions.values() for r in part.items()]
            else:
                rows = [((hv, rv), item) for hv, part in table.items.items() for rv, item in part.items()]
            rows.sort(key=lambda r: str(r[0]))
            return self._page(table, rows, kw, filt, ctx, kw.get("IndexName"))

    # -- transactions ------------------------------------------------------------------------------
    def transact_write_items(self, **kw: Any) -> dict[str, Any]:
        self._count("TransactWriteItems")
        actions = kw["TransactItems"]
        with self._lock:
            if not actions or len(actions) > MAX_TRANSACT_ITEMS:
                raise client_error("ValidationException", "1 validation error detected: Value at 'transactItems' failed to "
                                   "satisfy constraint: Member must have length less than or equal to 100", "TransactWriteItems")
            plan: list[tuple[str, _Table, tuple[Any, Any], Mapping[str, Any]]] = []
            seen: set[tuple[str, Any]] = set()
            for action in actions:
                (kind, body), = action.items()
                table = self._table(body["TableName"], "TransactWriteItems")
                key = table.key_of(body["Item"] if kind == "Put" else body["Key"], "TransactWriteItems")
                if (table.name, key) in seen:
                    raise client_error("ValidationException", "Transaction request cannot include multiple operations on one item",
                                       "TransactWriteItems")
                seen.add((table.name, key))
                plan.append((kind, table, key, body))
            reasons: list[dict[str, Any]] = []
            results: list[dict[str, Any] | None] = []
            failed = False
            for kind, table, key, body in plan:
                old = table.get(key)
                self._validate_values(body.get("ExpressionAttributeValues"), "TransactWriteItems")

                def run() -> tuple[bool, dict[str, Any] | None]:
                    cond = parse_condition(body["ConditionExpression"]) if body.get("ConditionExpression") else None
                    clauses = parse_update(body["UpdateExpression"]) if kind == "Update" else None
                    trees = [t for t in (cond, clauses) if t is not None]
                    ctx = Context(body.get("ExpressionAttributeNames"), canon_item(body.get("ExpressionAttributeValues")), *trees)
                    if cond is not None and not evaluate(old, cond, ctx):
                        return False, None
                    if kind == "Put":
                        return True, canon_item(body["Item"])
                    if kind == "Delete":
                        return True, None
                    if kind == "ConditionCheck":
                        return True, old
                    base = dict(old) if old is not None else canon_item(body["Key"])
                    new, _ = apply_update(base, clauses, ctx)
                    return True, new

                ok, new = self._ctx_or_error(run, "TransactWriteItems")
                if ok:
                    if new is not None:
                        self._check_size(new, "TransactWriteItems")
                    reasons.append({"Code": "None"})
                else:
                    failed = True
                    reason = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
                    if body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and old is not None:
                        reason["Item"] = clone(old)
                    reasons.append(reason)
                results.append(new)
            if failed:
                codes = ", ".join(r["Code"] for r in reasons)
                raise client_error("TransactionCanceledException",
                                   f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
                                   "TransactWriteItems", CancellationReasons=reasons)
            for (kind, table, key, _body), new in zip(plan, results):
                if kind == "ConditionCheck":
                    continue
                if new is None:
                    if table.get(key) is not None:
                        del table.items[key[0]][key[1]]
                        if not table.items[key[0]]:
                            del table.items[key[0]]
                else:
                    table.items.setdefault(key[0], {})[key[1]] = new
                self._index_write(table, key, new)
            return {}

    def transact_get_items(self, **kw: Any) -> dict[str, Any]:
        self._count("TransactGetItems")
        with self._lock:
            out = []
            for action in kw["TransactItems"]:
                body = action["Get"]
                table = self._table(body["TableName"], "TransactGetItems")
                item = table.get(table.key_of(body["Key"], "TransactGetItems"))
                out.append({"Item": clone(item)} if item is not None else {})
            return {"Responses": out}

    # -- introspection for tests ---------------------------------------------------------------------
    def items(self, table: str) -> list[dict[str, Any]]:
        t = self._table(table, "Scan")
        return [clone(i) for part in t.items.values() for i in part.values()]
