"""A fan-out target whose one route dies keeps delivering on the other (found by make sim's routes
world, seed 328). The cell ends ``delivery_abandoned`` as soon as one route's row is dead; the other
route's row, still waiting for its retry, used to be dead-lettered "cell already ended; not
delivered" at its next claim -- even when an earlier attempt of it had landed -- so the ledger lost
that the work was on that route and a later slot delivered it there a second time."""

from __future__ import annotations

from support.example_routes import GATEWAY, SUBMIT, intents, receiver, start, state  # noqa: F401 - the receiver fixture

from pixivflow.services.delivery import deliver_intent


def test_a_dead_route_of_a_fan_out_cell_leaves_the_other_route_delivering(make_runtime, receiver):  # noqa: F811
    rt = start(make_runtime, receiver, routes=("bot1-submit", "qq-main"))
    while rt.pumps["execute"].poll():
        pass
    rows = intents(rt)
    receiver.queue(SUBMIT, (503, {"ok": False, "error": "busy"}))
    assert deliver_intent(rt.wiring.deliveries, rows["bot1-submit"]).action == "retried"
    receiver.queue(GATEWAY, (422, {"error": "bad"}))
    assert deliver_intent(rt.wiring.deliveries, rows["qq-main"]).action == "dead"
    cell = state(rt).cells["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("failed", "delivery_abandoned")
    # the other route's retry still delivers its work (and the ledger knows it is there)
    assert deliver_intent(rt.wiring.deliveries, intents(rt)["bot1-submit"], ignore_due=True).action == "done"
    rows = intents(rt)
    assert (rows["bot1-submit"].status, rows["bot1-submit"].outbox_status) == ("delivered", "done")
    assert len(receiver.at(SUBMIT, "POST")) == 2 and len(receiver.state.records) == 1
    cell = state(rt).cells["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("failed", "delivery_abandoned")  # the outcome stays "partly"
