"""A consumer's cancel and a Telegram review whose posts were saved but never recorded (issue 23 x
spec §12.7; README "Cancel"; make sim's routes world, seeds 739, 1006, 1357 and 1633 found it).

The route posts the media and the control card, then ``POST <controlPlaneUrl>/reviews`` is refused
(429 or 5xx): the attempt saves what it posted on the row (``sendProgress``), drops its ``sending``
marker and schedules a retry, whose pre-flight finds no record and records it without posting
again. A cancel in between used to cancel that row like a never-attempted one (it only left out
rows marked ``sending``): no attempt ever came again and the review stayed in the chat with no
record at the control plane. Now every row that began posting (``Intent.began_posting``) is left to
the route: it posts nothing more (``SendGuard.record_only``), records the review ``uncertain`` with
the message ids it posted, and the row is dead-lettered; the cell and the job stay as the cancel
ended them.

Each interleaving is driven explicitly (not a seed replay): the record is refused, the cancel
commits (or reads, then a worker posts inside its read-decide-commit window), then the queue and
the sweep run.
"""

from __future__ import annotations

import test_telegram_cancel
from support.delivery import drive
from test_telegram_cancel import SLOT, assert_settled_uncertain, row, telegram_job

from pixivflow.services import jobs as jobs_service
from pixivflow.services.delivery import deliver_message

fakes = test_telegram_cancel.fakes  # the loopback Bot API and control plane of the route's own tests


def posted_ids(progress):
    """The message ids an attempt saved: the media's, then the control card's."""
    return [i for b in progress["blocks"] for i in b["message_ids"]], progress["control_message_id"]


def test_a_cancel_after_posts_the_control_plane_did_not_record_leaves_them_to_be_recorded_uncertain(make_runtime, fakes):
    telegram, cp = fakes
    rt = telegram_job(make_runtime)
    cp.fail_records.append(429)  # the review is posted; its record is refused
    deliver_message(rt.wiring.deliveries, "delivery", row(rt).idempotency_key)
    posted = [c.method for c in telegram.sent()]
    assert posted == ["sendMediaGroup", "sendMessage"] and cp.reviews == {}  # in the chat, known to nobody
    saved = row(rt)
    assert (saved.outbox_status, saved.sending_at) == ("retry_wait", None) and saved.began_posting
    media_ids, card_id = posted_ids(saved.send_progress)

    done = jobs_service.cancel(rt.wiring.job_control, SLOT)
    assert done.job["status"] == "cancelled" and done.rows_cancelled == 0
    assert row(rt).outbox_status == "retry_wait"  # the route records it
    drive(rt)
    assert_settled_uncertain(rt, telegram, cp, posted)
    (record,) = cp.reviews.values()
    assert (record["media_message_ids"], record["control_message_id"]) == (media_ids, card_id)  # where the operator looks
    assert "cell ended before the review" in record["error"]


def test_posts_saved_between_the_cancels_read_and_its_commit_make_it_decide_again(make_runtime, fakes):
    """The cancel reads the row waiting for a retry with nothing in the chat (a 429 before the
    first post); inside its read-decide-commit window a worker claims it, posts the review, has
    its record refused and settles the row back to ``retry_wait`` with its posts saved. The row's
    status is the one read, so only the ``sendProgress`` condition refuses the commit; the
    re-decided cancel leaves the row to the route."""
    telegram, cp = fakes
    rt = telegram_job(make_runtime)
    telegram.script("sendMediaGroup", {"error_code": 429, "description": "Too Many Requests: retry after 1",
                                       "parameters": {"retry_after": 1}})
    key = row(rt).idempotency_key
    deliver_message(rt.wiring.deliveries, "delivery", key)
    first = row(rt)
    assert (first.outbox_status, first.began_posting, telegram.sent()) == ("retry_wait", False, [])
    rt.clock.advance(2_000)

    ledger = rt.wiring.ledger
    real = ledger.cancel_cells
    tries = []

    def cancel_cells(state, **kwargs):
        if not tries:  # the worker's whole attempt lands inside the cancel's window
            cp.fail_records.append(503)
            deliver_message(rt.wiring.deliveries, "delivery", key)
            assert row(rt).outbox_status == "retry_wait" and row(rt).began_posting
        tries.append(sorted(i.idempotency_key for i in kwargs["intents"]))
        return real(state, **kwargs)

    ledger.cancel_cells = cancel_cells
    try:
        done = jobs_service.cancel(rt.wiring.job_control, SLOT)
    finally:
        ledger.cancel_cells = real
    assert tries == [[key], []]  # refused once, then decided without the row
    assert done.job["status"] == "cancelled" and done.rows_cancelled == 0
    posted = [c.method for c in telegram.sent()]
    assert posted == ["sendMediaGroup", "sendMessage"] and cp.reviews == {}
    drive(rt)
    assert_settled_uncertain(rt, telegram, cp, posted)
