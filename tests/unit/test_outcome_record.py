"""The schedule.outcome record, its business status and the compact execution summary (spec §9)."""

from __future__ import annotations

import json

import pytest

from pixivflow.domain.model import Cell, Intent, Slot
from pixivflow.domain.outcome_record import (
    USER_COPY,
    build_outcome,
    build_summary,
    business_status,
    categorise_cell,
)

OCCURRENCE = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z
STARTED = OCCURRENCE + 1_234
COMPLETED = STARTED + 45_678


def make_slot(status="success", targets=("t1",), **kw) -> Slot:
    base = dict(
        slot_id="slot-1",
        schedule_id="daily",
        status=status,
        target_ids=list(targets),
        created_at=OCCURRENCE,
        occurrence_at=OCCURRENCE,
        occurrence_date="2026-01-01",
        started_at=STARTED,
    )
    base.update(kw)
    return Slot(**base)


def make_cell(target, status, **kw) -> Cell:
    return Cell(slot_id="slot-1", target_id=target, status=status, **kw)


def submitted(target, work="100"):
    return make_cell(target, "submitted", work_id=work, work_type="illustration")


def no_candidate(target, reason_code="no_candidate"):
    return make_cell(
        target,
        "no_candidate",
        last_error="no eligible candidate found after scanning 5",
        terminal_reason_code=reason_code,
    )


def duplicate(target, work="200"):
    return make_cell(
        target, "duplicate", work_id=work, work_type="illustration", terminal_reason_code="duplicate_exhausted"
    )


def failed(target, code="internal_error", work=None, error="boom"):
    return make_cell(target, "failed", work_id=work, last_error=error, terminal_reason_code=code)


def counts(record):
    return {k: v for k, v in record["cells"].items() if k != "targets"}


# ---------------------------------------------------------------------------------------------
# build_outcome
# ---------------------------------------------------------------------------------------------


def test_one_submitted_cell_gives_one_exact_record():
    cell = submitted("t1")
    cell.candidate_report = {"bound": 5, "attempted": 1, "skipped": [], "outages": []}
    record = build_outcome(make_slot("success"), [cell], {"t1": "confirmed"}, COMPLETED)
    assert record == {
        "event": "schedule.outcome",
        "outcome_version": 2,
        "schedule_id": "daily",
        "slot_id": "slot-1",
        "occurrence_at": "2026-01-01T00:00:00.000Z",
        "occurrence_date": "2026-01-01",
        "status": "success",
        "business_status": "success",
        "alertable": False,
        "duration_ms": 45_678,
        "cells": {
            "total": 1,
            "submitted": 1,
            "no_match": 0,
            "duplicate": 0,
            "all_duplicates": False,
            "executor_failed": 0,
            "delivery_failed": 0,
            "targets": [
                {
                    "target_id": "t1",
                    "status": "submitted",
                    "work_id": "100",
                    "error": None,
                    "terminal_reason_code": None,
                    "terminal_reason_message": None,
                    "candidate_report": {"bound": 5, "attempted": 1, "skipped": [], "outages": []},
                }
            ],
        },
    }
    json.dumps(record)  # the record is logged and stored as JSON


def test_submitted_plus_no_candidate_is_partial_success():
    slot = make_slot("partial", targets=("t1", "t2"))
    record = build_outcome(slot, [submitted("t1"), no_candidate("t2")], {}, COMPLETED)
    assert record["status"] == "partial"
    assert record["business_status"] == "partial_success"
    assert record["alertable"] is False
    assert counts(record) == {
        "total": 2,
        "submitted": 1,
        "no_match": 1,
        "duplicate": 0,
        "all_duplicates": False,
        "executor_failed": 0,
        "delivery_failed": 0,
    }
    no_match = record["cells"]["targets"][1]
    assert no_match["terminal_reason_code"] == "no_candidate"
    assert no_match["terminal_reason_message"] == "没有找到合适的新作品"  # table default when none stored
    assert no_match["error"] == "no eligible candidate found after scanning 5"


