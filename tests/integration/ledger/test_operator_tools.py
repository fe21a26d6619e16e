"""OperatorTools (``pixivflow.ports.OperatorTools``): the operator's reads (the CLI and /ui; they scan the
table, never on a hot path) and the conditional redrive of a dead delivery row.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import OUTBOX_LEASE_MS, T0, Env, admitted, make_intent, make_slot

from pixivflow.adapters.dynamo_ledger import slot_pk
from pixivflow.domain.model import Intent, LedgerStatus, OutboxStatus

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


def _dead(env: Env, intent: Intent, at: int) -> Intent:
    stored, _ = env.ledger.put_intent(intent)
    claimed = env.ledger.claim_intent(stored, "dlv-a", at, OUTBOX_LEASE_MS)
    dead = env.ledger.settle_intent(claimed, "dlv-a", at + 1, ledger_status=LedgerStatus.FAILED,
                                    outbox_status=OutboxStatus.DEAD, error="delivery endpoint HTTP 404: gone")
    assert dead is not None and dead.outbox_status == OutboxStatus.DEAD
    return dead


def test_dead_intents_lists_only_dead_rows_newest_first(env: Env) -> None:
    slot = admitted(env)
    old = _dead(env, make_intent(slot.slot_id, "cats", "1001"), T0)
    new = _dead(env, make_intent(slot.slot_id, "landscape", "2002"), T0 + 10)
    env.ledger.put_intent(make_intent(slot.slot_id, "novels", "3003"))  # pending: not dead
    found = env.ledger.dead_intents()
    assert [i.idempotency_key for i in found] == [new.idempotency_key, old.idempotency_key]
    assert (found[0].status, found[0].last_error, found[0].attempts) == ("failed", "delivery endpoint HTTP 404: gone", 1)


def test_redrive_intent_rearms_a_dead_row_once_and_refuses_any_other(env: Env) -> None:
    slot = admitted(env)
    dead = _dead(env, make_intent(slot.slot_id), T0)
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
    dead = _dead(env, make_intent(slot.slot_id, "cats", "1001"), T0)  # last written at T0 + 1
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


def _job(env: Env, n: int, created_at: int):
    from dataclasses import replace

    slot = replace(make_slot(f"morning-tokyo@manual-job-{n:04d}", targets=("cats",), created_at=created_at),
                   trigger_source="manual", manual_request_id=f"job-{n:04d}", params={"query": {"tags": ["cats"]}})
    stored, created = env.ledger.create_slot(slot)
    assert created
    return stored


def test_jobs_are_paged_newest_first_from_their_index_and_their_heads_read_in_batches(env: Env) -> None:
    for n in range(5):
        _job(env, n, T0 + n * 1_000)
    admitted(env)  # a scheduled slot is never a job
    ids, cursor = env.ledger.job_page(2)
    assert ids == ["morning-tokyo@manual-job-0004", "morning-tokyo@manual-job-0003"] and cursor is not None
    ids, cursor = env.ledger.job_page(2, cursor)
    assert ids == ["morning-tokyo@manual-job-0002", "morning-tokyo@manual-job-0001"]
    ids, cursor = env.ledger.job_page(2, cursor)
    assert ids == ["morning-tokyo@manual-job-0000"] and cursor is None
    heads = env.ledger.job_heads(["morning-tokyo@manual-job-0001", "morning-tokyo@manual-gone"])
    assert [(s.slot_id, c) for s, c in heads] == [("morning-tokyo@manual-job-0001", None)]  # never claimed: no cell item


def test_jobs_written_before_the_index_are_put_into_it_once(env: Env) -> None:
    job = _job(env, 7, T0)
    env.client.update_item(TableName=env.table, Key={"pk": {"S": slot_pk(job.slot_id)}, "sk": {"S": "META"}},
                           UpdateExpression="REMOVE jobsPk, jobsSk")  # as a job written before the index
    assert env.ledger.job_page(10) == ([], None)
    assert env.ledger.index_jobs() == 1
    assert env.ledger.index_jobs() == 0  # idempotent
    assert env.ledger.job_page(10) == ([job.slot_id], None)


# -- the Failure Center's index (FailedCells) ----------------------------------------------------


def _fail(env: Env, slot_id: str, target: str, at: int, reason: str = "network_error") -> None:
    from conftest import claim

    assert claim(env.ledger, slot_id, target, "exec-a", at - 10) is not None
    assert env.ledger.move_cell_as_owner(slot_id, target, "failed", at, "exec-a", reason_code=reason,
                                         reason_message="down", last_error="search failed: down")


def test_every_path_that_fails_a_cell_lists_it_newest_first_and_a_page_reads_one_query(env: Env) -> None:
    from pixivflow.domain.failures import FailureEntry

    a = admitted(env, make_slot("morning-tokyo@2026-12-01T0800"))
    b, _ = env.ledger.create_slot(make_slot("evening-berlin@2026-12-01T1930"))  # its cells never written
    from conftest import claim

    assert claim(env.ledger, b.slot_id, "cats", "exec-b", T0) is not None  # cats written by its claim, landscape not
    env.ledger.release_cell(b.slot_id, "cats", "exec-b", T0 + 1)
    assert env.raw(b.slot_id, "CELL#landscape") is None
    _fail(env, a.slot_id, "cats", T0 + 100)  # the executor's own move
    assert env.ledger.terminalise_slot(env.ledger.load(b.slot_id), fail_cells=["cats", "landscape"], guard_cells=[],
                                       slot_status="failed", reason_code="stalled_no_heartbeat", reason_message="stalled",
                                       now_ms=T0 + 200)  # the sweep: one written cell, one never written
    assert "landscape" in env.ledger.load(b.slot_id).cells and env.raw(b.slot_id, "CELL#landscape") is not None
    assert env.ledger.fail_cell_if_unchanged(a.slot_id, "landscape", "pending", T0 + 300, reason_code="queued_too_long",
                                             reason_message="queued")
    everything, cursor = env.ledger.failure_page(10)
    assert cursor is None
    assert everything == [FailureEntry(a.slot_id, "landscape", T0 + 300, "queued_too_long"),
                          FailureEntry(b.slot_id, "landscape", T0 + 200, "stalled_no_heartbeat"),
                          FailureEntry(b.slot_id, "cats", T0 + 200, "stalled_no_heartbeat"),
                          FailureEntry(a.slot_id, "cats", T0 + 100, "network_error")]
    first, cursor = env.ledger.failure_page(2)
    assert first == everything[:2] and cursor is not None
    second, cursor = env.ledger.failure_page(2, cursor)
    assert second == everything[2:]
    # A full last page may or may not carry a cursor (DynamoDB returns one when the Limit was reached):
    # following it reads nothing more.
    assert cursor is None or env.ledger.failure_page(2, cursor) == ([], None)
    # The filters are applied to the entries the page read: fewer rows, the same cursor.
    assert env.ledger.failure_page(10, schedule_id="evening-berlin")[0] == everything[1:3]
    assert env.ledger.failure_page(10, target_id="cats")[0] == [everything[2], everything[3]]
    assert env.ledger.failure_page(10, reason="network_error")[0] == [everything[3]]
    assert env.ledger.failure_page(10, between=(T0 + 150, T0 + 250))[0] == everything[1:3]
    assert env.ledger.failure_page(10, between=(T0 + 301, T0 + 900)) == ([], None)
    filtered, cursor = env.ledger.failure_page(1, reason="network_error")
    assert filtered == [] and cursor is not None  # the page read one entry, which did not match


def test_a_consumers_cancel_is_not_a_listed_failure(env: Env) -> None:
    slot = admitted(env, make_slot(targets=("cats", "landscape")))
    assert env.ledger.cancel_cells(env.ledger.load(slot.slot_id), cells=["cats", "landscape"], intents=[],
                                   slot_status="failed", reason_code="cancelled_by_consumer", reason_message="cancelled",
                                   now_ms=T0 + 5)
    assert {c.status for c in env.ledger.load(slot.slot_id).cells.values()} == {"failed"}
    assert env.ledger.failure_page(10) == ([], None)
    assert env.ledger.index_failures() == 0  # nor listed by the reindex


def test_failure_heads_read_the_cells_their_slots_and_their_rows_in_the_order_given(env: Env) -> None:
    from conftest import claim

    slot = admitted(env)
    _fail(env, slot.slot_id, "cats", T0 + 100)  # failed before it bound a work
    assert claim(env.ledger, slot.slot_id, "landscape", "exec-b", T0) is not None
    assert env.ledger.bind_work(slot.slot_id, "landscape", "2002", "illustration", T0)[0]
    row = _dead(env, make_intent(slot.slot_id, "landscape", "2002"), T0 + 50)
    assert env.ledger.move_cell_as_owner(slot.slot_id, "landscape", "failed", T0 + 101, "exec-b",
                                         reason_code="delivery_abandoned", reason_message="abandoned")
    heads = env.ledger.failure_heads([(slot.slot_id, "landscape"), (slot.slot_id, "cats"), ("gone@x", "cats")],
                                     {"landscape": ["review", "other"], "cats": ["review"]})
    assert [(s.slot_id, c.target_id, c.status, c.work_id) for s, c, _ in heads] == [
        (slot.slot_id, "landscape", "failed", "2002"), (slot.slot_id, "cats", "failed", None)]
    assert [(i.idempotency_key, i.outbox_status) for i in heads[0][2]] == [(row.idempotency_key, "dead")]
    assert heads[1][2] == []  # no work bound: no rows to read


def test_failures_written_before_the_index_are_listed_once(env: Env) -> None:
    slot = admitted(env)
    _fail(env, slot.slot_id, "cats", T0 + 100)
    env.client.update_item(TableName=env.table, Key={"pk": {"S": slot_pk(slot.slot_id)}, "sk": {"S": "CELL#cats"}},
                           UpdateExpression="REMOVE failPk, failSk")  # as a failure written before the index
    assert env.ledger.failure_page(10) == ([], None)
    assert env.ledger.index_failures() == 1
    assert env.ledger.index_failures() == 0  # idempotent
    [entry] = env.ledger.failure_page(10)[0]
    assert (entry.slot_id, entry.target_id, entry.failed_at, entry.reason_code) == (slot.slot_id, "cats", T0 + 100,
                                                                                   "network_error")
