"""CellMoves (``pixivflow.ports.CellMoves``): a cell's state moves: the work binding (compare-and-set, never
rebound), the moves of the cell's state machine, and the multi-item steps that end a slot's cells at once.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import pytest

import ledger_env
from ledger_env import LEASE_MS, OUTBOX_LEASE_MS, T0, Env, admitted, make_intent, make_slot, slot_only, unwritten

from pixivflow.adapters.dynamo_ledger import cell_sk
from pixivflow.domain.cells import ALLOWED_FROM, TERMINAL_CELL_STATES, CellStatus
from pixivflow.domain.model import Slot

env = ledger_env.env


def test_bind_first_work_wins_and_rebinding_is_idempotent(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.bind_work(slot.slot_id, "cats", "1001", "illustration", T0) == (True, "1001")
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.status == "selected" and cell.work_id == "1001"
    assert env.ledger.bind_work(slot.slot_id, "cats", "1001", "illustration", T0 + 1) == (True, "1001")
    assert env.ledger.bind_work(slot.slot_id, "cats", "2002", "illustration", T0 + 2) == (False, "1001")
    assert env.ledger.get_cell(slot.slot_id, "cats").work_id == "1001"


def test_bind_keeps_the_cell_work_type(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.bind_work(slot.slot_id, "novels", "77", "illustration", T0) == (True, "77")
    assert env.ledger.get_cell(slot.slot_id, "novels").work_type == "novel"


def test_release_work_only_while_selected_with_exactly_that_work(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.release_work(sid, "cats", "1001", T0) is False  # nothing bound
    env.ledger.bind_work(sid, "cats", "1001", "illustration", T0)
    assert env.ledger.release_work(sid, "cats", "2002", T0 + 1) is False  # a different work
    assert env.ledger.get_cell(sid, "cats").work_id == "1001"
    assert env.ledger.release_work(sid, "cats", "1001", T0 + 2) is True
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "pending" and cell.work_id is None
    # once the cell has moved on (delivery_pending) the binding is never released
    env.ledger.bind_work(sid, "cats", "3003", "illustration", T0 + 3)
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0 + 4)
    assert env.ledger.release_work(sid, "cats", "3003", T0 + 5) is False
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "delivery_pending" and cell.work_id == "3003"


@pytest.mark.parametrize("terminal", sorted(TERMINAL_CELL_STATES))
def test_terminal_cells_refuse_every_move(env: Env, terminal: str) -> None:
    slot = admitted(env, make_slot(targets=("cats",)))
    assert env.ledger.transition_cell(slot.slot_id, "cats", terminal, T0, work_id="1001", reason_code="x")
    for to in CellStatus:
        assert env.ledger.transition_cell(slot.slot_id, "cats", to, T0 + 1) is False, f"{terminal} -> {to}"
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.status == terminal and cell.completed_at == T0 and cell.terminal_reason_code == "x"


def test_delivery_pending_cannot_go_back_to_selected_or_pending(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SELECTED, T0 + 1) is False
    assert env.ledger.transition_cell(sid, "cats", CellStatus.PENDING, T0 + 1) is False
    assert env.ledger.transition_cell(sid, "cats", CellStatus.ARTIFACT_READY, T0 + 1) is False
    assert env.ledger.get_cell(sid, "cats").status == "delivery_pending"
    # the legal move still works and stamps completion
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SUBMITTED, T0 + 2)
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "submitted" and cell.completed_at == T0 + 2 and cell.work_id == "1001"


def test_every_legal_move_from_pending_is_accepted(env: Env) -> None:
    targets = sorted(s for s in CellStatus if CellStatus.PENDING in ALLOWED_FROM[s])
    slot = admitted(env, make_slot(targets=tuple(f"t{i}" for i in range(len(targets)))))
    for i, to in enumerate(targets):
        assert env.ledger.transition_cell(slot.slot_id, f"t{i}", to, T0), to
    state = env.ledger.load(slot.slot_id)
    assert [state.cells[f"t{i}"].status for i in range(len(targets))] == targets


def test_move_requiring_the_lease_owner_is_refused_for_another_owner(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    env.ledger.claim_cell(sid, "cats", "exec-a", T0, LEASE_MS)
    assert env.ledger.transition_cell(sid, "cats", CellStatus.FAILED, T0 + 1, owner="exec-b") is False
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "pending" and cell.lease_owner == "exec-a"
    assert env.ledger.transition_cell(sid, "cats", CellStatus.FAILED, T0 + 2, owner="exec-a",
                                      last_error="boom", reason_code="internal_error", reason_message="m")
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "failed" and cell.lease_owner is None and cell.last_error == "boom"
    assert cell.terminal_reason_code == "internal_error"


def test_require_no_live_lease_refuses_while_someone_holds_the_cell(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    env.ledger.claim_cell(sid, "cats", "exec-a", T0, LEASE_MS)
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SUBMITTED, T0 + 1, require_no_live_lease=True) is False
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SUBMITTED, T0 + LEASE_MS, require_no_live_lease=True)
    assert env.ledger.get_cell(sid, "cats").status == "submitted"


def test_terminalise_slot_applies_every_change_when_no_lease_is_live(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    env.ledger.transition_cell(sid, "novels", CellStatus.DELIVERY_PENDING, T0, work_id="9")
    state = env.ledger.load(sid)
    ok = env.ledger.terminalise_slot(state, fail_cells=["cats", "landscape"], guard_cells=["novels"], slot_status="failed",
                                     reason_code="queued_too_long", reason_message="queued too long", now_ms=T0 + 1)
    assert ok is True
    after = env.ledger.load(sid)
    assert after.slot.status == "failed"
    assert {t: c.status for t, c in after.cells.items()} == {"cats": "failed", "landscape": "failed", "novels": "delivery_pending"}
    assert after.cells["cats"].terminal_reason_code == "queued_too_long"
    # It stays indexed until its outcome record is logged; then it leaves the index.
    assert [s for s, _ in env.ledger.active_slots()] == [sid]
    assert env.ledger.leave_active_index(sid) is True
    assert env.ledger.active_slots() == []


def test_terminalise_slot_is_all_or_nothing_when_a_guarded_cell_has_a_live_lease(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    env.ledger.transition_cell(sid, "novels", CellStatus.DELIVERY_PENDING, T0, work_id="9")
    env.ledger.claim_cell(sid, "novels", "exec-live", T0, LEASE_MS)
    state = env.ledger.load(sid)
    before = {t: (c.status, c.lease_owner) for t, c in state.cells.items()}

    ok = env.ledger.terminalise_slot(state, fail_cells=["cats", "landscape"], guard_cells=["novels"], slot_status="failed",
                                     reason_code="stalled_no_heartbeat", reason_message="stalled", now_ms=T0 + 1)

    assert ok is False  # a cancelled transaction is a refusal, not an infrastructure error
    after = env.ledger.load(sid)
    assert after.slot.status == "pending" and after.slot.completed_at is None
    assert {t: (c.status, c.lease_owner) for t, c in after.cells.items()} == before
    assert all(c.terminal_reason_code is None for c in after.cells.values())
    assert [s for s, _ in env.ledger.active_slots()] == [sid]


def test_terminalise_slot_refuses_to_fail_a_cell_whose_lease_is_live(env: Env) -> None:
    # DESIGN §4: the stall may fail only cells no executor holds. Here the live lease is on a cell
    # being FAILED (not a guard_cell), so only the fail update's own lease condition can refuse it.
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.claim_cell(sid, "cats", "exec-live", T0, LEASE_MS)
    state = env.ledger.load(sid)
    before = {t: (c.status, c.lease_owner) for t, c in state.cells.items()}

    ok = env.ledger.terminalise_slot(state, fail_cells=["cats", "landscape"], guard_cells=[], slot_status="failed",
                                     reason_code="stalled_no_heartbeat", reason_message="stalled", now_ms=T0 + 1)

    assert ok is False
    after = env.ledger.load(sid)
    assert after.slot.status == "pending" and after.slot.completed_at is None
    assert {t: (c.status, c.lease_owner) for t, c in after.cells.items()} == before
    assert after.cells["cats"].lease_owner == "exec-live"
    assert all(c.terminal_reason_code is None for c in after.cells.values())
    # Once that lease has lapsed, the same stall goes through.
    later = env.ledger.load(sid)
    assert env.ledger.terminalise_slot(later, fail_cells=["cats", "landscape"], guard_cells=[], slot_status="failed",
                                       reason_code="stalled_no_heartbeat", reason_message="stalled",
                                       now_ms=T0 + LEASE_MS + 1) is True
    assert env.ledger.load(sid).cells["cats"].status == "failed"


def test_terminalise_writes_never_claimed_cells_failed_and_refuses_if_one_was_claimed(env: Env) -> None:
    slot = slot_only(env, targets=("cats", "landscape"))
    stale = env.ledger.load(slot.slot_id)
    # landscape is claimed (its item written) after the sweep read the slot: the whole step refuses
    assert env.ledger.claim_cell(slot.slot_id, "landscape", "exec-a", T0, LEASE_MS, unwritten=unwritten(env, slot, "landscape"))
    assert not env.ledger.terminalise_slot(stale, fail_cells=["cats", "landscape"], guard_cells=[], slot_status="failed",
                                           reason_code="queued_too_long", reason_message="queued", now_ms=T0 + 1)
    assert env.raw(slot.slot_id, cell_sk("cats")) is None and env.ledger.get_slot(slot.slot_id).status == "pending"
    # read again (lease now dead): cats is born failed, landscape's item is failed in place
    fresh = env.ledger.load(slot.slot_id)
    assert env.ledger.terminalise_slot(fresh, fail_cells=["cats", "landscape"], guard_cells=[], slot_status="failed",
                                       reason_code="queued_too_long", reason_message="queued", now_ms=T0 + LEASE_MS + 1)
    after = env.ledger.load(slot.slot_id)
    assert {t: (c.status, c.terminal_reason_code, c.virtual) for t, c in after.cells.items()} == {
        "cats": ("failed", "queued_too_long", False), "landscape": ("failed", "queued_too_long", False)}
    assert after.slot.status == "failed"


def test_cancel_writes_never_claimed_cells_failed(env: Env) -> None:
    slot = slot_only(env, targets=("cats", "landscape"))
    state = env.ledger.load(slot.slot_id)
    assert env.ledger.cancel_cells(state, cells=["cats", "landscape"], intents=[], slot_status="failed",
                                   reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 1)
    after = env.ledger.load(slot.slot_id)
    assert {t: (c.status, c.terminal_reason_code) for t, c in after.cells.items()} == {
        "cats": ("failed", "cancelled_by_consumer"), "landscape": ("failed", "cancelled_by_consumer")}
    # a second cancel from the same stale read finds the cells written and refuses
    assert not env.ledger.cancel_cells(state, cells=["cats"], intents=[], slot_status=None,
                                       reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 2)


def _cancel(env: Env, state, now_ms: int) -> bool:
    """The consumer cancel of the whole job (services/jobs.py), from the state read in ``state``."""
    return env.ledger.cancel_cells(state, cells=["cats"], intents=state.intents_for("cats"), slot_status="failed",
                                   reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=now_ms)


def _refused_untouched(env: Env, slot: Slot, owner: str, lease_until: int) -> None:
    """The whole cancel refused: the row stays the worker's claim, the cell and the slot open."""
    after = env.ledger.load(slot.slot_id)
    (row,) = after.intents
    assert (row.outbox_status, row.lease_owner, row.lease_until) == ("processing", owner, lease_until)
    assert after.cells["cats"].status == "pending" and after.slot.status == "pending"


