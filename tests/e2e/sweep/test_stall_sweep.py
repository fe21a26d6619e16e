"""The one-minute sweep through the real ``stall_sweep`` handler on the virtual clock (spec §7, §8, §13.16; DESIGN §4).

Faults are played the way production meets them: an execution message that never arrives is
a message taken off the queue and thrown away; an executor that died mid-run is a cell lease
claimed by an owner that never comes back. Every assertion is on what an operator sees: the
ledger, the terminal reason codes, the sweep's counters and its log lines.
"""

from __future__ import annotations

import json

import pytest

from conftest import claim, ms
from pixivflow.domain.outbox import OutgoingMessage
from pixivflow.services.messages import execution_body
from support.queues import take

T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01: a fire of "0 8 * * *"
T0_MS = ms(T0)
MIN = 60_000
QUEUED_MESSAGE = "排队超时，未能开始执行"
STALLED_MESSAGE = "执行中断，长时间没有进展"
TIMEOUT_MESSAGE = "执行超时"
OUTCOME_MESSAGE = "Schedule occurrence reached a terminal outcome"
GHOST = "exec-ghost-that-died"


def schedule(sid: str, targets: list[str], **extra):
    def mutate(cfg):
        cfg["schedules"].append({"id": sid, "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": targets, **extra})

    return mutate


def both(*mutations):
    def mutate(cfg):
        for m in mutations:
            m(cfg)

    return mutate


def slot_of(sid: str, day: str = "2026-12-01") -> str:
    return f"{sid}@{day}T0800"


def at(rt, minutes: float) -> int:
    rt.clock.set(T0_MS + int(minutes * MIN))
    return rt.clock.now_ms()


def drop(rt, queue: str = "EXECUTION_QUEUE_URL") -> list[dict]:
    """Take every visible message off a queue and throw it away (a lost message). Returns the bodies."""
    return [json.loads(body) for body in take(rt, queue, visibility_s=30)]


def sweep_each_minute(rt, first: int, last: int, *, lose: tuple[str, ...] = ("EXECUTION_QUEUE_URL",), before=None):
    """Sweep at every whole minute in [first, last]; whatever the sweep sends is lost again."""
    results = []
    for minute in range(first, last + 1):
        at(rt, minute)
        if before:
            before(minute)
        result = rt.sweep()
        lost = {q: drop(rt, q) for q in lose}
        results.append((minute, result, lost))
    return results


def cells_by_target(rt, slot_id: str) -> dict:
    state = rt.wiring.ledger.load(slot_id)
    return {c.target_id: c for c in state.snapshot_cells()}


def die_mid_run(rt, slot_id: str, target_id: str, *, ttl_ms: int = 180_000):
    """An executor claims the cell (lease + heartbeat), moves the slot to running, then dies."""
    now = rt.clock.now_ms()
    cell = claim(rt.wiring.ledger, slot_id, target_id, GHOST, now, ttl_ms)
    assert cell is not None
    assert rt.wiring.ledger.mark_slot_running(slot_id, now)
    return cell


def renew_lease(rt, slot_id: str, target_id: str, owner: str = GHOST) -> bool:
    """The lease holder renews its lease (same-owner re-claim: lease + heartbeat move to now).

    ``ledger.heartbeat_cell`` is the executor's own call for this, but it is broken (see
    test_an_executor_heartbeat_renews_its_lease_and_moves_the_progress_clock), so the tests that
    only need a live, heartbeating owner use the claim path, which writes the same two fields."""
    return claim(rt.wiring.ledger, slot_id, target_id, owner, rt.clock.now_ms(), 180_000) is not None


def execute_only(rt, slot_id: str, target_id: str) -> None:
    """Deliver exactly one execution message to the real execute handler."""
    rt.wiring.queues.send_execution([OutgoingMessage(execution_body(slot_id, target_id))])
    assert rt.pumps["execute"].poll() == 1


# -- rule 1: queued_too_long -------------------------------------------------------------------


