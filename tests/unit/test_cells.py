"""Cell state machine (spec §3.2), slot derivation (§2.4), single-work rule (§5.3), applyOutcome (§3.3),
delivery ledger state (§10.8) and the stall rules (§7.2) as pure rules."""

import itertools

import pytest

from pixivflow.domain.apply import decide, retry_delay_s
from pixivflow.domain.cells import (
    ALLOWED_FROM,
    CellStatus,
    IllegalCellTransition,
    check_transition,
    derive_slot_status,
    is_single_work_cell,
)
from pixivflow.domain.delivery_state import LOST_REASON, delivery_state
from pixivflow.domain.model import Cell, Intent, Slot
from pixivflow.domain.outcomes import CandidateScan, CandidateSkip, TargetOutcome
from pixivflow.domain.stall import judge_slot, progress_clock

S = CellStatus
TERMINAL = {S.SUBMITTED, S.NO_CANDIDATE, S.DUPLICATE, S.FAILED}

# The table of spec §3.2, written out independently of the module under test.
EXPECTED = {
    S.PENDING: {S.SELECTED, S.ARTIFACT_READY, S.DELIVERY_PENDING, S.SUBMITTED, S.NO_CANDIDATE, S.DUPLICATE, S.FAILED},
    S.SELECTED: {S.ARTIFACT_READY, S.DELIVERY_PENDING, S.SUBMITTED, S.NO_CANDIDATE, S.DUPLICATE, S.FAILED},
    S.ARTIFACT_READY: {S.DELIVERY_PENDING, S.SUBMITTED, S.DUPLICATE, S.FAILED},
    S.DELIVERY_PENDING: {S.SUBMITTED, S.DUPLICATE, S.FAILED},
    S.SUBMITTED: set(),
    S.NO_CANDIDATE: set(),
    S.DUPLICATE: set(),
    S.FAILED: set(),
}


@pytest.mark.parametrize("source,target", list(itertools.product(list(S), list(S))))
def test_every_pair_of_the_transition_table(source, target):
    if source == target:
        assert check_transition(source, target) is False  # a same-state move is a no-op
    elif target in EXPECTED[source]:
        assert check_transition(source, target) is True
        assert source in ALLOWED_FROM[target]
    else:
        with pytest.raises(IllegalCellTransition, match=f"illegal slot cell transition: {source} -> {target}"):
            check_transition(source, target)
        assert source not in ALLOWED_FROM[target]


def test_terminal_cells_are_immutable():
    for terminal in TERMINAL:
        assert all(terminal not in ALLOWED_FROM[t] for t in S)


@pytest.mark.parametrize(
    "cells,expected",
    [
        ([], "pending"),
        (["pending"], "running"),
        (["submitted", "delivery_pending"], "running"),
        (["submitted", "submitted"], "success"),
        (["submitted", "no_candidate"], "partial"),
        (["submitted", "failed", "duplicate"], "partial"),
        (["no_candidate"], "failed"),
        (["failed", "duplicate"], "failed"),
    ],
)
def test_slot_status_derivation(cells, expected):
    assert derive_slot_status(cells) == expected


@pytest.mark.parametrize(
    "target,single",
    [
        ({"limit": 1, "mode": "search"}, True),
        ({"limit": 3, "mode": "topic"}, False),  # rule 1 wins over mode
        ({"limit": 0, "mode": "topic"}, True),  # a non-positive limit is ignored
        ({"type": "novel", "novelId": 0}, True),  # present, even falsy
        ({"type": "novel", "novelId": None, "mode": "search"}, False),
        ({"type": "illustration", "illustId": 42}, True),
        ({"type": "illustration", "illustId": 0, "mode": "search"}, False),
        ({"userId": 7, "mode": "topic"}, False),
        ({"type": "novel", "seriesId": 3, "mode": "topic"}, False),
        ({"mode": "topic"}, True),
        ({"mode": "search"}, False),
        ({"mode": "ranking"}, False),
    ],
)
def test_is_single_work_cell(target, single):
    assert is_single_work_cell(target) is single


