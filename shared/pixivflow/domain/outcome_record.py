"""The one structured record of a finished occurrence (``schedule.outcome``) and its compact summary.

When a slot reaches ``success``/``partial``/``failed`` the rollup writes exactly one
``execution.summary`` lifecycle event whose detail is ``{summary, outcome}``, and logs the same
``outcome`` object. Both are projections of durable state only (slot, cells, delivery ledger):
nothing is inferred from log text, and two builds from the same state are identical, so the log
line and the stored row cannot disagree.

The record separates "nothing suitable existed" and "already delivered" from real failures: the
slot *status* of an all-``no_candidate`` run is ``failed`` (no cell was submitted), yet its
*business* status is ``no_candidate`` and it is not alertable. ``business_status`` is reporting
only; it never drives scheduling.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from .cells import CellStatus, SlotStatus
from .model import Cell, Intent, Slot
from .reasons import reason_message

OUTCOME_EVENT = "schedule.outcome"
OUTCOME_VERSION = 2  # the 3.x record: business_status (with `cancelled`) and alertable
OUTCOME_SLOT_STATES: frozenset[str] = frozenset({SlotStatus.SUCCESS, SlotStatus.PARTIAL, SlotStatus.FAILED})

# Per-cell business categories. A cell lands in at most one.
CATEGORY_SUBMITTED = "submitted"
CATEGORY_NO_MATCH = "no_match"
CATEGORY_DUPLICATE = "duplicate"
CATEGORY_DELIVERY_FAILED = "delivery_failed"
CATEGORY_EXECUTOR_FAILED = "executor_failed"

# Business statuses.
BUSINESS_SUCCESS = "success"
BUSINESS_PARTIAL_SUCCESS = "partial_success"
BUSINESS_NO_CANDIDATE = "no_candidate"
BUSINESS_DUPLICATE_ONLY = "duplicate_only"
BUSINESS_CANCELLED = "cancelled"
BUSINESS_FAILED = "failed"

USER_COPY: Mapping[str, str] = MappingProxyType(
    {
        BUSINESS_SUCCESS: "任务完成，已发布本轮内容。",
        BUSINESS_PARTIAL_SUCCESS: "任务部分完成，部分内容已发布。",
        BUSINESS_NO_CANDIDATE: "本轮没有找到合适的新作品，任务已正常结束。",
        BUSINESS_DUPLICATE_ONLY: "本轮候选作品此前都已发布过，没有新内容，任务已正常结束。",
        BUSINESS_CANCELLED: "本轮任务已被取消，不会继续发布。",
        BUSINESS_FAILED: "本轮任务遇到系统异常，请稍后重试或检查日志。",
    }
)

DUPLICATE_EXHAUSTED = "duplicate_exhausted"
CANCELLED_BY_CONSUMER = "cancelled_by_consumer"
LEDGER_LOST = "lost"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def categorise_cell(cell: Cell, delivery_state: str | None) -> str | None:
    """One cell -> one business category, or ``None`` ("other", not counted).

    ``delivery_state`` is what the delivery ledger port answers for the cell's routes
    (``live``/``confirmed``/``lost``/``unknown``), or ``None`` when the target has no delivery
    route. A terminally lost delivery also leaves the cell ``failed``; it is checked first so
    that one cause produces one count.
    """
    status = cell.status
    if status == CellStatus.SUBMITTED:
        return CATEGORY_SUBMITTED
    if status == CellStatus.NO_CANDIDATE:
        return CATEGORY_NO_MATCH
    if status == CellStatus.DUPLICATE:
        return CATEGORY_DUPLICATE
    if delivery_state == LEDGER_LOST:
        return CATEGORY_DELIVERY_FAILED
    if status == CellStatus.FAILED:
        return CATEGORY_EXECUTOR_FAILED
    return None


def business_status(
    *,
    total: int,
    submitted: int,
    no_match: int = 0,
    duplicate: int = 0,
    executor_failed: int = 0,
    delivery_failed: int = 0,
    duplicate_exhausted: int = 0,
    cancelled: int = 0,
) -> str:
    """The operator-facing verdict of an occurrence, first matching rule wins.

    Count conventions (as :func:`build_outcome` produces them):

    * ``duplicate_exhausted`` counts cells carrying that reason that are *not* already in the
      ``duplicate`` bucket (in practice ``no_candidate`` cells whose whole scan was duplicates);
      a ``duplicate`` cell always carries that reason too, and counting it twice would turn an
      all-duplicate run into ``no_candidate``.
    * ``cancelled`` cells are also counted in ``executor_failed``/``delivery_failed`` (they end
      ``failed``). A cancellation is not a system failure, so only failures beyond the cancelled
      ones count as one.
    """
    del no_match  # part of the count set; the rules never need it
    non_submitted = total - submitted
    if submitted > 0 and non_submitted == 0:
        return BUSINESS_SUCCESS
    if submitted > 0:
        return BUSINESS_PARTIAL_SUCCESS
    if non_submitted == 0:
        return BUSINESS_SUCCESS
    system_failure = (executor_failed + delivery_failed) > cancelled
    if cancelled > 0 and not system_failure:
        return BUSINESS_CANCELLED
    if not system_failure:
        if duplicate + duplicate_exhausted == non_submitted:
            return BUSINESS_DUPLICATE_ONLY
        return BUSINESS_NO_CANDIDATE
    return BUSINESS_FAILED


def is_alertable(status: str) -> bool:
    """Only a business failure pages someone; no-content and cancelled runs never do."""
    return status == BUSINESS_FAILED


def iso_utc_ms(epoch_ms: int | None) -> str | None:
    """Epoch ms -> ``2026-01-02T03:04:05.678Z``; ``None`` when there is no valid instant."""
    if epoch_ms is None or isinstance(epoch_ms, bool):
        return None
    try:
        moment = _EPOCH + timedelta(milliseconds=int(epoch_ms))
    except (OverflowError, ValueError, TypeError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def ordered_cells(slot: Slot, cells: Iterable[Cell]) -> list[Cell]:
    """Cells in the slot's frozen target order; any cell outside the snapshot follows, as given."""
    by_target: dict[str, Cell] = {}
    extras: list[Cell] = []
    for cell in cells:
        if cell.target_id in slot.target_ids and cell.target_id not in by_target:
            by_target[cell.target_id] = cell
        else:
            extras.append(cell)
    ordered = [by_target[t] for t in slot.target_ids if t in by_target]
    return ordered + extras


