"""No cell UpdateItem leaves a partial item (issue 21 item 3), on moto and on the twin.

``GET /jobs/{id}`` once answered 500 because a cell item had no ``slotId`` / ``status``: an UpdateItem
without an existence condition upserts whatever it SETs. The audit, one test per call:

* every cell move that must find its cell (heartbeat, checkpoint, release, bind, release_work,
  the four named moves, record_cell_error, defer, mark_dispatched and claim without ``unwritten``,
  the stall and cancel transactions read from a snapshot whose cell has since gone, e.g. by TTL)
  refuses on an absent item and writes nothing;
* the two upserts (claim_cell / mark_dispatched with ``unwritten``) write a complete cell;
* a partial item already in the table (written before this fix) never fails a read: it is left out
  of the slot's cells (``SlotState.malformed``), reads as its pending cell, and the next claim, the
  sweep's re-dispatch mark or its stall Put completes it."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import ledger_env
from ledger_env import LEASE_MS, T0, Env, make_slot

from pixivflow.adapters.dynamo_ledger import cell_sk, slot_pk
from pixivflow.domain.cells import CellStatus
from pixivflow.domain.model import unwritten_cell

env = ledger_env.env  # the same two backends (moto and the twin) as the rest of the ledger suite
SLOT = "morning-tokyo@2026-12-01T0800"
BORN_WITH = {"entity", "slotId", "targetId", "status", "createdAt"}


def slot_only(env: Env) -> None:
    """Admission as it is: the slot item alone; no cell item is written until its first claim."""
    assert env.ledger.create_slot(make_slot())[1]


CELL_MOVES: dict[str, Callable[[Any], Any]] = {
    "claim_cell": lambda led: led.claim_cell(SLOT, "cats", "exec-a", T0, LEASE_MS),
    "heartbeat_cell": lambda led: led.heartbeat_cell(SLOT, "cats", "exec-a", T0, LEASE_MS),
    "save_selection_checkpoint": lambda led: led.save_selection_checkpoint(SLOT, "cats", "exec-a", T0, {"day": 0}),
    "release_cell": lambda led: led.release_cell(SLOT, "cats", "exec-a", T0),
    "bind_work": lambda led: led.bind_work(SLOT, "cats", "1001", "illustration", T0)[0],
    "release_work": lambda led: led.release_work(SLOT, "cats", "1001", T0),
    "move_cell_as_owner": lambda led: led.move_cell_as_owner(SLOT, "cats", CellStatus.FAILED, T0, "exec-a"),
    "settle_unleased_cell": lambda led: led.settle_unleased_cell(SLOT, "cats", CellStatus.FAILED, T0),
    "settle_cell_from_delivery": lambda led: led.settle_cell_from_delivery(SLOT, "cats", CellStatus.SUBMITTED, T0),
    "fail_cell_if_unchanged": lambda led: led.fail_cell_if_unchanged(SLOT, "cats", CellStatus.PENDING, T0),
    "record_cell_error": lambda led: led.record_cell_error(SLOT, "cats", "boom", T0),
    "defer_cell": lambda led: led.defer_cell(SLOT, "cats", "exec-a", T0, T0 + 60_000, candidate_report={}),
    "mark_dispatched": lambda led: led.mark_dispatched(SLOT, "cats", None, T0),
}


def test_every_cell_move_on_an_absent_cell_refuses_and_writes_nothing(env: Env) -> None:
    """One table for all thirteen moves (one provisioning per backend keeps the test cheap)."""
    slot_only(env)
    for move in sorted(CELL_MOVES):
        assert not CELL_MOVES[move](env.ledger), move
        assert env.raw(SLOT, cell_sk("cats")) is None, move


def _stale_state_of_a_gone_cell(env: Env):
    """A snapshot read while the cell existed (failed, with its TTL), then the item is gone."""
    slot = make_slot()
    env.ledger.create_slot(slot)
    env.ledger.claim_cell(SLOT, "cats", "exec-a", T0, LEASE_MS, unwritten=unwritten_cell(slot, "cats"))
    env.ledger.release_cell(SLOT, "cats", "exec-a", T0 + 1)
    state = env.ledger.load(SLOT)
    assert "cats" in state.cells
    env.client.delete_item(TableName=env.table, Key={"pk": {"S": slot_pk(SLOT)}, "sk": {"S": cell_sk("cats")}})
    return state


def test_the_stall_transaction_on_a_cell_gone_since_the_read_refuses_and_writes_nothing(env: Env) -> None:
    state = _stale_state_of_a_gone_cell(env)
    assert not env.ledger.terminalise_slot(state, fail_cells=["cats"], guard_cells=[], slot_status="failed",
                                           reason_code="stalled_no_heartbeat", reason_message="stalled", now_ms=T0 + 2)
    assert env.raw(SLOT, cell_sk("cats")) is None
    assert env.ledger.get_slot(SLOT).status == "pending"


def test_the_cancel_transaction_on_a_cell_gone_since_the_read_refuses_and_writes_nothing(env: Env) -> None:
    state = _stale_state_of_a_gone_cell(env)
    assert not env.ledger.cancel_cells(state, cells=["cats"], intents=[], slot_status="failed",
                                       reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 2)
    assert env.raw(SLOT, cell_sk("cats")) is None


@pytest.mark.parametrize("upsert", ["claim_cell", "mark_dispatched"])
def test_the_two_upserts_write_a_complete_cell(env: Env, upsert: str) -> None:
    slot_only(env)
    pending = unwritten_cell(make_slot(), "cats")
    if upsert == "claim_cell":
        assert env.ledger.claim_cell(SLOT, "cats", "exec-a", T0, LEASE_MS, unwritten=pending) is not None
    else:
        assert env.ledger.mark_dispatched(SLOT, "cats", T0, T0 + 1, unwritten=pending)
    item = env.raw(SLOT, cell_sk("cats"))
    assert BORN_WITH <= set(item) and item["status"] == {"S": "pending"}
    assert env.ledger.load(SLOT).cells["cats"].status == CellStatus.PENDING


def _plant_partial_cell(env: Env) -> None:
    """What an unconditioned heartbeat racing the cell's first write (or its TTL) would leave."""
    env.client.put_item(TableName=env.table, Item={
        "pk": {"S": slot_pk(SLOT)}, "sk": {"S": cell_sk("cats")},
        "leaseUntil": {"N": str(T0 + LEASE_MS)}, "heartbeatAt": {"N": str(T0)}})


