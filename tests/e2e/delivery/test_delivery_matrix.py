"""The delivery ACK matrix end to end (spec §10.4–§10.7, §13.9, §13.13–§13.15; DESIGN §4, §5).

Every test fires a ONE-target schedule through the trigger function, lets the execute function
select a work and record its intent, and then drives the deliver function (through the SQS pump)
against the real loopback HTTP downstream. Virtual time only: retries ride on the pump's virtual
delay holding (SQS DelaySeconds) or on the sweep's re-drive; nothing here sleeps.

What is asserted is what a user sees: the cell and slot states, the intent/outbox row, how many
requests reached the downstream, how many records it holds, and the idempotency keys they carried.
"""

from __future__ import annotations

import threading

from pixivflow import aws
import pytest

from conftest import TRIGGER_TOKEN, ms
from support.delivery import HOUR, REDRIVE_GRACE_MS, SECOND, drive

FIRE = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
SLOT = "morning-tokyo@2026-12-01T0800"
TARGET = "cats"
MINUTE = 60_000
BASE_MS = 30_000  # spec §10.5 default retryBaseMs
FIVE_HUNDRED = (500, {"error": "internal server error"})


# -- helpers ---------------------------------------------------------------------------------


def one_target(target: str = TARGET, *, route: dict | None = None, delivery: dict | None = None, extra=None):
    """A config mutator: the morning schedule fires only ``target``; route/delivery fields are merged in."""

    def mutate(cfg):
        cfg["schedules"][0]["targetIds"] = [target]
        cfg["delivery"]["targets"]["review"].update(route or {})
        cfg["delivery"].update(delivery or {})
        if extra:
            extra(cfg)

    return mutate


def start(make_runtime, **kwargs):
    """A runtime whose morning schedule has just fired (the cell is queued, nothing delivered yet)."""
    mutate = kwargs.pop("mutate", None) or one_target()
    rt = make_runtime(FIRE, mutate=mutate, **kwargs)
    result = rt.fire("morning-tokyo", iso=FIRE)
    assert result["slot_id"] == SLOT and result["disposition"] == "accepted"
    return rt


def state(rt, slot_id: str = SLOT):
    return rt.wiring.ledger.load(slot_id)


def cell(rt, slot_id: str = SLOT, target: str = TARGET):
    return state(rt, slot_id).cells[target]


def intent(rt, slot_id: str = SLOT, target: str = TARGET):
    intents = state(rt, slot_id).intents_for(target)
    assert len(intents) == 1, intents
    return intents[0]


def keys_of(downstream) -> list[tuple[str, str]]:
    return [(r.headers.get("idempotency-key"), (r.body or {}).get("idempotency_key")) for r in downstream.requests]


def idle_for(rt, span_ms: int, step_ms: int = HOUR) -> None:
    """Let hours pass with the sweep and the pumps running (to prove nothing else happens)."""
    end = rt.clock.now_ms() + span_ms
    while rt.clock.now_ms() < end:
        rt.clock.advance(step_ms)
        rt.pump()
        rt.sweep()
        rt.pump()


# -- 2xx rows of the ACK table (§10.6) ----------------------------------------------------------


def test_plain_200_submits_after_exactly_one_request(make_runtime, downstream):
    rt = start(make_runtime)
    rt.settle()
    c, i = cell(rt), intent(rt)
    assert c.status == "submitted" and c.work_id == i.work_id
    assert state(rt).slot.status == "success"
    assert (i.status, i.outbox_status, i.attempts, i.remote_id, i.remote_status) == ("delivered", "done", 1, "r-1", "pending_review")
    assert i.delivered_at is not None
    assert len(downstream.requests) == 1 and len(downstream.records) == 1
    idle_for(rt, 6 * HOUR)
    assert len(downstream.requests) == 1


def test_200_reused_true_is_an_idempotent_replay_and_submits(make_runtime, downstream):
    downstream.queue((200, {"data": {"review_id": "r-77", "status": "pending_review", "reused": True}}))
    rt = start(make_runtime)
    drive(rt)
    c, i = cell(rt), intent(rt)
    assert c.status == "submitted"
    assert state(rt).slot.status == "success"
    assert (i.status, i.outbox_status, i.remote_id, i.reuse_reason) == ("delivered", "done", "r-77", None)
    assert len(downstream.requests) == 1


