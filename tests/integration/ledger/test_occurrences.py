"""Occurrences (``pixivflow.ports.Occurrences``): slots, their cells as read, their lifecycle events:
admission's insert-if-absent, the reads every use case starts from, the slot's own status moves.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import threading

import pytest

import ledger_env
from ledger_env import LEASE_MS, T0, TYPES, Env, admitted, make_slot, slot_only

from pixivflow import aws
from pixivflow.adapters.dynamo_ledger import DynamoLedger, cell_sk
from pixivflow.domain.cells import CellStatus

env = ledger_env.env


def test_duplicate_slot_creation_converges_on_the_stored_slot(env: Env) -> None:
    first = make_slot(slot_name="first label")
    stored, created = env.ledger.create_slot(first)
    assert created is True and stored.slot_name == "first label"

    # a retried trigger with a different label and a later clock converges on the first row
    second = make_slot(slot_name="second label", created_at=T0 + 5_000, targets=("cats",))
    stored2, created2 = env.ledger.create_slot(second)
    assert created2 is False
    assert stored2.slot_name == "first label"
    assert stored2.created_at == T0
    assert stored2.target_ids == ["cats", "landscape", "novels"]  # the snapshot frozen at creation
    assert env.ledger.get_slot(first.slot_id).slot_name == "first label"


@pytest.fixture
def atomic_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies a conditional write atomically per item; moto's in-process backend checks
    the condition and stores the item without a lock, so under threads two conditional puts can both
    "succeed" (measured: about 1 run in 9). Serialising the backend's write restores DynamoDB's
    guarantee; the 8 adapters, their clients and their error handling still run concurrently."""
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.Lock()
    original = DynamoDBBackend.put_item

    def put_item(self, *args, **kwargs):
        with lock:
            return original(self, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "put_item", put_item)


