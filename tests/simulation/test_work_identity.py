"""Work identity under crashes and races (spec §3.3, §3.6, §5, §10.8, §13.10–§13.12; DESIGN §4).

One single-work target (``cats``: limit 1, storageMode cache, route ``review``) on its own
schedule. A crash is an exception escaping ``execute_cell`` (Lambda dying), either soft (the
lease is released best effort) or hard (the process is gone: the lease stays until its TTL).
After each crash the world changes so that a fresh search would pick ANOTHER work; the
re-run must still deliver the work bound first, exactly once.
"""

from __future__ import annotations

import threading

import pytest

from conftest import ms
from identity_support import (
    CATALOG,
    FIRE,
    LEASE_TTL_MS,
    SCHEDULE,
    SLOT,
    START,
    TARGET,
    SteeredSource,
    add_schedule,
    cell,
    crash_at,
    delivered_work_ids,
    intents,
    queued,
    serialize_ledger_requests,
)
from pixivflow.domain.outbox import OutgoingMessage
from pixivflow.ports import WorkSource
from support.builders import work
from pixivflow.domain.cells import CellStatus
from pixivflow.domain.delivery_state import LOST_REASON
from pixivflow.services.execution import execute_cell


def _runtime(make_runtime, catalog=CATALOG, mutate=None):
    def cfg(c):
        add_schedule(c)
        if mutate:
            mutate(c)

    rt = make_runtime(START, mutate=cfg, catalog=catalog)
    steered = SteeredSource(rt.wiring.source)
    rt.wiring.source = steered
    assert rt.fire(SCHEDULE, iso=FIRE)["sent"] == 1  # the cell's message waits on the execution queue
    return rt, steered


def _assert_delivered_once(rt, downstream, work_id="501"):
    assert delivered_work_ids(downstream) == [work_id]
    c = cell(rt)
    assert (c.status, c.work_id) == (CellStatus.SUBMITTED, work_id)
    assert rt.wiring.ledger.get_slot(SLOT).status == "success"
    rows = intents(rt)
    assert [(i.work_id, i.status, i.outbox_status) for i in rows] == [(work_id, "delivered", "done")]


# --------------------------------------------------------------------------------------------
# 1. a crash at each boundary of a single-work cell, then the cell's message again


def _is_delivery_pending_move(slot_id, target_id, to_status, *a, **k):
    return to_status == CellStatus.DELIVERY_PENDING


CRASH_POINTS = {
    # name: (adapter, method, after, when, cell status right after the crash, intent rows, outbox message sent)
    "a_after_bind": ("ledger", "bind_work", True, None, CellStatus.SELECTED, 0, False),
    "a_after_reserve_before_download": ("source", "download", False, None, CellStatus.SELECTED, 0, False),
    "b_after_download": ("source", "download", True, None, CellStatus.SELECTED, 0, False),
    "b_after_artifact_stored": ("artifacts", "put", True, None, CellStatus.SELECTED, 0, False),
    "c_after_intent_before_cell_move": ("ledger", "put_intent", True, None, CellStatus.SELECTED, 1, False),
    "c_after_cell_move_before_send": ("ledger", "move_cell_as_owner", True, _is_delivery_pending_move,
                                      CellStatus.DELIVERY_PENDING, 1, False),
    "c_send_lost": ("queues", "send_outbox", False, None, CellStatus.DELIVERY_PENDING, 1, False),
    "d_after_send": ("queues", "send_outbox", True, None, CellStatus.DELIVERY_PENDING, 1, True),
}