def test_admitted_but_never_claimed_slot_fails_queued_too_long_at_30_minutes(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=schedule("pair", ["cats", "landscape"]))
    slot_id = slot_of("pair")
    assert rt.fire("pair", iso=T0)["sent"] == 2
    assert len(drop(rt)) == 2  # both execution messages lost

    # Recovery keeps re-dispatching every 5 minutes while the slot is inside its budget,
    # and every re-dispatch is lost as well.
    history = sweep_each_minute(rt, 1, 29)
    assert [m for m, r, _ in history if r["recovered"]] == [5, 10, 15, 20, 25]
    assert all(len(lost["EXECUTION_QUEUE_URL"]) == (2 if r["recovered"] else 0) for _, r, lost in history)
    assert all(r["queuedTooLong"] == 0 for _, r, _ in history)
    rt.clock.set(T0_MS + 30 * MIN - 1)
    assert rt.sweep()["queuedTooLong"] == 0
    assert rt.wiring.ledger.get_slot(slot_id).status == "pending"

    at(rt, 30)
    result = rt.sweep()
    assert result["queuedTooLong"] == 1 and result["stalledNoHeartbeat"] == 0 and result["recovered"] == 0
    assert drop(rt) == []  # a slot past its budget is not re-dispatched

    state = rt.wiring.ledger.load(slot_id)
    assert state.slot.status == "failed"
    assert state.slot.last_error == QUEUED_MESSAGE
    for cell in state.snapshot_cells():
        assert (cell.status, cell.terminal_reason_code, cell.terminal_reason_message, cell.last_error) == (
            "failed", "queued_too_long", QUEUED_MESSAGE, QUEUED_MESSAGE)
        assert cell.lease_owner is None

    stalled = logs.events("sweep.stalled")
    assert len(stalled) == 1
    assert stalled[0]["slot_id"] == slot_id and stalled[0]["reason_code"] == "queued_too_long"
    assert stalled[0]["cells_failed"] == 2 and stalled[0]["stalled_since"] == T0_MS

    [outcome] = logs.outcomes(slot_id)
    assert outcome["status"] == "failed" and outcome["business_status"] == "failed" and outcome["alertable"] is True
    assert outcome["cells"]["executor_failed"] == 2 and outcome["cells"]["total"] == 2
    assert {t["terminal_reason_code"] for t in outcome["cells"]["targets"]} == {"queued_too_long"}

    # A stale execution message arriving afterwards cannot resurrect the slot.
    execute_only(rt, slot_id, "cats")
    rt.pump()
    assert rt.wiring.ledger.get_slot(slot_id).status == "failed"
    assert {c.status for c in cells_by_target(rt, slot_id).values()} == {"failed"}
    assert downstream.requests == []


def test_queued_budget_below_the_floor_falls_back_to_the_30_minute_default(make_runtime, logs):
    def budget(cfg):
        cfg["schedulerRuntime"]["queuedTimeoutMs"] = 59_000

    rt = make_runtime(T0, mutate=both(budget, schedule("solo", ["cats"])))
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    drop(rt)

    at(rt, 1)  # 59 s would already have expired
    assert rt.sweep()["queuedTooLong"] == 0
    drop(rt)
    at(rt, 20)
    result = rt.sweep()
    drop(rt)
    assert result["queuedTooLong"] == 0
    assert rt.wiring.ledger.get_slot(slot_id).status == "pending"
    assert cells_by_target(rt, slot_id)["cats"].status == "pending"
    assert logs.events("sweep.stalled") == []

    at(rt, 30)
    assert rt.sweep()["queuedTooLong"] == 1
    assert cells_by_target(rt, slot_id)["cats"].terminal_reason_code == "queued_too_long"


# -- rule 2: stalled_no_heartbeat --------------------------------------------------------------