def test_200_reused_historical_duplicate_ends_cell_and_intent_duplicate(make_runtime, downstream):
    downstream.queue((200, {"data": {"review_id": "r-5", "status": "published", "reused": True,
                                     "reuse_reason": "historical_duplicate",
                                     "matched_idempotency_key": "reconcile:review:illustration:1"}}))
    rt = start(make_runtime)
    drive(rt)
    c, i = cell(rt), intent(rt)
    assert c.status == "duplicate"
    assert c.last_error == "downstream attested historical duplicate"
    assert (i.status, i.outbox_status, i.reuse_reason, i.remote_id) == ("duplicate", "done", "historical_duplicate", "r-5")
    assert state(rt).slot.status == "failed"  # lifecycle: terminal, nothing submitted (spec §2.4)
    assert len(downstream.requests) == 1


def test_200_with_terminal_record_status_is_a_remote_failure_never_retried(make_runtime, downstream):
    downstream.queue((200, {"data": {"status": "FAILED "}}))
    rt = start(make_runtime)
    drive(rt)
    c, i = cell(rt), intent(rt)
    assert c.status == "failed"
    assert c.last_error == "downstream reported terminal status failed (review unknown)"
    assert (i.status, i.outbox_status, i.remote_status) == ("failed", "done", "failed")
    assert i.last_error == "delivery endpoint reported terminal status failed"
    assert state(rt).slot.status == "failed"
    idle_for(rt, 12 * HOUR)
    assert len(downstream.requests) == 1
    assert cell(rt).status == "failed"


# -- retryable answers -----------------------------------------------------------------------


def test_three_500s_then_200_submits_after_four_requests_with_one_key(make_runtime, downstream):
    downstream.queue(FIVE_HUNDRED, FIVE_HUNDRED, FIVE_HUNDRED)
    rt = start(make_runtime)
    rt.pump()
    first = intent(rt)
    assert (first.outbox_status, first.status, first.attempts) == ("retry_wait", "pending", 1)
    assert first.last_error.startswith("delivery endpoint HTTP 500")
    assert cell(rt).status == "delivery_pending"
    drive(rt)
    i = intent(rt)
    assert cell(rt).status == "submitted" and state(rt).slot.status == "success"
    assert (i.status, i.outbox_status, i.attempts, i.last_error) == ("delivered", "done", 4, None)
    assert len(downstream.requests) == 4
    assert set(keys_of(downstream)) == {(i.idempotency_key, i.idempotency_key)}
    assert i.idempotency_key == f"pixivflow:review:illustration:{i.work_id}:{SLOT}:{TARGET}"
    assert len(downstream.records) == 1


def test_429_is_retried_then_submitted(make_runtime, downstream):
    downstream.queue((429, {"error": "slow down"}))
    rt = start(make_runtime)
    rt.pump()
    i = intent(rt)
    assert (i.outbox_status, i.attempts, i.last_error) == ("retry_wait", 1, "HTTP 429 rate limited by delivery endpoint")
    drive(rt)
    assert cell(rt).status == "submitted"
    assert intent(rt).attempts == 2
    assert len(downstream.requests) == 2 and len(set(keys_of(downstream))) == 1


def test_400_dead_letters_at_once_and_fails_the_cell_delivery_abandoned(make_runtime, downstream):
    downstream.queue((400, {"error": "bad payload"}))
    rt = start(make_runtime)
    rt.pump()
    c, i = cell(rt), intent(rt)
    assert (i.status, i.outbox_status, i.attempts) == ("failed", "dead", 1)
    assert i.last_error.startswith("delivery endpoint HTTP 400")
    assert c.status == "failed" and c.terminal_reason_code == "delivery_abandoned"
    assert c.last_error.startswith("delivery endpoint HTTP 400")
    assert state(rt).slot.status == "failed"
    idle_for(rt, 12 * HOUR)
    assert len(downstream.requests) == 1


