"""The JobStore port's contract, run against its DynamoDB adapter (on moto and on the twins) and
against its in-memory implementation: the same conditions and the same atomicity everywhere. A
job's callback rows are ``event_callback`` OutboxRows: written with their event here, then read,
claimed and settled through the one OutboxRows adapter (``store.rows``)."""

from __future__ import annotations

import pytest
from moto import mock_aws

from pixivflow import aws
from pixivflow.adapters.dynamo_ledger import DynamoLedger
from pixivflow.adapters.job_store import DynamoJobStore
from pixivflow.local.memory_job_store import InMemoryJobStore
from pixivflow.local.provision import provision
from pixivflow.local.twins import TwinCloud
from pixivflow.domain.event_stream import AppendResult, StoredEvent
from pixivflow.domain.outbox import OutboxRow

JOB = "plan@manual-k"


@pytest.fixture(params=["moto", "twin", "memory"])
def store(request):
    if request.param == "memory":
        yield InMemoryJobStore()
        return
    with (mock_aws() if request.param == "moto" else TwinCloud()):
        env = provision(prefix="jobstore")
        client = aws.client("dynamodb")
        yield DynamoJobStore(client, env["LEDGER_TABLE"])


def ev(kind, seq, ts, job=JOB, url=None):
    return StoredEvent(job, kind, seq, ts, url)


def row(key, job=JOB, due=0):
    return OutboxRow(kind="event_callback", key=key, slot_id=job, target="https://consumer.example/cb",
                     payload={"event": {"event_id": key}}, max_attempts=8, next_attempt_at=due, created_at=due, updated_at=due)


def test_events_append_on_the_head_they_were_computed_from(store):
    assert store.stream(JOB).events == () and store.stream(JOB).head_seq == 0
    assert store.append(ev("job.requested", 1, 100), expected_head=0) == AppendResult.APPENDED
    # a second writer that read the empty stream loses the head race and writes nothing
    assert store.append(ev("job.execution_started", 1, 150), expected_head=0) == AppendResult.HEAD_MOVED
    assert store.append(ev("job.execution_started", 2, 150), expected_head=1) == AppendResult.APPENDED
    stream = store.stream(JOB)
    assert [(e.kind, e.seq, e.ts) for e in stream.events] == [("job.requested", 1, 100), ("job.execution_started", 2, 150)]
    assert (stream.head_seq, stream.head_ts, stream.cursor) == (2, 150, None)
    with pytest.raises(ValueError):
        store.append(ev("job.outcome_failed", 5, 200), expected_head=2)


def test_a_lifecycle_kind_exists_at_most_once_but_progress_repeats(store):
    store.append(ev("job.requested", 1, 100), expected_head=0)
    assert store.append(ev("job.requested", 2, 100), expected_head=1) == AppendResult.EXISTS
    assert store.stream(JOB).head_seq == 1
    assert store.append(ev("job.progressed", 2, 110), expected_head=1) == AppendResult.APPENDED
    assert store.append(ev("job.progressed", 3, 120), expected_head=2) == AppendResult.APPENDED
    assert [e.kind for e in store.stream(JOB).events] == ["job.requested", "job.progressed", "job.progressed"]


def test_an_event_and_its_callback_row_are_written_together_or_not_at_all(store):
    assert store.append(ev("job.requested", 1, 100, url="https://consumer.example/cb"), expected_head=0,
                        callback=row("job-event:k:evt-100-1"), open_callback_since=100) == AppendResult.APPENDED
    stored = store.rows.get("event_callback", "job-event:k:evt-100-1")
    assert (stored.status, stored.attempts, stored.max_attempts, stored.target, stored.payload, stored.slot_id) == (
        "pending", 0, 8, "https://consumer.example/cb", {"event": {"event_id": "job-event:k:evt-100-1"}}, JOB)
    assert store.stream(JOB).events[0].callback_url == "https://consumer.example/cb"
    # the row of the next event already exists (say, a replayed step): the event is not written either
    store.append(ev("job.progressed", 2, 110), expected_head=1, callback=row("job-event:k:evt-110-2"))
    before = store.stream(JOB)
    assert store.append(ev("job.progressed", 3, 120), expected_head=2, callback=row("job-event:k:evt-110-2")) != AppendResult.APPENDED
    assert store.stream(JOB) == before


def test_the_open_callback_index_holds_jobs_until_their_terminal_event(store):
    for n, job in enumerate(("a@manual-1", "b@manual-2", "c@manual-3")):
        store.append(ev("job.requested", 1, 100 + n, job=job, url="https://consumer.example/cb"), expected_head=0,
                     open_callback_since=100 + n)
    store.append(ev("job.requested", 1, 50, job="quiet@manual-4"), expected_head=0)  # no callback: never indexed
    assert store.open_callbacks(50) == ["c@manual-3", "b@manual-2", "a@manual-1"]  # newest first
    assert store.open_callbacks(2) == ["c@manual-3", "b@manual-2"]
    store.append(ev("job.outcome_succeeded", 2, 200, job="b@manual-2"), expected_head=1, close_callback_index=True)
    assert store.open_callbacks(50) == ["c@manual-3", "a@manual-1"]