def test_two_duplicates_and_one_submitted_means_all_non_submitted_are_duplicates():
    slot = make_slot("partial", targets=("t1", "t2", "t3"))
    cells = [duplicate("t1", "201"), submitted("t2"), duplicate("t3", "203")]
    record = build_outcome(slot, cells, {}, COMPLETED)
    assert counts(record) == {
        "total": 3,
        "submitted": 1,
        "no_match": 0,
        "duplicate": 2,
        "all_duplicates": True,  # (3 - 1) > 0 and 2 == 3 - 1
        "executor_failed": 0,
        "delivery_failed": 0,
    }
    assert record["business_status"] == "partial_success"


def test_all_duplicates_is_false_when_everything_was_submitted():
    record = build_outcome(make_slot("success"), [submitted("t1")], {}, COMPLETED)
    assert record["cells"]["all_duplicates"] is False


def test_a_dead_delivery_counts_once_as_delivery_failed():
    slot = make_slot("failed", targets=("t1", "t2"))
    dead = failed("t1", code="delivery_abandoned", work="300", error="投稿未被处理，已放弃")
    crashed = failed("t2", code="internal_error")
    record = build_outcome(slot, [dead, crashed], {"t1": "lost", "t2": None}, COMPLETED)
    assert record["cells"]["delivery_failed"] == 1
    assert record["cells"]["executor_failed"] == 1
    assert record["business_status"] == "failed"
    assert record["alertable"] is True


def test_the_same_dead_delivery_without_a_lost_ledger_is_an_executor_failure():
    dead = failed("t1", code="delivery_abandoned", work="300")
    record = build_outcome(make_slot("failed"), [dead], {"t1": "unknown"}, COMPLETED)
    assert (record["cells"]["delivery_failed"], record["cells"]["executor_failed"]) == (0, 1)


@pytest.mark.parametrize("status", ["pending", "running", "expired"])
def test_a_slot_that_is_not_success_partial_or_failed_has_no_record(status):
    slot = make_slot(status)
    cells = [make_cell("t1", "delivery_pending", work_id="1")] if status == "running" else [failed("t1")]
    assert build_outcome(slot, cells, {"t1": "live"}, COMPLETED) is None


def test_targets_follow_the_slot_snapshot_order():
    slot = make_slot("partial", targets=("b", "a", "c"))
    cells = [submitted("a"), no_candidate("c"), failed("b")]
    record = build_outcome(slot, cells, {}, COMPLETED)
    assert [t["target_id"] for t in record["cells"]["targets"]] == ["b", "a", "c"]


def test_missing_times_are_omitted_not_invented():
    slot = make_slot("success", started_at=None, occurrence_at=None)
    record = build_outcome(slot, [submitted("t1")], {}, COMPLETED)
    assert "duration_ms" not in record
    assert "occurrence_at" not in record


def test_duration_never_goes_negative():
    record = build_outcome(make_slot("success"), [submitted("t1")], {}, STARTED - 5)
    assert record["duration_ms"] == 0


def test_occurrence_instant_keeps_milliseconds():
    slot = make_slot("success", occurrence_at=OCCURRENCE + 7)
    assert build_outcome(slot, [submitted("t1")], {}, COMPLETED)["occurrence_at"] == "2026-01-01T00:00:00.007Z"


def test_all_no_candidate_slot_is_failed_but_not_alertable():
    slot = make_slot("failed", targets=("t1", "t2"))
    record = build_outcome(slot, [no_candidate("t1"), no_candidate("t2", "filter_exhausted")], {}, COMPLETED)
    assert record["status"] == "failed"
    assert record["business_status"] == "no_candidate"
    assert record["alertable"] is False


def test_duplicate_cells_and_duplicate_exhausted_scans_are_duplicate_only():
    slot = make_slot("failed", targets=("t1", "t2"))
    cells = [duplicate("t1"), no_candidate("t2", "duplicate_exhausted")]
    record = build_outcome(slot, cells, {}, COMPLETED)
    assert record["business_status"] == "duplicate_only"
    assert record["alertable"] is False
    assert record["cells"]["all_duplicates"] is False  # the no_candidate cell is not a duplicate cell


