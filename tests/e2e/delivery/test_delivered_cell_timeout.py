"""A delivered cell is never failed for being late (found by make sim, seed 13568: a cell ended
`failed` / `execution_timeout` while the downstream held its work and its row was `delivered`).

The history: the cell's executor recorded its row and died before moving the cell on (the cell
stays `selected`, its work handed over); the sweep re-sent the row; the deliverer posted it,
recorded the ACK and died before settling the cell; then a re-dispatched executor claimed the
cell and hung. A cell under a lease is not the sweep's to converge, and the timeout rule, which
ends cells under a lease, failed it. The ACK had decided the cell: it is now submitted, as the
deliverer's own settle would have made it, and the occurrence is a success.

Driven explicitly (not a seed replay), through the real handlers.
"""

from __future__ import annotations

from support.dying_ledger import DyingLedger
from support.example_routes import SLOT, SUBMIT, intents, receiver, start, state  # noqa: F401 - the receiver fixture

from pixivflow.services.timing import LEASE_TTL_MS, REDRIVE_GRACE_MS

MINUTE_MS = 60_000


def _run_dying(rt, pump, method):
    real = rt.wiring.ledger
    dying = rt.wiring.ledger = DyingLedger(real, method)
    try:
        rt.pumps[pump].poll()
    finally:
        rt.wiring.ledger = real
    assert dying.died, method


def test_a_delivered_cell_under_a_hung_executors_lease_is_submitted_not_timed_out(make_runtime, receiver):  # noqa: F811
    rt = start(make_runtime, receiver, routes=("bot1-submit",))
    _run_dying(rt, "execute", "move_cell_as_owner")  # the row is recorded, the cell not moved
    assert state(rt).cells["cats"].status == "selected"
    assert intents(rt)["bot1-submit"].outbox_status == "pending"

    rt.clock.advance(LEASE_TTL_MS + REDRIVE_GRACE_MS + MINUTE_MS)
    rt.sweep()  # re-sends the overdue row (no message was ever sent for it)
    _run_dying(rt, "deliver", "settle_cell_from_delivery")  # posted and recorded, the cell not settled
    row = intents(rt)["bot1-submit"]
    assert (row.status, row.outbox_status) == ("delivered", "done")
    assert len(receiver.at(SUBMIT, "POST")) == 1

    cell = state(rt).cells["cats"]
    timeout_ms = state(rt).slot.timeout_ms or 1_800_000
    rt.clock.advance(cell.started_at + timeout_ms + MINUTE_MS - rt.clock.now_ms())  # past the schedule's timeout
    # a re-dispatched executor takes the cell and hangs: its lease is live when the sweep comes
    assert rt.wiring.ledger.claim_cell(SLOT, "cats", "exec-hung", rt.clock.now_ms(), LEASE_TTL_MS) is not None
    rt.sweep()

    cell = state(rt).cells["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("submitted", None), (cell.status, cell.terminal_reason_code)
    assert cell.work_id == row.work_id
    rt.settle(max_ms=MINUTE_MS * 30)  # the hung executor's lease lapses; the occurrence closes
    done = state(rt)
    assert done.slot.status == "success" and not done.slot.open
    assert len(receiver.at(SUBMIT, "POST")) == 1  # delivered once, never again
