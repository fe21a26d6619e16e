"""TopicSpaces (``pixivflow.ports.TopicSpaces``): a topic's cached tag space, shared by the cells that select
from it while it is fresh (issue 22).

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import T0

DAY_MS = 86_400_000

env = ledger_env.env


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
