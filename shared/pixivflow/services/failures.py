"""The Failure Center: every failed cell, one bounded page at a time, and the retry of one
(docs/explanation/failure-center.md; the retry's modes are domain/failures.py).

A page is one Query of the FailedCells index (``OperatorPages.failure_page``), then batched reads of
those cells, their slots and delivery rows (``failure_heads``), and of the slots their retries
would open (``slot_heads``: a retry's slot id is known before it exists). Nothing on a page reads
more because the ledger holds more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any, Mapping

from ..domain.cells import CellStatus
from ..domain.failures import NORMAL, RETRY_MODES, FailureEntry, retry_request_id
from ..domain.protocol import CANCELLED_REASON
from ..domain.reasons import TERMINAL_REASONS, reason_words
from ..domain.errors import StatusError
from .inspection import Reads, _delivery_view, trigger_kind
from .manual import ManualRequestError, RefetchResult, Refetches, Retry, admit_refetch, manual_slot_id

PAGE_SIZE = 25
RETRY = "retry"
NOT_FAILED = "not failed"


@dataclass(frozen=True)
class FailureFilters:
    """What a Failure Center page is narrowed to: each None means any."""

    schedule_id: str | None = None
    target_id: str | None = None
    reason: str | None = None
    day: date | None = None
    before: str | None = None

    def between(self) -> tuple[int, int] | None:
        """The UTC day as epoch ms, end exclusive."""
        if self.day is None:
            return None
        start = datetime(self.day.year, self.day.month, self.day.day, tzinfo=timezone.utc)
        return int(start.timestamp() * 1000), int((start + timedelta(days=1)).timestamp() * 1000)

    def params(self) -> dict[str, str | None]:
        return {"schedule": self.schedule_id, "target": self.target_id, "reason": self.reason,
                "day": self.day.isoformat() if self.day else None}


def failure_page(reads: Reads, filters: FailureFilters, limit: int = PAGE_SIZE) -> tuple[list[dict[str, Any]], str | None]:
    """One page of failures, newest first, and the next page's cursor (None: the last)."""
    entries, cursor = reads.ledger.failure_page(limit, filters.before, between=filters.between(),
                                                schedule_id=filters.schedule_id, target_id=filters.target_id,
                                                reason=filters.reason)
    return failure_rows(reads, entries), cursor


def _routes(reads: Reads, target_id: str) -> list[str]:
    target = reads.config.target(target_id) if reads.config is not None else None
    return target.routes() if target is not None else []


def failure_rows(reads: Reads, entries: list[FailureEntry]) -> list[dict[str, Any]]:
    keys = [(e.slot_id, e.target_id) for e in entries]
    heads = reads.ledger.failure_heads(keys, {t: _routes(reads, t) for _, t in keys})
    now = reads.now_ms()
    rows: list[dict[str, Any]] = []
    retry_slots: dict[str, tuple[int, str]] = {}
    for slot, cell, intents in heads:
        why_not = retry_refusal(reads, slot.schedule_id, slot.is_job, cell.target_id)
        row = {
            "slotId": slot.slot_id, "targetId": cell.target_id, "scheduleId": slot.schedule_id,
            "trigger": RETRY if slot.retry_mode else trigger_kind(slot),
            "retryMode": slot.retry_mode, "retryOf": slot.retry_of,
            "occurrenceAt": slot.occurrence_at, "timezone": slot.timezone, "failedAt": cell.completed_at,
            "startedAt": cell.started_at or cell.created_at or None,
            "reasonCode": cell.terminal_reason_code, "reason": reason_words(cell.terminal_reason_code),
            "message": cell.terminal_reason_message, "lastError": cell.last_error,
            "workType": cell.work_type, "workId": cell.work_id, "attempts": cell.attempt_count,
            "candidateReport": cell.candidate_report,
            "deliveries": [_delivery_view(i, now) for i in intents],
            "retryable": why_not is None, "notRetryable": why_not, "retries": {},
        }
        if why_not is None:
            for mode in RETRY_MODES:
                retry_slots[manual_slot_id(slot.schedule_id, retry_request_id(slot.slot_id, cell.target_id, mode))] = (
                    len(rows), mode)
        rows.append(row)
    for retried in reads.ledger.slot_heads(list(retry_slots)) if retry_slots else []:
        index, mode = retry_slots[retried.slot.slot_id]
        cell = retried.first_cell()  # a retry's slot has the one target; unwritten, it is the pending cell
        rows[index]["retries"][mode] = {"slotId": retried.slot.slot_id, "status": cell.status if cell else CellStatus.PENDING}
    return rows