def test_a_cancelled_job_is_cancelled_not_failed():
    cancelled = failed("t1", code="cancelled_by_consumer", error="任务已被取消")
    record = build_outcome(make_slot("failed"), [cancelled], {}, COMPLETED)
    assert record["cells"]["executor_failed"] == 1  # the cell did end failed
    assert record["business_status"] == "cancelled"
    assert record["alertable"] is False


def test_a_cancellation_next_to_a_real_failure_is_failed():
    slot = make_slot("failed", targets=("t1", "t2"))
    cells = [failed("t1", code="cancelled_by_consumer"), failed("t2", code="network_error")]
    record = build_outcome(slot, cells, {}, COMPLETED)
    assert record["business_status"] == "failed"
    assert record["alertable"] is True


# ---------------------------------------------------------------------------------------------
# categorise_cell and business_status tables
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cell,state,expected",
    [
        (submitted("t"), "lost", "submitted"),  # a confirmed cell is never re-counted as a loss
        (no_candidate("t"), "lost", "no_match"),
        (duplicate("t"), "lost", "duplicate"),
        (failed("t", "delivery_abandoned"), "lost", "delivery_failed"),
        (make_cell("t", "delivery_pending", work_id="1"), "lost", "delivery_failed"),
        (failed("t"), None, "executor_failed"),
        (failed("t"), "confirmed", "executor_failed"),
        (failed("t"), "live", "executor_failed"),
        (make_cell("t", "delivery_pending", work_id="1"), "live", None),
        (make_cell("t", "pending"), None, None),
    ],
)
def test_categorise_cell_precedence(cell, state, expected):
    assert categorise_cell(cell, state) == expected


BUSINESS_TABLE = [
    # (total, submitted, no_match, duplicate, executor_failed, delivery_failed, dup_exhausted, cancelled) -> status
    ((3, 3, 0, 0, 0, 0, 0, 0), "success"),
    ((3, 1, 1, 0, 1, 0, 0, 0), "partial_success"),  # any submission beats failures
    ((0, 0, 0, 0, 0, 0, 0, 0), "success"),  # nothing to do
    ((2, 0, 0, 0, 2, 0, 0, 2), "cancelled"),
    ((2, 0, 0, 0, 1, 1, 0, 1), "failed"),  # a lost delivery beside a cancellation
    ((2, 0, 0, 2, 0, 0, 0, 0), "duplicate_only"),
    ((2, 0, 1, 1, 0, 0, 1, 0), "duplicate_only"),
    ((2, 0, 2, 0, 0, 0, 0, 0), "no_candidate"),
    ((2, 0, 1, 1, 0, 0, 0, 0), "no_candidate"),
    ((2, 0, 1, 0, 1, 0, 0, 0), "failed"),
    ((1, 0, 0, 0, 0, 1, 0, 0), "failed"),
    ((3, 0, 1, 1, 0, 0, 0, 1), "cancelled"),  # cancelled with no-content siblings
]


@pytest.mark.parametrize("args,expected", BUSINESS_TABLE)
def test_business_status_table(args, expected):
    total, sub, nm, dup, ex, dl, de, cn = args
    status = business_status(
        total=total,
        submitted=sub,
        no_match=nm,
        duplicate=dup,
        executor_failed=ex,
        delivery_failed=dl,
        duplicate_exhausted=de,
        cancelled=cn,
    )
    assert status == expected


def test_every_business_status_has_user_copy():
    assert set(USER_COPY) == {"success", "partial_success", "no_candidate", "duplicate_only", "cancelled", "failed"}
    assert USER_COPY["success"] == "任务完成，已发布本轮内容。"
    assert USER_COPY["failed"] == "本轮任务遇到系统异常，请稍后重试或检查日志。"
    assert USER_COPY["no_candidate"] != USER_COPY["failed"]


