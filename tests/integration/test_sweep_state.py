"""The SweepState port: the DynamoDB adapter on moto and its in-memory twin pass the same contract
(DESIGN §10). Every write is conditional; a refused condition is an answer, never an exception."""

from __future__ import annotations

from dataclasses import replace

import boto3
import pytest
from moto import mock_aws

from pixivflow.adapters.sweep_state import DynamoSweepState
from pixivflow.local.memory_sweep_state import MemorySweepState
from pixivflow.local.provision import provision
from pixivflow.domain.sweep_state import ScheduleWatch, SweepCursor

NOW = 1_796_000_000_000
TTL = 60_000


@pytest.fixture(params=["dynamodb", "memory"])
def state(request):
    if request.param == "memory":
        yield MemorySweepState()
        return
    with mock_aws():
        env = provision(prefix="sweep-state")
        yield DynamoSweepState(boto3.client("dynamodb"), env["LEDGER_TABLE"], retention_days=7)


def test_one_lease_holder_at_a_time_until_it_expires(state):
    first = state.acquire_lease("sweep-a", NOW, TTL)
    assert (first.acquired, first.owner, first.until_ms) == (True, "sweep-a", NOW + TTL)
    second = state.acquire_lease("sweep-b", NOW + 1_000, TTL)
    assert (second.acquired, second.owner, second.until_ms) == (False, "sweep-a", NOW + TTL)
    assert state.acquire_lease("sweep-b", NOW + TTL - 1, TTL).acquired is False
    # a holder that died: its lease lapses at leaseUntil and the next tick takes it over
    taken = state.acquire_lease("sweep-b", NOW + TTL, TTL)
    assert (taken.acquired, taken.owner) == (True, "sweep-b")


def test_only_the_holder_releases_and_a_released_lease_is_free_at_once(state):
    state.acquire_lease("sweep-a", NOW, TTL)
    assert state.release_lease("sweep-b", NOW + 5) is False
    assert state.acquire_lease("sweep-b", NOW + 5, TTL).acquired is False
    assert state.release_lease("sweep-a", NOW + 5) is True
    assert state.release_lease("sweep-a", NOW + 5) is False  # already expired
    assert state.acquire_lease("sweep-b", NOW + 5, TTL).acquired is True


def test_the_walk_cursor_rides_on_the_lease_and_only_its_holder_moves_it(state):
    """Issue 25: the incremental sweep resumes where the last tick stopped; the cursor comes back
    with the lease, and a tick that no longer holds the lease cannot move it."""
    first = state.acquire_lease("sweep-a", NOW, TTL)
    assert first.cursor == SweepCursor(0, "")  # a new stack starts at the first shard
    assert state.release_lease("sweep-a", NOW + 5, SweepCursor(7, "0001796000000000#daily@2026-12-01T0800")) is True
    second = state.acquire_lease("sweep-b", NOW + 10, TTL)
    assert second.cursor == SweepCursor(7, "0001796000000000#daily@2026-12-01T0800")
    # sweep-a lost its lease long ago: its late release writes nothing, the cursor stays sweep-b's
    assert state.release_lease("sweep-a", NOW + 20, SweepCursor(3, "")) is False
    # a release without a cursor (the tick's walk failed) frees the lease and keeps the cursor
    assert state.release_lease("sweep-b", NOW + 30) is True
    assert state.acquire_lease("sweep-c", NOW + 40, TTL).cursor == SweepCursor(7, "0001796000000000#daily@2026-12-01T0800")
    # a holder that died: its successor takes over after the TTL, with the cursor the last release left
    assert state.acquire_lease("sweep-d", NOW + 40 + TTL, TTL).cursor.shard == 7


def test_a_watch_starts_once_and_moves_only_by_compare_and_set(state):
    assert state.watches(["daily"]) == {}
    assert state.start_watch("daily", "0 8 * * *|Asia/Tokyo", NOW) is True
    assert state.start_watch("daily", "0 8 * * *|Asia/Tokyo", NOW + 1) is False  # insert-if-absent
    watch = state.watches(["daily", "other"])["daily"]
    assert watch == ScheduleWatch("daily", "0 8 * * *|Asia/Tokyo", NOW, NOW, False)

    assert state.advance_watch(watch, NOW + 100) is True
    assert state.advance_watch(watch, NOW + 200) is False  # stale: the cursor already moved
    moved = state.watches(["daily"])["daily"]
    assert moved.checked_through_ms == NOW + 100 and moved.first_seen_ms == NOW

    assert state.pause_watch(watch) is False  # stale
    assert state.pause_watch(moved) is True
    paused = state.watches(["daily"])["daily"]
    assert paused.paused is True
    assert state.advance_watch(moved, NOW + 300) is False  # a paused watch is not the watch we read

    # re-enabled (or re-timed): a new watch replaces exactly the one read
    assert state.start_watch("daily", "0 9 * * *|Asia/Tokyo", NOW + 500, replacing=moved) is False
    assert state.start_watch("daily", "0 9 * * *|Asia/Tokyo", NOW + 500, replacing=paused) is True
    assert state.watches(["daily"])["daily"] == ScheduleWatch("daily", "0 9 * * *|Asia/Tokyo", NOW + 500, NOW + 500)
    assert state.start_watch("daily", "x", NOW + 600, replacing=replace(paused, paused=False)) is False


def test_watches_are_read_in_batches_beyond_one_hundred(state):
    ids = [f"s{n:03d}" for n in range(150)]
    for n, sid in enumerate(ids):
        assert state.start_watch(sid, "fp", NOW + n)
    found = state.watches(ids + ["missing"])
    assert set(found) == set(ids)
    assert found["s149"].first_seen_ms == NOW + 149


def test_a_missed_fire_is_recorded_once(state):
    assert state.record_missed("daily@2026-12-01T0800", "daily", NOW, NOW + 90 * 60_000) is True
    assert state.record_missed("daily@2026-12-01T0800", "daily", NOW, NOW + 91 * 60_000) is False
    assert state.record_missed("daily@2026-12-02T0800", "daily", NOW + 86_400_000, NOW + 86_400_000) is True


def test_the_missed_item_expires_with_the_retention_and_stays_out_of_the_indexes():
    with mock_aws():
        env = provision(prefix="sweep-state")
        ddb = boto3.client("dynamodb")
        DynamoSweepState(ddb, env["LEDGER_TABLE"], retention_days=7).record_missed("daily@2026-12-01T0800", "daily", NOW, NOW)
        item = ddb.get_item(TableName=env["LEDGER_TABLE"],
                            Key={"pk": {"S": "MISSED#daily@2026-12-01T0800"}, "sk": {"S": "META"}})["Item"]
        assert int(item["expiresAt"]["N"]) == NOW // 1000 + 7 * 86_400
        assert item["scheduleId"] == {"S": "daily"} and int(item["fireAt"]["N"]) == NOW
        assert not any(k.endswith(("Pk", "Sk")) for k in item)