def test_apply_outcome_mapping():
    assert decide(TargetOutcome.submitted("1", "illustration"), None).to_status == S.SUBMITTED
    assert decide(TargetOutcome.stored("1", "illustration"), None).to_status == S.SUBMITTED
    assert decide(TargetOutcome.delivery_pending("1", "illustration"), None).to_status == S.DELIVERY_PENDING
    nc = decide(TargetOutcome.no_candidate("no eligible candidate found after scanning 0"), None)
    assert (nc.to_status, nc.reason_code) == (S.NO_CANDIDATE, "no_candidate")
    # A locked work is never collapsed to no_candidate.
    assert decide(TargetOutcome.no_candidate("nothing"), "123").to_status is None
    dup = decide(TargetOutcome.duplicate("5", "downstream attested historical duplicate"), None)
    assert (dup.to_status, dup.reason_code) == (S.DUPLICATE, "duplicate_exhausted")
    retry = decide(TargetOutcome.failed("ECONNRESET", retryable=True), "123")
    assert retry.to_status is None and retry.retry and retry.last_error == "ECONNRESET"
    fail = decide(TargetOutcome.failed("HTTP 429 rate limit", retryable=False), None)
    assert (fail.to_status, fail.reason_code) == (S.FAILED, "rate_limited")
    # The stored message is the table message, never the raw error text.
    assert fail.reason_message == "Pixiv 请求频率受限" and fail.last_error == "HTTP 429 rate limit"


def test_filter_exhausted_from_scan_skips():
    scan = CandidateScan(bound=5, attempted=2, skipped=[CandidateSkip("filtered", "1", "language"), CandidateSkip("deleted", "2", "gone")])
    assert decide(TargetOutcome.no_candidate("x", scan), None).reason_code == "filter_exhausted"


def test_cell_retry_delay_doubles_to_five_minutes():
    assert [retry_delay_s(n) for n in (1, 2, 3, 4, 5, 6, 20)] == [30, 60, 120, 240, 300, 300, 300]


def _intent(route="review", status="pending", outbox="pending", work="1"):
    return Intent("s", "t", route, "illustration", work, f"k-{route}-{work}", status=status, outbox_status=outbox)


@pytest.mark.parametrize(
    "routes,intents,state",
    [
        (["review"], [], "unknown"),
        (["review"], [_intent(status="delivered", outbox="done")], "confirmed"),
        (["review"], [_intent(status="duplicate", outbox="done")], "confirmed"),
        (["review"], [_intent(outbox="retry_wait")], "live"),
        (["review"], [_intent(outbox="processing")], "live"),
        (["review"], [_intent(outbox="dead")], "lost"),
        (["review"], [_intent(status="failed", outbox="done")], "lost"),
        (["a", "b"], [_intent("a", "delivered", "done"), _intent("b", outbox="pending")], "live"),
        (["a", "b"], [_intent("a", "delivered", "done"), _intent("b", "failed", "dead")], "lost"),
        (["a", "b"], [_intent("a", "delivered", "done")], "live"),  # some confirmed, the rest not even queued
        (["a", "b"], [_intent("a", "delivered", "done"), _intent("b", "duplicate", "done")], "confirmed"),
    ],
)
def test_delivery_ledger_state(routes, intents, state):
    verdict = delivery_state(routes, intents)
    assert verdict.state == state
    if state == "confirmed":
        assert verdict.work_id == "1"
    if state == "lost":
        assert verdict.reason == LOST_REASON


def _slot(status, created=0, started=None):
    return Slot("s@x", "s", status, ["t"], created_at=created, started_at=started)


def _cell(heartbeat=None, lease_until=None, owner=None):
    return Cell("s@x", "t", "pending", heartbeat_at=heartbeat, lease_until=lease_until, lease_owner=owner)


def test_stall_rules():
    minute = 60_000
    q, st = 30 * minute, 15 * minute
    assert judge_slot(_slot("pending", 0), [_cell()], 30 * minute, queued_timeout_ms=q, stall_timeout_ms=st).rule == "queued_too_long"
    assert judge_slot(_slot("pending", 0), [_cell()], 29 * minute, queued_timeout_ms=q, stall_timeout_ms=st) is None
    # a live lease protects, an expired one does not
    live = _cell(lease_until=31 * minute, owner="o")
    assert judge_slot(_slot("pending", 0), [live], 30 * minute, queued_timeout_ms=q, stall_timeout_ms=st) is None
    dead = _cell(lease_until=30 * minute, owner="o")
    assert judge_slot(_slot("pending", 0), [dead], 30 * minute, queued_timeout_ms=q, stall_timeout_ms=st) is not None
    # running: newest heartbeat, else started, else created
    assert progress_clock(_slot("running", 0, 5), [_cell(heartbeat=9), _cell(heartbeat=7)]) == 9
    assert progress_clock(_slot("running", 0, 5), [_cell()]) == 5
    fresh = _cell(heartbeat=10 * minute)
    assert judge_slot(_slot("running", 0, 0), [fresh], 20 * minute, queued_timeout_ms=q, stall_timeout_ms=st) is None
    verdict = judge_slot(_slot("running", 0, 0), [fresh], 25 * minute, queued_timeout_ms=q, stall_timeout_ms=st)
    assert verdict.rule == "stalled_no_heartbeat" and verdict.since == 10 * minute
