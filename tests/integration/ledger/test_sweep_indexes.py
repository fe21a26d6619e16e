"""SweepIndexes (``pixivflow.ports.SweepIndexes``): the sparse index of live slots as the sweep walks it,
and the one cheap probe of every sparse index that keeps an idle tick cheap.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import T0, Env, admitted, make_intent, make_slot

env = ledger_env.env


def test_active_page_walks_one_shard_oldest_first_from_a_position(env: Env) -> None:
    """The sweep's incremental walk (issue 25): a page past a position, and whether more follow."""
    from pixivflow.adapters.dynamo_ledger import shard_of

    from collections import Counter

    made = [admitted(env, make_slot(f"walk-{n:03d}@2026-12-01T0800", created_at=T0 + n)) for n in range(40)]
    [(shard, _)] = Counter(shard_of(s.slot_id) for s in made).most_common(1)
    mine = [s.slot_id for s in made if shard_of(s.slot_id) == shard]
    assert len(mine) >= 3 and env.ledger.active_shards() == 16
    rows, more = env.ledger.active_page(shard, "", 2)
    assert [r.slot_id for r in rows] == mine[:2] and more is True
    assert [r.created_at for r in rows] == [T0 + int(s[5:8]) for s in mine[:2]]
    rest, more = env.ledger.active_page(shard, rows[-1].position, 100)
    assert [r.slot_id for r in rest] == mine[2:] and more is False
    # a slot that leaves the index leaves the walk; the positions of the others still hold
    assert env.ledger.finish_slot(mine[2], "success", T0 + 100) is True
    rest, _ = env.ledger.active_page(shard, rows[-1].position, 100)
    assert [r.slot_id for r in rest] == mine[3:]


def test_active_slots_drops_a_slot_once_finished(env: Env) -> None:
    a = admitted(env, make_slot("morning-tokyo@2026-12-01T0800", created_at=T0))
    b = admitted(env, make_slot("evening-berlin@2026-11-30T1930", created_at=T0 - 1_000))
    assert env.ledger.active_slots() == [(b.slot_id, T0 - 1_000), (a.slot_id, T0)]  # oldest first
    assert env.ledger.mark_slot_running(a.slot_id, T0 + 1) is True
    assert [s for s, _ in env.ledger.active_slots()] == [b.slot_id, a.slot_id]  # running stays active
    assert env.ledger.leave_active_index(b.slot_id) is False  # an active slot never leaves the index
    assert env.ledger.finish_slot(a.slot_id, "success", T0 + 2) is True
    assert env.ledger.active_slots() == [(b.slot_id, T0 - 1_000)]
    assert env.ledger.get_slot(a.slot_id).status == "success"
    # a terminal slot is never finished again
    assert env.ledger.finish_slot(a.slot_id, "failed", T0 + 3) is False
    assert env.ledger.get_slot(a.slot_id).status == "success"


# -- the methods of the role the suite had no contract test of -------------------------------------


def test_occupied_indexes_names_each_sparse_index_holding_an_entry(env: Env) -> None:
    assert env.ledger.occupied_indexes() == frozenset()  # an idle ledger: every index empty
    slot = admitted(env)
    assert env.ledger.occupied_indexes() == {"active"}
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.occupied_indexes() == {"active"}  # an open slot's row is found through the slot
    assert env.ledger.index_due(intent)
    assert env.ledger.occupied_indexes() == {"active", "due"}
    assert env.ledger.finish_slot(slot.slot_id, "success", T0 + 1)
    assert env.ledger.occupied_indexes() == {"due"}
    # the job store's open-callback index shares the table (adapters.job_store writes it)
    env.client.put_item(TableName=env.table, Item={"pk": {"S": "JOB#j-1"}, "sk": {"S": "META"},
                                                   "callbackPk": {"S": "CALLBACKS#00"}, "callbackSk": {"S": f"{T0:013d}#j-1"}})
    assert env.ledger.occupied_indexes() == {"due", "callbacks"}
