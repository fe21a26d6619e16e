"""CellLeases (``pixivflow.ports.CellLeases``): a cell's run lease (one executor at a time), heartbeats, the
hand-back of a deferral, the sweep's re-dispatch marker, and what an executor records under its lease.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import LEASE_MS, T0, Env, admitted, slot_only, unwritten

from pixivflow.adapters.dynamo_ledger import cell_sk
from pixivflow.domain.cells import CellStatus
from pixivflow.domain.model import Slot, unwritten_cell

env = ledger_env.env


def test_two_owners_contend_for_one_cell_lease(env: Env) -> None:
    slot = admitted(env)
    a = env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS)
    assert a is not None and a.lease_owner == "exec-a" and a.lease_until == T0 + LEASE_MS
    assert a.attempt_count == 1 and a.started_at == T0
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + 1_000, LEASE_MS) is None
    # one millisecond before expiry the lease is still live
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + LEASE_MS - 1, LEASE_MS) is None
    assert env.ledger.get_cell(slot.slot_id, "cats").lease_owner == "exec-a"


def test_expired_cell_lease_goes_to_the_other_owner(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    b = env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + LEASE_MS, LEASE_MS)
    assert b is not None
    assert b.lease_owner == "exec-b" and b.lease_until == T0 + 2 * LEASE_MS
    assert b.started_at == T0  # the first claim's startedAt is kept
    assert b.attempt_count == 2
    # the previous owner can no longer release it
    assert env.ledger.release_cell(slot.slot_id, "cats", "exec-a", T0 + LEASE_MS + 1) is False
    assert env.ledger.get_cell(slot.slot_id, "cats").lease_owner == "exec-b"


def test_same_owner_reclaims_its_cell_lease(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    renewed = env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0 + 60_000, LEASE_MS)
    assert renewed is not None
    assert renewed.lease_until == T0 + 60_000 + LEASE_MS and renewed.heartbeat_at == T0 + 60_000


def test_claim_refused_on_terminal_or_missing_cell(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.transition_cell(slot.slot_id, "cats", CellStatus.NO_CANDIDATE, T0)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is None
    assert env.ledger.claim_cell(slot.slot_id, "nope", "exec-a", T0, LEASE_MS) is None
    assert env.raw(slot.slot_id, cell_sk("nope")) is None  # the conditional update did not upsert a row


def test_heartbeat_only_by_the_owner(env: Env) -> None:
    """Spec §4.2: heartbeat renews leaseUntil and heartbeatAt only where the owner matches.

    heartbeat_cell's condition names #leaseOwner without registering it in
    ExpressionAttributeNames, so every heartbeat (owner or not) is rejected by DynamoDB."""
    slot = admitted(env)
    env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS)
    assert env.ledger.heartbeat_cell(slot.slot_id, "cats", "exec-b", T0 + 30_000, LEASE_MS) is False
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.heartbeat_at == T0 and cell.lease_until == T0 + LEASE_MS
    assert env.ledger.heartbeat_cell(slot.slot_id, "cats", "exec-a", T0 + 30_000, LEASE_MS) is True
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.heartbeat_at == T0 + 30_000 and cell.lease_until == T0 + 30_000 + LEASE_MS


def test_release_clears_the_lease_and_keeps_heartbeat(env: Env) -> None:
    slot = admitted(env)
    env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS)
    env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0 + 30_000, LEASE_MS)  # renewal stamps heartbeatAt
    assert env.ledger.release_cell(slot.slot_id, "cats", "exec-b", T0 + 40_000) is False
    assert env.ledger.release_cell(slot.slot_id, "cats", "exec-a", T0 + 40_000) is True
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.lease_owner is None and cell.lease_until is None
    assert cell.heartbeat_at == T0 + 30_000
    assert cell.lease_live(T0 + 40_000) is False
    # released: anyone may claim at once
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + 40_001, LEASE_MS) is not None


def test_the_first_claim_writes_the_cell_in_one_conditional_write(env: Env) -> None:
    slot = slot_only(env)
    claimed = env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0 + 5, LEASE_MS, unwritten=unwritten(env, slot, "cats"))
    assert claimed is not None and (claimed.status, claimed.lease_owner, claimed.attempt_count) == ("pending", "exec-a", 1)
    item = env.raw(slot.slot_id, cell_sk("cats"))
    assert {k: list(v.values())[0] for k, v in item.items() if k in ("entity", "slotId", "targetId", "status", "workType",
                                                                   "createdAt", "dispatchedAt", "startedAt")} == {
        "entity": "cell", "slotId": slot.slot_id, "targetId": "cats", "status": "pending", "workType": "illustration",
        "createdAt": str(T0), "dispatchedAt": str(T0), "startedAt": str(T0 + 5)}
    # a second executor with the same stand-in is refused by the live lease, not by a second create
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + 6, LEASE_MS, unwritten=unwritten_again(slot, "cats")) is None
    assert env.ledger.get_cell(slot.slot_id, "cats").lease_owner == "exec-a"
    # without a stand-in a missing cell is never created
    assert env.ledger.claim_cell(slot.slot_id, "landscape", "exec-a", T0, LEASE_MS) is None
    assert env.raw(slot.slot_id, cell_sk("landscape")) is None


def unwritten_again(slot: Slot, target_id: str):
    from pixivflow.domain.model import unwritten_cell

    return unwritten_cell(slot, target_id)


def test_a_claim_never_resurrects_a_terminal_cell_written_meanwhile(env: Env) -> None:
    slot = slot_only(env, targets=("cats",))
    stand_in = unwritten(env, slot, "cats")
    state = env.ledger.load(slot.slot_id)
    assert env.ledger.terminalise_slot(state, fail_cells=["cats"], guard_cells=[], slot_status="failed",
                                       reason_code="queued_too_long", reason_message="queued", now_ms=T0 + 1)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-late", T0 + 2, LEASE_MS, unwritten=stand_in) is None
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert (cell.status, cell.terminal_reason_code, cell.lease_owner) == ("failed", "queued_too_long", None)


def test_recovery_of_a_never_claimed_cell_writes_it_once(env: Env) -> None:
    slot = slot_only(env, targets=("cats",))
    stand_in = unwritten(env, slot, "cats")
    now = T0 + 300_000
    assert env.ledger.mark_dispatched(slot.slot_id, "cats", stand_in.dispatched_at, now, unwritten=stand_in)
    # a concurrent sweep that read the same unwritten cell is refused: the cell exists now, re-dispatched
    assert not env.ledger.mark_dispatched(slot.slot_id, "cats", stand_in.dispatched_at, now, unwritten=stand_in)
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert (cell.status, cell.dispatched_at, cell.created_at, cell.work_type) == ("pending", now, T0, "illustration")


def test_a_zombie_executors_error_neither_lands_on_the_cell_nor_drops_the_new_owners_lease(env: Env) -> None:
    """record_cell_error with an owner (spec §4.2): executor A's lease lapsed and B claimed the cell;
    A's late retryable error must be refused, or it would strip B's lease and let a third executor
    run the cell beside B (issue 20: make mutants found no test of this guard)."""
    slot = admitted(env)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + LEASE_MS, LEASE_MS) is not None
    assert env.ledger.record_cell_error(slot.slot_id, "cats", "late error from a", T0 + LEASE_MS + 5, owner="exec-a") is False
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert (cell.lease_owner, cell.lease_until, cell.last_error) == ("exec-b", T0 + 2 * LEASE_MS, None)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-c", T0 + LEASE_MS + 10, LEASE_MS) is None
    assert env.ledger.record_cell_error(slot.slot_id, "cats", "b's error", T0 + LEASE_MS + 20, owner="exec-b") is True
    assert env.ledger.get_cell(slot.slot_id, "cats").last_error == "b's error"


def test_a_cell_whose_lease_is_live_is_not_re_dispatched(env: Env) -> None:
    """mark_dispatched (DESIGN §4 "Recovery"): the sweep re-sends a cell's message only while nobody
    holds its lease; a cell being run right now must not get a second executor beside its own
    (issue 20: make mutants found no test of this guard)."""
    slot = admitted(env)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    seen = env.ledger.get_cell(slot.slot_id, "cats").dispatched_at
    assert env.ledger.mark_dispatched(slot.slot_id, "cats", seen, T0 + LEASE_MS - 1) is False  # lease still live
    assert env.ledger.get_cell(slot.slot_id, "cats").dispatched_at == seen
    assert env.ledger.mark_dispatched(slot.slot_id, "cats", seen, T0 + LEASE_MS) is True  # lapsed: the sweep may


def claimed(env, owner="exec-a"):
    slot = admitted(env)
    cell = env.ledger.claim_cell(slot.slot_id, "cats", owner, T0, LEASE_MS, unwritten=unwritten_cell(slot, "cats"))
    assert cell is not None
    return slot


def test_only_the_lease_owner_writes_the_checkpoint(env):
    slot = claimed(env)
    doc = {"fp": "topic:abc:2026-11-30", "dayIndex": 0, "progress": {"day": "2026-11-30", "nextTag": 3}}
    assert env.ledger.save_selection_checkpoint(slot.slot_id, "cats", "exec-a", T0 + 1, doc)
    assert env.ledger.get_cell(slot.slot_id, "cats").selection_checkpoint == doc
    # a zombie (the lease moved to exec-b) is refused and changes nothing
    assert env.ledger.release_cell(slot.slot_id, "cats", "exec-a", T0 + 2)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + 3, LEASE_MS) is not None
    stale = {**doc, "dayIndex": 2}
    assert not env.ledger.save_selection_checkpoint(slot.slot_id, "cats", "exec-a", T0 + 4, stale)
    assert env.ledger.get_cell(slot.slot_id, "cats").selection_checkpoint == doc
    assert env.ledger.save_selection_checkpoint(slot.slot_id, "cats", "exec-b", T0 + 5, stale)
    assert env.ledger.get_cell(slot.slot_id, "cats").selection_checkpoint["dayIndex"] == 2


def test_no_checkpoint_once_the_cell_left_selection(env):
    slot = claimed(env)
    assert env.ledger.move_cell_as_owner(slot.slot_id, "cats", CellStatus.NO_CANDIDATE, T0 + 1, "exec-a")
    assert not env.ledger.save_selection_checkpoint(slot.slot_id, "cats", "exec-a", T0 + 2, {"fp": "x"})
    assert "selectionCheckpoint" not in env.raw(slot.slot_id, cell_sk("cats"))


# -- the methods of the role the suite had no contract test of -------------------------------------


def test_defer_cell_hands_the_claim_back_only_as_its_lease_holder(env: Env) -> None:
    """defer_cell: the lease and the claim's attempt are given back, and the cell is due again at
    ``due_at`` (its ``dispatchedAt``, so the sweep waits for the delayed message); only the holder may."""
    slot = admitted(env)
    sid, report = slot.slot_id, {"deferred": "account_cooling_down"}
    assert env.ledger.claim_cell(sid, "cats", "exec-a", T0, LEASE_MS).attempt_count == 1
    assert env.ledger.defer_cell(sid, "cats", "exec-b", T0 + 1, T0 + 60_000, candidate_report=report) is False
    cell = env.ledger.get_cell(sid, "cats")
    assert (cell.lease_owner, cell.attempt_count, cell.dispatched_at, cell.candidate_report) == ("exec-a", 1, T0, None)
    assert env.ledger.defer_cell(sid, "cats", "exec-a", T0 + 2, T0 + 60_000, candidate_report=report) is True
    cell = env.ledger.get_cell(sid, "cats")
    assert (cell.status, cell.lease_owner, cell.lease_until, cell.attempt_count, cell.dispatched_at, cell.candidate_report) == (
        "pending", None, None, 0, T0 + 60_000, report)
    # the lease went with it: a repeat is refused (the attempt is given back once), and the next claim counts one again
    assert env.ledger.defer_cell(sid, "cats", "exec-a", T0 + 3, T0 + 90_000, candidate_report=report) is False
    assert env.ledger.get_cell(sid, "cats").attempt_count == 0
    assert env.ledger.claim_cell(sid, "cats", "exec-b", T0 + 60_000, LEASE_MS).attempt_count == 1
    # a terminal cell is never deferred, even by the holder of a lease it still shows
    assert env.ledger.settle_cell_from_delivery(sid, "cats", CellStatus.FAILED, T0 + 60_001)
    assert env.ledger.defer_cell(sid, "cats", "exec-b", T0 + 60_002, T0 + 120_000, candidate_report=report) is False
