"""The item codec: domain dataclasses <-> DynamoDB items (attribute names in camelCase, JSON for the
nested documents, Decimal for numbers)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Mapping

from ...domain.cells import CellStatus
from ...domain.model import Cell, Intent, Slot

_SLOT_FIELDS = {
    "slot_id": "slotId",
    "schedule_id": "scheduleId",
    "status": "status",
    "target_ids": "targetIds",
    "created_at": "createdAt",
    "occurrence_at": "occurrenceAt",
    "occurrence_date": "occurrenceDate",
    "occurrence_label": "occurrenceLabel",
    "timezone": "timezone",
    "trigger_source": "triggerSource",
    "slot_name": "slotName",
    "started_at": "startedAt",
    "completed_at": "completedAt",
    "last_error": "lastError",
    "manual_request_id": "manualRequestId",
    "correlation_id": "correlationId",
    "params": "params",
    "timeout_ms": "timeoutMs",
    "retry_mode": "retryMode",
    "retry_of": "retryOf",
}
_CELL_FIELDS = {
    "slot_id": "slotId",
    "target_id": "targetId",
    "status": "status",
    "work_type": "workType",
    "work_id": "workId",
    "attempt_count": "attemptCount",
    "lease_owner": "leaseOwner",
    "lease_until": "leaseUntil",
    "heartbeat_at": "heartbeatAt",
    "started_at": "startedAt",
    "dispatched_at": "dispatchedAt",
    "created_at": "createdAt",
    "updated_at": "updatedAt",
    "completed_at": "completedAt",
    "last_error": "lastError",
    "terminal_reason_code": "terminalReasonCode",
    "terminal_reason_message": "terminalReasonMessage",
    "retry_reason_code": "retryReasonCode",
    "candidate_report": "candidateReport",
    "selection_checkpoint": "selectionCheckpoint",
}
_INTENT_FIELDS = {
    "slot_id": "slotId",
    "target_id": "targetId",
    "route": "route",
    "work_type": "workType",
    "work_id": "workId",
    "idempotency_key": "idempotencyKey",
    "status": "status",
    "outbox_status": "outboxStatus",
    "attempts": "attempts",
    "max_attempts": "maxAttempts",
    "next_attempt_at": "nextAttemptAt",
    "lease_owner": "leaseOwner",
    "lease_until": "leaseUntil",
    "remote_id": "remoteId",
    "remote_status": "remoteStatus",
    "reuse_reason": "reuseReason",
    "ack_kind": "ackKind",
    "last_error": "lastError",
    "created_at": "createdAt",
    "updated_at": "updatedAt",
    "delivered_at": "deliveredAt",
    "payload": "payload",
    "sending_at": "sendingAt",
    "send_progress": "sendProgress",
    "redrive_count": "redriveCount",
    "unsettled_claim": "unsettledClaim",
    "files": "files",
}
_JSON_ATTRS = {"candidateReport", "selectionCheckpoint", "params", "payload", "sendProgress", "files"}




def _to_ddb(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _to_ddb(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_ddb(v) for v in value]
    return value


def _from_ddb(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_ddb(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_ddb(v) for v in value]
    return value


def _view(cls, fields: Mapping[str, str], item: Mapping[str, Any]):
    kwargs = {}
    for attr, name in fields.items():
        if name in item:
            raw = _from_ddb(item[name])
            if name in _JSON_ATTRS and isinstance(raw, str):
                raw = json.loads(raw)
            kwargs[attr] = raw
    return cls(**kwargs)


def _item(fields: Mapping[str, str], obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr, name in fields.items():
        value = getattr(obj, attr)
        if value is None:
            continue
        if name in _JSON_ATTRS:
            value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        out[name] = _to_ddb(value)
    return out


def slot_from_item(item: Mapping[str, Any]) -> Slot:
    slot = _view(Slot, _SLOT_FIELDS, item)
    slot.open = "activePk" in item
    return slot


class MalformedItem(ValueError):
    """A ledger item that cannot be read as the entity its key names (a cell item with no
    ``status``, as an UpdateItem without an existence condition would leave behind). The message
    names the key and what is wrong, never a value."""


_CELL_STATES = frozenset(CellStatus)


def cell_from_item(item: Mapping[str, Any]) -> Cell:
    """A cell from its item. ``slotId`` / ``targetId`` are taken from the key when absent (the key
    IS the cell's identity); an item without a known ``status`` is not a cell: MalformedItem."""
    pk, sk = str(item.get("pk", "")), str(item.get("sk", ""))
    if item.get("status") not in _CELL_STATES:
        what = "no status" if "status" not in item else "an unknown status"
        raise MalformedItem(f"cell item {pk} / {sk} has {what}")
    full = {"slotId": pk.removeprefix("SLOT#"), "targetId": sk.removeprefix("CELL#"), **item}
    try:
        return _view(Cell, _CELL_FIELDS, full)
    except (TypeError, ValueError) as exc:  # a JSON attribute that does not parse
        raise MalformedItem(f"cell item {pk} / {sk} does not decode: {type(exc).__name__}") from None


def intent_from_item(item: Mapping[str, Any]) -> Intent:
    return _view(Intent, _INTENT_FIELDS, item)
