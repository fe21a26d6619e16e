"""The ledger's topic items (issue 22) on moto and on the twin: the selection checkpoint is written
only by the cell's lease owner while it selects; a tag space is cached once while fresh."""

from __future__ import annotations

import test_ledger
from test_ledger import LEASE_MS, T0, admitted

from pixivflow.adapters.dynamo_ledger import cell_sk
from pixivflow.domain.cells import CellStatus
from pixivflow.domain.model import unwritten_cell

DAY_MS = 86_400_000


env = test_ledger.env  # the same two backends (moto and the twin) as the ledger suite


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


def test_a_fresh_space_is_kept_a_stale_one_replaced(env):
    space = [{"tag": "ミク", "score": 1.0, "occurrences": 0}]
    assert env.ledger.get_topic_space("k1", T0) is None
    assert env.ledger.put_topic_space("k1", "ミク", "illustration", space, T0, T0 + 7 * DAY_MS)
    other = [{"tag": "ミク", "score": 1.0, "occurrences": 0}, {"tag": "初音ミク", "score": 0.9, "occurrences": 3}]
    # a second resolver while the first space is fresh: refused, the first one stays
    assert not env.ledger.put_topic_space("k1", "ミク", "illustration", other, T0 + DAY_MS, T0 + 8 * DAY_MS)
    got = env.ledger.get_topic_space("k1", T0 + DAY_MS)
    assert got["space"] == space and got["freshUntil"] == T0 + 7 * DAY_MS and got["resolvedAt"] == T0
    # once stale it is replaced
    assert env.ledger.put_topic_space("k1", "ミク", "illustration", other, T0 + 7 * DAY_MS, T0 + 14 * DAY_MS)
    assert env.ledger.get_topic_space("k1", T0 + 7 * DAY_MS)["space"] == other
    raw = env.client.get_item(TableName=env.table, Key={"pk": {"S": "TOPIC#k1"}, "sk": {"S": "META"}})["Item"]
    assert int(raw["expiresAt"]["N"]) > (T0 + 14 * DAY_MS) // 1000  # TTL: a retention period after it goes stale