def test_a_partial_cell_item_never_fails_a_read(env: Env) -> None:
    slot_only(env)
    _plant_partial_cell(env)
    seen: list[tuple[str, dict]] = []
    env.ledger.log = lambda level, message, **fields: seen.append((level, fields))
    state = env.ledger.load(SLOT)
    assert "cats" not in state.cells and state.malformed == {"cats": f"cell item {slot_pk(SLOT)} / CELL#cats has no status"}
    assert state.cell("cats").virtual and state.cell("cats").status == CellStatus.PENDING
    assert env.ledger.get_cell(SLOT, "cats") is None
    assert [(level, f["event"], f["sk"]) for level, f in seen] == [("error", "ledger.malformed_item", "CELL#cats")] * 2
    assert seen[0][1]["attributes"] == ["heartbeatAt", "leaseUntil", "pk", "sk"]  # names only, never values


def test_the_first_claim_completes_a_partial_cell_item(env: Env) -> None:
    slot_only(env)
    _plant_partial_cell(env)
    cell = env.ledger.claim_cell(SLOT, "cats", "exec-a", T0 + 1, LEASE_MS, unwritten=unwritten_cell(make_slot(), "cats"))
    assert cell is not None and (cell.status, cell.lease_owner, cell.slot_id) == (CellStatus.PENDING, "exec-a", SLOT)
    assert BORN_WITH <= set(env.raw(SLOT, cell_sk("cats")))
    assert env.ledger.load(SLOT).malformed == {}


def test_the_sweeps_re_dispatch_mark_completes_a_partial_cell_item(env: Env) -> None:
    slot_only(env)
    _plant_partial_cell(env)
    assert env.ledger.mark_dispatched(SLOT, "cats", T0, T0 + LEASE_MS + 1, unwritten=unwritten_cell(make_slot(), "cats"))
    assert env.ledger.load(SLOT).cells["cats"].status == CellStatus.PENDING


def test_the_stall_put_replaces_a_partial_cell_item_with_a_failed_cell(env: Env) -> None:
    slot_only(env)
    _plant_partial_cell(env)
    state = env.ledger.load(SLOT)
    assert env.ledger.terminalise_slot(state, fail_cells=["cats", "landscape", "novels"], guard_cells=[], slot_status="failed",
                                       reason_code="stalled_no_heartbeat", reason_message="stalled", now_ms=T0 + 2)
    after = env.ledger.load(SLOT)
    assert after.malformed == {} and after.cells["cats"].status == CellStatus.FAILED
    assert after.cells["cats"].terminal_reason_code == "stalled_no_heartbeat"
