"""Count what the engine asks of AWS and price it the way AWS bills it (``make bench``).

``Meter.attach(rt)`` wraps every AWS client the engine holds (ledger, job store, outbox rows,
sweep state, queues, artifacts) and the SQS client of each queue pump (the embedded runtime's
stand-in for Lambda's event source mapping), on moto or on the in-memory twins alike. Each call
goes through unchanged; the meter records it, and prices it from what the table held before and
after, read through the unwrapped client (never counted):

* DynamoDB WRU: per item ``ceil(max(size before, size after) / 1 KB)``, at least 1, doubled inside
  a transaction (ConditionCheck included); a refused conditional write is billed like a done one.
  Every sparse index the item enters or leaves costs one more unit, a changed index key two (the
  template's indexes are KEYS_ONLY, so an index entry is always under 1 KB).
* DynamoDB RRU: ``ceil(bytes read / 4 KB)`` per request (per item for GetItem / BatchGetItem), ×0.5
  when eventually consistent (every index query is). Bytes read are the full items a Query
  evaluated, projection and filter notwithstanding, as DynamoDB bills them.
* Item size is DynamoDB's: attribute names plus values (numbers ~1 byte per 2 digits + 1, maps and
  lists 3 bytes + 1 per element).
* SQS: one request per API call, times the 64 KB chunks of its payload; ReceiveMessage calls that
  return nothing are the idle polling the report prices as a fixed cost, not per cell. The pump's
  virtual-delay emulation (re-sending a held message when its delay ends, deleting the held copy)
  is not an AWS request and is not counted.
* S3: one request per call, by API.

Each DynamoDB request is attributed to the ledger step that made it (the outermost adapter method
on the call stack, ``STEPS``), so the report can break write units down by step.
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

KB = 1024
SQS_CHUNK = 64 * KB
DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
DDB_READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}
NOT_REQUESTS = {"generate_presigned_url", "generate_presigned_post", "get_paginator", "get_waiter", "can_paginate", "close"}
ADAPTERS = "/pixivflow/adapters/"
PUMP = "/pixivflow/local/pump.py"

# Ledger step of each adapter method (the report's write-unit breakdown). A cell move is split by
# the state it moves to (``move_cell_as_owner`` → delivery_pending is the hand-off to the outbox).
STEPS: dict[str, str] = {
    "create_slot": "admit", "ensure_cells": "admit", "claim_request_key": "admit", "put_job_event": "admit",
    "claim_cell": "claim", "mark_slot_running": "claim", "heartbeat_cell": "claim", "release_cell": "claim",
    "mark_dispatched": "claim",
    "bind_work": "bind", "release_work": "bind",
    "reserve_work": "reserve", "release_work_reservation": "reserve", "work_owners": "reserve",
    "put_intent": "intent",
    "claim_intent": "outbox claim", "release_intent": "outbox claim", "get_intent": "outbox claim",
    "settle_intent": "settle", "settle_cell_from_delivery": "settle",
    "finish_slot": "rollup", "leave_active_index": "rollup", "settle_unleased_cell": "rollup",
    "terminalise_slot": "rollup", "fail_cell_if_unchanged": "rollup", "cancel_cells": "rollup",
    "put_event_once": "outcome record", "get_event": "outcome record",
    "load": "reads", "get_slot": "reads", "get_cell": "reads",
}
MOVE_STEPS = {"delivery_pending": "intent", "submitted": "settle", "duplicate": "settle"}


def item_size(item: dict[str, Any] | None) -> int:
    """DynamoDB's size of an item in wire form (``{"S": ...}`` values)."""
    if not item:
        return 0
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    (kind, v), = value.items()
    if kind == "S":
        return len(str(v).encode())
    if kind == "N":
        digits = str(v).lstrip("-").replace(".", "").lstrip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _value_size(x) for x in v)
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + _value_size(x) for k, x in v.items())
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(x)) for x in v)
    raise ValueError(f"unknown attribute type {kind}")


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KB))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / (4 * KB)))
    return float(units) if consistent else units / 2


