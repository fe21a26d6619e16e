"""A recovering cell never trusts a route to a cell that can never deliver it
(docs/explanation/reservations.md).

The history, found by the simulation: a job's cell held a work on one route of a fan-out target and
was cancelled, and the invocation cancelling it died between its releases of the work's routes, so
the reservation stayed with a cell that had ended and would never send. Another occurrence's cell,
bound to the same work, re-ran it, found that route held, recorded it as a duplicate delivered by
the holder, delivered its other route and ended ``submitted``, while the first route never received
the work. Now the re-running cell reads the holder's cell and row: the holder ended without a row
that could have sent, so the reservation is taken over with a conditional write naming it, and the
route gets the work from the cell that reports it."""

from __future__ import annotations

from support.example_routes import GATEWAY, LATE, SLOT, SUBMIT, receiver, state, two_occurrences  # noqa: F401

from conftest import claim
from pixivflow.domain.model import cell_key

WORK = "424242"


def test_a_route_reserved_by_a_cell_that_ended_without_sending_is_taken_over_and_delivered(make_runtime, receiver,  # noqa: F811
                                                                                            logs):
    rt = two_occurrences(make_runtime, receiver)
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    # The holder: bound to the work, holding bot1-submit, then ended (cancelled) with nothing sent.
    claim(ledger, SLOT, "cats", "dead-holder", now)
    assert ledger.bind_work(SLOT, "cats", WORK, "illustration", now)[0]
    assert ledger.reserve_work("bot1-submit", "illustration", WORK, cell_key(SLOT, "cats"), now, executor="dead-holder")[0]
    assert ledger.move_cell_as_owner(SLOT, "cats", "failed", now, "dead-holder", reason_code="cancelled_by_consumer",
                                     last_error="work cancelled by consumer")
    # The other occurrence's cell: bound to the same work, its executor died before reserving.
    claim(ledger, LATE, "cats", "dead-late", now)
    assert ledger.bind_work(LATE, "cats", WORK, "illustration", now)[0]
    rt.clock.advance(600_000)  # its lease lapses; the sweep hands the cell to a new executor
    rt.settle()

    done = state(rt, LATE)
    cell = done.cells["cats"]
    assert (cell.status, cell.work_id) == ("submitted", WORK), (cell.status, cell.last_error)
    rows = {i.route: i for i in done.intents_for("cats")}
    assert {r: (i.status, i.outbox_status) for r, i in rows.items()} == {
        "bot1-submit": ("delivered", "done"), "qq-main": ("delivered", "done")}
    # every route the cell reports got the work, once
    assert len(receiver.at(SUBMIT, "POST")) == 1 and len(receiver.at(GATEWAY, "POST")) == 1
    assert ledger.work_owners("bot1-submit", "illustration", [WORK]) == {WORK: cell_key(LATE, "cats")}
    [taken] = logs.events("reservation.taken_over")
    assert (taken["route"], taken["holder"]) == ("bot1-submit", cell_key(SLOT, "cats"))
    assert state(rt, SLOT).cells["cats"].status == "failed"  # the holder stays as it ended


def test_a_route_held_by_a_running_cell_without_its_row_yet_is_waited_for_never_trusted(make_runtime, receiver):  # noqa: F811
    """The holder is alive and bound to the work (its executor died after reserving one route, before
    its rows): the other cell queues the route it could reserve and waits instead of trusting the
    holder; once the holder runs again each cell delivers the route it holds and records the other."""
    from pixivflow.services.execution import execute_cell

    rt = two_occurrences(make_runtime, receiver)
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    claim(ledger, SLOT, "cats", "dead-holder", now)
    assert ledger.bind_work(SLOT, "cats", WORK, "illustration", now)[0]
    assert ledger.reserve_work("bot1-submit", "illustration", WORK, cell_key(SLOT, "cats"), now, executor="dead-holder")[0]
    claim(ledger, LATE, "cats", "dead-late", now)
    assert ledger.bind_work(LATE, "cats", WORK, "illustration", now)[0]
    rt.clock.advance(600_000)  # both leases lapse
    result = execute_cell(rt.wiring.executions, LATE, "cats")  # the waiting cell runs first
    waiting = state(rt, LATE)
    assert (result.action, waiting.cells["cats"].status) == ("applied", "selected")
    assert "waiting for the cell holding it on bot1-submit" in waiting.cells["cats"].last_error
    assert [(i.route, i.status) for i in waiting.intents_for("cats")] == [("qq-main", "pending")]  # nothing trusted
    rt.settle()
    cells = {slot_id: state(rt, slot_id) for slot_id in (SLOT, LATE)}
    assert {s: c.cells["cats"].status for s, c in cells.items()} == {SLOT: "submitted", LATE: "submitted"}
    for slot_id, own, other in ((SLOT, "bot1-submit", "qq-main"), (LATE, "qq-main", "bot1-submit")):
        rows = {i.route: i for i in cells[slot_id].intents_for("cats")}
        assert (rows[own].status, rows[other].status, rows[other].attempts) == ("delivered", "duplicate", 0), slot_id
    assert len(receiver.at(SUBMIT, "POST")) == 1 and len(receiver.at(GATEWAY, "POST")) == 1