@pytest.mark.parametrize("hard", [False, True], ids=["lease_released", "died_hard"])
@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_crash_then_rerun_delivers_the_first_bound_work_exactly_once(make_runtime, downstream, point, hard):
    rt, steered = _runtime(make_runtime)
    adapter, method, after, when, status_after, intent_rows, sent = CRASH_POINTS[point]
    with crash_at(rt.wiring, adapter, method, after=after, when=when, on_crash=steered.flip, hard=hard) as proxy:
        with pytest.raises(RuntimeError, match="injected crash"):
            execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert proxy.fired

    # What the dead executor left behind: the first work is bound, nothing was delivered.
    left = cell(rt)
    assert (left.status, left.work_id) == (status_after, "501")
    assert len(intents(rt)) == intent_rows
    assert queued(rt, "outbox") == (1 if sent else 0)
    # The cell move itself drops the lease; before it, a hard death leaves the lease behind.
    lease_left = hard and status_after == CellStatus.SELECTED
    assert (left.lease_owner is not None) == lease_left
    assert downstream.requests == []

    if lease_left:
        # The lease of a dead process protects the cell until its TTL: a re-run now changes nothing.
        assert execute_cell(rt.wiring.executions, SLOT, TARGET).action == "claimed_by_other"
        assert cell(rt).status == status_after
        rt.clock.advance(LEASE_TTL_MS + 1_000)

    # The world moved on: a fresh search would now pick 502.
    assert steered.flipped
    rt.settle()  # pumps the cell's original message again, then sweeps minute by minute

    _assert_delivered_once(rt, downstream, "501")
    assert steered.searches_after_flip == 0, "recovery must never re-run candidate selection"
    assert "502" not in steered.downloads


def test_rerun_while_the_outbox_message_is_lost_is_left_to_the_outbox_and_the_sweep_redrives_it(make_runtime, downstream):
    """(c) The cell moved to delivery_pending but its outbox message never reached SQS: a re-run
    of the cell must not select or enqueue anything new; the sweep re-drives the durable row."""
    rt, steered = _runtime(make_runtime)
    with crash_at(rt.wiring, "queues", "send_outbox", on_crash=steered.flip):
        with pytest.raises(RuntimeError, match="injected crash"):
            execute_cell(rt.wiring.executions, SLOT, TARGET)
    rerun = execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert rerun.action == "left_to_outbox"
    assert queued(rt, "outbox") == 0
    assert len(intents(rt)) == 1
    rt.settle()
    _assert_delivered_once(rt, downstream, "501")
    assert steered.searches_after_flip == 0


# --------------------------------------------------------------------------------------------
# 2. concurrent duplicate executions of one cell


class _Barrier:
    """Hold the first call of ``method`` of every thread until all ``n`` threads arrived."""

    def __init__(self, inner, method, n):
        self._inner, self._method = inner, method
        self._barrier = threading.Barrier(n, timeout=20)
        self._seen: set[int] = set()

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def wrapped(*args, **kwargs):
            me = threading.get_ident()
            if me not in self._seen:
                self._seen.add(me)
                self._barrier.wait()
            return attr(*args, **kwargs)

        return wrapped


class _Answers:
    """Forward to ``inner``; keep every answer of ``method`` with its arguments."""

    def __init__(self, inner, method):
        self._inner, self._method = inner, method
        self.calls: list[tuple[tuple, object]] = []

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def wrapped(*args, **kwargs):
            answer = attr(*args, **kwargs)
            self.calls.append((args, answer))
            return answer

        return wrapped