@dataclass
class Call:
    service: str
    op: str
    step: str  # the ledger step (DynamoDB), or the role (SQS: esm / engine; S3: artifacts)
    method: str  # the adapter method that made it
    wru: float = 0.0  # item units (index units are in ``index_wru``)
    index_wru: float = 0.0
    rru: float = 0.0
    chunks: int = 1  # SQS: 64 KB chunks billed
    messages: int = 0  # SQS: messages sent or received
    seconds: float = 0.0
    function: str | None = None  # the Lambda function whose invocation made it
    error: str | None = None


@dataclass
class Invocation:
    function: str
    seconds: float  # handler wall time on this machine
    aws_seconds: float  # of which inside metered AWS calls (moto / twin time, not Lambda's)
    records: int = 0
    # CPU time of the handler's thread (``time.thread_time``), the meter's own work taken out, and
    # the part of it spent inside metered AWS calls or the outside source (the twins run in this
    # thread): ``cpu_seconds - outside_cpu_seconds`` is the function's own compute
    cpu_seconds: float = 0.0
    outside_cpu_seconds: float = 0.0


class Meter:
    """See the module docstring. ``calls`` and ``invocations`` are everything recorded so far."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.invocations: list[Invocation] = []
        self._indexes: dict[str, list[tuple[str, str | None]]] = {}
        self._proxies: dict[int, Any] = {}
        self._current: list[str] = []  # the function being invoked (a stack: handlers never nest, but be safe)
        self._aws_seconds = 0.0
        self._overhead_seconds = 0.0
        self._outside_cpu = 0.0  # thread CPU inside AWS calls and ``outside()`` blocks
        self._overhead_cpu = 0.0  # thread CPU of the meter's own pricing reads
        self.enabled = True
        self.errors: list[str] = []  # pricing failures (the bench refuses to report over them)

    # -- wiring --------------------------------------------------------------------------------
    def wrap(self, client: Any, service: str | None = None) -> Any:
        """The metered stand-in of ``client`` (one per client: shared clients stay shared)."""
        if isinstance(client, _Metered):
            return client
        key = id(client)
        if key not in self._proxies:
            name = service or getattr(getattr(client, "meta", None), "service_model", None)
            name = getattr(name, "service_name", None) or service or _service_of(client)
            self._proxies[key] = _Metered(client, self, name)
        return self._proxies[key]

    def attach(self, rt: Any) -> "Meter":
        """Meter every AWS client of ``rt``'s engine, its pumps' SQS clients and its handlers."""
        wiring = rt.wiring
        for holder in _client_holders(wiring):
            for attr in ("_client", "_sqs", "_s3"):
                inner = getattr(holder, attr, None)
                if inner is not None and _looks_like_client(inner):
                    setattr(holder, attr, self.wrap(inner))
        for pump in rt.pumps.values():
            pump._sqs = self.wrap(pump._sqs, "sqs")
            pump._handler = self.timed(pump._name, pump._handler)
        for name, handler in list(rt.handlers.items()):
            rt.handlers[name] = self.timed(name, handler)
        return self

    def timed(self, function: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        """``handler`` as one Lambda invocation of ``function`` per call."""
        if getattr(handler, "__metered__", None) is self:
            return handler
        inner = getattr(handler, "__wrapped_handler__", handler)

        def invoke(event: Any, context: Any) -> Any:
            self._current.append(function)
            aws_before, overhead_before = self._aws_seconds, self._overhead_seconds
            outside_cpu_before, overhead_cpu_before = self._outside_cpu, self._overhead_cpu
            began, began_cpu = time.perf_counter(), time.thread_time()
            try:
                return inner(event, context)
            finally:
                elapsed = time.perf_counter() - began - (self._overhead_seconds - overhead_before)
                cpu = time.thread_time() - began_cpu - (self._overhead_cpu - overhead_cpu_before)
                self._current.pop()
                if self.enabled:
                    records = len(event.get("Records", [])) if isinstance(event, dict) else 0
                    self.invocations.append(Invocation(function, elapsed, self._aws_seconds - aws_before, records,
                                                       cpu, self._outside_cpu - outside_cpu_before))

        invoke.__metered__ = self  # type: ignore[attr-defined]
        invoke.__wrapped_handler__ = inner  # type: ignore[attr-defined]
        return invoke

    def reset(self) -> None:
        self.calls.clear()
        self.invocations.clear()

    @contextmanager
    def outside(self) -> Iterator[None]:
        """Time spent here is an outside service's (a stand-in work source answering in-process),
        like an AWS call's: not the function's own compute."""
        began, began_cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self._aws_seconds += time.perf_counter() - began
            self._outside_cpu += time.thread_time() - began_cpu

    # -- recording ------------------------------------------------------------------------------
    def _index_keys(self, inner: Any, table: str) -> list[tuple[str, str | None]]:
        if table not in self._indexes:
            desc = inner.describe_table(TableName=table)["Table"]
            keys = []
            for gsi in desc.get("GlobalSecondaryIndexes", []) or []:
                schema = {k["KeyType"]: k["AttributeName"] for k in gsi["KeySchema"]}
                keys.append((schema["HASH"], schema.get("RANGE")))
            self._indexes[table] = keys
        return self._indexes[table]

    def record(self, inner: Any, service: str, method: str, kwargs: dict[str, Any], call: Callable[[], Any]) -> Any:
        op = "".join(part.capitalize() for part in method.split("_"))
        where, caller = _caller()
        if not self.enabled or where == "harness":
            return call()
        entered, entered_cpu = time.perf_counter(), time.thread_time()
        entry = Call(service, op, step="", method=caller, function=self._current[-1] if self._current else None)
        before: list[tuple[dict, int, dict | None]] = []
        if service == "dynamodb" and op in DDB_WRITES:
            before = [(key, table, mult, _get(inner, table, key)) for key, table, mult in _touched(op, kwargs)]
        began, began_cpu = time.perf_counter(), time.thread_time()
        try:
            result = call()
        except Exception as exc:
            entry.error = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
            result = exc
        entry.seconds = entry_seconds = time.perf_counter() - began
        call_cpu = time.thread_time() - began_cpu
        self._aws_seconds += entry.seconds
        self._outside_cpu += call_cpu
        try:
            if service == "dynamodb":
                self._price_dynamodb(inner, entry, kwargs, before, result)
            elif service == "sqs":
                if where == "pump-artifact":
                    entry = None  # the virtual-delay emulation: not an AWS request
                else:
                    self._price_sqs(entry, op, kwargs, result, where)
            elif service == "s3":
                entry.step = "artifacts"
        except Exception:  # a pricing bug must not change what the engine sees: report it instead
            import traceback

            self.errors.append(traceback.format_exc())
        # the meter's own reads (items before and after, re-run queries) are nobody's Lambda time
        self._overhead_seconds += time.perf_counter() - entered - entry_seconds
        self._overhead_cpu += time.thread_time() - entered_cpu - call_cpu
        if entry is not None:
            self.calls.append(entry)
        if isinstance(result, Exception):
            raise result
        return result

    def _price_dynamodb(self, inner: Any, entry: Call, kwargs: dict[str, Any], before: list, result: Any) -> None:
        op = entry.op
        entry.step = _step(entry.method)
        if op in DDB_WRITES:
            for key, table, mult, old in before:
                new = _get(inner, table, key)
                entry.wru += mult * write_units(max(item_size(old), item_size(new)))
                for pk, sk in self._index_keys(inner, table):
                    had = old is not None and pk in old and (sk is None or sk in old)
                    has = new is not None and pk in new and (sk is None or sk in new)
                    if had and has and (old[pk], old.get(sk)) != (new[pk], new.get(sk)):
                        entry.index_wru += 2
                    elif had != has:
                        entry.index_wru += 1
            return
        if isinstance(result, Exception):
            return
        consistent = bool(kwargs.get("ConsistentRead"))
        if op == "GetItem":
            entry.rru = read_units(item_size(result.get("Item")), consistent)
        elif op == "BatchGetItem":
            for table, request in kwargs["RequestItems"].items():
                strong = bool(request.get("ConsistentRead"))
                for key in request["Keys"]:  # each item as a GetItem of the whole item, projection aside
                    entry.rru += read_units(item_size(_get(inner, table, key)), strong)
        elif op in ("Query", "Scan"):
            entry.rru = read_units(sum(item_size(i) for i in _evaluated(inner, op, kwargs)),
                                   consistent and not kwargs.get("IndexName"))
        elif op == "TransactGetItems":
            for action in kwargs["TransactItems"]:
                body = action["Get"]
                entry.rru += 2 * read_units(item_size(_get(inner, body["TableName"], body["Key"])), True)

    def _price_sqs(self, entry: Call, op: str, kwargs: dict[str, Any], result: Any, where: str) -> None:
        entry.step = "esm" if where == "pump" else "engine"
        if op == "SendMessage":
            entry.messages = 1
            entry.chunks = _chunks(len(kwargs.get("MessageBody", "").encode()) + _attr_bytes(kwargs.get("MessageAttributes")))
        elif op == "SendMessageBatch":
            entries = kwargs.get("Entries", [])
            entry.messages = len(entries)
            entry.chunks = _chunks(sum(len(e.get("MessageBody", "").encode()) + _attr_bytes(e.get("MessageAttributes"))
                                       for e in entries))
        elif op == "ReceiveMessage" and not isinstance(result, Exception):
            messages = result.get("Messages", [])
            entry.messages = len(messages)
            entry.chunks = _chunks(sum(len(m.get("Body", "").encode()) for m in messages))
            if not messages:
                entry.step = "idle"  # an empty poll: the fixed cost of a listening queue

    # -- summaries --------------------------------------------------------------------------------
    def of(self, service: str) -> list[Call]:
        return [c for c in self.calls if c.service == service]

    def requests(self, service: str, *, include_idle: bool = False) -> Counter:
        return Counter(c.op for c in self.of(service) if include_idle or c.step != "idle")

    def dynamodb_wru(self) -> float:
        return sum(c.wru + c.index_wru for c in self.of("dynamodb"))

    def dynamodb_rru(self) -> float:
        return sum(c.rru for c in self.of("dynamodb"))

    def wru_by_step(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for c in self.of("dynamodb"):
            if c.wru:
                out[c.step] += c.wru
            if c.index_wru:
                out["index maintenance"] += c.index_wru
        return dict(out)

    def sqs_billed(self) -> int:
        """Billed SQS requests (64 KB chunks), idle polling excluded."""
        return sum(c.chunks for c in self.of("sqs") if c.step != "idle")


class _Metered:
    """A client stand-in: API calls are recorded, everything else passes through."""

    def __init__(self, inner: Any, meter: Meter, service: str) -> None:
        self.__dict__["_inner"] = inner
        self.__dict__["_meter"] = meter
        self.__dict__["_service"] = service

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or name in NOT_REQUESTS or not callable(attr) or name in ("meta", "exceptions"):
            return attr
        meter, inner, service = self._meter, self._inner, self._service

        def call(*args: Any, **kwargs: Any) -> Any:
            return meter.record(inner, service, name, kwargs, lambda: attr(*args, **kwargs))

        return call


def _service_of(client: Any) -> str:
    name = type(client).__name__.lower()
    for service in ("dynamodb", "sqs", "s3", "ssm", "sts"):
        if service in name:
            return service
    return name


def _looks_like_client(obj: Any) -> bool:
    return hasattr(obj, "meta") and (hasattr(obj, "put_item") or hasattr(obj, "send_message") or hasattr(obj, "put_object"))


def _client_holders(wiring: Any) -> list[Any]:
    names = ("ledger", "jobs", "outbox_rows", "sweep_state", "queues", "artifacts", "source")
    holders = [getattr(wiring, n, None) for n in names]
    source = getattr(wiring, "source", None)
    for attr in ("_store", "_gate", "_accounts"):  # the Pixiv source's account store, when there is one
        holders.append(getattr(source, attr, None))
    return [h for h in holders if h is not None]


def _caller() -> tuple[str, str]:
    """(where, adapter method): where is 'engine', 'pump', 'pump-artifact' or 'harness'."""
    frame = sys._getframe(3)
    method = ""
    in_adapter = False
    while frame is not None:
        filename = frame.f_code.co_filename.replace("\\", "/")
        name = frame.f_code.co_name
        if PUMP in filename:
            if name == "poll":
                return "pump", name
            if name in ("release_due", "_hold"):  # DelaySeconds emulated on the virtual clock
                return "pump-artifact", name
            return "harness", name
        if "/pixivflow/local/harness.py" in filename or "/pixivflow/local/provision.py" in filename:
            return "harness", name
        if ADAPTERS in filename:
            in_adapter = True
            if not name.startswith("_"):
                method = name
                if name in ("move_cell_as_owner", "transition_cell"):
                    method = f"{name}:{frame.f_locals.get('to_status')}"
        elif in_adapter:
            return "engine", method
        frame = frame.f_back
    return "engine", method


def _step(method: str) -> str:
    name, _, to = method.partition(":")
    if name in ("move_cell_as_owner", "transition_cell"):
        return MOVE_STEPS.get(str(to), "settle" if str(to) in ("submitted",) else "rollup" if str(to) in ("failed", "no_candidate") else "intent")
    return STEPS.get(name, name or "other")


def _touched(op: str, kwargs: dict[str, Any]) -> list[tuple[dict, str, int]]:
    if op == "PutItem":
        item = kwargs["Item"]
        return [({"pk": item["pk"], "sk": item["sk"]}, kwargs["TableName"], 1)]
    if op in ("UpdateItem", "DeleteItem"):
        return [(kwargs["Key"], kwargs["TableName"], 1)]
    if op == "TransactWriteItems":
        out = []
        for action in kwargs["TransactItems"]:
            (body,) = action.values()
            key = body.get("Key") or {"pk": body["Item"]["pk"], "sk": body["Item"]["sk"]}
            out.append((key, body["TableName"], 2))
        return out
    if op == "BatchWriteItem":
        out = []
        for table, requests in kwargs["RequestItems"].items():
            for request in requests:
                if "PutRequest" in request:
                    item = request["PutRequest"]["Item"]
                    out.append(({"pk": item["pk"], "sk": item["sk"]}, table, 1))
                else:
                    out.append((request["DeleteRequest"]["Key"], table, 1))
        return out
    return []


def _get(inner: Any, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
    return inner.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")


def _evaluated(inner: Any, op: str, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """The full items (or index entries) a Query / Scan page read: DynamoDB bills what it evaluated,
    before any filter and whatever the projection."""
    again = {k: v for k, v in kwargs.items() if k not in ("ProjectionExpression", "FilterExpression", "Select")}
    if "FilterExpression" in kwargs or "ProjectionExpression" in kwargs:
        used = set(re.findall(r"[:#]\w+", kwargs.get("KeyConditionExpression", "")))
        for part in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
            kept = {k: v for k, v in (kwargs.get(part) or {}).items() if k in used}
            if kept:
                again[part] = kept
            else:
                again.pop(part, None)
    return getattr(inner, "query" if op == "Query" else "scan")(**again).get("Items", [])


def _chunks(size: int) -> int:
    return max(1, math.ceil(size / SQS_CHUNK))


def _attr_bytes(attributes: dict[str, Any] | None) -> int:
    total = 0
    for name, value in (attributes or {}).items():
        total += len(name.encode()) + len(str(value.get("DataType", "")).encode())
        total += len(str(value.get("StringValue", "")).encode()) + len(value.get("BinaryValue", b"") or b"")
    return total
