"""Trigger admission and the sweep, counted by the bench's meter (issue 14).

Admission reads the schedule's pause item, writes the slot alone (each cell's item is written by
its first claim) and sends the cells' execution messages ten to a SendMessageBatch: 2 DynamoDB
requests + ceil(n/10) SQS requests, whatever n. The sweep reads its sparse indexes and the live slots only: the same requests
with 1,000 or 10,000 finished slots in the ledger (``make bench`` adds 100,000).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's meter and scenarios

import math

import pytest

import scenarios


@pytest.mark.parametrize("targets", [1, 10, 90])
def test_admission_of_n_targets_is_at_most_two_dynamodb_and_ceil_n_over_10_sqs_requests(targets):
    m = scenarios.admission(targets, backend="moto")
    ddb = [c for c in m.window.calls if c.service == "dynamodb"]
    sqs = [c for c in m.window.calls if c.service == "sqs" and c.step != "idle"]
    assert len(ddb) <= 2, [c.op for c in ddb]
    assert len(sqs) <= math.ceil(targets / 10), [c.op for c in sqs]
    assert sum(c.messages for c in sqs) == targets  # every cell dispatched
    # the schedule's pause item (issue 26: one strongly consistent read, 1 read unit a fire), then
    # the slot, conditional (attribute_not_exists)
    assert [c.op for c in ddb] == ["GetItem", "PutItem"]


@pytest.mark.size("large")  # ledgers of 1 000 and 10 000 finished slots (tests/README.md, test sizes)
def test_the_sweep_costs_the_same_with_1000_and_10000_finished_slots():
    runs = scenarios.sweep_flatness([1_000, 10_000])
    shapes = {}
    for n, m in runs.items():
        ddb = [c for c in m.window.calls if c.service == "dynamodb"]
        shapes[n] = (sorted((c.op, c.method) for c in ddb), sum(c.rru for c in ddb), sum(c.wru + c.index_wru for c in ddb))
        assert m.detail["swept"]["queuedTooLong"] == 1  # it did its job on the one live slot
    assert shapes[1_000] == shapes[10_000]
    # no Scan of the table: the only Scans are the idle-tick probe's, one entry of each sparse index (issue 25)
    assert [method for op, method in shapes[1_000][0] if op == "Scan"] == ["occupied_indexes"] * 3