def retry_refusal(reads: Reads, schedule_id: str, is_job: bool, target_id: str) -> str | None:
    """Why a failed cell of this occurrence cannot be retried from here, or None when it can: the
    one rule the retry enforces and the pages show beside a failed cell."""
    if is_job:
        return "a protocol job is retried by its consumer (a new POST /jobs)"
    config = reads.config
    schedule = config.schedule(schedule_id) if config is not None else None
    if config is None or schedule is None or not schedule.enabled:
        return f"schedule {schedule_id} is not an enabled schedule of the config"
    if target_id not in [t.id for t in config.targets_for(schedule)]:
        return f"target {target_id} is no longer in schedule {schedule_id}"
    return None


def retry(ctx: Refetches, reads: Reads, slot_id: str, target_id: str, mode: str = NORMAL) -> RefetchResult:
    """Retry one failed cell: a refetch of its target into a manual slot of its schedule, in ``mode``.
    The same failure retried in the same mode again names the same slot (nothing runs twice).
    Raises ManualRequestError naming what is wrong (400 mode, 404 no such cell, 409 not retryable)."""
    if mode not in RETRY_MODES:
        raise ManualRequestError(400, f"mode: one of {', '.join(RETRY_MODES)}")
    state = ctx.occurrences.load(slot_id)
    cell = state.cell(target_id) if state is not None else None
    if state is None or cell is None or cell.virtual:
        raise ManualRequestError(404, f"no cell {target_id} in occurrence {slot_id}")
    if cell.status != CellStatus.FAILED:
        raise ManualRequestError(409, f"{NOT_FAILED}: cell {target_id} of {slot_id} is {cell.status}")
    why_not = retry_refusal(reads, state.slot.schedule_id, state.slot.is_job, target_id)
    if why_not is not None:
        raise ManualRequestError(409, why_not)
    plan = ctx.config.schedule(state.slot.schedule_id)
    assert plan is not None  # retry_refusal checked it
    result = admit_refetch(ctx, plan, target_id, retry_request_id(slot_id, target_id, mode), retry=Retry(mode, slot_id))
    ctx.log("info", "failure retry admitted", event="failure.retry_admitted", slot_id=slot_id, target_id=target_id,
            mode=mode, retry_slot_id=result.slot_id, disposition=result.disposition, reused=result.reused)
    return result


def parse_day(text: str | None) -> date | None:
    """``YYYY-MM-DD`` (a UTC day) or None; StatusError 400 naming ``day`` otherwise."""
    if not text:
        return None
    try:
        if len(text) != 10 or not text.isascii():
            raise ValueError
        return date.fromisoformat(text)
    except ValueError:
        raise StatusError(400, "day: a UTC day as YYYY-MM-DD") from None


def filter_choices(reads: Reads) -> Mapping[str, list[str]]:
    """The values each filter offers: the config's schedules and targets, and every reason code."""
    config = reads.config
    return {"schedule": [s.id for s in config.schedules] if config is not None else [],
            "target": [t.id for t in config.targets] if config is not None else [],
            "reason": sorted(c for c in TERMINAL_REASONS if c != CANCELLED_REASON)}


__all__ = ["FailureFilters", "PAGE_SIZE", "failure_page", "failure_rows", "filter_choices", "parse_day", "retry",
           "retry_refusal"]