def _reason_text(cell: Cell) -> str | None:
    if cell.terminal_reason_message:
        return cell.terminal_reason_message
    return reason_message(cell.terminal_reason_code) if cell.terminal_reason_code else None


def _target_entry(cell: Cell) -> dict[str, Any]:
    return {
        "target_id": cell.target_id,
        "status": str(cell.status),
        "work_id": cell.work_id,
        "error": cell.last_error,
        "terminal_reason_code": cell.terminal_reason_code,
        "terminal_reason_message": _reason_text(cell),
        "candidate_report": cell.candidate_report,
    }


def build_outcome(
    slot: Slot,
    cells: list[Cell],
    delivery_states: Mapping[str, str | None],
    completed_at: int,
) -> dict[str, Any] | None:
    """The ``schedule.outcome`` object of a terminal slot; ``None`` for any other slot status.

    ``delivery_states`` maps target id -> ledger answer (missing = no delivery route).
    """
    if slot.status not in OUTCOME_SLOT_STATES:
        return None
    ordered = ordered_cells(slot, cells)
    counts = {
        CATEGORY_SUBMITTED: 0,
        CATEGORY_NO_MATCH: 0,
        CATEGORY_DUPLICATE: 0,
        CATEGORY_EXECUTOR_FAILED: 0,
        CATEGORY_DELIVERY_FAILED: 0,
    }
    duplicate_exhausted = 0
    cancelled = 0
    for cell in ordered:
        category = categorise_cell(cell, delivery_states.get(cell.target_id))
        if category is not None:
            counts[category] += 1
        if cell.terminal_reason_code == DUPLICATE_EXHAUSTED and category != CATEGORY_DUPLICATE:
            duplicate_exhausted += 1
        if cell.terminal_reason_code == CANCELLED_BY_CONSUMER:
            cancelled += 1

    total = len(ordered)
    non_submitted = total - counts[CATEGORY_SUBMITTED]
    verdict = business_status(
        total=total,
        submitted=counts[CATEGORY_SUBMITTED],
        no_match=counts[CATEGORY_NO_MATCH],
        duplicate=counts[CATEGORY_DUPLICATE],
        executor_failed=counts[CATEGORY_EXECUTOR_FAILED],
        delivery_failed=counts[CATEGORY_DELIVERY_FAILED],
        duplicate_exhausted=duplicate_exhausted,
        cancelled=cancelled,
    )

    record: dict[str, Any] = {
        "event": OUTCOME_EVENT,
        "outcome_version": OUTCOME_VERSION,
        "schedule_id": slot.schedule_id,
        "slot_id": slot.slot_id,
    }
    occurrence_at = iso_utc_ms(slot.occurrence_at)
    if occurrence_at is not None:
        record["occurrence_at"] = occurrence_at
    record["occurrence_date"] = slot.occurrence_date
    record["status"] = str(slot.status)
    record["business_status"] = verdict
    record["alertable"] = is_alertable(verdict)
    if slot.started_at is not None:
        record["duration_ms"] = max(0, completed_at - slot.started_at)
    record["cells"] = {
        "total": total,
        "submitted": counts[CATEGORY_SUBMITTED],
        "no_match": counts[CATEGORY_NO_MATCH],
        "duplicate": counts[CATEGORY_DUPLICATE],
        "all_duplicates": non_submitted > 0 and counts[CATEGORY_DUPLICATE] == non_submitted,
        "executor_failed": counts[CATEGORY_EXECUTOR_FAILED],
        "delivery_failed": counts[CATEGORY_DELIVERY_FAILED],
        "targets": [_target_entry(cell) for cell in ordered],
    }
    return record


