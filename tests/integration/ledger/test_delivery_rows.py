"""DeliveryRows (``pixivflow.ports.DeliveryRows``): a cell's delivery intents, each its own outbox row:
recorded once, claimed under a lease, settled by the lease holder, found when due.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import OUTBOX_LEASE_MS, T0, Env, admitted, make_intent

from pixivflow.adapters.dynamo_ledger import slot_pk
from pixivflow.domain.model import LedgerStatus, OutboxStatus

env = ledger_env.env


def test_put_intent_is_insert_if_absent_and_returns_the_existing_row(env: Env) -> None:
    slot = admitted(env)
    first, created = env.ledger.put_intent(make_intent(slot.slot_id))
    assert created is True
    again = make_intent(slot.slot_id, next_attempt_at=T0 + 99_000)
    again.payload = {"work": {"id": "1001", "title": "changed"}}
    stored, created2 = env.ledger.put_intent(again)
    assert created2 is False
    assert stored.next_attempt_at == T0 and stored.payload == {"work": {"id": "1001", "title": "cat"}}
    assert len(env.ledger.load(slot.slot_id).intents) == 1


def test_claim_intent_once_and_reclaim_only_after_the_lease_expires(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    a = env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    assert a is not None and a.outbox_status == "processing" and a.lease_owner == "dlv-a"
    assert a.lease_until == T0 + OUTBOX_LEASE_MS
    assert env.ledger.claim_intent(intent, "dlv-b", T0 + 1, OUTBOX_LEASE_MS) is None
    assert env.ledger.claim_intent(intent, "dlv-b", T0 + OUTBOX_LEASE_MS - 1, OUTBOX_LEASE_MS) is None
    b = env.ledger.claim_intent(intent, "dlv-b", T0 + OUTBOX_LEASE_MS, OUTBOX_LEASE_MS)
    assert b is not None and b.lease_owner == "dlv-b"
    # the stale owner can no longer settle
    assert env.ledger.settle_intent(intent, "dlv-a", T0 + OUTBOX_LEASE_MS + 1, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE) is None


def test_the_sending_marker_is_set_once_by_the_lease_holder_and_kept_until_an_attempt_saves_its_posts(env: Env) -> None:
    """Issue 23: the Telegram review route marks its row before the first Bot API call. Only the
    lease holder may, only once; a retry that saved what it posted drops it; a redrive clears it."""
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    a = env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    assert env.ledger.mark_intent_sending(a, "dlv-b", T0 + 1) is None  # not the lease holder
    marked = env.ledger.mark_intent_sending(a, "dlv-a", T0 + 1)
    assert marked is not None and marked.sending_at == T0 + 1
    assert env.ledger.mark_intent_sending(a, "dlv-a", T0 + 2) is None  # once: a second worker never posts too
    # a claim taken over after the lease expired finds the marker
    b = env.ledger.claim_intent(intent, "dlv-b", T0 + OUTBOX_LEASE_MS, OUTBOX_LEASE_MS)
    assert b is not None and b.sending_at == T0 + 1
    assert env.ledger.mark_intent_sending(b, "dlv-b", T0 + OUTBOX_LEASE_MS) is None
    # an attempt that saved its posts drops the marker; the progress rides on the row
    saved = env.ledger.settle_intent(b, "dlv-b", T0 + OUTBOX_LEASE_MS + 1, ledger_status=None,
                                     outbox_status=OutboxStatus.RETRY_WAIT, next_attempt_at=T0 + 10**6,
                                     send_progress={"blocks": [{"message_ids": [7]}]}, clear_sending=True)
    assert saved.sending_at is None and saved.send_progress == {"blocks": [{"message_ids": [7]}]}
    # a retry that did not post keeps whatever marker there is (none here) and the saved progress
    c = env.ledger.claim_intent(saved, "dlv-c", T0 + 10**6, OUTBOX_LEASE_MS)
    assert env.ledger.mark_intent_sending(c, "dlv-c", T0 + 10**6) is not None
    dead = env.ledger.settle_intent(c, "dlv-c", T0 + 10**6 + 1, ledger_status=LedgerStatus.FAILED,
                                    outbox_status=OutboxStatus.DEAD, remote_status="uncertain")
    assert dead.sending_at == T0 + 10**6 and dead.remote_status == "uncertain"
    again = env.ledger.redrive_intent(dead, T0 + 10**6 + 2)
    assert again.sending_at is None and again.send_progress is None and again.redrive_count == 1


def test_claim_intent_refuses_a_row_not_yet_due(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id, next_attempt_at=T0 + 60_000))
    assert env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS) is None
    assert env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001").outbox_status == "pending"
    assert env.ledger.claim_intent(intent, "dlv-a", T0 + 60_000, OUTBOX_LEASE_MS) is not None


def test_claim_intent_ignoring_the_due_time_claims_a_future_row(env: Env) -> None:
    """``ignore_due=True`` builds ``((#outboxStatus IN (...))) OR (...)``: DynamoDB rejects the
    redundant parentheses with a ValidationException, so the claim raises LedgerUnavailable."""
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id, next_attempt_at=T0 + 60_000))
    claimed = env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS, ignore_due=True)
    assert claimed is not None and claimed.outbox_status == "processing" and claimed.lease_owner == "dlv-a"


def test_settle_intent_requires_the_lease_owner(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    assert env.ledger.settle_intent(intent, "dlv-b", T0 + 1, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE, remote_id="r-1") is None
    row = env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert row.outbox_status == "processing" and row.status == "pending" and row.attempts == 0
    done = env.ledger.settle_intent(intent, "dlv-a", T0 + 2, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE, remote_id="r-1", remote_status="pending_review")
    assert done is not None
    assert (done.status, done.outbox_status, done.attempts, done.remote_id, done.delivered_at) == (
        "delivered", "done", 1, "r-1", T0 + 2)
    assert done.lease_owner is None
    # done rows leave the due index and can never be claimed again
    assert env.ledger.due_intents(T0 + 10 ** 9) == []
    assert env.ledger.claim_intent(intent, "dlv-c", T0 + 10 ** 9, OUTBOX_LEASE_MS) is None


def test_settle_retry_wait_moves_the_due_time(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.index_due(intent)  # as its slot closes (rollup.rows_outlive_slot)
    env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    row = env.ledger.settle_intent(intent, "dlv-a", T0 + 1, ledger_status=None, outbox_status=OutboxStatus.RETRY_WAIT,
                                   error="503", next_attempt_at=T0 + 60_000)
    assert row.outbox_status == "retry_wait" and row.next_attempt_at == T0 + 60_000 and row.last_error == "503"
    assert env.ledger.due_intents(T0 + 59_999) == []
    assert len(env.ledger.due_intents(T0 + 60_000)) == 1
    assert env.ledger.claim_intent(intent, "dlv-b", T0 + 59_999, OUTBOX_LEASE_MS) is None
    assert env.ledger.claim_intent(intent, "dlv-b", T0 + 60_000, OUTBOX_LEASE_MS) is not None


def test_a_new_row_is_not_indexed_its_open_slot_covers_it(env: Env) -> None:
    """Two index writes less per delivery (issue 14): the sweep finds an open slot's rows through
    the slot; a row enters DueOutbox only when its slot closes with the row still actionable."""
    slot = admitted(env)
    intent, created = env.ledger.put_intent(make_intent(slot.slot_id))
    assert created and "duePk" not in env.raw(slot.slot_id, "DLV#cats#review#illustration#1001")
    assert env.ledger.due_intents(T0 + 10 ** 9) == []
    assert env.ledger.index_due(intent)
    assert env.ledger.due_intents(T0 + 10 ** 9) == [(slot_pk(slot.slot_id), "DLV#cats#review#illustration#1001")]


def test_indexing_a_row_that_moved_since_it_was_read_is_refused(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.claim_intent(intent, "dlv-a", T0 + 5, OUTBOX_LEASE_MS) is not None
    assert not env.ledger.index_due(intent)  # the stale read: pending, but it is processing now
    assert env.ledger.due_intents(T0 + 10 ** 9) == []
    fresh = env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert env.ledger.index_due(fresh)
    done = env.ledger.settle_intent(fresh, "dlv-a", T0 + 6, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE)
    assert done is not None and env.ledger.due_intents(T0 + 10 ** 9) == []  # a settled row leaves the index


def test_due_intents_only_returns_rows_due_at_or_before_the_instant(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    for target, work, due in (("cats", "1", T0), ("landscape", "2", T0 + 60_000), ("cats", "3", T0 + 3_600_000)):
        row, _ = env.ledger.put_intent(make_intent(sid, target, work, next_attempt_at=due))
        assert env.ledger.index_due(row)
    sks = lambda at: sorted(sk for _, sk in env.ledger.due_intents(at))  # noqa: E731
    assert sks(T0 - 1) == []
    assert sks(T0) == ["DLV#cats#review#illustration#1"]
    assert sks(T0 + 59_999) == ["DLV#cats#review#illustration#1"]
    assert sks(T0 + 60_000) == ["DLV#cats#review#illustration#1", "DLV#landscape#review#illustration#2"]
    assert len(sks(T0 + 3_600_000)) == 3
    assert all(pk == slot_pk(sid) for pk, _ in env.ledger.due_intents(T0 + 3_600_000))


def test_a_zombie_deliverers_readiness_release_neither_rearms_the_row_nor_drops_the_new_owners_lease(env: Env) -> None:
    """release_intent (spec §10.4 ``release``): deliverer A's outbox lease lapsed and B claimed the
    row; A's late readiness deferral must be refused, or it would put B's row back to pending,
    strip B's lease and let a third deliverer post it beside B (make mutants found no test of
    this guard)."""
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS) is not None
    b = env.ledger.claim_intent(intent, "dlv-b", T0 + OUTBOX_LEASE_MS, OUTBOX_LEASE_MS)
    assert b is not None and b.lease_owner == "dlv-b"
    assert env.ledger.release_intent(intent, "dlv-a", T0 + OUTBOX_LEASE_MS + 5, T0 + 10**6) is None  # the zombie
    row = env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert (row.outbox_status, row.lease_owner, row.lease_until, row.next_attempt_at) == (
        "processing", "dlv-b", T0 + 2 * OUTBOX_LEASE_MS, T0)
    assert env.ledger.claim_intent(intent, "dlv-c", T0 + OUTBOX_LEASE_MS + 10, OUTBOX_LEASE_MS) is None
    # its holder may defer it: pending again, due later, no attempt consumed
    released = env.ledger.release_intent(b, "dlv-b", T0 + OUTBOX_LEASE_MS + 20, T0 + 10**6)
    assert released is not None
    assert (released.outbox_status, released.lease_owner, released.next_attempt_at, released.attempts) == (
        "pending", None, T0 + 10**6, 0)
    # a row no longer processing (settled done) refuses any release, even by its last holder
    c = env.ledger.claim_intent(released, "dlv-c", T0 + 10**6, OUTBOX_LEASE_MS)
    assert env.ledger.settle_intent(c, "dlv-c", T0 + 10**6 + 1, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE) is not None
    assert env.ledger.release_intent(c, "dlv-c", T0 + 10**6 + 2, T0 + 2 * 10**6) is None
    row = env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert (row.outbox_status, row.status, row.next_attempt_at) == ("done", "delivered", T0 + 10**6)


def test_a_claim_names_its_worker_until_a_settle_and_a_deferral_clears_only_its_own_claim(env: Env) -> None:
    """``Intent.unsettled_claim``: a worker that claims a row may post it and die before recording
    anything, so the row names the first worker of each unsettled stretch. A deferral by that worker
    clears it (it posted nothing); a deferral by a worker that took a lapsed claim over keeps it (the
    first may have posted); a settle records an attempt and ends the stretch."""
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    a = env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    assert (a.unsettled_claim, a.may_be_downstream) == ("dlv-a", True)
    deferred = env.ledger.release_intent(a, "dlv-a", T0 + 1, T0 + 10)
    assert (deferred.outbox_status, deferred.unsettled_claim, deferred.may_be_downstream) == ("pending", None, False)

    a = env.ledger.claim_intent(deferred, "dlv-a", T0 + 10, OUTBOX_LEASE_MS)
    b = env.ledger.claim_intent(a, "dlv-b", T0 + 10 + OUTBOX_LEASE_MS, OUTBOX_LEASE_MS)  # dlv-a's lease lapsed
    assert (b.lease_owner, b.unsettled_claim) == ("dlv-b", "dlv-a")
    deferred = env.ledger.release_intent(b, "dlv-b", T0 + 20 + OUTBOX_LEASE_MS, T0 + 10**6)
    assert (deferred.outbox_status, deferred.attempts, deferred.unsettled_claim, deferred.may_be_downstream) == (
        "pending", 0, "dlv-a", True)

    c = env.ledger.claim_intent(deferred, "dlv-c", T0 + 10**6, OUTBOX_LEASE_MS)
    assert c.unsettled_claim == "dlv-a"
    settled = env.ledger.settle_intent(c, "dlv-c", T0 + 10**6 + 1, ledger_status=None, outbox_status=OutboxStatus.RETRY_WAIT,
                                       next_attempt_at=T0 + 2 * 10**6, error="503")
    assert (settled.attempts, settled.unsettled_claim) == (1, None)
    d = env.ledger.claim_intent(settled, "dlv-d", T0 + 2 * 10**6, OUTBOX_LEASE_MS)
    assert d.unsettled_claim == "dlv-d"  # a new stretch names its own first worker


# -- the methods of the role the suite had no contract test of -------------------------------------


def test_get_intent_by_key_reads_the_row_an_index_entry_names_and_nothing_else(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.index_due(intent)
    [(pk, sk)] = env.ledger.due_intents(T0)
    row = env.ledger.get_intent_by_key(pk, sk)
    assert row == env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert (row.idempotency_key, row.outbox_status, row.payload) == (intent.idempotency_key, "pending", intent.payload)
    # strongly consistent: the claim made right after the index entry was read is seen
    assert env.ledger.claim_intent(row, "dlv-a", T0 + 1, OUTBOX_LEASE_MS) is not None
    assert (env.ledger.get_intent_by_key(pk, sk).outbox_status, env.ledger.get_intent_by_key(pk, sk).lease_owner) == (
        "processing", "dlv-a")
    # a key that names no delivery row: the slot's own item, a cell, an absent row
    assert env.ledger.get_intent_by_key(pk, "META") is None
    assert env.ledger.get_intent_by_key(pk, "CELL#cats") is None
    assert env.ledger.get_intent_by_key(pk, "DLV#cats#review#illustration#9") is None
