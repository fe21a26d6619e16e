"""POST /jobs/{id}/cancel (spec §12.7, §13.24): one atomic step, idempotent, and nothing is ever
posted downstream after it commits, whatever the delivery was doing at that moment."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


from support.jobs import PLAN, TARGET, cancel, events, get_job, jobs_runtime, post_job, task
from support.protocol_schema import error_body, validate
from support.queues import take

from pixivflow.domain.route_io import DeliveryResponse
from pixivflow.services import jobs as jobs_service
from pixivflow.services.delivery import deliver_message, drain
from pixivflow.services.execution import execute_cell

SLOT = f"{PLAN}@manual-job-key-1"
CANCELLED_ERROR = {"code": "cancelled_by_consumer", "message": "任务已被取消", "retryable": False,
                   "detail": {"internal_code": "cancelled_by_consumer"}}


@dataclass
class GatedChannel:
    """A delivery route that records whether the cancel had committed when each post was made,
    can hold a post open until released, and answers ``statuses`` in order (then 200)."""

    statuses: list[int] = field(default_factory=list)
    hold: bool = False
    posts: list[tuple[str, bool]] = field(default_factory=list)  # (work id, cancel already committed)
    committed: bool = False
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def send(self, route, payload, idempotency_key):
        self.posts.append((payload["work_id"], self.committed))
        self.entered.set()
        if self.hold:
            assert self.release.wait(30), "the test never released the post"
        status = self.statuses.pop(0) if self.statuses else 200
        body = {"data": {"review_id": "r-1", "status": "pending_review"}} if status < 300 else {"error": "down"}
        return DeliveryResponse(status, body)

    # The DeliveryChannel port beyond ``send``: this route has no readiness probe and speaks our
    # own JSON wire format (``kind: webhook``).
    def ready(self, route):
        return True

    def deliver(self, request):
        return self.send(request.route, request.body, request.idempotency_key)

    def close(self):
        pass  # holds no connection


def gated_runtime(make_runtime, channel):
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    ledger = rt.wiring.ledger
    real = ledger.cancel_cells

    def cancel_cells(*args, **kwargs):
        ok = real(*args, **kwargs)
        if ok:
            channel.committed = True
        return ok

    ledger.cancel_cells = cancel_cells
    return rt


def drop(rt, queue="EXECUTION_QUEUE_URL"):
    return take(rt, queue)


def execute_only(rt, slot_id=SLOT, target=TARGET):
    """Run the cell up to delivery_pending; its outbox message is taken off the queue."""
    drop(rt)
    execute_cell(rt.wiring.executions, slot_id, target)
    return drop(rt, "OUTBOX_QUEUE_URL")


def intent_of(rt, slot_id=SLOT):
    [intent] = rt.wiring.ledger.load(slot_id).intents
    return intent


def test_cancel_fails_the_open_cell_and_a_second_cancel_answers_the_same_body(make_runtime, downstream, logs):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    drop(rt)
    rt.clock.advance(5_000)
    status, job = cancel(rt, SLOT)
    assert status == 200
    validate("Job", job)
    assert (job["status"], job["error"], job["progress"]["stage"], job["lease_active"]) == (
        "cancelled", CANCELLED_ERROR, "cancelled", False)
    assert job["updated_at"] == rt.clock.now_ms()
    rt.clock.advance(5_000)
    assert cancel(rt, SLOT) == (200, job)
    state = rt.wiring.ledger.load(SLOT)
    cell = state.cells[TARGET]
    assert (cell.status, cell.terminal_reason_code, cell.terminal_reason_message, cell.last_error) == (
        "failed", "cancelled_by_consumer", "任务已被取消", "任务已被取消")
    assert (state.slot.status, state.slot.last_error, state.slot.open) == ("failed", "任务已被取消", False)
    lines = logs.events("schedule.job_cancelled")
    assert [(line["http_status"], line["cells_cancelled"]) for line in lines] == [(200, 1), (200, 0)]
    assert len(logs.outcomes(SLOT)) == 1  # one outcome record for the slot
    rt.settle()
    assert downstream.requests == []


def test_cancel_of_an_unknown_job_is_404(make_runtime):
    rt = jobs_runtime(make_runtime)
    status, body = cancel(rt, "nope@manual-1")
    assert status == 404
    error_body(body)
    assert body == {"error": {"code": "invalid_params", "message": "unknown job", "retryable": False,
                              "detail": {"reason": "unknown_job", "job_id": "nope@manual-1"}}}


def test_cancel_of_a_finished_job_changes_nothing(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    rt.settle()
    before = get_job(rt, SLOT)[1]
    assert cancel(rt, SLOT) == (200, before)
    assert before["status"] == "succeeded"


def test_cancel_cancels_the_pending_outbox_row_and_gives_the_work_back(make_runtime):
    channel = GatedChannel()
    rt = gated_runtime(make_runtime, channel)
    post_job(rt, task())
    [message] = execute_only(rt)
    intent = intent_of(rt)
    assert (intent.outbox_status, rt.wiring.ledger.load(SLOT).cells[TARGET].status) == ("pending", "delivery_pending")
    assert rt.wiring.ledger.work_owners("review", "illustration", ["501"]) == {"501": f"{SLOT}#{TARGET}"}
    assert cancel(rt, SLOT)[1]["status"] == "cancelled"
    intent = intent_of(rt)
    assert (intent.outbox_status, intent.last_error) == ("cancelled", "cancelled by consumer")
    assert rt.wiring.ledger.work_owners("review", "illustration", ["501"]) == {}
    import json

    body = json.loads(message)
    result = deliver_message(rt.wiring.deliveries, body["kind"], body["key"])  # the message that was in flight
    assert result.action == "skipped" and channel.posts == []
    assert drain(rt.wiring.deliveries).processed == 0


def held_post(rt, channel):
    """A worker that claimed the job's one delivery row and is posting it now (held open)."""
    import json

    [message] = execute_only(rt)
    body = json.loads(message)
    worker = threading.Thread(target=deliver_message, args=(rt.wiring.deliveries, body["kind"], body["key"]))
    worker.start()
    assert channel.entered.wait(30)  # the worker holds the row and is posting now
    return worker


