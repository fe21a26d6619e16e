"""A stall the sweep read before the outbox settled the cell never fails a slot whose rollup recorded
its outcome: the slot's outcome record, its ``schedule.outcome`` line and its final status agree
(issue 20; DESIGN §12, spec §3.4 and §13: the cells' states decide the slot's outcome, exactly one
record).

The history replayed is make sim's routes world, seed 379 (on older code): the sweep's stall
transaction made a slot terminal ``failed`` between a deliverer's rollup writing and logging
``success`` and its close."""

from __future__ import annotations

import json

from support.queues import take

from pixivflow.services.delivery import deliver_message
from pixivflow.services.execution import execute_cell
from pixivflow.services.sweep import sweep


def test_a_stall_read_before_the_outbox_settled_the_cell_cannot_fail_the_slot_its_rollup_records(make_runtime, logs, monkeypatch):
    """Issue 20 (make sim's routes world, seed 379): the sweep read a stalled slot whose one cell
    was delivery_pending with its row already delivered; the deliverer then settled the cell,
    its rollup wrote and logged the outcome record (``success``), and before its close the sweep's
    stall transaction, built on the old read, made the slot terminal ``failed``: the log and the
    record said success for a slot the ledger says failed. The transaction now guards each open
    cell it does not fail on the status it read (spec §3.4: the cells decide the slot's outcome),
    so the stale stall is refused and the one record, its line and the slot agree."""
    rt = make_runtime(mutate=lambda cfg: cfg["schedules"][0].update(targetIds=["cats"]))
    ledger = rt.wiring.ledger
    slot_id = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")["slot_id"]
    [execution] = [json.loads(b) for b in take(rt, "EXECUTION_QUEUE_URL")]
    execute_cell(rt.wiring.executions, execution["slotId"], execution["targetId"])
    [outbox] = [json.loads(b) for b in take(rt, "OUTBOX_QUEUE_URL")]  # the delivery message, held back
    rt.clock.advance(rt.wiring.config.schedulerRuntime.stall_timeout_ms + 60_000)  # no heartbeat since: stalled

    real_load, real_settle, real_finish = ledger.load, ledger.settle_cell_from_delivery, ledger.finish_slot
    sweep_read = []

    def settle_after_the_sweeps_read(*args, **kwargs):
        sweep_read.append(real_load(slot_id))  # the sweep reads: row delivered, cell still delivery_pending
        return real_settle(*args, **kwargs)

    def stall_commits_before_the_close(*args, **kwargs):
        reads = iter(sweep_read)
        monkeypatch.setattr(ledger, "load", lambda sid: next(reads, None) or real_load(sid))
        sweep(rt.wiring.sweeps)  # ... and goes on with that read, after the rollup logged its record
        monkeypatch.setattr(ledger, "load", real_load)
        return real_finish(*args, **kwargs)

    monkeypatch.setattr(ledger, "settle_cell_from_delivery", settle_after_the_sweeps_read)
    monkeypatch.setattr(ledger, "finish_slot", stall_commits_before_the_close)
    deliver_message(rt.wiring.deliveries, outbox["kind"], outbox["key"])
    monkeypatch.setattr(ledger, "settle_cell_from_delivery", real_settle)
    monkeypatch.setattr(ledger, "finish_slot", real_finish)

    [seen] = sweep_read
    [cell] = seen.snapshot_cells()
    assert cell.status == "delivery_pending" and seen.slot.status == "running"  # what the stall judged
    rt.clock.advance(61_000)
    rt.sweep()
    rt.sweep()
    [line] = logs.outcomes(slot_id)
    stored = ledger.get_event(slot_id, "execution.summary")["detail"]["outcome"]
    slot = ledger.get_slot(slot_id)
    assert (line["status"], stored["status"], slot.status) == ("success", "success", "success")
    assert ledger.active_slots() == []