def test_running_slot_whose_executor_died_fails_stalled_no_heartbeat_after_15_minutes(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"]))
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    drop(rt)  # the executor received it ...
    die_mid_run(rt, slot_id, "cats")  # ... claimed the cell, then died

    history = sweep_each_minute(rt, 1, 14)
    assert all(r["stalledNoHeartbeat"] == 0 for _, r, _ in history)
    # lease dead after 3 min; re-dispatch (lost again) at 5 and 10 while inside the budget
    assert [m for m, r, _ in history if r["recovered"]] == [5, 10]
    assert rt.wiring.ledger.get_slot(slot_id).status == "running"

    at(rt, 15)
    result = rt.sweep()
    assert result["stalledNoHeartbeat"] == 1 and result["queuedTooLong"] == 0 and result["recovered"] == 0

    state = rt.wiring.ledger.load(slot_id)
    assert state.slot.status == "failed" and state.slot.last_error == STALLED_MESSAGE
    cell = state.cells["cats"]
    assert (cell.status, cell.terminal_reason_code, cell.terminal_reason_message) == ("failed", "stalled_no_heartbeat", STALLED_MESSAGE)
    [line] = logs.events("sweep.stalled")
    assert line["reason_code"] == "stalled_no_heartbeat" and line["stalled_since"] == T0_MS and line["cells_failed"] == 1
    [outcome] = logs.outcomes(slot_id)
    assert outcome["status"] == "failed" and outcome["cells"]["executor_failed"] == 1
    assert downstream.requests == []


def test_a_fresh_heartbeat_protects_the_slot_and_moves_its_progress_clock(make_runtime, logs):
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"]))
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    drop(rt)
    die_mid_run(rt, slot_id, "cats")
    beat_at = T0_MS + 10 * MIN

    def heartbeat(minute):
        if minute == 10:  # the executor was only slow: one more heartbeat, then silence
            assert renew_lease(rt, slot_id, "cats")

    history = sweep_each_minute(rt, 1, 24, before=heartbeat)
    # 15 min after the claim the heartbeat is only 5 min old (and the lease long dead): not stalled
    assert all(r["stalledNoHeartbeat"] == 0 for _, r, _ in history)
    assert rt.wiring.ledger.get_slot(slot_id).status == "running"
    assert cells_by_target(rt, slot_id)["cats"].status == "pending"

    at(rt, 25)  # 15 min after the last heartbeat
    assert rt.sweep()["stalledNoHeartbeat"] == 1
    [line] = logs.events("sweep.stalled")
    assert line["stalled_since"] == beat_at
    assert cells_by_target(rt, slot_id)["cats"].terminal_reason_code == "stalled_no_heartbeat"


def test_a_live_lease_protects_a_slot_whose_heartbeat_is_old(make_runtime, logs):
    # A generous schedule timeout keeps the execution-timeout rule out of the picture.
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"], timeout=7_200_000))
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    drop(rt)
    die_mid_run(rt, slot_id, "cats", ttl_ms=60 * MIN)  # one long lease, heartbeat only at claim time

    for minute in (16, 30, 59):
        at(rt, minute)
        result = rt.sweep()
        assert result["stalledNoHeartbeat"] == 0 and result["recovered"] == 0 and result["timedOut"] == 0
        assert drop(rt) == []  # a leased cell is never re-dispatched behind its owner's back
    assert rt.wiring.ledger.get_slot(slot_id).status == "running"
    assert logs.events("sweep.stalled") == []

    at(rt, 60)  # the lease ends now: nothing protects the slot any more
    assert rt.sweep()["stalledNoHeartbeat"] == 1
    assert cells_by_target(rt, slot_id)["cats"].terminal_reason_code == "stalled_no_heartbeat"


def test_an_executor_heartbeat_renews_its_lease_and_moves_the_progress_clock(make_runtime):
    """DESIGN §4: a 30 s heartbeat keeps the 3 min lease live and is the slot's progress clock.

    BUG: DynamoLedger.heartbeat_cell conditions on ``#leaseOwner`` without declaring that name
    in ExpressionAttributeNames, so every heartbeat is rejected by DynamoDB (moto: KeyError;
    AWS: ValidationException -> LedgerUnavailable)."""
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"]))
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    drop(rt)
    die_mid_run(rt, slot_id, "cats")
    at(rt, 2)
    now = rt.clock.now_ms()
    assert rt.wiring.ledger.heartbeat_cell(slot_id, "cats", GHOST, now, 180_000) is True
    cell = cells_by_target(rt, slot_id)["cats"]
    assert (cell.heartbeat_at, cell.lease_until, cell.lease_owner) == (now, now + 180_000, GHOST)
    assert rt.wiring.ledger.heartbeat_cell(slot_id, "cats", "exec-someone-else", now, 180_000) is False
    at(rt, 16)  # 15 min after the claim, 14 after the heartbeat: not stalled
    assert rt.sweep()["stalledNoHeartbeat"] == 0
    assert rt.wiring.ledger.get_slot(slot_id).status == "running"


class SlowSource:
    """The catalogue source, but every search page takes 40 s of (virtual) time."""

    def __init__(self, path, clock_ref):
        from pixivflow.adapters.catalog_source import CatalogSource

        self._inner = CatalogSource(path)
        self._clock_ref = clock_ref

    def search_page(self, request, cursor):
        self._clock_ref[0].advance(40_000)
        return self._inner.search_page(request, cursor)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_an_execution_longer_than_one_heartbeat_interval_completes_in_one_attempt(make_runtime, downstream):
    """A search that takes 40 s makes the executor heartbeat (every 30 s) mid-run.

    BUG (same root cause as above): the first real heartbeat raises inside execute, the lease is
    released and the SQS record is reported as a batch failure; only the retry, which continues
    the already bound work without searching (and so without heartbeating), completes the cell,
    with the first attempt's candidate report lost. Any step that heartbeats in every attempt
    would never complete."""
    from conftest import DEMO

    clock_ref = []
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"]),
                      overrides={"source": SlowSource(DEMO / "catalog.json", clock_ref)})
    clock_ref.append(rt.clock)
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    rt.pump()
    assert rt.pumps["execute"].stats.failed == 0  # no infrastructure failure, no SQS retry
    state = rt.wiring.ledger.load(slot_id)
    assert state.slot.status == "success"
    cell = state.cells["cats"]
    assert cell.status == "submitted" and cell.attempt_count == 1
    assert cell.candidate_report is not None and cell.candidate_report["attempted"] == 1
    assert cell.heartbeat_at >= T0_MS + 40_000  # the mid-run heartbeat landed
    assert len(downstream.requests) == 1