@pytest.mark.parametrize(
    "cells,expected",
    [
        ([no_candidate("t1"), no_candidate("t2")], "no_candidate"),
        ([duplicate("t1"), duplicate("t2")], "duplicate_only"),
        ([no_candidate("t1"), duplicate("t2")], "no_candidate"),
    ],
)
def test_no_content_outcomes_are_never_alertable(cells, expected):
    record = build_outcome(make_slot("failed", targets=("t1", "t2")), cells, {}, COMPLETED)
    assert record["business_status"] == expected
    assert record["alertable"] is False


# ---------------------------------------------------------------------------------------------
# build_summary
# ---------------------------------------------------------------------------------------------


def test_summary_of_a_partial_slot():
    slot = make_slot("partial", targets=("t1", "t2", "t3"), completed_at=COMPLETED)
    cells = [submitted("t1", "100"), no_candidate("t2"), failed("t3", code="auth_failed", error="401 unauthorized")]
    intents = [
        Intent(
            slot_id="slot-1",
            target_id="t1",
            route="review",
            work_type="illustration",
            work_id="100",
            idempotency_key="k1",
            status="delivered",
            outbox_status="done",
            attempts=2,
            remote_id="rev-9",
            remote_status="pending_review",
        ),
        Intent(
            slot_id="other-slot",
            target_id="t1",
            route="review",
            work_type="illustration",
            work_id="999",
            idempotency_key="k2",
        ),
    ]
    events = [{"event": f"e{i}", "ts": i} for i in range(10)] + [{"event": "execution.summary", "ts": 99}]
    summary = build_summary(slot, cells, intents, events=events)
    assert summary == {
        "executionId": "slot-1",
        "scheduleId": "daily",
        "slotId": "slot-1",
        "status": "partial",
        "candidates": {
            "selected": 1,
            "none": [{"target": "t2", "reason": "no eligible candidate found after scanning 5"}],
        },
        "downloads": [{"pixivId": "100", "workType": "illustration", "files": None, "bytes": None}],
        "media": [
            {"pixivId": "100", "originals": None, "previews": None, "documentFallback": None, "reasons": None}
        ],
        "deliveries": [
            {
                "target": "review",
                "pixivId": "100",
                "status": "delivered",
                "attempts": 2,
                "remoteStatus": "pending_review",
                "reviewId": "rev-9",
            }
        ],
        "outboxEventsTail": [{"event": f"e{i}", "errorClass": None, "ts": i} for i in range(2, 10)],
        "warnings": [
            "no_candidate: t2 (no eligible candidate found after scanning 5)",
            "failed: t3 (401 unauthorized)",
        ],
        "durationMs": COMPLETED - STARTED,
    }


@pytest.mark.parametrize(
    "slot_status,cells,expected",
    [
        ("success", [submitted("t1")], "completed"),
        ("failed", [failed("t1")], "failed"),
        ("running", [failed("t1"), no_candidate("t2")], "failed"),
        ("running", [no_candidate("t1"), make_cell("t2", "selected")], "partial"),
        ("running", [make_cell("t1", "selected")], "running"),
    ],
)
def test_summary_status(slot_status, cells, expected):
    slot = make_slot(slot_status, targets=("t1", "t2"))
    assert build_summary(slot, cells, [])["status"] == expected


def test_summary_keeps_unknown_facts_null():
    slot = make_slot("running", started_at=None)
    summary = build_summary(slot, [make_cell("t1", "pending")], [])
    assert summary["durationMs"] is None
    assert summary["candidates"] == {"selected": 0, "none": []}
    assert summary["downloads"] == [] and summary["deliveries"] == [] and summary["outboxEventsTail"] == []
    assert summary["warnings"] == []


def test_summary_duration_prefers_the_given_completion_time():
    slot = make_slot("success", completed_at=None)
    assert build_summary(slot, [submitted("t1")], [], completed_at=STARTED + 10)["durationMs"] == 10
