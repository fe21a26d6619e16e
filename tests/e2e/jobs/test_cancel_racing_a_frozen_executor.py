"""A consumer's cancel racing an executor frozen past its lease never leaves a delivery row behind
that nothing will ever end: the row the executor writes around the cancel ends unposted (nothing is
posted after a committed cancel), and the sweep can always find it (spec §12.7, §13.7).

Make sim's demo world, seed 738 (issue 20: each bug the simulation found gets a scenario test that
fails when its fix is reverted; seed replays drift): each test builds the history the seed stumbled
on, step by step through the real services (``support.cancel_races``)."""

from __future__ import annotations

import json

from support.cancel_races import (
    SLOT, closed_with_its_pending_row_in_the_due_index, job_taken_by_its_executor, row_landed_after_the_closers_last_read,
)
from support.jobs import TARGET, cancel
from support.queues import take

from pixivflow.services.delivery import deliver_message
from pixivflow.services.timing import LEASE_TTL_MS
from pixivflow.services.execution import execute_cell


def test_a_row_written_between_a_cancels_read_and_its_commit_still_ends_unposted(make_runtime, monkeypatch):
    """Seed 738: an executor frozen past its lease wrote its delivery row after the consumer's cancel
    had read the job and before the cancel committed. The commit (conditioned on what it read) did
    not cover the row, the cancel closed the slot (no live lease: no executor could still write),
    and the executor's move to delivery_pending was refused. The row stayed ``pending`` behind a
    failed cell of a closed slot forever: no message, not indexed, the sweep blind to it (spec
    §13.7). The refused executor now indexes and sends its rows; the deliverer dead-letters them
    unposted (no post after a committed cancel)."""
    rt, channel = job_taken_by_its_executor(make_runtime)
    ledger = rt.wiring.ledger
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
    execute_cell(rt.wiring.executions, SLOT, TARGET)
    monkeypatch.setattr(ledger, "put_intent", real_put)

    state, row = closed_with_its_pending_row_in_the_due_index(rt, answers)
    [cell] = state.snapshot_cells()
    assert (cell.status, cell.terminal_reason_code) == ("failed", "cancelled_by_consumer")

    bodies = [json.loads(b) for b in take(rt, "OUTBOX_QUEUE_URL")]
    assert [b["key"] for b in bodies] == [row.idempotency_key]  # the refused executor sent it
    for b in bodies:
        deliver_message(rt.wiring.deliveries, b["kind"], b["key"])
    [row] = ledger.load(SLOT).intents
    assert row.outbox_status not in ("pending", "retry_wait", "processing"), row.outbox_status
    assert (row.outbox_status, row.attempts) == ("dead", 1)  # dead-lettered by the claiming worker
    assert channel.posts == [], "nothing was posted after the committed cancel"


def test_a_row_written_after_the_closers_last_read_is_indexed_by_its_refused_executor(make_runtime, monkeypatch):
    """The same race, one step later: the executor's row lands after the cancel's rollup read the
    slot for the last time (so ``rows_outlive_slot`` indexed nothing) and before it left
    ActiveSlots. Only the refused executor's ``index_due`` (mutant execution-ended-cell-rows-indexed)
    then puts the row where the sweep finds it once the slot is closed (spec §13.7)."""
    rt, channel, answers = row_landed_after_the_closers_last_read(make_runtime, monkeypatch)
    take(rt, "OUTBOX_QUEUE_URL")  # the executor's messages are lost: the index must find the row
    closed_with_its_pending_row_in_the_due_index(rt, answers)
    assert channel.posts == []