def test_read_timeout_is_retried_then_submitted(make_runtime, downstream):
    release = threading.Event()
    seen = []

    def responder(req):
        seen.append(req)
        if len(seen) == 1:
            release.wait(0.3)  # answer later than the route's 200 ms read timeout
            return (503, {"error": "too late"})
        return None  # normal behaviour afterwards

    downstream.state.responder = responder
    rt = start(make_runtime, mutate=one_target(route={"timeoutMs": 200}))
    try:
        rt.pump()
    finally:
        release.set()
    i = intent(rt)
    assert (i.outbox_status, i.status, i.attempts) == ("retry_wait", "pending", 1)
    assert "network_timeout" in i.last_error
    assert cell(rt).status == "delivery_pending"
    drive(rt)
    i = intent(rt)
    assert cell(rt).status == "submitted"
    assert (i.status, i.attempts) == ("delivered", 2)
    assert len(downstream.requests) == 2 and set(keys_of(downstream)) == {(i.idempotency_key, i.idempotency_key)}
    assert len(downstream.records) == 1


def test_lost_ack_after_commit_converges_by_replay_with_one_downstream_record(make_runtime, downstream):
    downstream.queue("drop")  # the downstream commits, then the connection dies before the answer
    rt = start(make_runtime)
    rt.pump()
    assert intent(rt).outbox_status == "retry_wait"
    assert len(downstream.records) == 1
    drive(rt)
    i = intent(rt)
    assert cell(rt).status == "submitted" and state(rt).slot.status == "success"
    assert (i.status, i.remote_id) == ("delivered", "r-1")
    assert len(downstream.requests) == 2
    assert len(downstream.records) == 1
    assert set(keys_of(downstream)) == {(i.idempotency_key, i.idempotency_key)}


def test_twelve_retryable_failures_dead_letter_the_row_and_fail_cell_and_slot(make_runtime, downstream):
    downstream.state.responder = lambda req: (503, {"error": "unavailable"})
    rt = start(make_runtime)
    drive(rt)
    c, i = cell(rt), intent(rt)
    assert (i.status, i.outbox_status, i.attempts, i.max_attempts) == ("failed", "dead", 12, 12)
    assert i.last_error.startswith("attempt budget exhausted after 12 attempts")
    assert c.status == "failed" and c.terminal_reason_code == "delivery_abandoned"
    assert state(rt).slot.status == "failed"
    assert len(downstream.requests) == 12
    assert len(set(keys_of(downstream))) == 1
    idle_for(rt, 24 * HOUR, step_ms=2 * HOUR)
    assert len(downstream.requests) == 12


def test_route_max_attempts_bounds_the_budget(make_runtime, downstream):
    downstream.state.responder = lambda req: FIVE_HUNDRED
    rt = start(make_runtime, mutate=one_target(route={"maxAttempts": 3}))
    drive(rt)
    assert (intent(rt).outbox_status, intent(rt).attempts) == ("dead", 3)
    assert cell(rt).terminal_reason_code == "delivery_abandoned"
    assert len(downstream.requests) == 3


# -- worker crash and lost messages (§13.14, DESIGN §5) ------------------------------------------