def test_a_cancel_racing_a_held_post_answers_200_within_a_second_and_commits_at_once(make_runtime):
    """Spec §12.7 (issue 21 item 7): one atomic commit, never blocked by a post in flight."""
    channel = GatedChannel(hold=True)
    rt = gated_runtime(make_runtime, channel)
    post_job(rt, task())
    worker = held_post(rt, channel)
    try:
        started = time.monotonic()
        status, job = cancel(rt, SLOT)
        elapsed = time.monotonic() - started
        assert status == 200 and elapsed < 1.0
        validate("Job", job)
        assert (job["status"], job["error"]) == ("cancelled", CANCELLED_ERROR)
        assert channel.committed is True  # committed while the post was still open
        state = rt.wiring.ledger.load(SLOT)
        assert (state.cells[TARGET].status, state.cells[TARGET].terminal_reason_code) == ("failed", "cancelled_by_consumer")
        assert intent_of(rt).outbox_status == "cancelled"
    finally:
        channel.release.set()
        worker.join()
    assert channel.posts == [("501", False)]  # the one post, made before the commit


def test_the_post_in_flight_settles_afterwards_unrecorded_and_keeps_its_work_reserved(make_runtime, logs):
    channel = GatedChannel(hold=True)
    rt = gated_runtime(make_runtime, channel)
    post_job(rt, task())
    worker = held_post(rt, channel)
    done = jobs_service.cancel(rt.wiring.job_control, SLOT)
    assert (done.cells_cancelled, done.rows_cancelled) == (1, 1)
    channel.release.set()  # the downstream answers 200 now: too late to be recorded
    worker.join()
    intent = intent_of(rt)
    assert (intent.outbox_status, intent.last_error, intent.lease_owner) == ("cancelled", "cancelled by consumer", None)
    # the downstream may hold the work: no other slot may send it again
    assert rt.wiring.ledger.work_owners("review", "illustration", ["501"]) == {"501": f"{SLOT}#{TARGET}"}
    assert [line["keys"] for line in logs.events("job.cancelled_during_post")] == [[intent.idempotency_key]]
    rt.clock.advance(3_600_000)
    rt.settle()
    assert channel.posts == [("501", False)]  # never posted again
    assert get_job(rt, SLOT)[1]["status"] == "cancelled"
    assert [e["type"] for e in events(rt, SLOT)[1]["events"]] == ["job.accepted", "job.started", "job.cancelled"]
    assert len(logs.outcomes(SLOT)) == 1