def test_eight_concurrent_creates_of_one_slot_yield_exactly_one_creation(env: Env, atomic_moto: None) -> None:
    clients = [aws.client("dynamodb") for _ in range(8)]
    barrier = threading.Barrier(8)
    results: list[tuple[str, bool]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def create(i: int) -> None:
        try:
            ledger = DynamoLedger(clients[i], env.table)
            barrier.wait(timeout=10)
            stored, created = ledger.create_slot(make_slot(slot_name=f"writer-{i}", created_at=T0 + i))
            with lock:
                results.append((stored.slot_name, created))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert len(results) == 8
    assert sum(1 for _, created in results if created) == 1
    winner = next(name for name, created in results if created)
    # every loser got the winner's row back, and the table holds exactly that row
    assert {name for name, _ in results} == {winner}
    assert env.ledger.get_slot("morning-tokyo@2026-12-01T0800").slot_name == winner


def test_ensure_cells_is_idempotent_and_only_creates_missing_cells(env: Env) -> None:
    slot, _ = env.ledger.create_slot(make_slot())
    assert env.ledger.ensure_cells(slot, TYPES, T0, existing=["landscape"]) == ["cats", "novels"]
    # the third cell is missing: only it is created
    assert env.ledger.ensure_cells(slot, TYPES, T0 + 1) == ["landscape"]
    # a full repeat creates nothing and does not reset a cell that moved on
    assert env.ledger.transition_cell(slot.slot_id, "cats", CellStatus.SELECTED, T0 + 2, work_id="1001")
    assert env.ledger.ensure_cells(slot, TYPES, T0 + 3) == []
    state = env.ledger.load(slot.slot_id)
    assert sorted(state.cells) == ["cats", "landscape", "novels"]
    assert state.cells["cats"].status == "selected" and state.cells["cats"].work_id == "1001"
    assert state.cells["novels"].work_type == "novel"
    assert state.cells["landscape"].created_at == T0 + 1


def test_mark_slot_running_only_from_pending_and_keeps_started_at(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.mark_slot_running(slot.slot_id, T0 + 1) is True
    assert env.ledger.mark_slot_running(slot.slot_id, T0 + 2) is False
    assert env.ledger.get_slot(slot.slot_id).started_at == T0 + 1


def test_put_event_once_creates_each_lifecycle_event_once(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.put_event_once(slot.slot_id, "execution.summary", {"n": 1}, T0) is True
    assert env.ledger.put_event_once(slot.slot_id, "execution.summary", {"n": 2}, T0 + 1) is False
    assert env.ledger.get_event(slot.slot_id, "execution.summary") == {"kind": "execution.summary", "ts": T0, "detail": {"n": 1}}
    assert env.ledger.load(slot.slot_id).events == {"execution.summary": {"ts": T0}}


def test_an_unwritten_cell_is_a_pending_cell_dispatched_at_admission(env: Env) -> None:
    slot = slot_only(env)
    state = env.ledger.load(slot.slot_id)
    assert state.cells == {} and state.missing_targets() == ["cats", "landscape", "novels"]
    cats = state.cell("cats")
    assert (cats.status, cats.virtual, cats.lease_owner, cats.attempt_count) == ("pending", True, None, 0)
    assert (cats.created_at, cats.dispatched_at, cats.started_at) == (T0, T0, None)
    assert [c.target_id for c in state.snapshot_cells()] == ["cats", "landscape", "novels"]
    assert state.cell("nope") is None  # outside the frozen snapshot


# -- the methods of the role the suite had no contract test of -------------------------------------


def test_get_slot_and_get_cell_read_what_was_written_and_none_for_what_was_not(env: Env) -> None:
    """The point reads, strongly consistent: the row right after its write; None for a slot or a cell
    with no item (an unwritten snapshot cell has none: admission writes the slot alone)."""
    assert env.ledger.get_slot("nope@2026-12-01T0800") is None
    slot = slot_only(env, targets=("cats", "landscape"))
    assert env.ledger.get_slot(slot.slot_id).target_ids == ["cats", "landscape"]
    assert env.ledger.get_cell(slot.slot_id, "cats") is None
    assert env.ledger.ensure_cells(slot, TYPES, T0 + 1) == ["cats", "landscape"]
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert (cell.slot_id, cell.target_id, cell.status, cell.work_type, cell.created_at, cell.virtual) == (
        slot.slot_id, "cats", "pending", "illustration", T0 + 1, False)
    assert env.ledger.get_cell(slot.slot_id, "nope") is None  # outside the snapshot: never written


def test_finish_slot_closes_an_active_slot_once_and_only_from_the_states_it_is_forced_from(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.finish_slot(sid, "failed", T0 + 1, force_from=["running"]) is False  # it is pending
    assert env.ledger.get_slot(sid).status == "pending"
    assert env.ledger.finish_slot(sid, "failed", T0 + 2, last_error="x" * 1500) is True
    stored = env.ledger.get_slot(sid)
    assert (stored.status, stored.completed_at, stored.last_error, stored.open) == ("failed", T0 + 2, "x" * 1000, False)
    assert "expiresAt" in env.raw(sid, "META")  # a closed slot is kept for the retention period only
    assert env.ledger.finish_slot(sid, "success", T0 + 3) is False  # a terminal slot is never finished again
    assert env.ledger.get_slot(sid).status == "failed"
    assert env.ledger.finish_slot("nope@2026-12-01T0800", "success", T0) is False
    assert env.raw("nope@2026-12-01T0800", "META") is None  # the refused update did not upsert a row


def test_leave_active_index_takes_only_a_terminal_slot_out_and_only_once(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.leave_active_index(sid) is False  # an active slot stays indexed
    state = env.ledger.load(sid)
    assert env.ledger.terminalise_slot(state, fail_cells=list(slot.target_ids), guard_cells=[], slot_status="failed",
                                       reason_code="queued_too_long", reason_message="queued", now_ms=T0 + 1)
    assert env.ledger.get_slot(sid).open is True  # the stall made it terminal and left it indexed
    assert env.ledger.leave_active_index(sid) is True
    after = env.ledger.get_slot(sid)
    assert (after.status, after.open) == ("failed", False)
    assert env.ledger.leave_active_index(sid) is False  # nothing left to leave: a repeat is refused
    assert env.ledger.leave_active_index("nope@2026-12-01T0800") is False
    assert env.raw("nope@2026-12-01T0800", "META") is None


def test_claim_event_relog_goes_to_one_caller_and_again_only_after_the_quiet_time(env: Env) -> None:
    slot = admitted(env)
    sid, kind, quiet = slot.slot_id, "execution.summary", 60_000
    assert env.ledger.claim_event_relog(sid, kind, T0, quiet) is False  # no such event: nothing to re-log
    assert env.raw(sid, f"EVT#L#{kind}") is None
    assert env.ledger.put_event_once(sid, kind, {"status": "success"}, T0)
    assert env.ledger.claim_event_relog(sid, kind, T0 + 10, quiet) is True
    assert env.ledger.claim_event_relog(sid, kind, T0 + 10, quiet) is False  # a second sweep at the same time
    assert env.ledger.claim_event_relog(sid, kind, T0 + 10 + quiet - 1, quiet) is False
    assert env.ledger.claim_event_relog(sid, kind, T0 + 10 + quiet, quiet) is True  # its claimer died: the next may
    assert env.ledger.get_event(sid, kind) == {"kind": kind, "ts": T0, "detail": {"status": "success"}}


def test_slot_ids_lists_every_slot_and_no_other_item(env: Env) -> None:
    assert env.ledger.slot_ids() == []
    a = admitted(env, make_slot("morning-tokyo@2026-12-01T0800"))
    b, _ = env.ledger.create_slot(make_slot("evening-berlin@2026-11-30T1930", targets=("cats",)))
    assert env.ledger.put_event_once(a.slot_id, "execution.summary", {}, T0)
    assert env.ledger.claim_cell(a.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    assert env.raw(a.slot_id, cell_sk("cats")) is not None  # cells and events share the slot's partition
    assert env.ledger.claim_request_key("k-1", {"slotRef": a.slot_id})[0]  # a META item that is not a slot
    assert env.ledger.end_ui_sessions(0, T0) == 1  # another
    assert env.ledger.slot_ids() == sorted([a.slot_id, b.slot_id])
