"""Two recovering cells that split a work's routes between them both finish (the history replayed was
found by the 10,000-seed make sim, routes world, seeds 3574, 8143 and 8761: two slots running for
ever, their cells ``delivery_pending``).

Two occurrences' fan-out cells (routes bot1-submit and qq-main) bind the same work; each executor
dies after reserving one route, each a different one. On recovery an executor continues its bound
work (spec §5.6: never search, never substitute) on the route it holds, and finds the other route
held by the other cell. It queued the held route only, and the cell's verdict (every configured
route confirmed, spec §10.8) waited for a row that nobody would ever write. Now the route the other
cell holds is recorded on this cell as a duplicate before the held one is queued: each route gets
the work once, from one of the two cells, and both cells end submitted."""

from __future__ import annotations

from support.example_routes import GATEWAY, LATE, SLOT, SUBMIT, receiver, state, two_occurrences  # noqa: F401

from conftest import claim
from pixivflow.domain.model import cell_key

WORK = "424242"


def test_two_cells_that_died_holding_one_route_each_of_one_work_both_end_submitted(make_runtime, receiver):  # noqa: F811
    rt = two_occurrences(make_runtime, receiver)
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    # What the two dead executors left: each cell bound to the work, each holding one route of it.
    for slot_id, route in ((SLOT, "bot1-submit"), (LATE, "qq-main")):
        claim(ledger, slot_id, "cats", f"dead-{route}", now)
        assert ledger.bind_work(slot_id, "cats", WORK, "illustration", now)[0]
        assert ledger.reserve_work(route, "illustration", WORK, cell_key(slot_id, "cats"), now, executor=f"dead-{route}")[0]
    rt.clock.advance(600_000)  # their leases lapse; the sweep hands both cells to new executors
    rt.settle()

    for slot_id, held, other in ((SLOT, "bot1-submit", "qq-main"), (LATE, "qq-main", "bot1-submit")):
        done = state(rt, slot_id)
        cell = done.cells["cats"]
        assert (cell.status, cell.work_id) == ("submitted", WORK), (slot_id, cell.status, cell.last_error)
        assert done.slot.status == "success"
        rows = {i.route: i for i in done.intents_for("cats")}
        assert (rows[held].status, rows[held].outbox_status) == ("delivered", "done")
        # the route the other cell holds: recorded, never sent, its holder named
        assert (rows[other].status, rows[other].outbox_status, rows[other].attempts) == ("duplicate", "done", 0)
        assert cell_key(SLOT if slot_id == LATE else LATE, "cats") in rows[other].reuse_reason
    # each route got the work exactly once, from the cell that held it
    assert len(receiver.at(SUBMIT, "POST")) == 1 and len(receiver.at(GATEWAY, "POST")) == 1
