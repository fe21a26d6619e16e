"""Deterministic scenarios of the last violations ``make sim`` found (issue 20: each bug the
simulation found gets a scenario test that fails when its fix is reverted; seed replays drift).

Each test builds the one history the seed stumbled on, step by step, through the real services."""

from __future__ import annotations

import json
import random

from support.jobs import PLAN, TARGET, cancel, jobs_runtime, post_job, task
from support.queues import take
from test_jobs_sim_found import LosingChannel

from pixivflow.services.delivery import deliver_message
from pixivflow.services.engine import LEASE_TTL_MS
from pixivflow.services.execution import execute_cell

SLOT = f"{PLAN}@manual-job-key-1"


def _job_taken_by_its_executor(make_runtime):
    """A job admitted and its execution message taken: the test then runs the executor by hand."""
    channel = LosingChannel(lose=0)  # takes every post, loses no answer
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    assert post_job(rt, task())[0] == 202
    take(rt, "EXECUTION_QUEUE_URL")
    return rt, channel


def _closed_with_its_pending_row_in_the_due_index(rt, answers):
    """The cancel answered ``cancelled`` and closed the slot; its one row is pending, and only the
    due index (the sweep's way to a closed slot's row, spec §13.7) can find it. Returns the row."""
    [(status, job)] = answers
    assert (status, job["status"]) == (200, "cancelled")
    ledger = rt.engine.ledger
    state = ledger.load(SLOT)
    assert not state.slot.open
    [row] = state.intents
    assert row.outbox_status == "pending"
    due = ledger.due_intents(rt.clock.now_ms())
    assert [ledger.get_intent_by_key(pk, sk).idempotency_key for pk, sk in due] == [row.idempotency_key], due
    return state, row


def test_a_row_written_between_a_cancels_read_and_its_commit_still_ends_unposted(make_runtime, monkeypatch):
    """Seed 738: an executor frozen past its lease wrote its delivery row after the consumer's cancel
    had read the job and before the cancel committed. The commit (conditioned on what it read) did
    not cover the row, the cancel closed the slot (no live lease: no executor could still write),
    and the executor's move to delivery_pending was refused. The row stayed ``pending`` behind a
    failed cell of a closed slot forever: no message, not indexed, the sweep blind to it (spec
    §13.7). The refused executor now indexes and sends its rows; the deliverer dead-letters them
    unposted (no post after a committed cancel)."""
    rt, channel = _job_taken_by_its_executor(make_runtime)
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

    state, row = _closed_with_its_pending_row_in_the_due_index(rt, answers)
    [cell] = state.snapshot_cells()
    assert (cell.status, cell.terminal_reason_code) == ("failed", "cancelled_by_consumer")

    bodies = [json.loads(b) for b in take(rt, "OUTBOX_QUEUE_URL")]
    assert [b["key"] for b in bodies] == [row.idempotency_key]  # the refused executor sent it
    for b in bodies:
        deliver_message(rt.engine, b["kind"], b["key"])
    [row] = ledger.load(SLOT).intents
    assert row.outbox_status not in ("pending", "retry_wait", "processing"), row.outbox_status
    assert (row.outbox_status, row.attempts) == ("dead", 1)  # dead-lettered by the claiming worker
    assert channel.posts == [], "nothing was posted after the committed cancel"



def row_landed_after_the_closers_last_read(make_runtime, monkeypatch):
    """The race of the test below, up to the close: the executor (frozen past its lease) writes its
    row after every read of the cancel's closing rollup, and before the slot leaves ActiveSlots.
    Returns the runtime, the channel and the cancel's answers."""
    rt, channel = _job_taken_by_its_executor(make_runtime)
    ledger = rt.engine.ledger
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
    execute_cell(rt.engine, SLOT, TARGET)
    monkeypatch.setattr(ledger, "put_intent", real_put)
    return rt, channel, answers


def test_a_row_written_after_the_closers_last_read_is_indexed_by_its_refused_executor(make_runtime, monkeypatch):
    """The same race, one step later: the executor's row lands after the cancel's rollup read the
    slot for the last time (so ``rows_outlive_slot`` indexed nothing) and before it left
    ActiveSlots. Only the refused executor's ``index_due`` (mutant execution-ended-cell-rows-indexed)
    then puts the row where the sweep finds it once the slot is closed (spec §13.7)."""
    rt, channel, answers = row_landed_after_the_closers_last_read(make_runtime, monkeypatch)
    take(rt, "OUTBOX_QUEUE_URL")  # the executor's messages are lost: the index must find the row
    _closed_with_its_pending_row_in_the_due_index(rt, answers)
    assert channel.posts == []

class _Twin:
    """A client that records the requests that reached it."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def put_item(self, **kw):
        self.calls.append(kw["n"])
        return {}


def test_an_invocation_frozen_past_its_function_timeout_dies_at_its_next_step():
    """Seeds 158 and 738 (make sim, 1,000 seeds): a sweep froze for 162 s between logging a slot's
    ``schedule.outcome`` and closing the slot, and an executor for 210 s between storing a work and
    writing its delivery row; both then carried on. The product's "its writer is dead by now" rules
    (an outcome record still open after a minute is orphaned, spec §13.18; no executor outlives its
    lease) rest on Lambda killing an invocation at its timeout (60 s here), so the deliverer that
    logged the record again and the cancel that closed the slot were right. The baton now kills
    an invocation at the first step past its deadline, as Lambda would: nothing after it runs."""
    from baton import Baton, SteppedClient
    from world import FUNCTION_TIMEOUT_MS

    from pixivflow.clock import VirtualClock

    clock = VirtualClock(0)
    twin = _Twin()
    client = SteppedClient(twin, "dynamodb")
    baton = Baton(clock, random.Random(1), switch=0.0, timeouts=FUNCTION_TIMEOUT_MS)
    ran: list[str] = []

    def sweep():
        client.put_item(n=1)  # the outcome record (its creator logs it)
        clock.advance(FUNCTION_TIMEOUT_MS["sweep"])  # the container freezes for the rest of its time
        client.put_item(n=2)  # the close: Lambda killed the invocation before it
        ran.append("after the close")

    fast = baton.spawn("sweep", lambda: client.put_item(n=0))  # well within its time: runs to its end
    baton.drain()
    frozen = baton.spawn("sweep", sweep)
    baton.drain()
    assert (fast.state, frozen.state) == ("done", "dead")
    assert twin.calls == [0, 1] and ran == []
    assert baton.counts["timeout"] == 1 and baton.deaths[-1].endswith("in sweep (function timeout)"), baton.deaths
    baton.release_dead()


def test_the_simulated_function_timeouts_are_the_templates():
    """The kill above is only as true as its numbers: they are template.yaml's."""
    from world import FUNCTION_TIMEOUT_MS

    from pixivflow.local.template import default_template_path, load_template

    tpl = load_template(default_template_path())
    logical = {"execute": "ExecuteFunction", "deliver": "DeliverFunction", "sweep": "StallSweepFunction",
               "trigger": "TriggerFunction", "job_events": "JobEventsFunction"}
    for name, logical_id in logical.items():
        own = tpl["Resources"][logical_id]["Properties"].get("Timeout")
        seconds = int(own if own is not None else tpl["Globals"]["Function"]["Timeout"])
        assert FUNCTION_TIMEOUT_MS[name] == seconds * 1000, name
