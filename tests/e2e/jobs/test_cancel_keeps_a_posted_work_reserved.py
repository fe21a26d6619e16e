"""A consumer's cancel keeps the work of a row the downstream may hold reserved, so no other slot sends
it on that route again (spec §13.2; §10.1: the selection excludes a work that is pending, delivered or
duplicate on the route, whatever the slot, and a manual job selects like any occurrence, spec §12.3).

Each test replays, step by step through the real services, a history ``make sim`` found (issue 20:
each bug the simulation found gets a scenario test that fails when its fix is reverted; a seed
replay drifts with the call order and guards nothing):

* demo-world seed 1123: the job's post reached the downstream and its ACK was lost before the cancel;
* demo-world seed 6093: the job's deliverer died between its post and its settle, and the cancel came
  once its claim had run out (a claim uses no attempt: the row showed no sign of the post);
* seed 207643: as 6093, but the next deliverer took the lapsed claim over and deferred the row (the
  route was not ready), which put it back in the queue as if never claimed, before the cancel."""

from __future__ import annotations

import json

import pytest

from conftest import ms
from support.jobs import PLAN, TARGET, LosingChannel, cancel, jobs_runtime, post_job, task
from support.queues import take

from pixivflow.services.delivery import deliver_message
from pixivflow.services.timing import OUTBOX_LEASE_MS
from pixivflow.services.execution import execute_cell

FIRST = f"{PLAN}@manual-job-key-1"
SECOND = f"{PLAN}@manual-job-key-2"
FIRE = "2026-11-30T23:00:00Z"  # morning-tokyo's 08:00 Asia/Tokyo, a minute after support.jobs.START


def test_a_cancel_after_a_lost_ack_keeps_the_work_reserved_so_no_other_slot_sends_it_again(make_runtime):
    """Seed 1123: the job's post reached the downstream, its ACK was lost (row ``retry_wait``,
    one attempt), the consumer cancelled; the cancel gave the work back, and the scheduled
    occurrence delivered the same work on the same route again (spec §13.2). A row an earlier
    attempt posted keeps its work reserved, as a row in flight does."""
    channel = LosingChannel(lose=1)
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    assert post_job(rt, task())[0] == 202
    take(rt, "EXECUTION_QUEUE_URL")
    execute_cell(rt.wiring.executions, FIRST, TARGET)  # binds the newest cats work, 501, and records its delivery row
    [message] = take(rt, "OUTBOX_QUEUE_URL")
    body = json.loads(message)
    deliver_message(rt.wiring.deliveries, body["kind"], body["key"])  # posted; the answer is lost
    [intent] = rt.wiring.ledger.load(FIRST).intents
    assert (intent.outbox_status, intent.attempts, channel.posts) == ("retry_wait", 1, [("501", FIRST)])

    status, job = cancel(rt, FIRST)
    assert (status, job["status"]) == (200, "cancelled")
    owner = f"{FIRST}#{TARGET}"
    assert rt.wiring.ledger.work_owners("review", "illustration", ["501"]) == {"501": owner}  # the downstream may hold it

    rt.clock.set(ms(FIRE))
    assert rt.fire(PLAN, ms(FIRE))["status"] == "admitted"
    rt.settle()
    works = [work for work, _ in channel.posts]
    assert works.count("501") == 1, channel.posts  # never a second delivery of the work on the route
    assert works == ["501", "502"]  # the occurrence took the next work instead


class Died(BaseException):
    """The deliverer's death (issue 20 §3): none of its code runs after this point (a
    BaseException, so no ``except Exception`` of the product settles anything on its way out)."""


class DyingChannel(LosingChannel):
    """A route that takes every post; the invocation making the first ``die`` posts dies right
    after the downstream took it, before the answer reaches the outbox worker."""

    def __init__(self, die: int = 1) -> None:
        super().__init__(lose=0)
        self.die = die
        self.up = True

    def ready(self, route):
        return self.up

    def deliver(self, request):
        response = super().deliver(request)
        if self.die > 0:
            self.die -= 1
            raise Died()
        return response


def _run_job(rt, key: str, slot_id: str) -> str:
    """Admit a job, run its executor: returns the outbox message's key of its one delivery row."""
    assert post_job(rt, task(key))[0] == 202
    take(rt, "EXECUTION_QUEUE_URL")
    execute_cell(rt.wiring.executions, slot_id, TARGET)
    [message] = take(rt, "OUTBOX_QUEUE_URL")
    return json.loads(message)["key"]


