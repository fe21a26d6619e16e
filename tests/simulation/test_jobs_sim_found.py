"""Deterministic scenarios of the faults ``make sim`` found once jobs, callbacks and cancel were in
its world (issue 20: "each bug the simulation ever found gets a deterministic scenario test that
fails when its fix is reverted"; seed replays drift with the call order and guard nothing).

Each test builds the one history the seed stumbled on, step by step, through the real services."""

from __future__ import annotations

import json

import httpx

from conftest import ms
from support.jobs import PLAN, TARGET, cancel, jobs_runtime, post_job, task
from support.queues import take

from pixivflow.ports import DeliveryResponse
from pixivflow.services.delivery import deliver_message
from pixivflow.services.execution import execute_cell

SLOT = f"{PLAN}@manual-job-key-1"
FIRE = "2026-11-30T23:00:00Z"  # morning-tokyo's 08:00 Asia/Tokyo, a minute after support.jobs.START


class LosingChannel:
    """A route that takes every post (the downstream records it) and, for the first ``lose``
    posts, loses its answer on the way back (the connection resets after the request was read)."""

    def __init__(self, lose: int = 1) -> None:
        self.lose = lose
        self.posts: list[tuple[str, str]] = []  # (work id, slot id)

    def send(self, route, payload, idempotency_key):
        self.posts.append((str(payload["work_id"]), idempotency_key.split(":")[4]))
        if self.lose > 0:
            self.lose -= 1
            raise httpx.ReadError("connection reset by peer after the request was sent")
        return DeliveryResponse(200, {"data": {"review_id": f"r-{len(self.posts)}", "status": "pending_review"}})

    def ready(self, route):
        return True

    def deliver(self, request):
        return self.send(request.route, request.body, request.idempotency_key)


def test_a_cancel_after_a_lost_ack_keeps_the_work_reserved_so_no_other_slot_sends_it_again(make_runtime):
    """Seed 1123: the job's post reached the downstream, its ACK was lost (row ``retry_wait``,
    one attempt), the consumer cancelled; the cancel gave the work back, and the scheduled
    occurrence delivered the same work on the same route again (spec §13.2). A row an earlier
    attempt posted keeps its work reserved, as a row in flight does."""
    channel = LosingChannel(lose=1)
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    assert post_job(rt, task())[0] == 202
    take(rt, "EXECUTION_QUEUE_URL")
    execute_cell(rt.engine, SLOT, TARGET)  # binds the newest cats work, 501, and records its delivery row
    [message] = take(rt, "OUTBOX_QUEUE_URL")
    body = json.loads(message)
    deliver_message(rt.engine, body["kind"], body["key"])  # posted; the answer is lost
    [intent] = rt.engine.ledger.load(SLOT).intents
    assert (intent.outbox_status, intent.attempts, channel.posts) == ("retry_wait", 1, [("501", SLOT)])

    status, job = cancel(rt, SLOT)
    assert (status, job["status"]) == (200, "cancelled")
    owner = f"{SLOT}#{TARGET}"
    assert rt.engine.ledger.work_owners("review", "illustration", ["501"]) == {"501": owner}  # the downstream may hold it

    rt.clock.set(ms(FIRE))
    assert rt.fire(PLAN, ms(FIRE))["status"] == "admitted"
    rt.settle()
    works = [work for work, _ in channel.posts]
    assert works.count("501") == 1, channel.posts  # never a second delivery of the work on the route
    assert works == ["501", "502"]  # the occurrence took the next work instead
