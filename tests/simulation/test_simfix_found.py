"""Deterministic scenarios of the last violations ``make sim`` found (issue 20: each bug the
simulation found gets a scenario test that fails when its fix is reverted; seed replays drift).

Each test builds the one history the seed stumbled on, step by step, through the real services."""

from __future__ import annotations

import json

from jobs_support import PLAN, TARGET, cancel, jobs_runtime, post_job, task
from test_jobs_sim_found import LosingChannel, _take

from pixivflow.services.delivery import deliver_message
from pixivflow.services.engine import LEASE_TTL_MS
from pixivflow.services.execution import execute_cell

SLOT = f"{PLAN}@manual-job-key-1"


def test_a_row_written_between_a_cancels_read_and_its_commit_still_ends_unposted(make_runtime, monkeypatch):
    """Seed 738: an executor frozen past its lease wrote its delivery row after the consumer's cancel
    had read the job and before the cancel committed. The commit (conditioned on what it read) did
    not cover the row, the cancel closed the slot (no live lease: no executor could still write),
    and the executor's move to delivery_pending was refused. The row stayed ``pending`` behind a
    failed cell of a closed slot forever: no message, not indexed, the sweep blind to it (spec
    §13.7). The refused executor now indexes and sends its rows; the deliverer dead-letters them
    unposted (no post after a committed cancel)."""
    channel = LosingChannel(lose=0)  # takes every post, loses no answer
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    assert post_job(rt, task())[0] == 202
    _take(rt, "EXECUTION_QUEUE_URL")
    ledger = rt.engine.ledger
    real_put, real_load = ledger.put_intent, ledger.load
    answers = []

    def frozen_then_cancelled_around_the_write(intent):
        rt.clock.advance(LEASE_TTL_MS + 1_000)  # the executor froze: its lease lapsed meanwhile
        read_before_the_row = real_load(SLOT)  # the cancel's read
        stored = real_put(intent)  # the executor's row lands
        first = iter([read_before_the_row])
        monkeypatch.setattr(ledger, "load", lambda slot_id: next(first, None) or real_load(slot_id))
        answers.append(cancel(rt, SLOT))  # ... and the cancel commits what it read
        monkeypatch.setattr(ledger, "load", real_load)
        return stored

    monkeypatch.setattr(ledger, "put_intent", frozen_then_cancelled_around_the_write)
    execute_cell(rt.engine, SLOT, TARGET)
    monkeypatch.setattr(ledger, "put_intent", real_put)

    [(status, job)] = answers
    assert (status, job["status"]) == (200, "cancelled")
    state = ledger.load(SLOT)
    assert not state.slot.open  # the cancel closed the slot: only the due index can find the row now
    [cell] = state.snapshot_cells()
    assert (cell.status, cell.terminal_reason_code) == ("failed", "cancelled_by_consumer")
    [row] = state.intents
    assert row.outbox_status == "pending"
    due = ledger.due_intents(rt.clock.now_ms())
    assert [ledger.get_intent_by_key(pk, sk).idempotency_key for pk, sk in due] == [row.idempotency_key], due

    bodies = [json.loads(b) for b in _take(rt, "OUTBOX_QUEUE_URL")]
    assert [b["key"] for b in bodies] == [row.idempotency_key]  # the refused executor sent it
    for b in bodies:
        deliver_message(rt.engine, b["kind"], b["key"])
    [row] = ledger.load(SLOT).intents
    assert row.outbox_status not in ("pending", "retry_wait", "processing"), row.outbox_status
    assert (row.outbox_status, row.attempts) == ("dead", 1)  # dead-lettered by the claiming worker
    assert channel.posts == [], "nothing was posted after the committed cancel"