def test_the_ack_cursor_only_moves_forward(store):
    assert store.advance_cursor(JOB, (100, 2), 1) == (100, 2)
    assert store.advance_cursor(JOB, (100, 1), 2) == (100, 2)
    assert store.advance_cursor(JOB, (90, 7), 3) == (100, 2)
    assert store.advance_cursor(JOB, (100, 2), 4) == (100, 2)
    assert store.advance_cursor(JOB, (101, 1), 5) == (101, 1)
    assert store.stream(JOB).cursor == (101, 1)
    assert store.stream("other@manual-x").cursor is None


def test_callback_rows_are_claimed_under_a_lease_counted_at_claim_and_settled_by_their_holder(store):
    key = "job-event:k:evt-100-1"
    rows = store.rows
    store.append(ev("job.requested", 1, 100, url="https://consumer.example/cb"), expected_head=0, callback=row(key, due=100))
    pending = rows.get("event_callback", key)
    claimed = rows.claim(pending, "w1", 100, 120_000)
    # the claim is the attempt's start: it is counted there, not when (if ever) it is settled
    assert (claimed.status, claimed.lease_owner, claimed.lease_until, claimed.attempts) == ("processing", "w1", 120_100, 1)
    assert rows.claim(pending, "w2", 200, 120_000) is None  # held
    assert rows.settle(claimed, "w2", 300, status="done") is None  # not the holder
    retry = rows.settle(claimed, "w1", 300, status="retry_wait", error="HTTP 503", next_attempt_at=30_300)
    assert (retry.status, retry.attempts, retry.next_attempt_at, retry.last_error, retry.lease_owner) == (
        "retry_wait", 1, 30_300, "HTTP 503", None)
    assert rows.claim(retry, "w2", 1_000, 120_000) is None  # not due yet
    again = rows.claim(retry, "w2", 30_300, 120_000)
    assert again is not None and again.attempts == 2
    # its worker died: the lease expires and another one takes the row over; the dead worker's
    # attempt stays used
    taken = rows.claim(again, "w3", 30_300 + 120_000, 120_000)
    assert (taken.lease_owner, taken.attempts) == ("w3", 3)
    done = rows.settle(taken, "w3", 200_000, status="done")
    assert (done.status, done.attempts, done.last_error, done.completed_at) == ("done", 3, None, 200_000)
    assert rows.claim(done, "w4", 10**13, 120_000) is None  # done is final


def test_a_released_callback_row_gets_its_attempt_back(store):
    key = "job-event:k:evt-100-1"
    store.append(ev("job.requested", 1, 100, url="https://consumer.example/cb"), expected_head=0, callback=row(key, due=100))
    claimed = store.rows.claim(store.rows.get("event_callback", key), "w1", 100, 120_000)
    assert store.rows.release(claimed, "w2", 200, 300) is None  # only the holder releases
    released = store.rows.release(claimed, "w1", 200, 30_200)
    assert (released.status, released.attempts, released.next_attempt_at, released.lease_owner) == ("pending", 0, 30_200, None)


def test_dead_callback_rows_and_the_conditional_redrive(store):
    """Operator tooling (issue 12): dead rows are listed with every other kind, and only a dead row is re-armed."""
    keys = ["job-event:k:evt-100-1", "job-event:k:evt-150-2"]
    rows = store.rows
    store.append(ev("job.requested", 1, 100, url="https://consumer.example/cb"), expected_head=0, callback=row(keys[0], due=100))
    store.append(ev("job.execution_started", 2, 150), expected_head=1, callback=row(keys[1], due=150))
    for key, at in zip(keys, (100, 150)):
        claimed = rows.claim(rows.get("event_callback", key), "w1", at, 120_000)
        assert rows.settle(claimed, "w1", at + 1, status="dead", error="HTTP 404").status == "dead"
    assert [(r.kind, r.key, r.status, r.last_error) for r in rows.dead_rows()] == [
        ("event_callback", keys[1], "dead", "HTTP 404"), ("event_callback", keys[0], "dead", "HTTP 404")]
    again = rows.redrive(rows.get("event_callback", keys[0]), 5_000)
    assert (again.status, again.attempts, again.next_attempt_at, again.completed_at) == ("retry_wait", 0, 5_000, None)
    assert rows.redrive(again, 6_000) is None  # not dead any more: refused
    assert rows.redrive(row("job-event:k:evt-999-9"), 6_000) is None  # no such row
    assert [r.key for r in rows.dead_rows()] == [keys[1]]
    taken = rows.claim(again, "w2", 5_000, 120_000)
    assert taken is not None and taken.status == "processing"


@pytest.mark.parametrize("backend", ["moto", "twin"])
def test_internal_events_in_the_partition_are_not_part_of_the_stream(backend):
    with (mock_aws() if backend == "moto" else TwinCloud()):
        env = provision(prefix="jobstore")
        client = aws.client("dynamodb")
        store = DynamoJobStore(client, env["LEDGER_TABLE"])
        _internal_events_are_ignored(store, DynamoLedger(client, env["LEDGER_TABLE"]))


def _internal_events_are_ignored(store, ledger):
    ledger.put_event_once(JOB, "execution.summary", {"summary": {}}, 100)
    store.append(ev("job.requested", 1, 100), expected_head=0)
    assert [e.kind for e in store.stream(JOB).events] == ["job.requested"]
