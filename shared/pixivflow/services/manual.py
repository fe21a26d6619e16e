"""Manual refetch: one target, one request id, one durable slot.

A refetch asks for a fresh work for ONE target, outside the cron. It gets its own slot
``<planId>@manual-<requestId lower-cased>`` holding exactly that target's cell, occurrence = now,
label ``manual``, trigger source ``manual`` and the frozen slot name ``审核群重抓``.

Identity: the request item ``REQUEST#<key>`` is written with
``attribute_not_exists`` first, then the slot (insert-if-absent, inside ``admit``). Every
prefix of that sequence is completed by the next call with the same request id, because the
slot id is a pure function of (plan, key) and both writes are idempotent:

* crash after the request item, before the slot: a replay finds the item and creates the slot;
* crash after the slot, before its cell: a replay (or the sweep) materialises the cell;
* concurrent calls: one request item wins, every caller names the same slot id, and the slot
  put is insert-if-absent, so there is one slot however the calls interleave.

Dispositions: ``already_completed`` when the slot is success/partial; ``accepted``
when this call sent the cell's execution message (or nothing is left to run); ``queued``
when no message went out by this call: sending failed (the slot stays durable and the sweep
dispatches it) or the cell is being executed under a live lease right now.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypeGuard
from zoneinfo import ZoneInfo

from ..ports import Settings, ScheduleSettings
from ..domain.errors import StatusError
from ..domain.model import Cell, Slot
from ..domain.occurrence import Occurrence
from ..ports import Clock, Log, Occurrences, RequestKeys
from .context import Clocked
from .admission import ACCEPTED, ALREADY_COMPLETED, ALREADY_RUNNING, Admission, Admissions, admit, new_slot

REQUEST_ID_RE = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", re.IGNORECASE
)
MAX_CORRELATION_ID = 200
REFETCH_SLOT_NAME = "审核群重抓"
MANUAL_LABEL = "manual"
MANUAL_SOURCE = "manual"

QUEUED = "queued"  # refetch-only disposition: durable, not dispatched by this call

UNKNOWN_TARGET = "unknown target"
AMBIGUOUS_TARGET = "ambiguous target"


class ManualRequestError(StatusError):
    """A refusal of a refetch request the caller can act on (HTTP status + echoed message)."""


@dataclass(frozen=True)
class Refetches(Clocked):
    """What the legacy refetch route takes: admission, the request keys that name a refetch's
    slot forever, the slots it reads back, the config (which plan selects a target), clock, log."""

    admissions: Admissions
    request_keys: RequestKeys
    occurrences: Occurrences
    config: Settings
    clock: Clock
    log: Log


@dataclass
class RefetchResult:
    slot: Slot
    disposition: str  # accepted | queued | already_completed
    reused: bool  # the request id was already known
    sent: int = 0
    reason: str | None = None

    @property
    def slot_id(self) -> str:
        return self.slot.slot_id


def is_request_id(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and REQUEST_ID_RE.match(value) is not None


def manual_slot_id(plan_id: str, key: str) -> str:
    return f"{plan_id}@manual-{key.strip().lower()}"


def plan_for_target(config: Settings, target_id: str) -> ScheduleSettings:
    """The one enabled plan that selects ``target_id`` (the refetch route's resolution)."""
    plans = [s for s in config.schedules if s.enabled and any(t.id == target_id for t in config.targets_for(s))]
    if not plans:
        raise ManualRequestError(404, UNKNOWN_TARGET)
    if len(plans) > 1:
        raise ManualRequestError(409, AMBIGUOUS_TARGET)
    return plans[0]


def iso_utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _manual_occurrence(plan: ScheduleSettings, slot_id: str, now_ms: int) -> Occurrence:
    tz = plan.timezone or "UTC"
    local = datetime.fromtimestamp(now_ms / 1000, tz=ZoneInfo(tz))
    return Occurrence(
        schedule_id=plan.id,
        slot_id=slot_id,
        occurrence_at=now_ms,
        occurrence_iso=iso_utc(now_ms),
        occurrence_date=local.strftime("%Y-%m-%d"),
        occurrence_label=MANUAL_LABEL,
        timezone=tz,
    )


def manual_slot(ctx: Admissions, plan: ScheduleSettings, target_id: str, key: str, correlation_id: str | None,
                params: dict[str, Any] | None = None, retry: Retry | None = None) -> Slot:
    """The slot a refetch (or a protocol job) opens: the plan's fields, but ONLY the requested
    target's cell. ``params`` are a job's stored retrieval params; ``retry`` a Failure Center
    retry's mode and the occurrence it retries."""
    slot_id = manual_slot_id(plan.id, key)
    occ = _manual_occurrence(plan, slot_id, ctx.now())
    slot = new_slot(ctx, plan, occ, trigger_source=MANUAL_SOURCE, label=REFETCH_SLOT_NAME, slot_id=slot_id,
                    target_ids=[target_id], manual_request_id=key, correlation_id=correlation_id, params=params)
    if retry is not None:
        slot.retry_mode, slot.retry_of = retry.mode, retry.of
    return slot


@dataclass(frozen=True)
class Retry:
    """A Failure Center retry: its mode (domain/failures.py) and the failed occurrence."""

    mode: str
    of: str


def _same_request(slot: Slot, plan_id: str, target_id: str, key: str) -> bool:
    stored_key = (slot.manual_request_id or "").strip().lower()
    return slot.schedule_id == plan_id and list(slot.target_ids) == [target_id] and stored_key == key.lower()


def refetch(ctx: Refetches, target_id: str, request_id: str, correlation_id: str | None = None) -> RefetchResult:
    """Admit (or re-answer) one refetch. Raises ManualRequestError (404/409); anything else is a 500."""
    key = request_id.strip()
    if not is_request_id(key):
        raise ManualRequestError(400, "requestId must be a UUID")
    return admit_refetch(ctx, plan_for_target(ctx.config, target_id), target_id, key, correlation_id)


def admit_refetch(ctx: Refetches, plan: ScheduleSettings, target_id: str, key: str, correlation_id: str | None = None,
                  retry: Retry | None = None) -> RefetchResult:
    """The refetch of ``target_id`` under ``plan`` with the request id ``key`` (checked by the caller)."""
    slot_id = manual_slot_id(plan.id, key)
    now = ctx.now()
    record_in: dict[str, Any] = {"kind": "refetch", "requestKey": key, "slotRef": slot_id, "planId": plan.id,
                                 "targetId": target_id, "createdAt": now}
    if retry is not None:
        record_in.update(retryMode=retry.mode, retryOf=retry.of)
    created, record = ctx.request_keys.claim_request_key(key, record_in)
    if not created and (record.get("slotRef") != slot_id or record.get("targetId") != target_id):
        # The id already names a slot of another target or plan: a conflict.
        raise ManualRequestError(409, AMBIGUOUS_TARGET)

    # The same key may have come through POST /jobs first (one identity space): if
    # that admission died before its slot was written, this call writes it with the job's params.
    # A replay after a crash before the slot writes it with the retry the key was claimed for.
    params = _job_params(record) if not created else None
    stored_retry = Retry(str(record["retryMode"]), str(record.get("retryOf") or "")) if record.get("retryMode") else None
    admission = admit(ctx.admissions, manual_slot(ctx.admissions, plan, target_id, key, correlation_id, params=params,
                                                  retry=stored_retry))
    if not _same_request(admission.slot, plan.id, target_id, key):
        raise ManualRequestError(409, AMBIGUOUS_TARGET)
    disposition = _disposition(admission)
    ctx.log("info", "manual refetch admitted", event="schedule.refetch_admission", slot_id=admission.slot.slot_id,
            target_id=target_id, disposition=disposition, reused=not created, sent=admission.sent,
            reason=admission.reason)
    return RefetchResult(admission.slot, disposition, reused=not created, sent=admission.sent, reason=admission.reason)


def _job_params(record: dict[str, Any]) -> dict[str, Any] | None:
    raw = record.get("paramsJson")
    if record.get("kind") != "job" or not isinstance(raw, str):
        return None
    try:
        params = json.loads(raw)
    except ValueError:
        return None
    return params if isinstance(params, dict) else None


def _disposition(admission: Admission) -> str:
    if admission.disposition == ALREADY_COMPLETED:
        return ALREADY_COMPLETED
    if admission.disposition == ACCEPTED and admission.sent > 0:
        return ACCEPTED
    if admission.disposition == ALREADY_RUNNING:
        return QUEUED  # a live lease holds the cell: this call sent nothing, the executor owns it
    if all(c.terminal for c in admission.cells) and admission.cells:
        return ACCEPTED  # a failed slot: nothing is left to run (terminal cells are never re-run)
    return QUEUED


# -- status ----------------------------------------------------------------------------


def find_refetch(ctx: Refetches, target_id: str, request_id: str) -> tuple[Slot, Cell | None] | None:
    """The slot a request id names for this target, with the target's cell (None when unknown)."""
    key = request_id.strip()
    record = ctx.request_keys.get_request_key(key)
    if record is None or record.get("targetId") != target_id or not record.get("slotRef"):
        return None
    state = ctx.occurrences.load(str(record["slotRef"]))
    if state is None:  # the request item outlived a crash before its slot: not admitted yet
        return None
    return state.slot, state.cell(target_id)


def status_projection(slot: Slot, cell: Cell | None, now_ms: int) -> dict[str, Any]:
    """``JobStatusProjection``: the slot plus its single cell; epoch ms or null everywhere.

    A cell that is not materialised yet (admission interrupted; the sweep or a replay creates
    it as ``pending``) is reported as ``pending`` with no cell timestamps.
    """
    lease_active = bool(cell and cell.lease_live(now_ms))
    updated = (cell.updated_at or cell.created_at) if cell else 0
    return {
        "requestId": slot.manual_request_id,
        "slotId": slot.slot_id,
        "state": cell.status if cell else "pending",
        "slotStatus": slot.status,
        "createdAt": slot.created_at,
        "startedAt": slot.started_at,
        "updatedAt": updated or slot.created_at,
        "heartbeatAt": cell.heartbeat_at if cell else None,
        "leaseExpiresAt": cell.lease_until if cell else None,
        "leaseActive": lease_active,
        "claimed": slot.status != "pending" or lease_active,
        "attemptCount": cell.attempt_count if cell else 0,
        "terminalReasonCode": cell.terminal_reason_code if cell else None,
        "terminalReasonMessage": cell.terminal_reason_message if cell else None,
        "manualRequestId": slot.manual_request_id,
        "idempotencyKey": slot.manual_request_id,
        "correlationId": slot.correlation_id,
    }


__all__ = [
    "AMBIGUOUS_TARGET",
    "MAX_CORRELATION_ID",
    "ManualRequestError",
    "QUEUED",
    "REFETCH_SLOT_NAME",
    "RefetchResult",
    "Retry",
    "UNKNOWN_TARGET",
    "admit_refetch",
    "find_refetch",
    "is_request_id",
    "iso_utc",
    "manual_slot",
    "manual_slot_id",
    "plan_for_target",
    "refetch",
    "status_projection",
]
