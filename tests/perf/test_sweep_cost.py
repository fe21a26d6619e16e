"""The sweep's cost follows live work, never ledger size (DESIGN §4 "Sparse GSIs").

1 000 finished slots (cloned from one real occurrence run end to end, so every item has
exactly the shape the pipeline leaves behind) and 3 stalled ones. Every DynamoDB call the
sweep makes is counted with botocore hooks on the sweep's own client: the sweep may only
query the ActiveSlots / DueOutbox / OpenCallbacks indexes (which must hold nothing but the 3 live slots)
and read or write the partitions of those 3 slots.
"""

from __future__ import annotations

import pytest
from collections import Counter
from dataclasses import dataclass, field

import boto3

from conftest import claim, ms
from support.builders import schedule
from support.queues import drop_executions

T0 = "2026-11-30T23:00:00Z"
T0_MS = ms(T0)
MIN = 60_000
TERMINAL_SLOTS = 1_000  # the sweep never reads one (tests/perf/test_admission_and_sweep_cost.py compares 1 000 with 10 000)
STALLED_DAYS = ("2026-12-01T23:00:00Z", "2026-12-02T23:00:00Z", "2026-12-03T23:00:00Z")
STALLED = ("solo@2026-12-02T0800", "solo@2026-12-03T0800", "solo@2026-12-04T0800")
TEMPLATE = "solo@2026-12-01T0800"


def solo(cfg):
    cfg["schedules"].append(schedule("solo", ["cats"]))


@dataclass
class Call:
    op: str
    params: dict
    parsed: dict


@dataclass
class Meter:
    calls: list[Call] = field(default_factory=list)
    _pending: list[tuple[str, dict]] = field(default_factory=list)

    def before(self, params, model, **_):
        self._pending.append((model.name, dict(params)))

    def after(self, parsed, model, **_):
        op, params = self._pending.pop(0)
        assert op == model.name
        self.calls.append(Call(op, params, parsed))

    def ops(self) -> Counter:
        return Counter(c.op for c in self.calls)


def _partition_keys(call: Call) -> set[str]:
    """The slot partitions (pk values) a table-level call touched."""
    p = call.params
    if call.op in ("GetItem", "UpdateItem", "DeleteItem"):
        return {p["Key"]["pk"]["S"]}
    if call.op == "PutItem":
        return {p["Item"]["pk"]["S"]}
    if call.op == "Query":
        return {p["ExpressionAttributeValues"][":pk"]["S"]}
    if call.op == "TransactWriteItems":
        keys = set()
        for action in p["TransactItems"]:
            (body,) = action.values()
            keys.add((body.get("Key") or body["Item"])["pk"]["S"])  # a Put writes a never-claimed cell failed
        return keys
    if call.op == "BatchGetItem":
        return {k["pk"]["S"] for req in p["RequestItems"].values() for k in req["Keys"]}
    raise AssertionError(f"unexpected DynamoDB call {call.op}")


def _clone_finished_ledger(rt, count: int) -> int:
    """Write ``count - 1`` copies of the template's finished slot item. Returns items written.

    Every 10th clone also gets a copy of the template's settled delivery intent (= its outbox
    row): the two entities that ever carry index keys, exactly as the pipeline left them.
    Cells, events and the other intents never do; they are left out because moto's index
    queries and transactions cost O(table) and would only slow the test down."""
    ddb = boto3.client("dynamodb")
    table = rt.env["LEDGER_TABLE"]
    items = ddb.query(TableName=table, KeyConditionExpression="pk = :pk",
                      ExpressionAttributeValues={":pk": {"S": f"SLOT#{TEMPLATE}"}}, ConsistentRead=True)["Items"]
    assert {i["sk"]["S"].split("#")[0] for i in items} == {"META", "CELL", "DLV", "EVT"}
    assert not any("activePk" in i or "duePk" in i for i in items)  # the real finish left the indexes
    meta = next(i for i in items if i["sk"]["S"] == "META")
    intent = next(i for i in items if i["sk"]["S"].startswith("DLV#"))
    written, batch = 0, []

    def put(item):
        nonlocal written, batch
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25:
            ddb.batch_write_item(RequestItems={table: batch})
            written += len(batch)
            batch = []

    for n in range(1, count):
        slot_id = f"solo@old-{n:05d}"
        for item in (meta, intent) if n % 10 == 0 else (meta,):
            clone = dict(item)
            clone["pk"] = {"S": f"SLOT#{slot_id}"}
            clone["slotId"] = {"S": slot_id}
            put(clone)
    if batch:
        ddb.batch_write_item(RequestItems={table: batch})
        written += len(batch)
    return written