def test_delivery_pending_cells_are_untouched_by_the_stall_rules(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=schedule("pair", ["cats", "landscape"]))
    slot_id = slot_of("pair")
    rt.fire("pair", iso=T0)
    drop(rt)
    execute_only(rt, slot_id, "cats")  # cats ran and handed its work to the outbox ...
    assert len(drop(rt, "OUTBOX_QUEUE_URL")) == 1  # ... whose message was lost; landscape's never arrived
    assert cells_by_target(rt, slot_id)["cats"].status == "delivery_pending"

    history = sweep_each_minute(rt, 1, 14, lose=("EXECUTION_QUEUE_URL", "OUTBOX_QUEUE_URL"))
    assert all(r["stalledNoHeartbeat"] == 0 for _, r, _ in history)
    assert sum(r["redriven"] for _, r, _ in history) > 0  # the outbox row is kept alive by the sweep

    at(rt, 15)
    result = rt.sweep()
    assert result["stalledNoHeartbeat"] == 1
    state = rt.wiring.ledger.load(slot_id)
    cats, landscape = state.cells["cats"], state.cells["landscape"]
    assert (landscape.status, landscape.terminal_reason_code) == ("failed", "stalled_no_heartbeat")
    assert cats.status == "delivery_pending"
    assert cats.terminal_reason_code is None and cats.completed_at is None and cats.last_error is None
    [intent] = state.intents_for("cats")
    assert intent.status == "pending" and intent.actionable  # the outbox still owns it
    # a stalled slot is never reported as running, even with an in-flight delivery (spec §7.2)
    assert state.slot.status == "failed"
    [line] = logs.events("sweep.stalled")
    assert line["cells_failed"] == 1

    # The outbox finishes its own work later: the same intent is delivered once, the cell confirmed.
    at(rt, 17)
    rt.sweep()
    rt.pump()
    assert cells_by_target(rt, slot_id)["cats"].status == "submitted"
    assert len(downstream.requests) == 1 and downstream.requests[0].body["target_id"] == "cats"
    assert cells_by_target(rt, slot_id)["landscape"].status == "failed"


def test_a_slot_whose_only_open_cell_waits_on_a_live_outbox_row_is_left_to_the_outbox(make_runtime, downstream, logs):
    """delivery_pending belongs to the outbox: a route that is down for 20 minutes is the outbox's
    problem (retry budget, dead letter), not an executor stall."""
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"]))
    slot_id = slot_of("solo")
    downstream.state.responder = lambda req: (503, {"error": "maintenance"})
    rt.fire("solo", iso=T0)
    rt.pump()
    assert cells_by_target(rt, slot_id)["cats"].status == "delivery_pending"

    history = []
    for minute in range(1, 21):
        at(rt, minute)
        rt.pump()
        history.append(rt.sweep())
        rt.pump()
    assert all(r["stalledNoHeartbeat"] == 0 and r["queuedTooLong"] == 0 for r in history)
    state = rt.wiring.ledger.load(slot_id)
    assert state.slot.status == "running" and state.cells["cats"].status == "delivery_pending"
    assert state.cells["cats"].heartbeat_at == T0_MS  # nobody heartbeats: the executor is done
    failed_attempts = len(downstream.requests)
    assert failed_attempts >= 3

    downstream.state.responder = None  # the route is back
    rt.settle()
    state = rt.wiring.ledger.load(slot_id)
    assert state.slot.status == "success" and state.cells["cats"].status == "submitted"
    assert len(downstream.requests) == failed_attempts + 1
    assert len({r.headers["idempotency-key"] for r in downstream.requests}) == 1
    assert logs.events("sweep.stalled") == []
    [outcome] = logs.outcomes(slot_id)
    assert outcome["status"] == "success" and outcome["cells"]["delivery_failed"] == 0


