"""The oracle's check [5b], [3] on a never-sent duplicate and [3] on a route never queued find what they claim (issue 20, "proof that the proof works").

[5b] says a terminal slot's ``execution.summary`` record and its ``schedule.outcome`` line both name
the slot's final status (make sim's routes world, seed 379, once logged ``success`` for a slot the
ledger says ``failed``). A check that never fires proves nothing, so these tests hand the oracle one
real, settled occurrence, first as it is (no [5b]) and then with its record or its line telling a
different story than the ledger: the oracle must name that slot.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from oracle import SUMMARY, check_invariants, check_outcome_lines

from pixivflow import aws
from pixivflow.domain.cells import TERMINAL_SLOT_STATES

NO_FAULTS = SimpleNamespace(remote_failed=set(), trace=[])  # the oracle reads these off the run's Chaos


@pytest.fixture
def settled(make_runtime, downstream, logs):
    """One morning-tokyo occurrence, fired and settled without faults: a terminal slot, its record, its line."""
    rt = make_runtime()
    slot_id = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")["slot_id"]
    rt.settle()
    slot = rt.wiring.ledger.get_slot(slot_id)
    assert slot.status in TERMINAL_SLOT_STATES
    return rt, slot_id, slot.status


def _other(status: str) -> str:
    return next(s for s in sorted(TERMINAL_SLOT_STATES) if s != status)


def _agreement(problems: list[str]) -> list[str]:
    return [p for p in problems if p.startswith("[5b]")]


def test_a_settled_slot_whose_record_and_line_agree_with_the_ledger_passes(settled, downstream, logs):
    rt, slot_id, status = settled
    problems, _, _ = check_invariants(rt, downstream, NO_FAULTS)
    [line] = logs.outcomes(slot_id)
    assert line["status"] == status
    assert _agreement(problems) == []
    assert _agreement(check_outcome_lines(rt, NO_FAULTS, logs.outcomes)) == []


def test_an_outcome_record_that_names_another_status_than_the_slot_is_a_violation(settled, downstream):
    rt, slot_id, status = settled
    item = {"pk": {"S": f"SLOT#{slot_id}"}, "sk": {"S": f"EVT#L#{SUMMARY}"}}
    client = aws.client("dynamodb")
    stored = client.get_item(TableName=rt.env["LEDGER_TABLE"], Key=item, ConsistentRead=True)["Item"]
    detail = json.loads(stored["detail"]["S"])
    detail["outcome"]["status"] = _other(status)  # a record written before a stall changed the slot's fate
    client.update_item(TableName=rt.env["LEDGER_TABLE"], Key=item, UpdateExpression="SET #d = :d",
                       ExpressionAttributeNames={"#d": "detail"}, ExpressionAttributeValues={":d": {"S": json.dumps(detail)}})

    problems, _, _ = check_invariants(rt, downstream, NO_FAULTS)

    assert _agreement(problems) == [f"[5b] terminal slot {slot_id} is {status} but its {SUMMARY} says {_other(status)}"]


def test_a_logged_outcome_line_that_names_another_status_than_the_slot_is_a_violation(settled, logs):
    rt, slot_id, status = settled
    [line] = logs.outcomes(slot_id)
    told = dict(line, status=_other(status))  # what an operator reading the log would have been told

    problems = check_outcome_lines(rt, NO_FAULTS, lambda sid: [told] if sid == slot_id else [])

    assert _agreement(problems) == [f"[5b] slot {slot_id} is {status} but its schedule.outcome line says ['{_other(status)}']"]


# -- [3] and the never-sent duplicate (make sim seeds 3574, 8143, 8761) ---------------------------------
# A recovering cell records a route another cell holds its work on as a duplicate it never sent
# (binding._record_taken). The oracle takes such a row only where the route really has the work
# (under the holder's key) or may have it (a review recorded uncertain); anywhere else it is a
# submitted cell whose work never reached that route.


def _as_never_sent_duplicate(rt, slot_id: str, target_id: str):
    intent = rt.wiring.ledger.load(slot_id).intents_for(target_id)[0]
    aws.client("dynamodb").update_item(
        TableName=rt.env["LEDGER_TABLE"],
        Key={"pk": {"S": f"SLOT#{slot_id}"}, "sk": {"S": f"DLV#{target_id}#{intent.route}#{intent.work_type}#{intent.work_id}"}},
        UpdateExpression="SET #s = :dup, #a = :zero", ExpressionAttributeNames={"#s": "status", "#a": "attempts"},
        ExpressionAttributeValues={":dup": {"S": "duplicate"}, ":zero": {"N": "0"}})
    return intent


def _missing_record(problems: list[str]) -> list[str]:
    return [p for p in problems if p.startswith("[3]") and "downstream never recorded" in p]


def test_a_never_sent_duplicate_passes_where_the_route_has_the_work_under_the_holders_key(settled, downstream):
    rt, slot_id, _ = settled
    intent = _as_never_sent_duplicate(rt, slot_id, "cats")
    record = downstream.state.records.pop(intent.idempotency_key)
    holder = intent.idempotency_key.replace(slot_id, "late-tokyo@2026-12-01T0805")
    downstream.state.records[holder] = record  # the work is on the route, sent by the cell that held it
    problems, _, _ = check_invariants(rt, downstream, NO_FAULTS)
    assert _missing_record(problems) == []


def test_a_never_sent_duplicate_whose_route_never_got_the_work_is_a_violation(settled, downstream):
    rt, slot_id, _ = settled
    intent = _as_never_sent_duplicate(rt, slot_id, "cats")
    del downstream.state.records[intent.idempotency_key]  # nobody delivered the work on the route
    problems, _, _ = check_invariants(rt, downstream, NO_FAULTS)
    assert _missing_record(problems) == [
        f"[3] submitted cell {slot_id}/cats: downstream never recorded work {intent.work_id} "
        f"(key {intent.idempotency_key}, remote failed=False)"]


# -- [3] and a fan-out route that never got a row (make sim seed 5206) ----------------------------------
# The sweep's stall or timeout rule may end a fan-out cell whose executor died between two rows'
# writes: one route delivered, the other never had a row. The oracle takes that delivered record of a
# failed cell only when the sweep's own rule ended it and a configured route has no row at all.


def _fan_out_cell_failed(rt, monkeypatch, slot_id: str, reason: str) -> str:
    """The settled cell, seen as one of a two-route target whose second route never got a row, and
    failed with ``reason``. Returns the delivered row's key."""
    target = rt.wiring.config.target("cats")
    routes = [*target.routes(), "never-queued"]
    stand_in = SimpleNamespace(routes=lambda: routes, single_work=target.single_work)
    real = type(rt.wiring.config).target
    monkeypatch.setattr(type(rt.wiring.config), "target",
                        lambda self, tid: stand_in if tid == "cats" else real(self, tid))
    aws.client("dynamodb").update_item(
        TableName=rt.env["LEDGER_TABLE"], Key={"pk": {"S": f"SLOT#{slot_id}"}, "sk": {"S": "CELL#cats"}},
        UpdateExpression="SET #s = :f, #r = :r", ExpressionAttributeNames={"#s": "status", "#r": "terminalReasonCode"},
        ExpressionAttributeValues={":f": {"S": "failed"}, ":r": {"S": reason}})
    return rt.wiring.ledger.load(slot_id).intents_for("cats")[0].idempotency_key


def _held_by_a_failed_cell(problems: list[str]) -> list[str]:
    return [p for p in problems if p.startswith("[3] downstream holds")]


def test_a_record_of_a_fan_out_cell_the_sweep_ended_with_a_route_never_queued_passes(settled, downstream, monkeypatch):
    rt, slot_id, _ = settled
    _fan_out_cell_failed(rt, monkeypatch, slot_id, "stalled_no_heartbeat")
    problems, _, _ = check_invariants(rt, downstream, NO_FAULTS)
    assert _held_by_a_failed_cell(problems) == []


def test_a_record_of_a_cell_failed_by_another_rule_is_a_violation_even_with_a_route_never_queued(settled, downstream,
                                                                                                  monkeypatch):
    rt, slot_id, _ = settled
    key = _fan_out_cell_failed(rt, monkeypatch, slot_id, "no_candidate")
    problems, _, _ = check_invariants(rt, downstream, NO_FAULTS)
    assert _held_by_a_failed_cell(problems) == [
        f"[3] downstream holds {key} but cell {slot_id}/cats ended failed (no_candidate); intent delivered/done"]