def test_a_cancel_after_a_deliverer_died_between_its_post_and_its_settle_keeps_the_work_reserved(make_runtime):
    """Seed 6093: two manual jobs of one target delivered the same work on the same route. The first
    job's deliverer claimed its row, posted it (the downstream took it) and died before it could
    settle: the row stayed ``processing`` with no attempt counted. Once its lease had run out the
    consumer cancelled the job, the cancel took that row for one that was never posted and gave its
    work back, and the second job selected and delivered the same work again."""
    channel = DyingChannel(die=1)
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    key = _run_job(rt, "job-key-1", FIRST)
    with pytest.raises(Died):
        deliver_message(rt.wiring.deliveries, "delivery", key)  # posted, then the deliverer died before settle_intent
    [intent] = rt.wiring.ledger.load(FIRST).intents
    assert (intent.outbox_status, intent.attempts, channel.posts) == ("processing", 0, [("501", FIRST)])

    rt.clock.advance(OUTBOX_LEASE_MS + 1_000)  # its claim ran out: nothing shows the post was made
    status, job = cancel(rt, FIRST)
    assert (status, job["status"]) == (200, "cancelled")
    # the downstream may hold the work (it does): no other slot may send it on this route
    assert rt.wiring.ledger.work_owners("review", "illustration", ["501"]) == {"501": f"{FIRST}#{TARGET}"}

    deliver_message(rt.wiring.deliveries, "delivery", _run_job(rt, "job-key-2", SECOND))
    rt.settle()
    works = [work for work, _ in channel.posts]
    assert works.count("501") == 1, channel.posts  # never a second delivery of the work on the route
    assert channel.posts == [("501", FIRST), ("502", SECOND)]  # the second job took the next work instead


def test_a_deferral_after_a_dead_deliverers_claim_keeps_the_work_reserved_through_the_cancel(make_runtime):
    """Seed 207643: the first job's deliverer posted its row (the downstream took it) and died before
    its settle. Once its claim had lapsed the next deliverer took the row over, found the route not
    ready and deferred it: the row was ``pending`` again, with no attempt and no claim on it, as if
    never sent. The consumer cancelled the job, the cancel gave the work back, and the second job
    selected and delivered the same work again. The first worker's claim stays on the row until a
    settle (``Intent.unsettled_claim``): a deferral by a worker that took a lapsed claim over keeps it."""
    channel = DyingChannel(die=1)
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    key = _run_job(rt, "job-key-1", FIRST)
    with pytest.raises(Died):
        deliver_message(rt.wiring.deliveries, "delivery", key)  # posted, then the deliverer died before settle_intent
    rt.clock.advance(OUTBOX_LEASE_MS + 1_000)
    channel.up = False
    assert deliver_message(rt.wiring.deliveries, "delivery", key).action == "deferred"  # took the lapsed claim over
    take(rt, "OUTBOX_QUEUE_URL")  # the deferral's wake-up, a minute later
    [intent] = rt.wiring.ledger.load(FIRST).intents
    assert (intent.outbox_status, intent.attempts, intent.may_be_downstream) == ("pending", 0, True)

    status, job = cancel(rt, FIRST)
    assert (status, job["status"]) == (200, "cancelled")
    assert rt.wiring.ledger.work_owners("review", "illustration", ["501"]) == {"501": f"{FIRST}#{TARGET}"}

    channel.up = True
    deliver_message(rt.wiring.deliveries, "delivery", _run_job(rt, "job-key-2", SECOND))
    rt.settle()
    assert channel.posts == [("501", FIRST), ("502", SECOND)]  # the second job took the next work instead


def test_a_deferral_by_the_worker_that_claimed_the_row_gives_the_work_back_on_cancel(make_runtime):
    """The other side of the same rule: a worker that claims a row and defers it posted nothing, and
    no one else claimed it, so the cancel gives the work back and another job may deliver it."""
    channel = DyingChannel(die=0)
    channel.up = False
    rt = jobs_runtime(make_runtime, overrides={"channel": channel})
    key = _run_job(rt, "job-key-1", FIRST)
    assert deliver_message(rt.wiring.deliveries, "delivery", key).action == "deferred"
    take(rt, "OUTBOX_QUEUE_URL")
    [intent] = rt.wiring.ledger.load(FIRST).intents
    assert (intent.outbox_status, intent.may_be_downstream) == ("pending", False)
    assert cancel(rt, FIRST)[0] == 200
    assert rt.wiring.ledger.work_owners("review", "illustration", ["501"]) == {}

    channel.up = True
    deliver_message(rt.wiring.deliveries, "delivery", _run_job(rt, "job-key-2", SECOND))
    rt.settle()
    assert channel.posts == [("501", SECOND)]
