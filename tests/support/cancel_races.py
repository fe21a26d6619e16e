"""A consumer's cancel racing an executor frozen past its lease (make sim's seed 738): the history up
to the cancel's close, which the jobs tests (the row still ends unposted) and the sweep's (the due
index leads the sweep to the row) replay step by step through the real services."""

from __future__ import annotations

from pixivflow.services.timing import LEASE_TTL_MS
from pixivflow.services.execution import execute_cell
from support.jobs import PLAN, TARGET, LosingChannel, cancel, jobs_runtime, post_job, task
from support.queues import take

SLOT = f"{PLAN}@manual-job-key-1"


def job_taken_by_its_executor(make_runtime):
    """A job admitted and its execution message taken: the test then runs the executor by hand."""
    channel = LosingChannel(lose=0)  # takes every post, loses no answer
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    assert post_job(rt, task())[0] == 202
    take(rt, "EXECUTION_QUEUE_URL")
    return rt, channel


def closed_with_its_pending_row_in_the_due_index(rt, answers):
    """The cancel answered ``cancelled`` and closed the slot; its one row is pending, and only the
    due index (the sweep's way to a closed slot's row, spec §13.7) can find it. Returns the row."""
    [(status, job)] = answers
    assert (status, job["status"]) == (200, "cancelled")
    ledger = rt.wiring.ledger
    state = ledger.load(SLOT)
    assert not state.slot.open
    [row] = state.intents
    assert row.outbox_status == "pending"
    due = ledger.due_intents(rt.clock.now_ms())
    assert [ledger.get_intent_by_key(pk, sk).idempotency_key for pk, sk in due] == [row.idempotency_key], due
    return state, row


def row_landed_after_the_closers_last_read(make_runtime, monkeypatch):
    """The race up to the close: the executor (frozen past its lease) writes its row after every read
    of the cancel's closing rollup, and before the slot leaves ActiveSlots. Returns the runtime, the
    channel and the cancel's answers."""
    rt, channel = job_taken_by_its_executor(make_runtime)
    ledger = rt.wiring.ledger
    real_put, real_leave = ledger.put_intent, ledger.leave_active_index
    answers, stored = [], []

    def frozen_through_the_whole_cancel(intent):
        rt.clock.advance(LEASE_TTL_MS + 1_000)  # the executor froze: its lease lapsed meanwhile

        def row_lands_then_close(slot_id):
            stored.append(real_put(intent))  # after every read of the closing rollup
            return real_leave(slot_id)

        monkeypatch.setattr(ledger, "leave_active_index", row_lands_then_close)
        answers.append(cancel(rt, SLOT))
        monkeypatch.setattr(ledger, "leave_active_index", real_leave)
        return stored[0]

    monkeypatch.setattr(ledger, "put_intent", frozen_through_the_whole_cancel)
    execute_cell(rt.wiring.executions, SLOT, TARGET)
    monkeypatch.setattr(ledger, "put_intent", real_put)
    return rt, channel, answers
