"""OperatorTools (``pixivflow.ports.OperatorTools``): the operator's reads (the CLI and /ui; they scan the
table, never on a hot path) and the conditional redrive of a dead delivery row.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import OUTBOX_LEASE_MS, T0, Env, admitted, dead_row, make_intent, make_slot

from pixivflow.adapters.dynamo_ledger import slot_pk
from pixivflow.domain.model import LedgerStatus, OutboxStatus

env = ledger_env.env


def test_find_slots_filters_by_schedule_status_and_since_newest_first(env: Env) -> None:
    a = admitted(env, make_slot("morning-tokyo@2026-12-01T0800", created_at=T0))
    b = admitted(env, make_slot("morning-tokyo@2026-12-02T0800", created_at=T0 + 86_400_000))
    c = admitted(env, make_slot("evening-berlin@2026-11-30T1930", created_at=T0 - 1_000))
    env.ledger.put_intent(make_intent(a.slot_id))  # other items of the partition are not slots
    env.ledger.claim_request_key("k-1", {"slotRef": a.slot_id})
    assert env.ledger.finish_slot(a.slot_id, "failed", T0 + 5, last_error="boom") is True
    assert [s.slot_id for s in env.ledger.find_slots()] == [b.slot_id, a.slot_id, c.slot_id]
    assert [s.slot_id for s in env.ledger.find_slots(schedule_id="morning-tokyo")] == [b.slot_id, a.slot_id]
    failed = env.ledger.find_slots(status="failed")
    assert [(s.slot_id, s.status, s.last_error) for s in failed] == [(a.slot_id, "failed", "boom")]
    assert [s.slot_id for s in env.ledger.find_slots(since_ms=T0)] == [b.slot_id, a.slot_id]
    assert env.ledger.find_slots(schedule_id="morning-tokyo", status="pending", since_ms=T0 + 1) == [
        env.ledger.get_slot(b.slot_id)]
    assert env.ledger.find_slots(schedule_id="nope") == []


def test_dead_intents_lists_only_dead_rows_newest_first(env: Env) -> None:
    slot = admitted(env)
    old = dead_row(env, make_intent(slot.slot_id, "cats", "1001"), T0)
    new = dead_row(env, make_intent(slot.slot_id, "landscape", "2002"), T0 + 10)
    env.ledger.put_intent(make_intent(slot.slot_id, "novels", "3003"))  # pending: not dead
    found = env.ledger.dead_intents()
    assert [i.idempotency_key for i in found] == [new.idempotency_key, old.idempotency_key]
    assert (found[0].status, found[0].last_error, found[0].attempts) == ("failed", "delivery endpoint HTTP 404: gone", 1)


def test_redrive_intent_rearms_a_dead_row_once_and_refuses_any_other(env: Env) -> None:
    slot = admitted(env)
    dead = dead_row(env, make_intent(slot.slot_id), T0)
    assert env.ledger.due_intents(T0 + 10**9) == []  # dead rows are out of the due index
    again = env.ledger.redrive_intent(dead, T0 + 500)
    assert again is not None
    assert (again.outbox_status, again.status, again.attempts, again.next_attempt_at, again.last_error) == (
        OutboxStatus.RETRY_WAIT, LedgerStatus.PENDING, 0, T0 + 500, "delivery endpoint HTTP 404: gone")
    raw = env.raw(slot.slot_id, "DLV#cats#review#illustration#1001")
    assert (raw["redrivenAt"], raw["redriveCount"]) == ({"N": str(T0 + 500)}, {"N": "1"})
    assert "completedAt" not in raw
    assert env.ledger.due_intents(T0 + 500) == [(slot_pk(slot.slot_id), "DLV#cats#review#illustration#1001")]
    assert env.ledger.redrive_intent(dead, T0 + 600) is None  # no longer dead: refused, unchanged
    assert env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001").updated_at == T0 + 500
    claimed = env.ledger.claim_intent(again, "dlv-b", T0 + 500, OUTBOX_LEASE_MS)  # the worker takes it as usual
    assert claimed is not None and claimed.outbox_status == OutboxStatus.PROCESSING
    pending = env.ledger.put_intent(make_intent(slot.slot_id, "landscape", "2002"))[0]
    assert env.ledger.redrive_intent(pending, T0 + 700) is None  # a pending row is never re-armed
    assert env.ledger.redrive_intent(make_intent(slot.slot_id, "novels", "9"), T0) is None  # nor a missing one
    assert env.raw(slot.slot_id, "DLV#novels#review#illustration#9") is None


# -- the methods of the role the suite had no contract test of -------------------------------------


def test_find_intents_lists_every_row_or_those_in_one_outbox_status_newest_first(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.find_intents() == []  # the slot and its cells are no delivery rows
    dead = dead_row(env, make_intent(slot.slot_id, "cats", "1001"), T0)  # last written at T0 + 1
    pending, _ = env.ledger.put_intent(make_intent(slot.slot_id, "landscape", "2002"))  # at T0
    novels, _ = env.ledger.put_intent(make_intent(slot.slot_id, "novels", "3003"))
    claimed = env.ledger.claim_intent(novels, "dlv-b", T0 + 10, OUTBOX_LEASE_MS)  # at T0 + 10
    keys = lambda rows: [i.idempotency_key for i in rows]  # noqa: E731
    assert keys(env.ledger.find_intents()) == keys([claimed, dead, pending])
    assert keys(env.ledger.find_intents(OutboxStatus.PROCESSING)) == keys([claimed])
    assert keys(env.ledger.find_intents(OutboxStatus.PENDING)) == keys([pending])
    assert env.ledger.find_intents(OutboxStatus.DEAD) == env.ledger.dead_intents()
    assert env.ledger.find_intents(OutboxStatus.DONE) == []
    assert env.ledger.find_intents()[0] == env.ledger.get_intent(slot.slot_id, "novels", "review", "illustration", "3003")
