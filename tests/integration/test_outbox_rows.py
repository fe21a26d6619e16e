"""The generic outbox rows port (DESIGN §4 ``OUTBOX#<kind>#<key>`` / ``META``; spec §10.4), on
DynamoDB (moto, table from template.yaml) and in memory: one contract, both implementations."""

from __future__ import annotations

import pytest
from moto import mock_aws

from pixivflow.adapters.outbox_rows import DynamoOutboxRows, MemoryOutboxRows
from pixivflow.domain.outbox import OutboxRow

T0 = 1_796_000_000_000
LEASE = 120_000


@pytest.fixture(params=["dynamo", "memory"])
def rows(request):
    if request.param == "memory":
        yield MemoryOutboxRows()
        return
    with mock_aws():
        import boto3

        from pixivflow.local.provision import provision

        env = provision(prefix="rows-test")
        yield DynamoOutboxRows(boto3.client("dynamodb"), env["LEDGER_TABLE"])


def row(key="notification:s1:summary", kind="notification", **kw):
    base = dict(kind=kind, key=key, target="bot1-submit", payload={"scheduleOutcome": {"slot_id": "s1"}, "text": "猫"},
                next_attempt_at=T0, created_at=T0, updated_at=T0)
    base.update(kw)
    return OutboxRow(**base)


def test_enqueue_is_insert_if_absent_the_first_row_wins(rows):
    stored, created = rows.enqueue(row())
    assert created and stored.status == "pending"
    again, created = rows.enqueue(row(target="other", payload={"text": "second"}))
    assert not created and again.target == "bot1-submit" and again.payload["text"] == "猫"
    got = rows.get("notification", "notification:s1:summary")
    assert (got.kind, got.key, got.payload, got.attempts, got.max_attempts) == (
        "notification", "notification:s1:summary", {"scheduleOutcome": {"slot_id": "s1"}, "text": "猫"}, 0, 12)
    assert rows.get("event_callback", "notification:s1:summary") is None  # (kind, key) is the identity


def test_claim_settle_and_the_lease(rows):
    rows.enqueue(row())
    r = rows.get("notification", "notification:s1:summary")
    assert rows.claim(r, "w1", T0 - 1, LEASE) is None  # not due yet
    claimed = rows.claim(r, "w1", T0, LEASE)
    assert (claimed.status, claimed.lease_owner, claimed.lease_until) == ("processing", "w1", T0 + LEASE)
    assert rows.claim(r, "w2", T0 + 1000, LEASE) is None  # held by w1
    assert rows.settle(claimed, "w2", T0 + 1000, status="done") is None  # only the holder settles
    retry = rows.settle(claimed, "w1", T0 + 1000, status="retry_wait", error="remote_5xx: HTTP 503", next_attempt_at=T0 + 31_000)
    assert (retry.status, retry.attempts, retry.next_attempt_at, retry.lease_owner) == ("retry_wait", 1, T0 + 31_000, None)
    assert rows.due(T0 + 30_000) == [] and rows.due(T0 + 31_000) == [("notification", "notification:s1:summary")]
    again = rows.claim(retry, "w3", T0 + 31_000, LEASE)
    done = rows.settle(again, "w3", T0 + 32_000, status="done")
    assert (done.status, done.attempts, done.last_error, done.completed_at) == ("done", 2, None, T0 + 32_000)
    assert rows.due(T0 + 10**9) == []  # a terminal row leaves the due index
    assert rows.claim(done, "w4", T0 + 10**9, LEASE) is None


def test_an_expired_processing_lease_can_be_claimed_again(rows):
    rows.enqueue(row())
    first = rows.claim(rows.get("notification", "notification:s1:summary"), "dead-worker", T0, LEASE)
    assert rows.claim(first, "w2", T0 + LEASE - 1, LEASE) is None
    second = rows.claim(first, "w2", T0 + LEASE, LEASE)
    assert second.lease_owner == "w2"
    assert rows.settle(first, "dead-worker", T0 + LEASE + 1, status="done") is None  # the zombie cannot settle


def test_release_gives_the_row_back_without_an_attempt(rows):
    rows.enqueue(row())
    claimed = rows.claim(rows.get("notification", "notification:s1:summary"), "w1", T0, LEASE)
    released = rows.release(claimed, "w1", T0 + 10, T0 + 60_000)
    assert (released.status, released.attempts, released.next_attempt_at, released.lease_owner) == ("pending", 0, T0 + 60_000, None)
    assert rows.due(T0 + 59_999) == [] and len(rows.due(T0 + 60_000)) == 1


