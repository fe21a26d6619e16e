"""applyOutcome: the only place a TargetOutcome becomes a cell state.

``decide`` is pure: it says what to write; the execution service writes it with one
conditional update (so a late result can never downgrade a terminal cell).
"""

from __future__ import annotations

from dataclasses import dataclass

from .cells import CellStatus
from .outcomes import TargetOutcome
from .reasons import reason_message, terminal_reason_for

RETRY_BASE_S = 30
RETRY_MAX_S = 300


@dataclass(frozen=True)
class CellEffect:
    to_status: str | None  # None: no transition
    last_error: str | None = None
    reason_code: str | None = None
    reason_message: str | None = None
    retry: bool = False  # a retryable failure: record the error, re-send the cell's message later
    work_id: str | None = None
    work_type: str | None = None


def decide(outcome: TargetOutcome, cell_work_id: str | None) -> CellEffect:
    kind = outcome.kind
    if kind in ("submitted", "stored"):
        return CellEffect(CellStatus.SUBMITTED, work_id=outcome.work_id, work_type=outcome.work_type)
    if kind == "delivery_pending":
        return CellEffect(CellStatus.DELIVERY_PENDING, work_id=outcome.work_id, work_type=outcome.work_type)
    if kind == "no_candidate":
        if cell_work_id:
            # A locked work with a pending delivery is never collapsed to no_candidate.
            return CellEffect(None)
        code = terminal_reason_for(outcome)
        return CellEffect(
            CellStatus.NO_CANDIDATE,
            last_error=outcome.reason,
            reason_code=code,
            reason_message=reason_message(code) if code else None,
        )
    if kind == "duplicate":
        code = terminal_reason_for(outcome) or "duplicate_exhausted"
        return CellEffect(
            CellStatus.DUPLICATE,
            last_error=outcome.reason,
            reason_code=code,
            reason_message=reason_message(code),
            work_id=outcome.work_id,
        )
    if kind == "failed":
        error = (outcome.error or "failed")[:1000]
        if outcome.retryable:
            return CellEffect(None, last_error=error, retry=True, reason_code=terminal_reason_for(outcome))
        code = terminal_reason_for(outcome) or "internal_error"
        return CellEffect(CellStatus.FAILED, last_error=error, reason_code=code, reason_message=reason_message(code))
    raise ValueError(f"unknown outcome kind {kind!r}")


def retry_delay_s(attempts: int) -> int:
    """Delay before a retryable cell failure is retried: min(300, 30 x 2^(attempts-1)) seconds."""
    n = max(1, int(attempts))
    doubled: int = RETRY_BASE_S * 2 ** min(n - 1, 10)  # int ** int is Any to mypy (a negative power is a float)
    return min(RETRY_MAX_S, doubled)