# --------------------------------------------------------------------------------------------
# Compact execution summary (detail.summary)
# --------------------------------------------------------------------------------------------

SUMMARY_EVENT = "execution.summary"
SUMMARY_EVENTS_TAIL = 8
WARNING_REASON_CHARS = 200

_SUMMARY_STATUS = {
    SlotStatus.SUCCESS.value: "completed",
    SlotStatus.PARTIAL.value: "partial",
    SlotStatus.FAILED.value: "failed",
}


def _summary_status(slot: Slot, cells: Sequence[Cell]) -> str:
    mapped = _SUMMARY_STATUS.get(str(slot.status))
    if mapped:
        return mapped
    if any(c.status == CellStatus.FAILED for c in cells):
        return "failed"
    if any(c.status == CellStatus.NO_CANDIDATE for c in cells):
        return "partial"
    return str(slot.status)


def _cell_reason(cell: Cell) -> str | None:
    text = cell.last_error or _reason_text(cell) or cell.terminal_reason_code
    if text is None:
        return None
    return text[:WARNING_REASON_CHARS]


def _events_tail(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    kept = [e for e in events if (e.get("event") or e.get("kind")) != SUMMARY_EVENT]
    kept.sort(key=lambda e: (e.get("ts") is None, e.get("ts") or 0))
    tail = kept[-SUMMARY_EVENTS_TAIL:] if kept else []
    return [
        {"event": e.get("event") or e.get("kind"), "errorClass": e.get("errorClass"), "ts": e.get("ts")}
        for e in tail
    ]


def build_summary(
    slot: Slot,
    cells: list[Cell],
    intents: list[Intent],
    *,
    events: Iterable[Mapping[str, Any]] = (),
    completed_at: int | None = None,
) -> dict[str, Any]:
    """The compact ``detail.summary`` of one occurrence, from the ledger only.

    Facts the ledger does not hold (file counts, byte sizes, media renditions) stay ``None``.
    ``events`` are the slot's lifecycle/outbox events (``{event, errorClass?, ts}``); the summary
    row itself is never part of its own tail. ``completed_at`` defaults to the slot's column.
    """
    ordered = ordered_cells(slot, cells)
    worked = [c for c in ordered if c.work_id]
    no_candidate = [c for c in ordered if c.status == CellStatus.NO_CANDIDATE]
    failed = [c for c in ordered if c.status == CellStatus.FAILED]

    own_intents = sorted(
        (i for i in intents if i.slot_id == slot.slot_id),
        key=lambda i: (i.created_at, i.target_id, i.route),
    )

    end = completed_at if completed_at is not None else slot.completed_at
    duration = max(0, end - slot.started_at) if end is not None and slot.started_at is not None else None

    warnings = [f"no_candidate: {c.target_id} ({_cell_reason(c) or 'unknown'})" for c in no_candidate]
    warnings += [f"failed: {c.target_id} ({_cell_reason(c) or 'unknown'})" for c in failed]

    return {
        "executionId": slot.slot_id,
        "scheduleId": slot.schedule_id,
        "slotId": slot.slot_id,
        "status": _summary_status(slot, ordered),
        "candidates": {
            "selected": len(worked),
            "none": [{"target": c.target_id, "reason": _cell_reason(c)} for c in no_candidate],
        },
        "downloads": [
            {"pixivId": c.work_id, "workType": c.work_type, "files": None, "bytes": None} for c in worked
        ],
        "media": [
            {"pixivId": c.work_id, "originals": None, "previews": None, "documentFallback": None, "reasons": None}
            for c in worked
        ],
        "deliveries": [
            {
                "target": i.route,
                "pixivId": i.work_id,
                "status": str(i.status),
                "attempts": i.attempts,
                "remoteStatus": i.remote_status,
                "reviewId": i.remote_id,
            }
            for i in own_intents
        ],
        "outboxEventsTail": _events_tail(events),
        "warnings": warnings,
        "durationMs": duration,
    }


__all__ = [
    "OUTCOME_EVENT",
    "OUTCOME_VERSION",
    "USER_COPY",
    "build_outcome",
    "build_summary",
    "business_status",
    "categorise_cell",
    "is_alertable",
    "iso_utc_ms",
    "ordered_cells",
]