def test_lost_outbox_message_is_re_sent_by_the_sweep_after_120_s(make_runtime, downstream):
    rt = start(make_runtime)
    t0 = rt.clock.now_ms()
    while rt.pumps["execute"].poll():
        pass
    assert cell(rt).status == "delivery_pending"
    sqs = aws.client("sqs")
    url = rt.env["OUTBOX_QUEUE_URL"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert len(got) == 1  # the one outbox message ... lost
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    rt.pump()
    assert downstream.requests == []
    rt.clock.set(t0 + 119 * SECOND)
    assert rt.sweep()["redriven"] == 0
    rt.pump()
    assert downstream.requests == [] and intent(rt).outbox_status == "pending"
    rt.clock.set(t0 + REDRIVE_GRACE_MS)
    assert rt.sweep()["redriven"] == 1
    rt.pump()
    assert len(downstream.requests) == 1
    assert cell(rt).status == "submitted" and intent(rt).status == "delivered"


def test_worker_dying_before_recording_the_ack_is_redriven_after_lease_expiry(make_runtime, downstream):
    """The POST committed, then the worker died before settling: the row stays `processing` under its
    lease; after the lease expires the sweep re-drives it, the same key is replayed, one record."""
    from pixivflow.domain.errors import LedgerUnavailable

    rt = start(make_runtime)
    ledger = rt.wiring.ledger
    real_settle = ledger.settle_intent
    crashes = []

    def crash_once(*args, **kwargs):
        if not crashes:
            crashes.append(1)
            raise LedgerUnavailable("DynamoDB update_item failed: simulated worker crash")
        return real_settle(*args, **kwargs)

    ledger.settle_intent = crash_once
    rt.pump()
    i = intent(rt)
    assert crashes and i.outbox_status == "processing" and i.attempts == 0
    assert len(downstream.requests) == 1 and len(downstream.records) == 1
    rt.clock.advance(60 * SECOND)
    rt.sweep()
    rt.pump()
    assert len(downstream.requests) == 1  # the lease (120 s) still protects the row
    drive(rt)
    i = intent(rt)
    assert cell(rt).status == "submitted"
    assert (i.status, i.outbox_status) == ("delivered", "done")
    assert len(downstream.requests) == 2 and len(downstream.records) == 1
    assert set(keys_of(downstream)) == {(i.idempotency_key, i.idempotency_key)}


# -- backoff (§10.5; DESIGN §5) -------------------------------------------------------------------


def test_backoff_starts_within_15_to_30_s_and_doubles(make_runtime, downstream):
    downstream.state.responder = lambda req: FIVE_HUNDRED
    rt = start(make_runtime)
    rt.pump()
    for n in range(1, 6):  # windows 30 s .. 480 s: every retry fits an SQS delay (≤ 900 s)
        i = intent(rt)
        assert (i.outbox_status, i.attempts) == ("retry_wait", n)
        failed_at = i.updated_at
        delay = i.next_attempt_at - failed_at
        window = BASE_MS * 2 ** (n - 1)
        assert window // 2 <= delay <= window, (n, delay)
        if n == 1:
            assert 15 * SECOND <= delay <= 30 * SECOND
        # ≤ 900 s: the retry rides on an SQS delay that ends at (or just after) nextAttemptAt
        release = rt.next_release()
        assert release is not None and i.next_attempt_at <= release < i.next_attempt_at + SECOND
        rt.clock.set(i.next_attempt_at - SECOND)
        rt.pump()
        assert len(downstream.requests) == n  # not before it is due
        rt.clock.set(release)
        rt.pump()
        assert len(downstream.requests) == n + 1
    assert len(set(keys_of(downstream))) == 1


def test_backoff_beyond_900_s_is_not_put_on_sqs_but_re_driven_by_the_sweep(make_runtime, downstream):
    downstream.queue(FIVE_HUNDRED)
    rt = start(make_runtime, mutate=one_target(delivery={"outboxRetryBaseMs": 2_000_000}))
    rt.pump()
    i = intent(rt)
    delay = i.next_attempt_at - i.updated_at
    assert 1_000 * SECOND <= delay <= 2_000 * SECOND
    assert rt.next_release() is None  # nothing held for later release
    attrs = aws.client("sqs").get_queue_attributes(
        QueueUrl=rt.env["OUTBOX_QUEUE_URL"],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    assert all(v == "0" for v in attrs.values()), attrs
    rt.clock.set(i.next_attempt_at + 60 * SECOND)
    assert rt.sweep()["redriven"] == 0
    rt.pump()
    assert len(downstream.requests) == 1
    rt.clock.set(i.next_attempt_at + REDRIVE_GRACE_MS)
    assert rt.sweep()["redriven"] == 1
    rt.pump()
    assert len(downstream.requests) == 2
    assert cell(rt).status == "submitted" and intent(rt).status == "delivered"


def test_slot_with_a_slow_but_successful_delivery_is_not_failed_by_the_stall_sweep(make_runtime, downstream):
    """Six 500s at the default backoff span > 15 min (the stall budget) before the 200 arrives.

    The outbox owns a delivery_pending cell whose row is still actionable (spec §13.12, DESIGN §4
    "the slot turns terminal when every cell is terminal"): the slot must end `success` with an
    outcome record that says so, not `failed` with `stalled_no_heartbeat` and a submitted cell."""
    downstream.queue(*[FIVE_HUNDRED] * 6)
    rt = start(make_runtime)
    rt.settle(max_ms=2 * HOUR)
    st = state(rt)
    assert st.cells[TARGET].status == "submitted"
    assert intent(rt).attempts == 7
    outcome = rt.wiring.ledger.get_event(SLOT, "execution.summary")["detail"]["outcome"]
    assert (st.slot.status, st.slot.last_error) == ("success", None)
    assert outcome["status"] == "success" and outcome["cells"]["submitted"] == 1


# -- the drain endpoint (POST /internal/outbox/drain) ----------------------------------------------


def _three_due_rows(make_runtime, downstream):
    """Three one-work cells whose first attempt failed; every row is due, nothing pumped since."""
    three = ["cats", "landscape", "ranking-daily"]
    downstream.queue(FIVE_HUNDRED, FIVE_HUNDRED, FIVE_HUNDRED)
    rt = make_runtime(FIRE, mutate=lambda cfg: cfg["schedules"][0].update(targetIds=three))
    rt.fire("morning-tokyo", iso=FIRE)
    rt.pump()  # three first attempts fail; their retries are held by the (virtual) SQS delay
    st = state(rt)
    assert sorted(i.outbox_status for i in st.intents) == ["retry_wait"] * 3
    assert len(downstream.requests) == 3
    rt.clock.advance(31 * SECOND)  # every row is due now (attempt 1 waits at most 30 s)
    return rt


def _assert_one_done_one_retried_one_dead(rt, downstream):
    assert len(downstream.requests) == 6
    st = state(rt)
    assert sorted((i.status, i.outbox_status) for i in st.intents) == [
        ("delivered", "done"), ("failed", "dead"), ("pending", "retry_wait")]
    expected_cell = {"done": "submitted", "dead": "failed", "retry_wait": "delivery_pending"}
    for i in st.intents:
        assert st.cells[i.target_id].status == expected_cell[i.outbox_status]


def test_drain_endpoint_rejects_a_missing_or_wrong_token(make_runtime, downstream):
    rt = _three_due_rows(make_runtime, downstream)
    status, body = rt.http("POST", "/internal/outbox/drain")
    assert status == 401 and body["status"] == "error"
    assert rt.http("POST", "/internal/outbox/drain", token="wrong-token")[0] == 401
    assert len(downstream.requests) == 3
    assert sorted((i.outbox_status, i.attempts) for i in state(rt).intents) == [("retry_wait", 1)] * 3


NOTHING_QUEUED = {"queued": 0, "kinds": {"delivery": 0, "event_callback": 0, "notification": 0}, "unsent": 0}


def test_drain_endpoint_queues_due_rows_for_the_deliver_function(make_runtime, downstream):
    """The drain route hands every due row to the deliver function's queue and sends nothing
    itself (issue 21: trigger holds no route secret). The rows' held retries are lost first, so
    only the drain's messages can deliver them; draining twice queues twice, and the rows' own
    claims still send each once."""
    rt = _three_due_rows(make_runtime, downstream)
    assert rt.pumps["deliver"].lose_held() == 3
    downstream.queue("commit", FIVE_HUNDRED, (400, {"error": "rejected"}))
    three = {**NOTHING_QUEUED, "queued": 3, "kinds": {**NOTHING_QUEUED["kinds"], "delivery": 3}}
    assert rt.http("POST", "/internal/outbox/drain", token=TRIGGER_TOKEN) == (200, {"status": "ok", "result": three})
    assert len(downstream.requests) == 3  # the trigger function talked to no route
    assert rt.http("POST", "/internal/outbox/drain", token=TRIGGER_TOKEN)[1]["result"] == three  # still due
    assert rt.pump() == 6
    _assert_one_done_one_retried_one_dead(rt, downstream)  # 6 requests: each row sent once
    assert rt.http("POST", "/internal/outbox/drain", token=TRIGGER_TOKEN) == (200, {"status": "ok", "result": NOTHING_QUEUED})
    rt.pump()
    assert len(downstream.requests) == 6


def test_drain_endpoint_leaves_a_claimed_row_to_its_worker(make_runtime, downstream):
    rt = _three_due_rows(make_runtime, downstream)
    rt.pumps["deliver"].lose_held()
    busy = state(rt).intents[0]
    assert rt.wiring.ledger.claim_intent(busy, "dlv-other-worker", rt.clock.now_ms(), 120 * SECOND) is not None
    status, body = rt.http("POST", "/internal/outbox/drain", token=TRIGGER_TOKEN)
    assert (status, body["result"]["queued"], body["result"]["kinds"]["delivery"]) == (200, 2, 2)
    downstream.queue("commit", "commit")
    rt.pump()
    assert len(downstream.requests) == 5
    rows = {i.idempotency_key: i for i in state(rt).intents}
    assert (rows[busy.idempotency_key].outbox_status, rows[busy.idempotency_key].attempts) == ("processing", 1)
    assert sorted(i.outbox_status for k, i in rows.items() if k != busy.idempotency_key) == ["done", "done"]


def test_drain_service_counters_behind_the_endpoint(make_runtime, downstream):
    """The same scenario one layer down (services.delivery.drain), independent of the HTTP resolver."""
    from pixivflow.services.delivery import drain

    rt = _three_due_rows(make_runtime, downstream)
    downstream.queue("commit", FIVE_HUNDRED, (400, {"error": "rejected"}))
    assert drain(rt.wiring.deliveries).as_dict() == {"processed": 3, "done": 1, "retried": 1, "dead": 1}
    _assert_one_done_one_retried_one_dead(rt, downstream)
    assert drain(rt.wiring.deliveries).as_dict() == {"processed": 0, "done": 0, "retried": 0, "dead": 0}
    # the retried row's held SQS retry still delivers it later, with the same key
    drive(rt)
    assert sorted(c.status for c in state(rt).cells.values()) == ["failed", "submitted", "submitted"]
    assert len(downstream.requests) == 7


# -- selection-time dedupe across slots (§10.1) ----------------------------------------------------

ONE_CAT = {
    "illusts": [{
        "id": 424242, "type": "illust", "title": "The only cat", "tags": [{"name": "cats"}],
        "user": {"id": 1, "name": "solo"}, "create_date": "2026-11-01T00:00:00+09:00",
        "total_bookmarks": 5, "page_count": 1,
    }],
    "novels": [],
    "ranking": {},
}


def test_a_confirmed_work_is_never_delivered_again_by_another_slot(make_runtime, downstream):
    rt = start(make_runtime, catalog=ONE_CAT)
    drive(rt)
    assert cell(rt).status == "submitted" and cell(rt).work_id == "424242"
    rt.clock.set(ms("2026-12-01T23:00:00Z"))
    nxt = rt.fire("morning-tokyo", iso="2026-12-01T23:00:00Z")
    slot2 = nxt["slot_id"]
    assert slot2 == "morning-tokyo@2026-12-02T0800"
    rt.settle()
    c2 = cell(rt, slot2)
    assert c2.status == "no_candidate" and c2.work_id is None
    assert state(rt, slot2).intents == []
    assert len(downstream.requests) == 1 and len(downstream.records) == 1


def test_a_work_still_pending_delivery_is_not_selected_by_another_slot(make_runtime, downstream):
    def second_schedule(cfg):
        cfg["schedules"][1].update(cron="5 8 * * *", timezone="Asia/Tokyo", targetIds=[TARGET])

    downstream.queue(FIVE_HUNDRED)
    rt = start(make_runtime, catalog=ONE_CAT, mutate=one_target(extra=second_schedule))
    rt.pump()
    assert intent(rt).outbox_status == "retry_wait"
    rt.clock.set(ms("2026-11-30T23:05:00Z"))
    other = rt.fire("evening-berlin", iso="2026-11-30T23:05:00Z")["slot_id"]
    rt.pump()
    assert cell(rt, other).status == "no_candidate"
    drive(rt)
    assert cell(rt).status == "submitted"
    assert state(rt, other).intents == []
    assert len(downstream.records) == 1
    assert [r.body["work"]["id"] for r in downstream.requests] == ["424242", "424242"]


# -- what travels on the wire ------------------------------------------------------------------------


def test_request_carries_key_slot_target_and_work_and_the_route_token(make_runtime, downstream):
    rt = start(make_runtime, mutate=one_target(route={"token": "route-secret-123"}))
    drive(rt)
    (req,) = downstream.requests
    i = intent(rt)
    assert req.path == "/review"
    assert req.headers["idempotency-key"] == req.body["idempotency_key"] == i.idempotency_key
    assert req.headers["authorization"] == "Bearer route-secret-123"
    assert req.headers["content-type"].startswith("application/json")
    assert (req.body["slot_id"], req.body["target_id"]) == (SLOT, TARGET)
    work = req.body["work"]
    assert work["id"] == i.work_id == cell(rt).work_id
    assert isinstance(work["title"], str) and work["title"]
    assert "cats" in work["tags"]


def test_no_authorization_header_without_a_route_token(make_runtime, downstream):
    rt = start(make_runtime)
    drive(rt)
    (req,) = downstream.requests
    assert "authorization" not in req.headers
    assert cell(rt).status == "submitted"


@pytest.mark.parametrize("reason", ["execution_timeout", "stalled_no_heartbeat"])
def test_a_row_of_a_cell_the_sweep_already_failed_is_dead_lettered_never_posted(make_runtime, downstream, reason):
    """Found by the seeded simulation (seed 15): an executor died right after recording its intent, the
    cell stayed `selected` until the sweep failed it, and the sweep's later re-drive of the still-pending
    row posted a work whose cell the outcome record already called failed (spec §13.3)."""
    rt = start(make_runtime)
    rt.pumps["execute"].poll()  # the executor records the intent; the deliver function has not run yet
    [intent] = state(rt).intents
    assert intent.outbox_status == "pending"
    assert rt.wiring.ledger.transition_cell(SLOT, TARGET, "failed", rt.clock.now_ms(), reason_code=reason,
                                            reason_message="ended by the sweep", last_error="ended by the sweep")
    rt.settle()
    after = state(rt)
    [cell] = after.snapshot_cells()
    [row] = after.intents
    assert downstream.requests == []  # nothing reached the route
    assert (cell.status, cell.terminal_reason_code) == ("failed", reason)  # the cell keeps how it ended
    assert (row.status, row.outbox_status) == ("failed", "dead")
    assert row.last_error.startswith(f"cell already ended failed ({reason})")


def test_an_answer_whose_settle_is_refused_moves_nothing_else(make_runtime, downstream):
    """A worker whose lease moved on to another worker gets its answer back (a downstream's terminal
    status): its conditional settle is refused, and then it records nothing - not the cell, not the
    slot, not the work's reservation. The row's new holder owns all three."""
    from pixivflow.domain.ack import AckKind, DeliveryAck
    from pixivflow.domain.model import cell_key
    from pixivflow.services.delivery import _handle

    rt = start(make_runtime)
    rt.pumps["execute"].poll()
    row = intent(rt)
    now = rt.clock.now_ms()
    assert rt.wiring.ledger.claim_intent(row, "the-new-holder", now, 120_000) is not None
    before = cell(rt)
    answer = DeliveryAck(AckKind.REMOTE_FAILED, 200, remote_id="r-9", remote_status="rejected")
    result = _handle(rt.wiring.deliveries, row, "the-zombie", answer)
    assert result.action == "skipped"
    after = cell(rt)
    assert (after.status, after.terminal_reason_code) == (before.status, before.terminal_reason_code)
    assert state(rt).slot.status == "running"
    assert (intent(rt).outbox_status, intent(rt).lease_owner) == ("processing", "the-new-holder")
    assert rt.wiring.ledger.work_owners(row.route, row.work_type, [row.work_id]) == {row.work_id: cell_key(SLOT, TARGET)}
