"""A fan-out cell whose executor died between its two rows' writes is ended by the sweep (found by the
10,000-seed make sim, routes world, seed 5206: a job's slot `running` and its cell `selected` for
ever, the job never terminal).

The cell's target delivers through bot1-submit and qq-main. Its executor wrote the bot1-submit row
and died before the qq-main one; the row delivered; the sweep's re-dispatch never reached an
executor. The delivery verdict of such a cell is "live" (some routes confirmed, the others not yet),
and the sweep took that for a row in flight: its stall and timeout rules left the cell to the
outbox, which had nothing left to do. Now only a row that exists and is still the outbox's keeps the
cell from those rules: the cell ends failed, its slot terminal, with the delivered route's record in
the ledger (a reported partial delivery, as when a route's row dies: test_fanout_partial.py).

Driven explicitly (not a seed replay): the executor dies at the second row, no executor runs again.
"""

from __future__ import annotations

from support.dying_ledger import DyingLedger
from support.example_routes import GATEWAY, SLOT, SUBMIT, intents, receiver, start, state  # noqa: F401 - the receiver fixture

HOUR_MS = 3_600_000


def test_a_fan_out_cell_whose_executor_died_between_its_rows_is_ended_by_the_sweep(make_runtime, receiver):  # noqa: F811
    rt = start(make_runtime, receiver, routes=("bot1-submit", "qq-main"))
    real = rt.wiring.ledger
    dying = rt.wiring.ledger = DyingLedger(real, "put_intent", when=lambda intent, *a, **k: intent.route == "qq-main")
    try:
        rt.pumps["execute"].poll()
    finally:
        rt.wiring.ledger = real
    assert dying.died
    assert list(intents(rt)) == ["bot1-submit"]  # the qq-main row was never written
    assert state(rt).cells["cats"].status == "selected"
    now = rt.clock.now_ms()
    rt.outages.append(("execute", now, now + 24 * HOUR_MS))  # no executor runs again: no re-dispatch rescues it

    rt.settle(max_ms=2 * HOUR_MS)  # past the stall budget and the schedule's timeout
    done = state(rt)
    cell = done.cells["cats"]
    assert cell.status == "failed" and cell.terminal_reason_code in ("stalled_no_heartbeat", "execution_timeout"), (
        cell.status, cell.terminal_reason_code)
    assert done.slot.status in ("failed", "partial") and not done.slot.open
    rows = intents(rt)
    assert list(rows) == ["bot1-submit"]
    assert (rows["bot1-submit"].status, rows["bot1-submit"].outbox_status) == ("delivered", "done")
    assert len(receiver.at(SUBMIT, "POST")) == 1 and receiver.at(GATEWAY, "POST") == []
