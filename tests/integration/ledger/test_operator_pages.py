"""OperatorPages (``pixivflow.ports.OperatorPages``): the operator page's lists, each one page of an
index at a time (JobsByCreated, SlotsByCreated, FailedCells), and the reindex of items written before
each index existed.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import T0, Env, admitted, dead_row, make_intent, make_slot

from pixivflow.adapters.dynamo_ledger import slot_pk

env = ledger_env.env


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
    heads = env.ledger.slot_heads(["morning-tokyo@manual-job-0001", "morning-tokyo@manual-gone"])
    assert [(h.slot.slot_id, h.cells) for h in heads] == [("morning-tokyo@manual-job-0001", {})]  # never claimed: no cell item


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
    row = dead_row(env, make_intent(slot.slot_id, "landscape", "2002"), T0 + 50)
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


# -- the occurrence list (SlotsByCreated) ---------------------------------------------------------


def test_slots_are_paged_newest_first_from_their_index_and_read_with_their_cells(env: Env) -> None:
    from conftest import claim

    for n in range(4):
        admitted(env, make_slot(f"morning-tokyo@2026-12-0{n + 1}T0800", created_at=T0 + n * 1_000))
    env.ledger.create_slot(make_slot("evening-berlin@2026-12-01T1930", created_at=T0 - 500))
    assert claim(env.ledger, "morning-tokyo@2026-12-04T0800", "cats", "exec-a", T0 + 5_000) is not None
    ids, cursor = env.ledger.slot_page(2)
    assert ids == ["morning-tokyo@2026-12-04T0800", "morning-tokyo@2026-12-03T0800"] and cursor is not None
    ids, cursor = env.ledger.slot_page(2, cursor)
    assert ids == ["morning-tokyo@2026-12-02T0800", "morning-tokyo@2026-12-01T0800"]
    rest, cursor = env.ledger.slot_page(2, cursor)
    assert rest == ["evening-berlin@2026-12-01T1930"] and cursor is None
    assert env.ledger.slot_page(10, schedule_id="evening-berlin")[0] == ["evening-berlin@2026-12-01T1930"]
    assert env.ledger.slot_page(10, since_ms=T0 + 2_000)[0] == ["morning-tokyo@2026-12-04T0800", "morning-tokyo@2026-12-03T0800"]
    filtered, cursor = env.ledger.slot_page(1, schedule_id="evening-berlin")
    assert filtered == [] and cursor is not None  # the page read one entry, which did not match
    [latest, gone, berlin] = env.ledger.slot_heads(["morning-tokyo@2026-12-04T0800", "nope@x",
                                                    "evening-berlin@2026-12-01T1930"]) + [None]
    assert latest.slot.slot_id == "morning-tokyo@2026-12-04T0800" and latest.cells["cats"].lease_owner == "exec-a"
    assert gone.slot.slot_id == "evening-berlin@2026-12-01T1930" and gone.cells == {} and berlin is None


def test_slots_written_before_the_index_are_put_into_it_once(env: Env) -> None:
    slot = admitted(env)
    env.client.update_item(TableName=env.table, Key={"pk": {"S": slot_pk(slot.slot_id)}, "sk": {"S": "META"}},
                           UpdateExpression="REMOVE slotsPk, slotsSk")  # as a slot written before the index
    assert env.ledger.slot_page(10) == ([], None)
    assert env.ledger.index_slots() == 1
    assert env.ledger.index_slots() == 0  # idempotent
    assert env.ledger.slot_page(10) == ([slot.slot_id], None)


# -- the dead letters (DeadRows) --------------------------------------------------------------------


def test_every_dead_row_is_listed_newest_first_until_a_redrive_re_arms_it(env: Env) -> None:
    from dataclasses import replace

    from pixivflow.adapters.outbox_rows import DynamoOutboxRows
    from pixivflow.domain.outbox import OutboxRow

    slot = admitted(env)
    settled = dead_row(env, make_intent(slot.slot_id, "cats", "1001"), T0)  # died at T0 + 1
    recorded, _ = env.ledger.put_intent(replace(make_intent(slot.slot_id, "landscape", "2002"), status="failed",
                                                outbox_status="dead", updated_at=T0 + 5))  # recorded dead, never sent
    env.ledger.put_intent(make_intent(slot.slot_id, "novels", "3003"))  # pending: not dead
    rows = DynamoOutboxRows(env.client, env.table)
    notice = OutboxRow(kind="notification", key="notification:x:summary", target="review", payload={"text": "t"},
                       next_attempt_at=T0, created_at=T0, updated_at=T0, max_attempts=3)
    rows.enqueue(notice)
    rows.settle(rows.claim(rows.get("notification", notice.key), "w1", T0 + 9, 120_000), "w1", T0 + 10, status="dead",
                error="remote_4xx: HTTP 410")

    keys, cursor = env.ledger.dead_page(10)
    assert cursor is None and len(keys) == 3
    heads = env.ledger.dead_heads(keys)
    assert [getattr(r, "idempotency_key", None) or r.key for r in heads] == [
        notice.key, recorded.idempotency_key, settled.idempotency_key]
    first, cursor = env.ledger.dead_page(2)
    assert first == keys[:2] and cursor is not None
    assert env.ledger.dead_page(2, cursor)[0] == keys[2:]

    assert env.ledger.redrive_intent(settled, T0 + 20) is not None  # re-armed: off the list
    assert rows.redrive(rows.get("notification", notice.key), T0 + 21) is not None
    still_dead, _ = env.ledger.dead_page(10)
    assert still_dead == keys[1:2]  # the index holds only what is dead: a page reads no stale entry
    assert env.ledger.dead_heads(still_dead) == [env.ledger.get_intent(slot.slot_id, "landscape", "review", "illustration",
                                                                       "2002")]
    assert env.ledger.dead_heads(keys) == heads[1:2]  # a key read after its row was re-armed is left out
