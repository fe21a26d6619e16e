"""A Telegram review posted and recorded before a consumer's cancel keeps its work (issue 23 x spec
§13.2; make sim's routes world, seed 3898 found it).

The attempt posts the media and the control card, the control plane records the review
``pending``, and the invocation dies before the row's settle. The cancel then commits; it leaves
the row (it began posting) to the route, whose next attempt posts nothing and finds the review
recorded (``review_exists``). The row is dead-lettered like every row of a cancelled cell, and it
used to give the work back to the pool: a later job selected the same work, its row's pre-flight
found the cancelled job's review and the later cell was reported submitted for a delivery it
never made (the review names the cancelled job's slot). Now the dead row keeps the review's id
and status, the work stays reserved on the route, and the later job never selects it.

Driven explicitly (not a seed replay): the attempt dies after the record, the cancel commits, the
sweep re-drives the row, then a second job with the same query runs.
"""

from __future__ import annotations

import pytest

import test_telegram_cancel
from support.jobs import PLAN, TARGET, post_job, task
from support.delivery import drive
from test_telegram_cancel import SLOT, row, telegram_job
from test_telegram_route import Crash

from pixivflow.adapters.routes import telegram as adapter
from pixivflow.domain.model import cell_key
from pixivflow.services import jobs as jobs_service
from pixivflow.services.delivery import deliver_message

fakes = test_telegram_cancel.fakes  # the loopback Bot API and control plane of the route's own tests
ROUTE, WORK_TYPE, WORK = "bot1-review", "illustration", "501"
NEXT_SLOT = f"{PLAN}@manual-job-key-2"


def test_a_review_recorded_before_the_cancel_keeps_its_work_from_the_next_job(make_runtime, fakes, monkeypatch):
    telegram, cp = fakes
    rt = telegram_job(make_runtime)
    recorded = adapter._Attempt.record

    def record_then_die(self, status, error=None):
        recorded(self, status, error)
        raise Crash()  # the review is recorded; the invocation dies before the row's settle

    with monkeypatch.context() as patch, pytest.raises(Crash):
        patch.setattr(adapter._Attempt, "record", record_then_die)
        deliver_message(rt.wiring.deliveries, "delivery", row(rt).idempotency_key)
    posted = [c.method for c in telegram.sent()]
    assert posted == ["sendMediaGroup", "sendMessage"]
    ((rid, review),) = cp.reviews.items()
    assert (review["status"], review["slot_id"], review["work_id"]) == ("pending", SLOT, WORK)

    done = jobs_service.cancel(rt.wiring.job_control, SLOT)
    assert done.job["status"] == "cancelled" and done.rows_cancelled == 0  # the row is the route's to settle
    drive(rt)
    dead = row(rt)
    assert (dead.status, dead.outbox_status) == ("failed", "dead")
    assert (dead.remote_status, dead.remote_id) == ("review_exists", rid)  # where the operator finds it
    assert dead.last_error.startswith("work cancelled by consumer")
    assert rt.wiring.ledger.work_owners(ROUTE, WORK_TYPE, [WORK]) == {WORK: cell_key(SLOT, TARGET)}

    # The next job asks for the same works: the only match is in the review chat already.
    assert post_job(rt, task(key="job-key-2", params={"query": {"tags": ["cats"]}, "target_id": TARGET}))[0] == 202
    drive(rt)
    state = rt.wiring.ledger.load(NEXT_SLOT)
    cell = state.cells[TARGET]
    assert cell.terminal and cell.status != "submitted" and cell.work_id != WORK, (cell.status, cell.work_id)
    assert [i.work_id for i in state.intents_for(TARGET)] == []
    assert [c.method for c in telegram.sent()] == posted  # nothing posted again
    assert list(cp.reviews) == [rid] and cp.reviews[rid]["slot_id"] == SLOT


def test_a_cancelled_review_the_control_plane_never_records_keeps_its_work_when_its_budget_runs_out(make_runtime, fakes):
    """The review is posted and its record refused; the cancel commits; the control plane then
    refuses every record until the row's budget is spent: the row is dead with the review still
    unrecorded, and the work, which is in the chat, stays reserved."""
    telegram, cp = fakes
    rt = telegram_job(make_runtime)
    cp.fail_records.extend([503] * 20)  # more refusals than the row has attempts
    deliver_message(rt.wiring.deliveries, "delivery", row(rt).idempotency_key)
    posted = [c.method for c in telegram.sent()]
    assert posted == ["sendMediaGroup", "sendMessage"] and cp.reviews == {}
    assert jobs_service.cancel(rt.wiring.job_control, SLOT).rows_cancelled == 0
    drive(rt)
    dead = row(rt)
    assert (dead.status, dead.outbox_status, dead.attempts) == ("failed", "dead", dead.max_attempts)
    assert "attempt budget exhausted" in dead.last_error and cp.reviews == {}
    assert [c.method for c in telegram.sent()] == posted  # nothing posted again
    assert rt.wiring.ledger.work_owners(ROUTE, WORK_TYPE, [WORK]) == {WORK: cell_key(SLOT, TARGET)}