def test_cancel_refuses_a_row_a_worker_claimed_after_the_read(env: Env) -> None:
    """Spec §12.7: the cancel read the row pending; a worker claimed it before the transaction (it
    may be posting now, before its sending marker). The stale cancel must not mark it cancelled."""
    slot = admitted(env, make_slot(targets=("cats",)))
    env.ledger.put_intent(make_intent(slot.slot_id))
    state = env.ledger.load(slot.slot_id)
    assert state.intents_for("cats")[0].outbox_status == "pending"
    assert env.ledger.claim_intent(state.intents[0], "dlv-a", T0 + 10, OUTBOX_LEASE_MS) is not None
    assert not _cancel(env, state, T0 + 11)
    _refused_untouched(env, slot, "dlv-a", T0 + 10 + OUTBOX_LEASE_MS)
    # re-read, the row is a live claim: a cancel that leaves it out goes through
    fresh = env.ledger.load(slot.slot_id)
    assert env.ledger.cancel_cells(fresh, cells=["cats"], intents=[], slot_status="failed",
                                   reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 12)
    assert env.ledger.load(slot.slot_id).intents[0].outbox_status == "processing"


def test_cancel_takes_an_expired_claim_only_if_nobody_reclaimed_it(env: Env) -> None:
    """A row read processing with an expired lease is cancelled (its worker died) -- but only that
    claim: another worker that took the row over between the read and the transaction owns it now."""
    slot = admitted(env, make_slot(targets=("cats",)))
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS) is not None
    expired = T0 + OUTBOX_LEASE_MS
    state = env.ledger.load(slot.slot_id)  # processing, dlv-a's lease just expired
    assert (state.intents[0].outbox_status, state.intents[0].lease_until) == ("processing", expired)
    assert env.ledger.claim_intent(state.intents[0], "dlv-b", expired, OUTBOX_LEASE_MS) is not None
    assert not _cancel(env, state, expired + 1)
    _refused_untouched(env, slot, "dlv-b", expired + OUTBOX_LEASE_MS)
    # the same cancel from a read of the expired claim nobody took over goes through
    again = env.ledger.load(slot.slot_id)
    later = expired + OUTBOX_LEASE_MS
    assert _cancel(env, again, later + 1)
    after = env.ledger.load(slot.slot_id)
    assert after.intents[0].outbox_status == "cancelled" and after.intents[0].lease_owner is None
    assert after.cells["cats"].status == "failed" and after.slot.status == "failed"


