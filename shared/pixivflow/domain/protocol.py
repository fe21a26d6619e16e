"""Workflow Protocol v1 projections: pure functions of ledger views.

Everything a consumer sees about a job is built here from the same slot, cell and intent
items the engine writes: no second state machine. Internal words (cell states, terminal
reason codes, slot statuses) are translated at this one place; internal reason codes only
cross the boundary inside ``error.detail.internal_code``.

The event stream is a projection too: lifecycle events are stored once each with a per-job
sequence number ``seq`` and a timestamp ``ts`` that never moves backwards, and
``event_id = evt-<ts>-<seq>`` resolves back to exactly one stored event of one job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

from .cells import CellStatus, TERMINAL_CELL_STATES
from .model import Cell, Intent, LedgerStatus, Slot
from .reasons import PROTOCOL_ERROR_CODES, protocol_error

PROTOCOL_VERSION = "1"
SUPPORTED_VERSIONS = ("1",)
JOB_TYPE = "candidate_search"
DEFAULT_DEADLINE_MS = 1_800_000
EVENTS_PAGE_LIMIT = 200  # a page is bounded so a long job never streams unbounded JSON

# -- errors -----------------------------------------------------------------------------------


class ProtocolError(Exception):
    """A refusal on the protocol surface: HTTP status plus the ``{"error": Error}`` body.

    ``retryable`` defaults to the protocol error table so it is always present."""

    def __init__(self, code: str, status: int, message: str, detail: Mapping[str, Any] | None = None,
                 *, retryable: bool | None = None, stage: str | None = None) -> None:
        if code not in PROTOCOL_ERROR_CODES:
            raise ValueError(f"{code!r} is not a protocol error code")
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message
        self.detail = dict(detail) if detail else None
        self.retryable = PROTOCOL_ERROR_CODES[code] if retryable is None else retryable
        self.stage = stage  # where the request was refused (for the log line only)

    def error(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message, "retryable": self.retryable}
        if self.detail is not None:
            body["detail"] = self.detail
        return body

    def body(self) -> dict[str, Any]:
        return {"error": self.error()}


def invalid(message: str, status: int = 400, *, stage: str = "validation", **detail: Any) -> ProtocolError:
    return ProtocolError("invalid_params", status, message, detail or None, stage=stage)


def unknown_job(job_id: str) -> ProtocolError:
    """404 for a job id no slot has (every route answers it the same way)."""
    return ProtocolError("invalid_params", 404, "unknown job", {"reason": "unknown_job", "job_id": job_id}, stage="lookup")


# -- job status and projection ------------------------------------------------------------------

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, EXPIRED = "queued", "running", "succeeded", "failed", "cancelled", "expired"
TERMINAL_JOB_STATUSES = frozenset({SUCCEEDED, FAILED, CANCELLED, EXPIRED})
CANCELLED_REASON = "cancelled_by_consumer"
# Budget verdicts describe lost liveness, not a Pixiv failure: the protocol calls them expired.
EXPIRED_REASONS = frozenset({"queued_too_long", "stalled_no_heartbeat", "execution_timeout"})


def job_status(cell_status: str, reason_code: str | None, slot_status: str | None) -> str:
    """The cell is the truth: its state (and reason code) decides the job status."""
    if cell_status == CellStatus.SUBMITTED:
        return SUCCEEDED
    if cell_status == CellStatus.PENDING:
        return QUEUED
    if cell_status not in TERMINAL_CELL_STATES:
        return RUNNING
    if reason_code == CANCELLED_REASON:
        return CANCELLED
    if slot_status == "expired" or reason_code in EXPIRED_REASONS:
        return EXPIRED
    return FAILED


def progress_stage(status: str, cell_status: str) -> str:
    if status == QUEUED:
        return "queued"
    if status == RUNNING:
        return "searching" if cell_status == CellStatus.SELECTED else "delivering"
    if status == SUCCEEDED:
        return "done"
    return status


def events_url(job_id: str) -> str:
    # A job id carries the consumer's idempotency key: percent-encode it so the URL stays one path.
    return f"/jobs/{quote(job_id, safe='')}/events"


def project_job(slot: Slot, cell: Cell | None, intents: Sequence[Intent], now_ms: int) -> dict[str, Any]:
    """``$defs/Job`` for a slot and its first snapshot cell. Optional string fields are omitted
    rather than null; timestamp fields the schema allows to be null are null when unknown."""
    if cell is None:
        raise ProtocolError("internal_error", 500, "internal error", {"reason": "job_cell_missing", "job_id": slot.slot_id},
                            stage="projection")
    status = job_status(cell.status, cell.terminal_reason_code, slot.status)
    created = int(slot.created_at or now_ms)
    updated = int(cell.updated_at or created)
    deadline = slot.occurrence_at + (slot.timeout_ms or DEFAULT_DEADLINE_MS) if slot.occurrence_at is not None else None
    job: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "job_id": slot.slot_id,
        "job_type": JOB_TYPE,
        "status": status,
    }
    if slot.manual_request_id:
        job["idempotency_key"] = slot.manual_request_id
    if slot.correlation_id:
        job["correlation_id"] = slot.correlation_id
    job.update({
        "created_at": created,
        "started_at": slot.started_at,
        "updated_at": updated,
        "heartbeat_at": cell.heartbeat_at,
        "deadline_at": deadline,
        "lease_active": cell.lease_live(now_ms),
        "lease_expires_at": cell.lease_until,
        "attempt": int(cell.attempt_count or 0),
        "progress": {"stage": progress_stage(status, cell.status), "at": updated},
        "events_url": events_url(slot.slot_id),
    })
    if status == SUCCEEDED:
        job["result"] = job_result(cell, intents)
    elif status in (FAILED, CANCELLED, EXPIRED):
        job["error"] = protocol_error(cell.terminal_reason_code, cell.terminal_reason_message)
    return job


def job_result(cell: Cell, intents: Sequence[Intent]) -> dict[str, Any]:
    """``Result_CandidateSearch`` from what the ledger knows: the delivered work and the scan count."""
    mine = [i for i in intents if i.target_id == cell.target_id and i.status == LedgerStatus.DELIVERED]
    candidates: list[dict[str, Any]] = []
    if mine:
        newest = max(mine, key=lambda i: (i.delivered_at or 0, i.updated_at or 0, i.work_id))
        candidates.append(_candidate(newest.work_id, newest.work_type))
    elif cell.status == CellStatus.SUBMITTED and cell.work_id:
        candidates.append(_candidate(cell.work_id, cell.work_type))
    report = cell.candidate_report or {}
    supply = stored if isinstance(stored := report.get("supply"), dict) else {}
    fetched = supply.get("fetched", report.get("fetched"))  # the stored supply report (domain.outcomes.CandidateScan)
    scanned = int(fetched) if isinstance(fetched, int) and not isinstance(fetched, bool) and fetched >= 0 else len(candidates)
    return {"candidates": candidates, "scanned": scanned}


def _candidate(work_id: str, work_type: str | None) -> dict[str, Any]:
    kind = work_type if work_type in ("illustration", "novel") else "unknown"
    return {"candidate_id": str(work_id), "platform": "pixiv", "work_id": str(work_id), "work_type": kind}


# -- events -------------------------------------------------------------------------------------

REQUESTED = "job.requested"
STARTED = "job.execution_started"
PROGRESSED = "job.progressed"
TERMINAL_KINDS: Mapping[str, str] = {
    SUCCEEDED: "job.outcome_succeeded",
    FAILED: "job.outcome_failed",
    EXPIRED: "job.outcome_expired",
    CANCELLED: "job.outcome_cancelled",
}
# The ONE mapping from stored kinds to protocol types. Anything absent is internal only: never
# projected, never ackable, never counted.
EVENT_TYPE_FOR_KIND: Mapping[str, str] = {
    REQUESTED: "job.accepted",
    STARTED: "job.started",
    PROGRESSED: "job.progress",
    "job.outcome_succeeded": "job.succeeded",
    "job.outcome_failed": "job.failed",
    "job.outcome_expired": "job.expired",
    "job.outcome_cancelled": "job.cancelled",
}
TERMINAL_EVENT_KINDS = frozenset(TERMINAL_KINDS.values())
# Kinds that exist at most once per job; job.progressed may repeat (each with its own seq).
ONCE_KINDS = frozenset({REQUESTED, STARTED} | set(TERMINAL_EVENT_KINDS))
# A bounded grammar: an epoch-ms timestamp of at most 13 digits and a row id of at most 12,
# ASCII digits only, nothing trailing (``fullmatch``: ``$`` would let a final "\n" through).
# Anything else is "not one of ours" (an unknown ``after`` or ack id is ignored) and never
# reaches ``int()``'s 4,300-digit limit.
_EVENT_ID = re.compile(r"evt-([0-9]{1,13})-([0-9]{1,12})")


def is_projected(kind: str) -> bool:
    return kind in EVENT_TYPE_FOR_KIND


def event_id(ts: int, seq: int) -> str:
    return f"evt-{int(ts)}-{int(seq)}"


def parse_event_id(value: Any) -> tuple[int, int] | None:
    """``(ts, seq)`` of an ``evt-<ts>-<seq>`` id; None when it is not one of ours."""
    if not isinstance(value, str):
        return None
    match = _EVENT_ID.fullmatch(value)
    return (int(match.group(1)), int(match.group(2))) if match else None


@dataclass(frozen=True)
class ImpliedEvent:
    kind: str
    at: int


def implied_events(job: Mapping[str, Any]) -> list[ImpliedEvent]:
    """What the ledger already implies must exist, in the order it happened (reconcile)."""
    out = [ImpliedEvent(REQUESTED, int(job["created_at"]))]
    if job.get("started_at") is not None:
        out.append(ImpliedEvent(STARTED, int(job["started_at"])))
    terminal = TERMINAL_KINDS.get(job["status"])
    if terminal:
        out.append(ImpliedEvent(terminal, int(job["updated_at"])))
    return out


def build_event(job: Mapping[str, Any], kind: str, ts: int, seq: int) -> dict[str, Any] | None:
    """``$defs/Event`` for one stored event; None for an internal-only kind."""
    kind = kind.split("#", 1)[0]
    event_type = EVENT_TYPE_FOR_KIND.get(kind)
    if event_type is None:
        return None
    body: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "event_id": event_id(ts, seq),
        "job_id": job["job_id"],
        "type": event_type,
        "at": int(ts),
    }
    if job.get("correlation_id"):
        body["correlation_id"] = job["correlation_id"]
    payload: dict[str, Any] = {"detail": {"internal_kind": kind}}
    if kind in TERMINAL_EVENT_KINDS:
        payload["job"] = dict(job)
        if event_type == "job.succeeded":
            payload["result"] = job.get("result")
        else:
            payload["error"] = job.get("error")
    body["payload"] = payload
    return body


def after_position(position: tuple[int, int] | None, ts: int, seq: int) -> bool:
    """Strictly after ``position`` in stream order (ts, then seq)."""
    return position is None or (int(ts), int(seq)) > position


def parse_event_query(query: Mapping[str, Any] | None) -> tuple[str | None, bool]:
    """``after`` and ``unacked`` of ``GET /jobs/{id}/events``."""
    query = query or {}
    after = query.get("after")
    if after is not None and (not isinstance(after, str) or after == ""):
        raise invalid("after must be a non-empty event id", field="after")
    raw = query.get("unacked")
    if raw is None or raw in ("", "0", "false"):
        unacked = False
    elif raw in ("1", "true"):
        unacked = True
    else:
        raise invalid("unacked must be 1, true, 0 or false", field="unacked")
    return after, unacked


def parse_ack_body(body: Any) -> str:
    """``$defs/AckRequest``: the event id to acknowledge through."""
    if not isinstance(body, dict):
        raise invalid("body must be a JSON object", reason="not_an_object", field="body")
    value = body.get("ack_through")
    if not isinstance(value, str) or not value.strip():
        raise invalid("ack_through must be a non-empty event id", field="ack_through")
    return value


def count_after(positions: Iterable[tuple[int, int]], cursor: tuple[int, int] | None) -> int:
    return sum(1 for p in positions if cursor is None or p > cursor)


__all__ = [
    "CANCELLED", "EVENTS_PAGE_LIMIT", "EVENT_TYPE_FOR_KIND", "EXPIRED", "FAILED", "ImpliedEvent", "JOB_TYPE",
    "ONCE_KINDS", "PROGRESSED", "PROTOCOL_VERSION", "ProtocolError", "QUEUED", "REQUESTED", "RUNNING", "STARTED",
    "SUCCEEDED", "SUPPORTED_VERSIONS", "TERMINAL_EVENT_KINDS", "TERMINAL_JOB_STATUSES", "TERMINAL_KINDS",
    "after_position", "build_event", "count_after", "event_id", "events_url", "implied_events",
    "invalid", "is_projected", "job_result", "job_status", "parse_ack_body", "parse_event_id", "parse_event_query",
    "progress_stage", "project_job", "unknown_job",
]