def test_a_post_that_failed_is_not_retried_after_the_cancel(make_runtime):
    channel = GatedChannel(hold=True, statuses=[503])
    rt = gated_runtime(make_runtime, channel)
    post_job(rt, task())
    worker = held_post(rt, channel)
    done = jobs_service.cancel(rt.wiring.job_control, SLOT)
    channel.release.set()
    worker.join()
    assert done.job["status"] == "cancelled" and done.rows_cancelled == 1
    assert intent_of(rt).outbox_status == "cancelled"
    rt.clock.advance(3_600_000)
    rt.settle()  # no retry message was sent, and the sweep finds nothing to re-drive
    assert channel.posts == [("501", False)]


def test_a_worker_that_died_mid_post_has_its_row_cancelled(make_runtime):
    channel = GatedChannel()
    rt = gated_runtime(make_runtime, channel)
    post_job(rt, task())
    execute_only(rt)
    intent = intent_of(rt)
    now = rt.clock.now_ms()
    assert rt.wiring.ledger.claim_intent(intent, "dlv-ghost", now, 120_000) is not None
    rt.clock.advance(121_000)  # its lease ran out: the post (≤ 60 s) is over, whatever it did
    assert cancel(rt, SLOT)[1]["status"] == "cancelled"
    assert intent_of(rt).outbox_status == "cancelled"
    rt.settle()
    assert channel.posts == []


def test_an_intent_recorded_after_the_cancel_is_dead_lettered_never_posted(make_runtime):
    """An executor still running when the cancel commits may record its intent afterwards."""
    channel = GatedChannel()
    rt = gated_runtime(make_runtime, channel)
    post_job(rt, task())
    drop(rt)
    ledger = rt.wiring.ledger
    real_put = ledger.put_intent

    def cancel_then_put(intent):
        ledger.put_intent = real_put
        assert jobs_service.cancel(rt.wiring.job_control, SLOT).cells_cancelled == 1  # commits while the executor runs
        return real_put(intent)

    ledger.put_intent = cancel_then_put
    execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert channel.committed
    rt.settle()
    assert channel.posts == []
    intent = intent_of(rt)
    assert (intent.outbox_status, intent.last_error) == ("dead", "work cancelled by consumer")
    assert get_job(rt, SLOT)[1]["status"] == "cancelled"
    assert [e["type"] for e in events(rt, SLOT)[1]["events"]] == ["job.accepted", "job.started", "job.cancelled"]


def test_cancelling_an_occurrence_with_a_submitted_cell_leaves_the_slot_partial(make_runtime, downstream):
    rt = jobs_runtime(make_runtime, mutate=lambda cfg: None, catalog=None)
    slot_id = rt.fire(PLAN, iso="2026-11-30T23:00:00Z")["slot_id"]
    drop(rt)
    execute_cell(rt.wiring.executions, slot_id, "cats")
    drain(rt.wiring.deliveries)
    state = rt.wiring.ledger.load(slot_id)
    # the two cells nobody claimed have no item yet: pending cells the snapshot stands for
    assert {c.target_id: (c.status, c.virtual) for c in state.snapshot_cells()} == {
        "cats": ("submitted", False), "landscape": ("pending", True), "ranking-daily": ("pending", True)}
    status, job = cancel(rt, slot_id)
    assert status == 200 and job["status"] == "succeeded"  # the job view is the first cell
    state = rt.wiring.ledger.load(slot_id)
    assert {t: (c.status, c.terminal_reason_code) for t, c in state.cells.items()} == {
        "cats": ("submitted", None), "landscape": ("failed", "cancelled_by_consumer"),
        "ranking-daily": ("failed", "cancelled_by_consumer")}
    assert state.slot.status == "partial" and not state.slot.open
    assert len(downstream.requests) == 1