def test_a_refused_take_over_is_decided_again_never_delivered_on_a_hunch(make_runtime, receiver, monkeypatch):  # noqa: F811
    """The holder moved between the read and the take-over (another cell took the route first): the
    write is refused and the cell sends nothing on that route; it decides again on its next run."""
    from pixivflow.services.execution import execute_cell

    rt = two_occurrences(make_runtime, receiver)
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    claim(ledger, SLOT, "cats", "dead-holder", now)
    assert ledger.bind_work(SLOT, "cats", WORK, "illustration", now)[0]
    assert ledger.reserve_work("bot1-submit", "illustration", WORK, cell_key(SLOT, "cats"), now, executor="dead-holder")[0]
    assert ledger.move_cell_as_owner(SLOT, "cats", "failed", now, "dead-holder", reason_code="cancelled_by_consumer")
    claim(ledger, LATE, "cats", "dead-late", now)
    assert ledger.bind_work(LATE, "cats", WORK, "illustration", now)[0]
    rt.clock.advance(600_000)
    with monkeypatch.context() as patched:
        patched.setattr(type(ledger), "take_over_work", lambda self, *args, **kwargs: False)
        execute_cell(rt.wiring.executions, LATE, "cats")
    waiting = state(rt, LATE)
    assert waiting.cells["cats"].status == "selected"
    assert [i.route for i in waiting.intents_for("cats")] == ["qq-main"]  # bot1-submit: neither sent nor trusted
    rt.settle()
    done = state(rt, LATE).cells["cats"]
    assert done.status == "submitted", (done.status, done.terminal_reason_code, done.last_error)
    assert len(receiver.at(SUBMIT, "POST")) == 1 and len(receiver.at(GATEWAY, "POST")) == 1


def test_a_route_whose_holder_ended_after_a_post_that_may_have_landed_is_neither_sent_nor_trusted(
        make_runtime, receiver):  # noqa: F811
    """The holder's row on bot1-submit was claimed by a worker that died (it may have posted, it may
    not) and then cancelled with the holder's job: nobody can say whether the route has the work.
    The other cell bound to the work sends nothing there and reports nothing false: it records the
    route failed, naming the holder, delivers the route it holds, and ends failed with the reason."""
    from pixivflow.domain.model import Intent
    from pixivflow.domain.ack import idempotency_key

    rt = two_occurrences(make_runtime, receiver)
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    claim(ledger, SLOT, "cats", "dead-holder", now)
    assert ledger.bind_work(SLOT, "cats", WORK, "illustration", now)[0]
    assert ledger.reserve_work("bot1-submit", "illustration", WORK, cell_key(SLOT, "cats"), now, executor="dead-holder")[0]
    ledger.put_intent(Intent(slot_id=SLOT, target_id="cats", route="bot1-submit", work_type="illustration", work_id=WORK,
                             idempotency_key=idempotency_key("bot1-submit", "illustration", WORK, SLOT, "cats"),
                             status="pending", outbox_status="cancelled", unsettled_claim="dlv-died", created_at=now,
                             updated_at=now))
    assert ledger.move_cell_as_owner(SLOT, "cats", "failed", now, "dead-holder", reason_code="cancelled_by_consumer")
    claim(ledger, LATE, "cats", "dead-late", now)
    assert ledger.bind_work(LATE, "cats", WORK, "illustration", now)[0]
    rt.clock.advance(600_000)
    rt.settle()

    done = state(rt, LATE)
    cell = done.cells["cats"]
    rows = {i.route: i for i in done.intents_for("cats")}
    assert {r: (i.status, i.outbox_status, i.attempts) for r, i in rows.items()} == {
        "bot1-submit": ("failed", "dead", 0), "qq-main": ("delivered", "done", 1)}
    assert f"may already be on route bot1-submit from {cell_key(SLOT, 'cats')}" in rows["bot1-submit"].last_error
    assert (cell.status, cell.terminal_reason_code) == ("failed", "delivery_abandoned"), (cell.status, cell.last_error)
    assert receiver.at(SUBMIT, "POST") == [] and len(receiver.at(GATEWAY, "POST")) == 1
    # the reservation stays with the holder: the route may have the work from it
    assert ledger.work_owners("bot1-submit", "illustration", [WORK]) == {WORK: cell_key(SLOT, "cats")}