@pytest.mark.size("large")  # a ledger of 1 000 finished slots on moto (tests/README.md, test sizes)
def test_sweep_reads_no_finished_slot_and_terminalises_the_three_stalled(make_runtime, downstream):
    rt = make_runtime(T0, mutate=solo, backend="moto")  # counts requests with a botocore hook
    # One real occurrence end to end: the template of a finished slot.
    rt.fire("solo", iso=T0)
    rt.settle()
    assert rt.wiring.ledger.get_slot(TEMPLATE).status == "success"
    written = _clone_finished_ledger(rt, TERMINAL_SLOTS)

    # Three live slots that will be past their budgets: two never claimed, one whose executor died.
    rt.clock.set(T0_MS + 60 * MIN)
    for iso in STALLED_DAYS:
        assert rt.fire("solo", iso=iso)["sent"] == 1
    assert drop_executions(rt) == 3
    ledger = rt.wiring.ledger
    rt.clock.set(T0_MS + 75 * MIN)
    now = rt.clock.now_ms()
    assert claim(ledger, STALLED[1], "cats", "exec-ghost", now, 180_000) is not None
    assert ledger.mark_slot_running(STALLED[1], now)
    rt.clock.set(T0_MS + 91 * MIN)

    meter = Meter()
    events = ledger._client.meta.events
    events.register("before-parameter-build.dynamodb.*", meter.before, unique_id="cost-before")
    events.register("after-call.dynamodb.*", meter.after, unique_id="cost-after")
    try:
        result = rt.sweep()
    finally:
        events.unregister("before-parameter-build.dynamodb.*", unique_id="cost-before")
        events.unregister("after-call.dynamodb.*", unique_id="cost-after")

    index_calls = [c for c in meter.calls if c.op in ("Query", "Scan") and c.params.get("IndexName")]
    # The tick's own items (issue 16): its lease, taken and released, and one batch read of the
    # schedule watches. Per tick and per configured schedule, never per ledger item.
    own = {"SWEEP#LEASE"} | {f"SCHEDULE#{s.id}" for s in rt.wiring.config.schedules}
    bookkeeping = [c for c in meter.calls if c not in index_calls and _partition_keys(c) <= own]
    table_calls = [c for c in meter.calls if c not in index_calls and c not in bookkeeping]
    index_items = Counter()
    for c in index_calls:
        if c.op == "Query":  # the probe's one entry is counted apart, below
            index_items[c.params["IndexName"]] += len(c.parsed.get("Items", []))
    table_items = sum(len(c.parsed.get("Items", [])) for c in table_calls if c.op == "Query")
    table_items += sum(1 for c in table_calls if c.op == "GetItem" and c.parsed.get("Item"))
    touched = set().union(*(_partition_keys(c) for c in table_calls)) if table_calls else set()

    print(f"\nledger: {TERMINAL_SLOTS} finished slots ({written} cloned slot/intent items) + 3 live slots")
    print(f"sweep result: {result}")
    print(f"DynamoDB calls: {len(meter.calls)} {dict(sorted(meter.ops().items()))}")
    print(f"index queries: {Counter(c.params['IndexName'] for c in index_calls)} items returned: {dict(index_items)}")
    print(f"slot-partition calls: {len(table_calls)} items returned: {table_items} partitions: {sorted(touched)}")
    print(f"sweep bookkeeping calls: {dict(Counter(c.op for c in bookkeeping))}")

    # It did its job ...
    assert result["queuedTooLong"] == 2 and result["stalledNoHeartbeat"] == 1 and result["errors"] == 0
    assert result["scanned"] == 3
    for slot_id, code in zip(STALLED, ("queued_too_long", "stalled_no_heartbeat", "queued_too_long")):
        state = ledger.load(slot_id)
        assert state.slot.status == "failed"
        assert state.cells["cats"].terminal_reason_code == code
    # ... without a Scan of the table (the probe reads one entry of each index, issue 25: only
    # ActiveSlots held one, so only its shards were queried), and the indexes held nothing but the live work ...
    scans = [c for c in meter.calls if c.op == "Scan"]
    assert sorted((c.params.get("IndexName"), c.params.get("Limit")) for c in scans) == [
        ("ActiveSlots", 1), ("DueOutbox", 1), ("OpenCallbacks", 1)]
    assert {c.params["IndexName"] for c in index_calls if c.op == "Query"} == {"ActiveSlots"}
    assert index_items["ActiveSlots"] == 3
    assert index_items["DueOutbox"] == 0
    assert index_items["OpenCallbacks"] == 0  # the job-event repair pass: no job with an open callback
    assert sum(int(c.parsed.get("ScannedCount", 0)) for c in index_calls) <= 3 + 1  # + the probe's one entry
    # ... and every read or write of a slot partition was one of the 3 live slots.
    assert touched == {f"SLOT#{s}" for s in STALLED}
    assert meter.ops()["TransactWriteItems"] == 3
    # bounded per live slot, whatever the ledger size: 3 probes + 16 index queries + 5 calls per stalled slot
    # (read, terminalise, re-read, write the outcome record, leave the index once it is logged)
    assert len(table_calls) <= 3 * 5
    # this is the stack's first tick ever, so it also starts one watch per enabled schedule
    enabled = [s for s in rt.wiring.config.schedules if s.enabled]
    # the lease is taken and released with one UpdateItem each (the walk's cursor rides on them)
    assert Counter(c.op for c in bookkeeping) == {"PutItem": len(enabled), "UpdateItem": 2, "BatchGetItem": 1}
    assert ledger.get_slot(TEMPLATE).status == "success"
    assert ledger.get_slot(f"solo@old-{TERMINAL_SLOTS - 1:05d}").status == "success"