def test_dead_rows_are_revived_only_when_asked(rows):
    rows.enqueue(row())
    claimed = rows.claim(rows.get("notification", "notification:s1:summary"), "w1", T0, LEASE)
    dead = rows.settle(claimed, "w1", T0 + 5, status="dead", error="remote_4xx: HTTP 404")
    assert dead.status == "dead"
    same, created = rows.enqueue(row(next_attempt_at=T0 + 100))
    assert not created and same.status == "dead"  # a repair never re-sends a dead notification
    revived, created = rows.enqueue(row(next_attempt_at=T0 + 100, updated_at=T0 + 100), revive=True)
    assert not created and (revived.status, revived.attempts, revived.last_error, revived.next_attempt_at) == (
        "pending", 0, None, T0 + 100)
    assert rows.due(T0 + 100) == [("notification", "notification:s1:summary")]


def test_settling_actionable_needs_a_time(rows):
    rows.enqueue(row())
    claimed = rows.claim(rows.get("notification", "notification:s1:summary"), "w1", T0, LEASE)
    with pytest.raises(ValueError):
        rows.settle(claimed, "w1", T0, status="retry_wait")


def test_due_rows_of_many_keys_and_kinds(rows):
    for n in range(12):
        rows.enqueue(row(key=f"notification:s{n}:summary", next_attempt_at=T0 + n))
    rows.enqueue(row(kind="event_callback", key="job-event:j1:e1", target="https://cb.example/hook", next_attempt_at=T0))
    due = rows.due(T0 + 5)
    assert sorted(due) == sorted([("notification", f"notification:s{n}:summary") for n in range(6)]
                                 + [("event_callback", "job-event:j1:e1")])


def test_dynamo_rows_live_in_their_own_partitions_and_index_shards():
    with mock_aws():
        import boto3

        from pixivflow.adapters.dynamo_ledger import DynamoLedger
        from pixivflow.local.provision import provision

        env = provision(prefix="rows-test")
        ddb = boto3.client("dynamodb")
        rows = DynamoOutboxRows(ddb, env["LEDGER_TABLE"])
        rows.enqueue(row())
        item = ddb.get_item(TableName=env["LEDGER_TABLE"],
                            Key={"pk": {"S": "OUTBOX#notification#notification:s1:summary"}, "sk": {"S": "META"}})["Item"]
        assert item["entity"]["S"] == "outbox" and item["status"]["S"] == "pending"
        assert item["duePk"]["S"].startswith("ODUE#")
        # the intents' due scan never sees these rows
        assert DynamoLedger(ddb, env["LEDGER_TABLE"]).due_intents(T0 + 10**9) == []


def _dead(rows, key="notification:s1:summary", at=T0):
    rows.enqueue(row(key=key, next_attempt_at=at, created_at=at, updated_at=at))
    claimed = rows.claim(rows.get("notification", key), "w1", at, LEASE)
    return rows.settle(claimed, "w1", at + 1, status="dead", error="remote_4xx: HTTP 404")


def test_dead_rows_and_the_operator_redrive_is_conditional(rows):
    old = _dead(rows, "notification:s1:summary", T0)
    new = _dead(rows, "notification:s2:summary", T0 + 10)
    rows.enqueue(row(key="notification:s3:summary"))  # pending: not dead
    assert [(r.key, r.status, r.last_error) for r in rows.dead_rows()] == [
        (new.key, "dead", "remote_4xx: HTTP 404"), (old.key, "dead", "remote_4xx: HTTP 404")]
    assert rows.due(T0 + 10**9) == [("notification", "notification:s3:summary")]
    again = rows.redrive(old, T0 + 500)
    assert (again.status, again.attempts, again.next_attempt_at, again.completed_at, again.last_error) == (
        "retry_wait", 0, T0 + 500, None, "remote_4xx: HTTP 404")
    assert ("notification", old.key) in rows.due(T0 + 500)
    assert rows.redrive(old, T0 + 600) is None  # not dead any more
    assert rows.redrive(rows.get("notification", "notification:s3:summary"), T0) is None  # pending: refused
    assert [r.key for r in rows.dead_rows()] == [new.key]
    claimed = rows.claim(again, "w2", T0 + 500, LEASE)
    assert claimed is not None and claimed.status == "processing"