def _run_threads(n, fn):
    results, errors = [None] * n, []

    def body(i):
        try:
            results[i] = fn(i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


def _assert_single_binding(rt, downstream):
    rows = intents(rt)
    assert len(rows) == 1, [(i.work_id, i.outbox_status) for i in rows]
    assert rows[0].work_id == cell(rt).work_id
    rt.settle()
    assert len(downstream.requests) == 1
    assert delivered_work_ids(downstream) == [cell(rt).work_id]
    assert cell(rt).status == CellStatus.SUBMITTED
    assert rt.wiring.ledger.get_slot(SLOT).status == "success"
    final = intents(rt)
    assert [(i.status, i.outbox_status) for i in final] == [("delivered", "done")]


def test_concurrent_duplicate_executions_claim_once_bind_once_deliver_once(make_runtime, downstream):
    n = 6
    rt, _ = _runtime(make_runtime)
    serialize_ledger_requests(rt.wiring)
    ledger = rt.wiring.ledger
    rt.wiring.ledger = _Barrier(ledger, "claim_cell", n)  # every executor claims at the same instant
    try:
        results = _run_threads(n, lambda i: execute_cell(rt.wiring.executions, SLOT, TARGET))
    finally:
        rt.wiring.ledger = ledger
    actions = sorted(r.action for r in results)
    assert actions.count("applied") == 1, actions
    assert set(actions) <= {"applied", "claimed_by_other", "left_to_outbox"}
    assert queued(rt, "outbox") == 1  # one outbox message for one outbox row
    _assert_single_binding(rt, downstream)
    assert delivered_work_ids(downstream) == ["501"]


def test_overlapping_executors_past_the_lease_still_bind_one_work(make_runtime, downstream):
    """Zombie executors: each claim happens after the previous lease expired, so all of them run
    the handler at once, and each one's search ranks a DIFFERENT work first. The CAS bind must
    let exactly one work through: one binding, one intent, one outbox row, one delivery."""
    n = 5
    rt, steered = _runtime(make_runtime)
    serialize_ledger_requests(rt.wiring)
    ledger = rt.wiring.ledger
    catalogue = steered.inner
    order = iter(["501", "502", "503", "501", "502", "503"])
    lock = threading.Lock()
    shift = iter(range(n))

    class PerThreadNewest(WorkSource):
        """Each executor's search sees another work as the newest one."""

        def __init__(self):
            self._local = threading.local()

        def search_page(self, request, cursor):
            if not hasattr(self._local, "promote"):
                with lock:
                    self._local.promote = next(order)
            from dataclasses import replace

            from pixivflow.domain.work import Page

            page = catalogue.search_page(request, cursor)
            items = tuple(replace(w, create_date="2026-11-30T12:00:00+09:00") if w.work_id == self._local.promote else w
                          for w in page.items)
            return Page(items=items, next_cursor=page.next_cursor)

        def get_work(self, *a):
            return catalogue.get_work(*a)

        def download(self, w):
            return catalogue.download(w)

    class ExpiredLeases:
        """claim_cell as if each executor arrived after the previous lease had expired."""

        def __getattr__(self, name):
            return getattr(ledger, name)

        def claim_cell(self, slot_id, target_id, owner, now_ms, ttl_ms, **kwargs):
            # Taking a place in the sequence and claiming must be one step: otherwise a later
            # place can claim first and make an earlier one look like it arrived inside a live lease.
            with lock:
                k = next(shift)
                return ledger.claim_cell(slot_id, target_id, owner, now_ms + k * (ttl_ms + 1), ttl_ms, **kwargs)

    rt.wiring.source = PerThreadNewest()
    rt.wiring.ledger = _Barrier(ExpiredLeases(), "bind_work", n)  # every executor binds at the same instant
    try:
        results = _run_threads(n, lambda i: execute_cell(rt.wiring.executions, SLOT, TARGET))
    finally:
        rt.wiring.ledger, rt.wiring.source = ledger, steered
    assert all(r.action != "claimed_by_other" for r in results), [r.action for r in results]
    bound = cell(rt).work_id
    assert bound in {"501", "502", "503"}
    rt.clock.advance(n * (LEASE_TTL_MS + 1))  # let the last zombie's lease run out
    _assert_single_binding(rt, downstream)
    assert delivered_work_ids(downstream) == [bound]


# --------------------------------------------------------------------------------------------
# 3. two cells of different slots that pick the same work

SLOT_A = "cats-a@2026-12-01T0800"
SLOT_B = "cats-b@2026-12-01T0800"


def _two_slots(make_runtime, catalog=CATALOG):
    def cfg(c):
        add_schedule(c, "cats-a")
        add_schedule(c, "cats-b")

    rt = make_runtime(START, mutate=cfg, catalog=catalog)
    steered = SteeredSource(rt.wiring.source)
    rt.wiring.source = steered
    assert rt.fire("cats-a", iso=FIRE)["slot_id"] == SLOT_A
    assert rt.fire("cats-b", iso=FIRE)["slot_id"] == SLOT_B
    return rt, steered


def _by_slot(downstream):
    return {r.body["slot_id"]: str(r.body["work_id"]) for r in downstream.requests}


def test_two_slots_one_after_the_other_never_deliver_the_same_work_twice(make_runtime, downstream):
    rt, _ = _two_slots(make_runtime)
    rt.settle()
    works = _by_slot(downstream)
    assert len(downstream.requests) == 2
    assert sorted(works.values()) == ["501", "502"]
    for slot_id in (SLOT_A, SLOT_B):
        c = cell(rt, slot_id)
        assert (c.status, c.work_id) == (CellStatus.SUBMITTED, works[slot_id])


def test_two_slots_racing_for_the_same_candidate_deliver_it_once(make_runtime, downstream):
    """Both executors read the route's owners before either reserved: both bind 501 in their own
    cell; the route reservation lets one through, the other is refused, releases its binding and
    moves on."""
    rt, _ = _two_slots(make_runtime)
    serialize_ledger_requests(rt.wiring)
    ledger = rt.wiring.ledger
    # Both read the route's owners before either reserved, and both reach their first reservation
    # before either makes it: the executors cannot learn of each other but through the refusal.
    answers = _Answers(ledger, "reserve_work")
    rt.wiring.ledger = _Barrier(_Barrier(answers, "reserve_work", 2), "work_owners", 2)
    try:
        _run_threads(2, lambda i: execute_cell(rt.wiring.executions, (SLOT_A, SLOT_B)[i], TARGET))
    finally:
        rt.wiring.ledger = ledger
    # the race reached the reservation: one executor's conditional write was refused, naming the other
    refused = [(args, answer) for args, answer in answers.calls if args[2] == "501" and not answer[0]]
    assert len(refused) == 1, answers.calls
    rt.settle()
    works = _by_slot(downstream)
    assert len(downstream.requests) == 2
    assert sorted(works.values()) == ["501", "502"]
    loser = SLOT_A if works[SLOT_A] == "502" else SLOT_B
    report = cell(rt, loser).candidate_report
    assert {"code": "duplicate", "workId": "501"}.items() <= report["skipped"][0].items()


def test_second_slot_ends_no_candidate_when_the_only_work_is_taken(make_runtime, downstream):
    only = {"illusts": [work("501", "2026-11-20T10:00:00+09:00")]}
    rt, _ = _two_slots(make_runtime, catalog=only)
    rt.settle()
    assert delivered_work_ids(downstream) == ["501"]
    cells = [cell(rt, s) for s in (SLOT_A, SLOT_B)]
    assert sorted(c.status for c in cells) == [CellStatus.NO_CANDIDATE, CellStatus.SUBMITTED]
    empty = next(c for c in cells if c.status == CellStatus.NO_CANDIDATE)
    assert empty.work_id is None
    assert empty.last_error.startswith("no eligible candidate found after scanning 1 candidate(s)")
    assert "duplicate" in empty.last_error
    assert empty.candidate_report["skipped"][0]["code"] == "duplicate"


def test_locked_work_taken_by_another_slot_while_the_binder_was_down_is_not_delivered_twice(make_runtime, downstream):
    """Slot A binds 501 and dies before reserving it on the route; slot B then selects and
    delivers 501. A's recovery must keep 501 (never substitute) but must not post it a second
    time: spec §10.3 makes a work already confirmed on the route a `duplicate`."""
    rt, _ = _two_slots(make_runtime)
    with crash_at(rt.wiring, "ledger", "bind_work", after=True,
                  when=lambda slot_id, *a, **k: slot_id == SLOT_A):
        with pytest.raises(RuntimeError, match="injected crash"):
            execute_cell(rt.wiring.executions, SLOT_A, TARGET)
    assert cell(rt, SLOT_A).work_id == "501"
    execute_cell(rt.wiring.executions, SLOT_B, TARGET)
    rt.settle()
    assert cell(rt, SLOT_B).work_id == "501"
    assert cell(rt, SLOT_A).work_id == "501", "a locked work is never replaced"
    assert delivered_work_ids(downstream).count("501") == 1, _by_slot(downstream)
    assert cell(rt, SLOT_A).status in (CellStatus.DUPLICATE, CellStatus.FAILED)


# --------------------------------------------------------------------------------------------
# 4. the locked work disappears, is malformed, or cannot be fetched right now


def _crash_after_bind(rt, steered):
    with crash_at(rt.wiring, "ledger", "bind_work", after=True, on_crash=steered.flip):
        with pytest.raises(RuntimeError, match="injected crash"):
            execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert cell(rt).work_id == "501"


def test_deleted_locked_work_fails_the_cell_and_nothing_else_is_delivered(make_runtime, downstream):
    rt, steered = _runtime(make_runtime)
    _crash_after_bind(rt, steered)
    steered.gone.add("501")
    result = execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert (result.action, result.cell_status) == ("applied", CellStatus.FAILED)
    c = cell(rt)
    assert (c.status, c.work_id) == (CellStatus.FAILED, "501")
    assert c.last_error.startswith("LOCKED_WORK_UNAVAILABLE: locked work 501 is no longer fetchable")
    rt.settle()
    assert downstream.requests == []
    assert intents(rt) == []
    assert rt.wiring.ledger.get_slot(SLOT).status == "failed"
    assert steered.searches_after_flip == 0


def test_non_numeric_locked_id_fails_with_locked_work_unavailable(make_runtime, downstream):
    rt, steered = _runtime(make_runtime)
    # the cell as an earlier executor left it: written (by its claim) and bound to a malformed id
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    assert ledger.ensure_cells(ledger.get_slot(SLOT), {TARGET: "illustration"}, now) == [TARGET]
    won, _ = ledger.bind_work(SLOT, TARGET, "abc", "illustration", now)
    assert won
    result = execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert result.cell_status == CellStatus.FAILED
    c = cell(rt)
    assert c.last_error == 'LOCKED_WORK_UNAVAILABLE: cell work id "abc" is not a valid illustration id'
    assert c.work_id == "abc"
    rt.settle()
    assert downstream.requests == []
    assert steered.searches == 0 and steered.downloads == []


def test_transient_fetch_error_of_the_locked_work_keeps_it_and_a_later_run_delivers_it(make_runtime, downstream):
    rt, steered = _runtime(make_runtime)
    _crash_after_bind(rt, steered)
    steered.transient.add("501")
    result = execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert result.outcome == "failed_retryable"
    c = cell(rt)
    assert not c.terminal
    assert (c.status, c.work_id) == (CellStatus.SELECTED, "501")
    assert c.last_error.startswith("locked work 501 could not be fetched (will retry the SAME work)")
    assert c.lease_owner is None
    assert downstream.requests == []
    steered.transient.clear()  # the network is back
    rt.settle()  # the delayed retry message (and the original one) run the cell again
    _assert_delivered_once(rt, downstream, "501")
    assert steered.searches_after_flip == 0


# --------------------------------------------------------------------------------------------
# 5. the ledger is confirmed but the cell never moved


def test_confirmed_ledger_promotes_a_delivery_pending_cell_without_a_second_request(make_runtime, downstream):
    rt, steered = _runtime(make_runtime)
    assert rt.pumps["execute"].poll() == 1
    assert cell(rt).status == CellStatus.DELIVERY_PENDING
    with crash_at(rt.wiring, "ledger", "settle_cell_from_delivery",
                  when=lambda s, t, to, *a, **k: to == CellStatus.SUBMITTED) as proxy:
        assert rt.pumps["deliver"].poll() == 1  # the ACK is recorded, then the cell move dies
        assert rt.pumps["deliver"].poll() == 1  # SQS retries the message: the row is done, nothing is sent
    assert proxy.fired
    assert len(downstream.requests) == 1
    assert [(i.status, i.outbox_status) for i in intents(rt)] == [("delivered", "done")]
    assert cell(rt).status == CellStatus.DELIVERY_PENDING

    steered.flip()
    result = execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert (result.action, result.cell_status) == ("applied", CellStatus.SUBMITTED)
    _assert_delivered_once(rt, downstream, "501")
    rt.settle()
    assert len(downstream.requests) == 1
    assert steered.searches_after_flip == 0


# --------------------------------------------------------------------------------------------
# 6. a dead outbox row


def test_dead_outbox_row_fails_the_cell_and_a_rerun_selects_nothing(make_runtime, downstream):
    rt, steered = _runtime(make_runtime)
    downstream.queue((400, {"error": "bad payload"}))
    rt.pump()
    c = cell(rt)
    assert (c.status, c.terminal_reason_code, c.work_id) == (CellStatus.FAILED, "delivery_abandoned", "501")
    assert [(i.status, i.outbox_status) for i in intents(rt)] == [("failed", "dead")]
    assert rt.wiring.ledger.get_slot(SLOT).status == "failed"

    steered.flip()
    rt.wiring.queues.send_execution([OutgoingMessage({"slotId": SLOT, "targetId": TARGET})])
    rt.settle()
    assert execute_cell(rt.wiring.executions, SLOT, TARGET).action == "claimed_by_other"
    rt.sweep()
    rt.pump()
    assert len(downstream.requests) == 1
    assert (cell(rt).status, cell(rt).work_id) == (CellStatus.FAILED, "501")
    assert len(intents(rt)) == 1
    assert steered.searches_after_flip == 0


def test_dead_outbox_row_whose_cell_move_crashed_fails_the_cell_on_rerun_without_reselecting(make_runtime, downstream):
    rt, steered = _runtime(make_runtime)
    assert rt.pumps["execute"].poll() == 1
    downstream.queue((400, {"error": "bad payload"}))
    with crash_at(rt.wiring, "ledger", "settle_cell_from_delivery", when=lambda s, t, to, *a, **k: to == CellStatus.FAILED):
        rt.pumps["deliver"].poll()
    assert [(i.status, i.outbox_status) for i in intents(rt)] == [("failed", "dead")]
    assert cell(rt).status == CellStatus.DELIVERY_PENDING
    steered.flip()
    result = execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert result.cell_status == CellStatus.FAILED
    c = cell(rt)
    assert (c.status, c.work_id, c.last_error) == (CellStatus.FAILED, "501", LOST_REASON)
    rt.settle()
    assert len(downstream.requests) == 1
    assert steered.searches_after_flip == 0
    assert rt.wiring.ledger.get_slot(SLOT).status == "failed"


# --------------------------------------------------------------------------------------------
# 8. a multi-work target

MULTI = {
    "illusts": [work(str(600 + i), f"2026-11-{20 - i:02d}T10:00:00+09:00") for i in range(8)]
}


def _multi(cfg):
    cfg["targets"].append({"id": "cats3", "type": "illustration", "mode": "search", "tag": "cats", "limit": 3,
                           "storageMode": "cache", "delivery": {"target": "review"}})
    add_schedule(cfg, "cats3-daily", targets=("cats3",))


def test_multi_work_target_delivers_three_distinct_works_and_the_next_occurrence_others(make_runtime, downstream):
    rt = make_runtime(START, mutate=_multi, catalog=MULTI)
    rt.fire("cats3-daily", iso=FIRE)
    rt.settle()
    first = delivered_work_ids(downstream)
    assert len(first) == 3
    assert set(first) == {"600", "601", "602"}
    slot1 = "cats3-daily@2026-12-01T0800"
    assert cell(rt, slot1, "cats3").status == CellStatus.SUBMITTED
    assert rt.wiring.ledger.get_slot(slot1).status == "success"

    rt.clock.set(ms("2026-12-01T22:59:00Z"))
    rt.fire("cats3-daily", iso="2026-12-01T23:00:00Z")
    rt.settle()
    second = delivered_work_ids(downstream)[3:]
    assert len(second) == 3 and len(set(second)) == 3
    assert set(second) == {"603", "604", "605"}
    assert not set(first) & set(second)
    assert len(downstream.requests) == 6


@pytest.mark.parametrize("crash_after_intent", [2, 3])
def test_multi_work_cell_rerun_after_a_crash_never_exceeds_its_limit(make_runtime, downstream, crash_after_intent):
    """A multi-work cell dies after enqueuing 2 (or all 3) of its works; a newer work then appears. The
    re-run must not deliver more than ``limit`` works for the one cell (DESIGN: a cell that
    owns N works keeps them), and never the same work twice."""
    rt = make_runtime(START, mutate=_multi, catalog=MULTI)
    catalogue = rt.wiring.source
    rt.fire("cats3-daily", iso=FIRE)
    slot1 = "cats3-daily@2026-12-01T0800"
    calls = {"n": 0}

    def second_intent(*a, **k):
        calls["n"] += 1
        return calls["n"] == crash_after_intent

    steered = SteeredSource(catalogue, promote="607")
    rt.wiring.source = steered
    with crash_at(rt.wiring, "ledger", "put_intent", after=True, when=second_intent, on_crash=steered.flip):
        with pytest.raises(RuntimeError, match="injected crash"):
            execute_cell(rt.wiring.executions, slot1, "cats3")
    assert len(intents(rt, slot1, "cats3")) == crash_after_intent
    rt.settle()
    works = delivered_work_ids(downstream)
    assert len(works) == len(set(works)), works
    assert len(works) <= 3, works
    assert {"600", "601"} <= set(works)


# --------------------------------------------------------------------------------------------
# a zombie executor that wakes up after its lease was taken over


def test_a_zombie_executor_failing_late_does_not_free_a_delivered_work_for_reselection(make_runtime, downstream):
    """Executor A binds and reserves 501, then hangs in the download past its lease. Executor B
    takes the cell over, continues 501 and delivers it. When A finally sees its download fail, it
    must not undo anything it no longer owns: 501 stays taken on the route, so the next
    occurrence delivers another work instead of posting 501 a second time."""
    from identity_support import NEXT_DAY_FIRE, NEXT_DAY_SLOT

    from pixivflow.domain.errors import SourceError

    rt, steered = _runtime(make_runtime)
    serialize_ledger_requests(rt.wiring)
    entered, wake = threading.Event(), threading.Event()

    class HangingDownload:
        def __init__(self):
            self.calls = 0

        def __getattr__(self, name):
            return getattr(steered, name)

        def download(self, w):
            self.calls += 1
            if self.calls == 1:  # executor A
                entered.set()
                assert wake.wait(30)
                raise SourceError("image download failed")
            return steered.download(w)

    rt.wiring.source = HangingDownload()
    zombie = threading.Thread(target=lambda: execute_cell(rt.wiring.executions, SLOT, TARGET))
    zombie.start()
    try:
        assert entered.wait(30)
        rt.clock.advance(LEASE_TTL_MS + 1_000)
        takeover = execute_cell(rt.wiring.executions, SLOT, TARGET)  # executor B
        assert takeover.cell_status == CellStatus.DELIVERY_PENDING
        rt.pump()
        assert cell(rt).status == CellStatus.SUBMITTED
    finally:
        wake.set()
        zombie.join(30)
    rt.wiring.source = steered
    rt.settle()
    assert delivered_work_ids(downstream) == ["501"]

    rt.clock.set(ms("2026-12-01T22:59:00Z"))
    rt.fire(SCHEDULE, iso=NEXT_DAY_FIRE)
    rt.settle()
    assert cell(rt, NEXT_DAY_SLOT).status == CellStatus.SUBMITTED
    assert delivered_work_ids(downstream) == ["501", "502"]
    assert rt.wiring.ledger.work_owners("review", "illustration", ["501"]) == {"501": f"{SLOT}#{TARGET}"}


# --------------------------------------------------------------------------------------------
# 6. found by make sim: the row is delivered while the cell still says `selected`


def _intent_recorded_then_died(rt):
    """The executor records the intent and dies hard before moving the cell (lease left behind)."""
    with crash_at(rt.wiring, "ledger", "move_cell_as_owner", hard=True,
                  when=lambda s, t, to, *a, **k: to == CellStatus.DELIVERY_PENDING) as proxy:
        rt.pumps["execute"].poll()
    assert proxy.fired
    assert cell(rt).status == CellStatus.SELECTED and [i.outbox_status for i in intents(rt)] == ["pending"]


def test_a_row_delivered_while_its_cell_is_still_selected_settles_the_cell_submitted(make_runtime, downstream):
    """The scenario of make-sim seed 1848 (the sweep re-drove the row, the deliver function recorded the
    ACK and died before the cell move). Here the sweep's re-dispatch also rescues the cell; the seed
    itself, where it did not, is replayed by test_sim_seeds.py."""
    rt, _ = _runtime(make_runtime)
    _intent_recorded_then_died(rt)
    with crash_at(rt.wiring, "ledger", "settle_cell_from_delivery"):
        rt.settle(max_ms=10 * 60_000)  # the sweep re-drives the due row; the ACK is recorded, the cell move dies
    assert [(i.status, i.outbox_status) for i in intents(rt)] == [("delivered", "done")]
    rt.settle()
    assert cell(rt).status == CellStatus.SUBMITTED  # the delivery ledger settled it, no stall verdict
    assert rt.wiring.ledger.load(SLOT).slot.status == "success"
    _assert_delivered_once(rt, downstream, "501")


class _AckNeverRecorded:
    """The deliver function posts, then dies before recording the ACK, on every attempt."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        if name == "settle_intent":
            def settle_intent(*args, **kwargs):
                raise RuntimeError("injected crash after the post, before the ACK is recorded")
            return settle_intent
        return getattr(self._inner, name)


def test_a_selected_cell_whose_row_is_mid_post_is_never_failed_under_it(make_runtime, downstream):
    """The scenario of make-sim seed 2988 (the deliver function posts and dies before recording the ACK,
    the cell still `selected`): the cell is never failed under its live row and ends submitted with
    one downstream record. The seed itself is replayed by test_sim_seeds.py."""
    rt, _ = _runtime(make_runtime)
    _intent_recorded_then_died(rt)
    real = rt.wiring.ledger
    rt.wiring.ledger = _AckNeverRecorded(real)
    rt.settle(max_ms=20 * 60_000)  # past the 15 min stall budget: every attempt posts, none is recorded
    rt.wiring.ledger = real
    assert len(downstream.records) == 1  # the downstream recorded the work once (replays are idempotent)
    assert not cell(rt).terminal  # never failed under a row that may be posting it (re-dispatch may move it on)
    rt.settle()
    assert cell(rt).status == CellStatus.SUBMITTED
    assert [(i.status, i.outbox_status) for i in intents(rt)] == [("delivered", "done")]
    # every attempt posted (the replays are idempotent): the downstream holds ONE record, of the bound work
    assert [r["work_id"] for r in downstream.records.values()] == ["501"]


def test_a_handed_over_cell_is_the_outboxs_even_when_no_redispatch_can_rescue_it(make_runtime, downstream):
    """The 1848/2988 history with nothing else to save the cell (issue 20 §4: the scenario above passed
    with the ``handed_over(...) and ... == "live"`` branch of ``owned_by_outbox`` reverted, because the
    sweep's re-dispatch moved the cell to delivery_pending first). Here the execute consumer is down,
    so the cell stays `selected` past its stall budget while its row is being posted and never
    recorded: the stall rule must leave the cell to the outbox, or a work the route recorded would be
    reported as failed (spec §13.3, §13.16)."""
    rt, _ = _runtime(make_runtime)
    _intent_recorded_then_died(rt)
    now = rt.clock.now_ms()
    rt.outages.append(("execute", now, now + 3_600_000))  # no executor runs again for an hour: no re-dispatch
    real = rt.wiring.ledger
    rt.wiring.ledger = _AckNeverRecorded(real)
    rt.settle(max_ms=20 * 60_000)  # past the 15 min stall budget: every attempt posts, none is recorded
    rt.wiring.ledger = real
    assert cell(rt).status == CellStatus.SELECTED  # never failed under a row that may be posting it
    assert len(downstream.records) == 1
    rt.settle()
    assert cell(rt).status == CellStatus.SUBMITTED
    assert [(i.status, i.outbox_status) for i in intents(rt)] == [("delivered", "done")]
    assert rt.wiring.ledger.load(SLOT).slot.status == "success"