def test_a_cancel_from_a_stale_read_never_fails_a_cell_that_was_delivered_meanwhile(env: Env) -> None:
    """cancel_cells (spec §12.7): each cell's failure is conditioned on the status the cancel read.
    The consumer's cancel read cats delivery_pending; its delivery then submitted it. The whole step
    must refuse, or a delivered cell would be reported failed (and the slot failed) although the
    consumer received its work (make mutants found no test of this guard)."""
    slot = admitted(env, make_slot(targets=("cats",)))
    sid = slot.slot_id
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    stale = env.ledger.load(sid)
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SUBMITTED, T0 + 1)  # the delivery lands
    assert not env.ledger.cancel_cells(stale, cells=["cats"], intents=[], slot_status="failed",
                                       reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 2)
    after = env.ledger.load(sid)
    cats = after.cells["cats"]
    assert (cats.status, cats.terminal_reason_code, cats.completed_at) == ("submitted", None, T0 + 1)
    assert after.slot.status == "pending" and after.slot.completed_at is None


# -- the methods of the role the suite had no contract test of -------------------------------------


def test_move_cell_as_owner_is_the_lease_holders_move_and_gives_the_lease_back(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.move_cell_as_owner(sid, "cats", CellStatus.NO_CANDIDATE, T0, "exec-a") is False  # nobody holds it
    assert env.ledger.claim_cell(sid, "cats", "exec-a", T0, LEASE_MS) is not None
    assert env.ledger.move_cell_as_owner(sid, "cats", CellStatus.NO_CANDIDATE, T0 + 1, "exec-b") is False
    assert env.ledger.get_cell(sid, "cats").status == "pending"
    assert env.ledger.move_cell_as_owner(sid, "cats", CellStatus.NO_CANDIDATE, T0 + 2, "exec-a",
                                         reason_code="no_candidate", reason_message="nothing matched") is True
    cell = env.ledger.get_cell(sid, "cats")
    assert (cell.status, cell.lease_owner, cell.lease_until, cell.completed_at, cell.terminal_reason_code) == (
        "no_candidate", None, None, T0 + 2, "no_candidate")
    assert env.ledger.move_cell_as_owner(sid, "cats", CellStatus.FAILED, T0 + 3, "exec-a") is False  # the lease went with the move


def test_settle_unleased_cell_waits_for_a_live_lease_to_lapse(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    assert env.ledger.claim_cell(sid, "cats", "exec-a", T0, LEASE_MS) is not None
    assert env.ledger.settle_unleased_cell(sid, "cats", CellStatus.SUBMITTED, T0 + LEASE_MS - 1) is False
    assert env.ledger.get_cell(sid, "cats").status == "delivery_pending"
    assert env.ledger.settle_unleased_cell(sid, "cats", CellStatus.SUBMITTED, T0 + LEASE_MS) is True
    cell = env.ledger.get_cell(sid, "cats")
    assert (cell.status, cell.work_id, cell.lease_owner, cell.completed_at) == ("submitted", "1001", None, T0 + LEASE_MS)
    assert env.ledger.settle_unleased_cell(sid, "cats", CellStatus.FAILED, T0 + LEASE_MS + 1) is False  # terminal now


def test_settle_cell_from_delivery_leaves_an_executors_lease_as_it_is(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    assert env.ledger.claim_cell(sid, "cats", "exec-a", T0, LEASE_MS) is not None
    assert env.ledger.settle_cell_from_delivery(sid, "cats", CellStatus.SELECTED, T0 + 1) is False  # no way back
    assert env.ledger.settle_cell_from_delivery(sid, "cats", CellStatus.SUBMITTED, T0 + 2) is True  # a live lease is no bar
    cell = env.ledger.get_cell(sid, "cats")
    assert (cell.status, cell.completed_at, cell.lease_owner, cell.lease_until) == ("submitted", T0 + 2, "exec-a", T0 + LEASE_MS)
    assert env.ledger.settle_cell_from_delivery(sid, "cats", CellStatus.FAILED, T0 + 3) is False  # terminal now


def test_fail_cell_if_unchanged_fails_a_cell_only_in_the_state_the_caller_saw(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    assert env.ledger.fail_cell_if_unchanged(sid, "cats", CellStatus.PENDING, T0 + 1, reason_code="delivery_timeout") is False
    assert env.ledger.get_cell(sid, "cats").status == "delivery_pending"
    assert env.ledger.fail_cell_if_unchanged(sid, "cats", CellStatus.DELIVERY_PENDING, T0 + 2, reason_code="delivery_timeout",
                                             reason_message="timed out") is True
    cell = env.ledger.get_cell(sid, "cats")
    assert (cell.status, cell.terminal_reason_code, cell.completed_at, cell.work_id) == ("failed", "delivery_timeout", T0 + 2, "1001")
    assert env.ledger.fail_cell_if_unchanged(sid, "cats", CellStatus.DELIVERY_PENDING, T0 + 3) is False  # a repeat
    assert env.ledger.fail_cell_if_unchanged(sid, "cats", CellStatus.FAILED, T0 + 3) is False  # a terminal state is never left
    assert env.ledger.get_cell(sid, "cats").completed_at == T0 + 2
