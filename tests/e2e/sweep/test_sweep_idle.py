"""An idle tick (issue 25, profile (a): a deployment that delivers 8 cells a day is idle almost every
minute): the sweep reads one entry of each sparse index (``Ledger.occupied_indexes``) instead of a
Query per shard, and skips only what an empty index proves there is nothing of. What must never be
missed: a live slot, a due outbox row, an open callback, written at any moment before or after the
probe; and a probe that fails reads everything."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import ms
from pixivflow.adapters.dynamo_ledger import DynamoLedger
from pixivflow.adapters.dynamo_ledger.keys import ACTIVE_INDEX, CALLBACK_INDEX, DUE_INDEX
from support.builders import only, schedule
from support.queues import drop_executions

T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
T0_MS = ms(T0)
MIN = 60_000


class IndexReads:
    """Every read the twin DynamoDB answers that names an index: (operation, index)."""

    def __init__(self, rt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[tuple[str, str]] = []
        twin = rt.cloud.dynamodb
        for op in ("query", "scan"):
            real = getattr(twin, op)

            def recording(_real=real, _op=op, **kw: Any) -> Any:
                if kw.get("IndexName"):
                    self.reads.append((_op, kw["IndexName"]))
                return _real(**kw)

            monkeypatch.setattr(twin, op, recording)

    def take(self) -> list[tuple[str, str]]:
        out, self.reads = self.reads, []
        return out


def _delivered(make_runtime):
    rt = make_runtime(T0, mutate=only(schedule("kept", ["cats"])), backend="twin")
    rt.fire("kept", iso=T0)
    rt.settle()
    assert rt.wiring.ledger.get_slot("kept@2026-12-01T0800").status == "success"
    return rt


def test_an_idle_tick_reads_one_entry_of_each_sparse_index_and_queries_no_shard(make_runtime, downstream, logs, monkeypatch):
    rt = _delivered(make_runtime)
    reads = IndexReads(rt, monkeypatch)
    rt.clock.advance(MIN)
    result = rt.sweep()
    assert sorted(reads.take()) == [("scan", ACTIVE_INDEX), ("scan", DUE_INDEX), ("scan", CALLBACK_INDEX)]
    assert (result["indexesEmpty"], result["activeSlots"], result["passComplete"], result["errors"]) == (3, 0, 1, 0)
    assert logs.events("sweep.finished")[-1]["indexesEmpty"] == 3


def test_a_slot_admitted_after_an_idle_tick_is_walked_by_the_next_and_its_lost_message_recovered(
        make_runtime, downstream, logs, monkeypatch):
    rt = _delivered(make_runtime)
    rt.clock.set(T0_MS + 24 * 60 * MIN - 2 * MIN)  # the next day, a minute before its fire: idle
    assert rt.sweep()["indexesEmpty"] == 3
    reads = IndexReads(rt, monkeypatch)
    rt.fire("kept", iso="2026-12-01T23:00:00Z")
    assert drop_executions(rt) == 1  # the admission's execution message is lost
    rt.clock.advance(5 * MIN)
    result = rt.sweep()
    assert ("query", ACTIVE_INDEX) in reads.take()  # the probe found the slot: its shards are walked
    assert (result["indexesEmpty"], result["activeSlots"], result["recovered"]) == (2, 1, 1)
    assert drop_executions(rt) == 1  # re-dispatched by the sweep


def test_a_probe_that_fails_makes_the_tick_read_every_index(make_runtime, downstream, logs, monkeypatch):
    rt = make_runtime(T0, mutate=only(schedule("lost", ["dogs"])), backend="twin")
    rt.fire("lost", iso=T0)
    assert drop_executions(rt) == 1
    rt.clock.set(T0_MS + 5 * MIN)
    reads = IndexReads(rt, monkeypatch)

    def unavailable() -> frozenset:
        from pixivflow.domain.errors import LedgerUnavailable

        raise LedgerUnavailable("DynamoDB Scan failed: ThrottlingException")

    monkeypatch.setattr(rt.wiring.ledger, "occupied_indexes", unavailable)
    result = rt.sweep()
    assert (result["recovered"], result["indexesEmpty"]) == (1, 0)
    assert {index for op, index in reads.take() if op == "query"} >= {ACTIVE_INDEX, DUE_INDEX}
    [line] = logs.events("sweep.probe_failed")
    assert "ThrottlingException" in line["error"]


class _Answers:
    """A client whose Scan answers are given (each a legal DynamoDB Scan response), recording requests."""

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers, self.requests = answers, []

    def scan(self, **kw: Any) -> dict[str, Any]:
        self.requests.append(kw)
        return self.answers[kw["IndexName"]]


def test_the_probe_reads_one_entry_per_index_and_a_page_that_may_continue_is_occupied():
    # DynamoDB may end a Scan page before it reaches an entry and say so with LastEvaluatedKey: no
    # proof of emptiness, so that index is read (only Items == [] with no LastEvaluatedKey is empty).
    more = {"Items": [], "Count": 0, "LastEvaluatedKey": {"pk": {"S": "SLOT#x"}, "sk": {"S": "META"}}}
    client = _Answers({ACTIVE_INDEX: {"Items": [], "Count": 0}, DUE_INDEX: more,
                       CALLBACK_INDEX: {"Items": [{"pk": {"S": "JOB#j"}}], "Count": 1}})
    assert DynamoLedger(client, "ledger").occupied_indexes() == {"due", "callbacks"}
    assert [(r["IndexName"], r["Limit"], r.get("ConsistentRead")) for r in client.requests] == [
        (ACTIVE_INDEX, 1, None), (DUE_INDEX, 1, None), (CALLBACK_INDEX, 1, None)]  # GSIs refuse consistent reads