def test_a_submitted_cell_and_a_stalled_pending_cell_end_partial(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=schedule("pair", ["cats", "landscape"]))
    slot_id = slot_of("pair")
    rt.fire("pair", iso=T0)
    drop(rt)
    execute_only(rt, slot_id, "cats")
    rt.pumps["deliver"].poll()  # cats delivered and acknowledged
    assert cells_by_target(rt, slot_id)["cats"].status == "submitted"
    assert rt.wiring.ledger.get_slot(slot_id).status == "running"  # landscape is still open

    history = sweep_each_minute(rt, 1, 14)
    assert all(r["stalledNoHeartbeat"] == 0 for _, r, _ in history)
    at(rt, 15)
    assert rt.sweep()["stalledNoHeartbeat"] == 1

    state = rt.wiring.ledger.load(slot_id)
    assert state.slot.status == "partial"
    assert state.cells["cats"].status == "submitted" and state.cells["cats"].terminal_reason_code is None
    assert (state.cells["landscape"].status, state.cells["landscape"].terminal_reason_code) == ("failed", "stalled_no_heartbeat")
    [outcome] = logs.outcomes(slot_id)
    assert (outcome["status"], outcome["business_status"], outcome["alertable"]) == ("partial", "partial_success", False)
    assert (outcome["cells"]["submitted"], outcome["cells"]["executor_failed"]) == (1, 1)
    assert len(downstream.requests) == 1


# -- recovery ------------------------------------------------------------------------------------


def test_a_lost_execution_message_is_redispatched_after_5_minutes_and_the_slot_succeeds(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=schedule("pair", ["cats", "landscape"]))
    slot_id = slot_of("pair")
    rt.fire("pair", iso=T0)
    assert len(drop(rt)) == 2

    for minute in (1, 2, 3, 4):
        at(rt, minute)
        assert rt.sweep()["recovered"] == 0
    rt.clock.set(T0_MS + 5 * MIN - 1)
    assert rt.sweep()["recovered"] == 0
    assert rt.pump() == 0  # nothing was re-sent early

    at(rt, 5)
    result = rt.sweep()
    assert result["recovered"] == 1 and result["queuedTooLong"] == 0
    assert rt.sweep()["recovered"] == 0  # a second sweep at the same instant sends nothing more
    assert rt.pump() >= 2
    rt.settle()

    state = rt.wiring.ledger.load(slot_id)
    assert state.slot.status == "success"
    assert [(c.status, c.terminal_reason_code) for c in state.snapshot_cells()] == [("submitted", None)] * 2
    assert len(downstream.requests) == 2
    assert logs.events("sweep.stalled") == []
    [outcome] = logs.outcomes(slot_id)
    assert outcome["business_status"] == "success" and outcome["cells"]["submitted"] == 2
    [recovered] = logs.events("sweep.recovered")
    assert sorted(recovered["targets"]) == ["cats", "landscape"]


