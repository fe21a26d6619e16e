"""A consumer's cancel and a Telegram review that began posting (issue 23 x spec §12.7; README
"Cancel"; make sim's routes world, seed 106 found it).

The Telegram route marks its row ``sending`` before the first Bot API call. When that attempt dies
after a post and before the review record, the chat holds a post nobody knows about until the
next attempt records it ``uncertain`` at the control plane. A cancel used to cancel such a row:
no attempt ever came again, and the post stayed unrecorded. Now the cancel leaves a row marked
``sending`` to the route's uncertain path: the review is recorded ``uncertain``, nothing is posted
again, the row is dead-lettered, and the cell and the job stay as the cancel ended them.

Each interleaving is driven explicitly (not a seed replay): the attempt dies inside the route, the
cancel commits, then the queue and the sweep run.
"""

from __future__ import annotations

import pytest

from support.builders import both
from support.jobs import PLAN, TARGET, events, jobs_runtime, post_job, single_target, task
from support.queues import take
from support.delivery import drive
import test_telegram_route
from test_telegram_route import Crash, telegram_config

from pixivflow.adapters.routes import telegram as adapter
from pixivflow.services import jobs as jobs_service
from pixivflow.services.delivery import deliver_message
from pixivflow.services.execution import execute_cell

fakes = test_telegram_route.fakes  # the loopback Bot API and control plane, as the route's own tests use them
SLOT = f"{PLAN}@manual-job-key-1"
CATALOG = {"illusts": [{"id": 501, "type": "illust", "title": "One cat", "tags": [{"name": "cats"}],
                        "user": {"id": 1, "name": "artist"}, "create_date": "2026-11-20T10:00:00+09:00",
                        "total_bookmarks": 10, "total_view": 100, "x_restrict": 0, "page_count": 2}],
           "novels": []}


def telegram_job(make_runtime):
    """A Protocol v1 job whose one target delivers through ``bot1-review``, run up to its row."""
    rt = jobs_runtime(make_runtime, mutate=both(single_target, telegram_config()), catalog=CATALOG)
    assert post_job(rt, task(params={"query": {"tags": ["cats"]}, "target_id": TARGET}))[0] == 202
    take(rt, "EXECUTION_QUEUE_URL")
    execute_cell(rt.wiring.executions, SLOT, TARGET)
    take(rt, "OUTBOX_QUEUE_URL")
    return rt


def row(rt):
    (intent,) = rt.wiring.ledger.load(SLOT).intents_for(TARGET)
    return intent


def die_after_the_media(monkeypatch):
    """The invocation dies between the media post and the control card: nothing saved, no record."""
    def post_card(self):
        raise Crash()
    monkeypatch.setattr(adapter._Attempt, "post_card", post_card)


def assert_settled_uncertain(rt, telegram, cp, posted_before):
    assert [c.method for c in telegram.sent()] == posted_before  # nothing posted again
    (record,) = cp.reviews.values()
    assert record["status"] == "uncertain" and record["work_id"] == "501"
    intent = row(rt)
    assert (intent.outbox_status, intent.remote_status) == ("dead", "uncertain")
    assert intent.last_error.startswith("work cancelled by consumer")
    cell = rt.wiring.ledger.load(SLOT).cells[TARGET]
    assert (cell.status, cell.terminal_reason_code) == ("failed", "cancelled_by_consumer")
    assert [e["type"] for e in events(rt, SLOT)[1]["events"]] == ["job.accepted", "job.started", "job.cancelled"]


@pytest.mark.parametrize("lease", ["expired", "live"])
def test_a_cancel_after_a_post_that_died_unrecorded_leaves_it_to_be_recorded_uncertain(make_runtime, fakes, monkeypatch,
                                                                                        lease):
    telegram, cp = fakes
    rt = telegram_job(make_runtime)
    with monkeypatch.context() as patch, pytest.raises(Crash):
        die_after_the_media(patch)
        deliver_message(rt.wiring.deliveries, "delivery", row(rt).idempotency_key)
    posted = [c.method for c in telegram.sent()]
    assert posted == ["sendMediaGroup"] and cp.reviews == {}  # in the chat, known to nobody
    assert row(rt).sending_at is not None
    if lease == "expired":
        rt.clock.advance(121_000)
    done = jobs_service.cancel(rt.wiring.job_control, SLOT)
    assert done.job["status"] == "cancelled" and done.rows_cancelled == 0
    assert row(rt).outbox_status == "processing"  # the route's uncertain path owns it
    drive(rt)  # the claim expires; the sweep re-drives the row
    assert_settled_uncertain(rt, telegram, cp, posted)


def test_a_sending_marker_set_between_the_cancels_read_and_its_commit_makes_it_decide_again(make_runtime, fakes):
    """The worker marks the row ``sending`` after the cancel read it and before it commits (then
    posts and dies): the commit is refused, and the re-decided cancel leaves the row out."""
    telegram, cp = fakes
    rt = telegram_job(make_runtime)
    ledger = rt.wiring.ledger
    now = rt.clock.now_ms()
    claimed = ledger.claim_intent(row(rt), "dlv-worker", now, 120_000)
    assert claimed is not None
    real = ledger.cancel_cells
    tries = []

    def cancel_cells(state, **kwargs):
        if not tries:  # the worker's marker lands inside the cancel's read-decide-commit window
            assert ledger.mark_intent_sending(claimed, "dlv-worker", now) is not None
        tries.append(sorted(i.idempotency_key for i in kwargs["intents"]))
        return real(state, **kwargs)

    ledger.cancel_cells = cancel_cells
    done = jobs_service.cancel(rt.wiring.job_control, SLOT)
    ledger.cancel_cells = real
    assert tries == [[claimed.idempotency_key], []]  # refused once, then decided without the row
    assert done.job["status"] == "cancelled" and done.rows_cancelled == 0
    assert row(rt).outbox_status == "processing"
    drive(rt)  # the worker died: its claim expires and the sweep re-drives the row
    assert_settled_uncertain(rt, telegram, cp, [])
