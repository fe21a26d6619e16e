"""An idle tick whose probe finds the DueOutbox index occupied re-drives what it holds, even a closed
slot's pending row whose message was lost, which only DueOutbox leads the sweep to (issue 25 (a),
spec §13.7).

What ``make sim`` found about the idle tick's probe (tests/mutants.d/services.sweep.toml): with the
sweep's DueOutbox re-drive skipped although the probe found the index occupied (mutant
sweep-due-intents-skipped-though-due-outbox-occupied), no deterministic test failed; the simulation
did. The history replayed is a consumer's cancel racing a frozen executor (``support.cancel_races``,
make sim's seed 738)."""

from __future__ import annotations

import json

from support.cancel_races import closed_with_its_pending_row_in_the_due_index, row_landed_after_the_closers_last_read
from support.queues import take

from pixivflow.services.timing import REDRIVE_GRACE_MS


def test_a_closed_slots_pending_row_is_re_driven_through_the_due_index_the_probe_found(make_runtime, monkeypatch):
    rt, _, answers = row_landed_after_the_closers_last_read(make_runtime, monkeypatch)
    take(rt, "OUTBOX_QUEUE_URL")  # the executor's messages are lost
    _, row = closed_with_its_pending_row_in_the_due_index(rt, answers)

    rt.clock.advance(REDRIVE_GRACE_MS + 1_000)
    result = rt.sweep()
    assert (result["activeSlots"], result["indexesEmpty"]) == (0, 2)  # ActiveSlots and OpenCallbacks empty: DueOutbox read
    assert result["redriven"] == 1
    bodies = [json.loads(b) for b in take(rt, "OUTBOX_QUEUE_URL")]
    assert [b["key"] for b in bodies] == [row.idempotency_key]