class FlakySource:
    """The catalogue source whose search always fails transiently (HTTP 429)."""

    def __init__(self, path, clock_ref, calls):
        from pixivflow.adapters.catalog_source import CatalogSource

        self._inner = CatalogSource(path)
        self._clock_ref = clock_ref
        self.calls = calls

    def search_page(self, request, cursor):
        from pixivflow.domain.errors import TransientSourceError

        self.calls.append((self._clock_ref[0].now_ms() - T0_MS) // 1000)
        raise TransientSourceError("HTTP 429 rate limited", status=429)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_recovery_never_duplicates_a_scheduled_retry_and_the_timeout_ends_it(make_runtime, downstream, logs):
    """A retryable failure re-sends its own delayed message; the sweep's 5-minute recovery must
    not add a second chain of attempts (DESIGN §4), and past startedAt + timeout the sweep fails
    the cell, with the cause of its failed attempts (docs/explanation/stall-rules.md): a rate limit
    that lasted the whole window is a rate limit, not a bare timeout."""
    from conftest import DEMO

    clock_ref, calls = [], []
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"]),
                      overrides={"source": FlakySource(DEMO / "catalog.json", clock_ref, calls)})
    clock_ref.append(rt.clock)
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    rt.pump()
    history = []
    for minute in range(1, 30):
        at(rt, minute)
        rt.pump()
        history.append(rt.sweep())
        rt.pump()
    # delays min(300, 30 * 2^(n-1)) s, released at the next whole minute the pump runs
    assert calls == [0, 60, 120, 240, 480, 780, 1080, 1380, 1680]
    assert sum(r["recovered"] for r in history) == 0
    assert all(r["stalledNoHeartbeat"] == 0 for r in history)
    cell = cells_by_target(rt, slot_id)["cats"]
    assert (cell.status, cell.attempt_count) == ("pending", 9)
    assert "rate limited" in cell.last_error

    at(rt, 31)  # 30 min after the first claim (the schedule's default timeout)
    result = rt.sweep()
    assert result["timedOut"] == 1
    cell = cells_by_target(rt, slot_id)["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("failed", "rate_limited")
    assert cell.last_error.startswith("rate_limited: execution exceeded the schedule timeout of 1800000 ms; "
                                      "the last attempt failed: search failed: HTTP 429 rate limited")
    assert rt.wiring.ledger.get_slot(slot_id).status == "failed"
    rt.settle()  # the retry still in flight finds a terminal cell
    assert len(calls) == 9
    assert downstream.requests == []


@pytest.mark.parametrize("case", ["pending_past_queued_budget", "running_past_stall_budget"])
def test_a_slot_past_its_budget_is_not_rescued_the_stall_rule_fires_instead(make_runtime, downstream, logs, case):
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"]))
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    drop(rt)
    if case == "running_past_stall_budget":
        die_mid_run(rt, slot_id, "cats")
        minute, rule, code = 16, "stalledNoHeartbeat", "stalled_no_heartbeat"
    else:
        minute, rule, code = 31, "queuedTooLong", "queued_too_long"

    at(rt, minute)  # the first sweep to look at it (the sweep was down until now)
    result = rt.sweep()
    assert result["recovered"] == 0 and result[rule] == 1
    assert drop(rt) == []
    rt.settle()
    cell = cells_by_target(rt, slot_id)["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("failed", code)
    assert rt.wiring.ledger.get_slot(slot_id).status == "failed"
    assert downstream.requests == []
    assert logs.events("sweep.recovered") == []


# -- execution timeout -----------------------------------------------------------------------------


def test_a_cell_running_past_the_schedule_timeout_fails_execution_timeout(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"], timeout=600_000))
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    drop(rt)
    die_mid_run(rt, slot_id, "cats")  # alive this time: it keeps heartbeating, but never finishes
    beats = []

    def heartbeat(minute):
        beats.append(renew_lease(rt, slot_id, "cats"))

    history = sweep_each_minute(rt, 1, 10, before=heartbeat)
    assert all(beats)
    assert all(r["timedOut"] == 0 and r["stalledNoHeartbeat"] == 0 and r["recovered"] == 0 for _, r, _ in history)
    assert rt.wiring.ledger.get_slot(slot_id).status == "running"  # exactly 10 min is not past the timeout

    at(rt, 11)
    assert renew_lease(rt, slot_id, "cats")  # the lease is live
    result = rt.sweep()
    assert result["timedOut"] == 1 and result["stalledNoHeartbeat"] == 0

    state = rt.wiring.ledger.load(slot_id)
    cell = state.cells["cats"]
    assert (cell.status, cell.terminal_reason_code, cell.terminal_reason_message) == ("failed", "execution_timeout", TIMEOUT_MESSAGE)
    # The overrunning executor was alive a moment ago and may still record a delivery row: the slot
    # stays open one lease TTL past its last heartbeat, where the sweep would find such a row.
    assert state.slot.status == "running" and logs.outcomes(slot_id) == []
    rt.clock.set(cell.heartbeat_at + 180_000 + 1)
    rt.sweep()
    assert rt.wiring.ledger.get_slot(slot_id).status == "failed"
    [outcome] = logs.outcomes(slot_id)
    assert outcome["status"] == "failed" and outcome["cells"]["executor_failed"] == 1
    assert outcome["cells"]["targets"][0]["terminal_reason_code"] == "execution_timeout"
    # the executor that overran has lost its lease: it cannot heartbeat or settle the cell any more
    assert not renew_lease(rt, slot_id, "cats")
    assert not rt.wiring.ledger.transition_cell(slot_id, "cats", "delivery_pending", rt.clock.now_ms(), owner=GHOST)
    assert downstream.requests == []


# -- the sweep as a whole ----------------------------------------------------------------------------


def test_sweep_counters_match_what_it_did_and_it_logs_one_finished_line(make_runtime, logs):
    rt = make_runtime(T0, mutate=both(
        schedule("queued", ["cats"]),
        schedule("dead", ["landscape"]),
        schedule("slow", ["ranking-daily"], timeout=600_000),
        schedule("fresh", ["dogs"]),
        schedule("outbox", ["sky-topic"]),
    ))
    queued, dead, slow = slot_of("queued"), slot_of("dead"), slot_of("slow")
    fresh, outbox = slot_of("fresh"), slot_of("outbox")
    rt.fire("queued", iso=T0)  # admitted at 0, never claimed
    rt.fire("dead", iso=T0)
    drop(rt)
    at(rt, 5)
    die_mid_run(rt, dead, "landscape")  # claimed at 5, executor died
    at(rt, 15)
    rt.fire("slow", iso=T0)
    drop(rt)
    die_mid_run(rt, slow, "ranking-daily")  # claimed at 15, heartbeats, runs past its 10 min timeout
    at(rt, 25)
    rt.fire("fresh", iso=T0)  # admitted at 25, message lost
    drop(rt)
    at(rt, 28)
    rt.fire("outbox", iso=T0)
    drop(rt)
    execute_only(rt, outbox, "sky-topic")  # delivery_pending at 28, outbox message lost
    drop(rt, "OUTBOX_QUEUE_URL")
    assert logs.events("sweep.finished") == []

    at(rt, 30)
    assert renew_lease(rt, slow, "ranking-daily")
    result = rt.sweep()
    assert result == {
        "scanned": 2,  # the rows of the two stall rules: queued (rule 1) and dead (rule 2), spec §7.2
        "queuedTooLong": 1,  # queued
        "stalledNoHeartbeat": 1,  # dead
        "recovered": 1,  # fresh
        "timedOut": 1,  # slow
        "rolledUp": 1,  # slow, terminal after its timeout (it closes once its executor cannot be alive)
        "redriven": 1,  # outbox's row, due at 28 (120 s grace)
        "jobsRepaired": 0,  # no protocol job with a callback is open
        "errors": 0,
        "activeSlots": 5,  # every row of the active-slot index
        "unrecoverable": 0,
        "shardsWalked": 16,  # the walk (issue 25): every active-index shard, to its end ...
        "passComplete": 1,  # ... so this tick visited every live slot
        "indexesEmpty": 2,  # DueOutbox and OpenCallbacks held nothing: not queried (issue 25's probe)
    }
    [finished] = logs.events("sweep.finished")
    assert {k: finished[k] for k in result} == result
    assert rt.wiring.ledger.get_slot(queued).status == "failed"
    assert rt.wiring.ledger.get_slot(dead).status == "failed"
    assert rt.wiring.ledger.get_slot(slow).status == "running"  # its executor heartbeated at 30: open till 33
    assert rt.wiring.ledger.get_slot(fresh).status == "pending"
    assert rt.wiring.ledger.get_slot(outbox).status == "running"
    assert [b["targetId"] for b in drop(rt)] == ["dogs"]
    assert len(drop(rt, "OUTBOX_QUEUE_URL")) == 1
    assert {line["slot_id"] for line in logs.all() if line.get("message") == OUTCOME_MESSAGE} == {queued, dead}
    at(rt, 33)
    rt.clock.advance(1)
    rt.sweep()
    assert rt.wiring.ledger.get_slot(slow).status == "failed"
    assert {line["slot_id"] for line in logs.all() if line.get("message") == OUTCOME_MESSAGE} == {queued, dead, slow}

    # A second sweep a minute later has nothing left to do and says so.
    at(rt, 34)
    again = rt.sweep()
    assert again["queuedTooLong"] == again["stalledNoHeartbeat"] == again["timedOut"] == again["rolledUp"] == 0
    assert again["activeSlots"] == 2  # only fresh and outbox are still active ...
    assert again["scanned"] == 0  # ... and neither is past its budget
    assert len(logs.events("sweep.finished")) == 3  # one line per sweep: at 30, at 33 (slow closed), at 34


def test_a_single_bad_slot_never_aborts_the_sweep(make_runtime, monkeypatch, logs):
    rt = make_runtime(T0, mutate=both(schedule("bad", ["cats"]), schedule("good", ["landscape"])))
    bad, good = slot_of("bad"), slot_of("good")
    rt.fire("bad", iso=T0)  # the older slot: the sweep meets it first
    at(rt, 0.5)
    rt.fire("good", iso=T0)
    drop(rt)

    ledger = rt.wiring.ledger
    real_load = ledger.load

    def flaky_load(slot_id):
        if slot_id == bad:
            raise RuntimeError("simulated unreadable slot partition")
        return real_load(slot_id)

    monkeypatch.setattr(ledger, "load", flaky_load)
    at(rt, 31)
    result = rt.sweep()
    assert result["errors"] == 1
    assert result["queuedTooLong"] == 1
    assert ledger.get_slot(good).status == "failed"
    assert cells_by_target_raw(ledger, good)["landscape"].terminal_reason_code == "queued_too_long"
    assert ledger.get_slot(bad).status == "pending"  # untouched, still findable next time
    [error] = logs.events("sweep.slot_error")
    assert error["slot_id"] == bad and "simulated unreadable" in error["error"]
    [finished] = logs.events("sweep.finished")
    assert finished["errors"] == 1

    monkeypatch.setattr(ledger, "load", real_load)
    at(rt, 32)
    healed = rt.sweep()
    assert healed["errors"] == 0 and healed["queuedTooLong"] == 1
    assert ledger.get_slot(bad).status == "failed"


def cells_by_target_raw(ledger, slot_id):
    return {c.target_id: c for c in ledger.load(slot_id).snapshot_cells()}


def test_a_stalled_slot_stays_in_the_sweep_until_its_in_delivery_cell_settles(make_runtime, downstream, logs):
    """Found by make sim (seed 451): the stall transaction leaves an in-delivery cell as it is, and the
    slot used to leave the active index at once, so a cell whose delivery had already ended (here a
    remote failure recorded while the cell move was lost) stayed delivery_pending forever."""
    rt = make_runtime(T0, mutate=schedule("pair", ["cats", "landscape"]))
    slot_id = slot_of("pair")
    rt.fire("pair", iso=T0)
    drop(rt)
    execute_only(rt, slot_id, "cats")
    drop(rt, "OUTBOX_QUEUE_URL")
    ledger = rt.wiring.ledger
    [intent] = ledger.load(slot_id).intents_for("cats")
    # The route answered FAILED and the row recorded it; the deliver function died before the cell move.
    claimed = ledger.claim_intent(intent, "dlv-test", rt.clock.now_ms(), 120_000)
    assert ledger.settle_intent(claimed, "dlv-test", rt.clock.now_ms(), ledger_status="failed", outbox_status="done",
                                error="delivery endpoint reported terminal status failed") is not None
    at(rt, 15)
    state = ledger.load(slot_id)
    assert ledger.terminalise_slot(state, fail_cells=["landscape"], guard_cells=["cats"], slot_status="failed",
                                   reason_code="stalled_no_heartbeat", reason_message=STALLED_MESSAGE, now_ms=rt.clock.now_ms())
    at(rt, 16)
    rt.sweep()
    final = ledger.load(slot_id)
    cats = final.cells["cats"]
    assert (cats.status, cats.terminal_reason_code) == ("failed", "delivery_abandoned")
    assert final.slot.status == "failed" and not final.slot.open  # closed only once every cell is terminal
    [line] = logs.outcomes(slot_id)
    assert {t["target_id"]: t["status"] for t in line["cells"]["targets"]} == {"cats": "failed", "landscape": "failed"}
    assert downstream.requests == []


def test_closing_a_stalled_slot_waits_while_its_in_delivery_cell_has_a_live_row(make_runtime, downstream, logs):
    """spec §13.16 / rollup.close: the stall transaction leaves a delivery_pending cell whose row is
    still live to the outbox. Closing the terminal slot must wait for that cell (no outcome record,
    slot kept in the active index), even though no executor holds a lease and nothing can converge
    it yet; otherwise the record would name a cell that is still being delivered."""
    from pixivflow.services.rollup import close

    rt = make_runtime(T0, mutate=schedule("pair", ["cats", "landscape"]))
    slot_id = slot_of("pair")
    rt.fire("pair", iso=T0)
    drop(rt)
    execute_only(rt, slot_id, "cats")
    drop(rt, "OUTBOX_QUEUE_URL")  # the row stays pending: the outbox has not delivered it yet
    ledger = rt.wiring.ledger
    at(rt, 15)
    state = ledger.load(slot_id)
    assert state.cells["cats"].status == "delivery_pending" and not state.cells["cats"].lease_live(rt.clock.now_ms())
    assert ledger.terminalise_slot(state, fail_cells=["landscape"], guard_cells=["cats"], slot_status="failed",
                                   reason_code="stalled_no_heartbeat", reason_message=STALLED_MESSAGE, now_ms=rt.clock.now_ms())
    at(rt, 16)

    assert close(rt.wiring.slot_rollup, ledger.load(slot_id)) is False

    after = ledger.load(slot_id)
    assert after.cells["cats"].status == "delivery_pending"
    assert after.slot.status == "failed" and after.slot.open  # still swept until cats settles
    assert slot_id in [s for s, _ in ledger.active_slots()]
    assert logs.outcomes(slot_id) == []


def test_a_timeout_names_the_last_attempts_failure_never_an_earlier_one(make_runtime, downstream):
    """An earlier attempt failed on the network; the attempt running when the timeout comes has not
    failed: the cell ends execution_timeout (the claim that began it cleared the earlier reason)."""
    rt = make_runtime(T0, mutate=schedule("solo", ["cats"], timeout=600_000))
    slot_id = slot_of("solo")
    rt.fire("solo", iso=T0)
    drop(rt)
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    assert claim(ledger, slot_id, "cats", "exec-first", now, 60_000) is not None
    assert ledger.record_cell_error(slot_id, "cats", "search failed: network_error: down", now, owner="exec-first",
                                    reason_code="network_error")
    at(rt, 1)
    die_mid_run(rt, slot_id, "cats")  # the next attempt: claimed, still running
    at(rt, 11)
    assert renew_lease(rt, slot_id, "cats")
    assert rt.sweep()["timedOut"] == 1
    cell = rt.wiring.ledger.load(slot_id).cells["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("failed", "execution_timeout")
