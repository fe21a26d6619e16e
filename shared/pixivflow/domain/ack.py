"""Delivery acknowledgements, outbox error classes, retry backoff and intent keys.

Everything here is a pure rule of delivery (docs/explanation/delivery.md):

* :func:`parse_delivery_ack` turns one HTTP answer of a delivery endpoint into a
  :class:`DeliveryAck`. A 2xx answer is *not* automatically a success: the
  record the endpoint persisted may already be terminally broken, and that outranks
  the transport status.
* :func:`settlement_for` is the worker's handling table expressed as data,
  so the outbox worker only has to apply it.
* :func:`classify_outbox_error` is the ordered rule list of error classification.
* :func:`retry_delay_ms` is the capped, jittered exponential backoff.
* :func:`idempotency_key` / :func:`parse_idempotency_key` implement the delivery
  intent key scheme (the same key is reused on every retry).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .model import LedgerStatus, OutboxStatus
from .reasons import remote_failed_reason

# ---------------------------------------------------------------------------------------------
# ACK parsing
# ---------------------------------------------------------------------------------------------

ID_FALLBACK_FIELD = "message_id"
REASON_FALLBACK_FIELD = "reuse_kind"

#: Record states that will never turn into a published delivery.
TERMINAL_REMOTE_STATUSES: frozenset[str] = frozenset({"failed", "rejected", "invalid", "expired"})
#: Reuse reasons that mean "a record from a *different* intent already exists".
HISTORICAL_REUSE_REASONS: frozenset[str] = frozenset({"duplicate_existing", "historical", "historical_duplicate"})

BODY_PREVIEW_CHARS = 200
RATE_LIMITED_ERROR = "HTTP 429 rate limited by delivery endpoint"


class AckHints(BaseModel):
    """Where a delivery endpoint puts its answer: the `ack` block of a delivery target.

    ``dataPath`` is a dot path into the JSON body (``"result.record"``); an empty
    path means the body itself is the record. The other fields name keys of that
    record. When the named id / reason key yields nothing usable, the parser also
    looks at ``message_id`` / ``reuse_kind``.
    """

    # built with the config that nests it (config.base._Model), for a shorter cold start
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    dataPath: str = "data"
    idField: str = Field(default="review_id", min_length=1)
    statusField: str = Field(default="status", min_length=1)
    reusedField: str = Field(default="reused", min_length=1)
    reasonField: str = Field(default="reuse_reason", min_length=1)
    keyField: str = Field(default="matched_idempotency_key", min_length=1)


class AckKind(StrEnum):
    ACCEPTED = "accepted"
    IDEMPOTENT_REPLAY = "idempotent_replay"
    DUPLICATE_EXISTING = "duplicate_existing"
    REMOTE_FAILED = "remote_failed"
    RETRYABLE_FAILURE = "retryable_failure"
    PERMANENT_FAILURE = "permanent_failure"


CONFIRMED_ACK_KINDS: frozenset[AckKind] = frozenset(
    {AckKind.ACCEPTED, AckKind.IDEMPOTENT_REPLAY, AckKind.DUPLICATE_EXISTING}
)


@dataclass(frozen=True)
class DeliveryAck:
    """One parsed answer of a delivery endpoint."""

    kind: AckKind
    http_status: int | None
    remote_id: str | None = None
    remote_status: str | None = None
    reuse_reason: str | None = None
    matched_key: str | None = None
    error: str | None = None
    # Set by routes that know better than the backoff (Telegram's parameters.retry_after), and
    # by multi-call routes that posted part of a delivery: what to save on the row,
    # and whether this attempt may drop the row's ``sending`` marker.
    retry_after_ms: int | None = None
    progress: Any = None
    clear_sending: bool = False
    note: str | None = None  # kept on a settled row: what the route did differently

    @property
    def confirmed(self) -> bool:
        """The downstream holds a record for this work (ours or a historical one)."""
        return self.kind in CONFIRMED_ACK_KINDS

    @property
    def terminal(self) -> bool:
        """Another attempt cannot change the outcome; only ``retryable_failure`` is not."""
        return self.kind is not AckKind.RETRYABLE_FAILURE


def _text(value: Any) -> str | None:
    """A string field's value, trimmed; ``None`` unless it is a non-blank string."""
    if isinstance(value, str):
        trimmed = value.strip()
        return trimmed or None
    return None


def _identifier(value: Any) -> str | None:
    """Like :func:`_text` but numbers (never booleans) are accepted and stringified."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    return _text(value)


def _decode(body: Any) -> Any:
    """Bytes become text; text that holds a JSON document becomes that document."""
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", errors="replace")
    if isinstance(body, str):
        stripped = body.strip()
        if stripped[:1] in ("{", "["):
            try:
                return json.loads(stripped)
            except ValueError:
                return body
    return body


def _preview(body: Any) -> str:
    if body is None:
        text = ""
    elif isinstance(body, (bytes, bytearray)):
        text = bytes(body).decode("utf-8", errors="replace")
    elif isinstance(body, str):
        text = body
    else:
        try:
            text = json.dumps(body, ensure_ascii=False, default=str, separators=(",", ":"))
        except (TypeError, ValueError):
            text = str(body)
    return text[:BODY_PREVIEW_CHARS]


def _at_path(body: Any, path: str) -> Any:
    """Follow a dot path through nested objects; ``None`` as soon as a step is missing."""
    node = body
    if not path:
        return node
    for step in path.split("."):
        if not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    return node


def parse_delivery_ack(http_status: int, body: Any, hints: AckHints | None = None) -> DeliveryAck:
    """Classify one HTTP answer of a delivery endpoint (the first matching rule wins)."""
    h = hints or AckHints()
    status = int(http_status)

    if status == 429:
        return DeliveryAck(AckKind.RETRYABLE_FAILURE, status, error=RATE_LIMITED_ERROR)
    if not 200 <= status <= 299:
        kind = AckKind.RETRYABLE_FAILURE if status == 408 or status >= 500 else AckKind.PERMANENT_FAILURE
        return DeliveryAck(kind, status, error=f"delivery endpoint HTTP {status}: {_preview(body)}")

    record = _at_path(_decode(body), h.dataPath)
    if not isinstance(record, dict):
        return DeliveryAck(AckKind.ACCEPTED, status)

    remote_id = _identifier(record.get(h.idField))
    if remote_id is None:
        remote_id = _identifier(record.get(ID_FALLBACK_FIELD))
    remote_status = _text(record.get(h.statusField))

    # A persisted-but-broken record is what a retry would find again, so its state
    # outranks both the 2xx and any "reused" flag.
    lowered = remote_status.lower() if remote_status else None
    if lowered in TERMINAL_REMOTE_STATUSES:
        return DeliveryAck(
            AckKind.REMOTE_FAILED,
            status,
            remote_id=remote_id,
            remote_status=lowered,
            error=f"delivery endpoint reported terminal status {lowered}",
        )

    if record.get(h.reusedField) is not True:
        return DeliveryAck(AckKind.ACCEPTED, status, remote_id=remote_id, remote_status=remote_status)

    reason = _text(record.get(h.reasonField))
    if reason is None:
        reason = _text(record.get(REASON_FALLBACK_FIELD))
    matched_key = _text(record.get(h.keyField))
    kind = (
        AckKind.DUPLICATE_EXISTING
        if reason is not None and reason.lower() in HISTORICAL_REUSE_REASONS
        else AckKind.IDEMPOTENT_REPLAY
    )
    return DeliveryAck(
        kind,
        status,
        remote_id=remote_id,
        remote_status=remote_status,
        reuse_reason=reason,
        matched_key=matched_key,
    )


# ---------------------------------------------------------------------------------------------
# PixivFlow's gateway route (``type: webhook``)
# ---------------------------------------------------------------------------------------------
#
# A messaging gateway answers with its own status words at the top level of the body. They are
# NOT the TelePost envelope and apply to ``type: webhook`` routes only: "pending" means
# the gateway recorded the intent without publishing it, so the SAME key is retried until it
# reports a business terminal state; an unknown word with a 2xx is retried too (guessing
# success would be worse).

GATEWAY_PENDING = frozenset({"pending", "queued", "accepted_pending", "submitted", "processing"})
GATEWAY_ACCEPTED = frozenset({"accepted", "ok", "success", "published", "sent", "delivered"})
GATEWAY_DUPLICATE = frozenset({"duplicate", "duplicate_existing", "already_exists", "replayed"})
GATEWAY_FAILED = frozenset({"failed", "rejected", "invalid", "expired", "blocked"})


def parse_gateway_ack(http_status: int, body: Any) -> DeliveryAck:
    """Classify one answer of a PixivFlow messaging gateway."""
    status = int(http_status)
    record = _decode(body)
    record = record if isinstance(record, dict) else {}
    word = (_text(record.get("status")) or "").lower()
    detail = next((t for t in (_text(record.get(k)) for k in ("reason", "error", "message")) if t), None)
    detail = detail[:BODY_PREVIEW_CHARS] if detail else None
    remote_id = _identifier(record.get("id"))
    if remote_id is None:
        remote_id = _identifier(record.get(ID_FALLBACK_FIELD))
    if word in GATEWAY_FAILED:  # a verdict of the receiver outranks its HTTP status
        return DeliveryAck(AckKind.REMOTE_FAILED, status, remote_id=remote_id, remote_status=word,
                           error=detail or f"gateway reported {word}")
    if status == 409 or word in GATEWAY_DUPLICATE:
        return DeliveryAck(AckKind.DUPLICATE_EXISTING, status, remote_id=remote_id, remote_status=word or None)
    if word in GATEWAY_PENDING:
        return DeliveryAck(AckKind.RETRYABLE_FAILURE, status, error=detail or f"gateway reported {word}")
    if status == 429:
        return DeliveryAck(AckKind.RETRYABLE_FAILURE, status, error=detail or RATE_LIMITED_ERROR)
    if status >= 500:
        return DeliveryAck(AckKind.RETRYABLE_FAILURE, status, error=detail or f"gateway returned HTTP {status}")
    if not 200 <= status <= 299:
        # A 4xx re-sends the same bytes on every retry: dead-letter it. A 3xx is never followed
        # (redirects are off), so it is no evidence of delivery either.
        return DeliveryAck(AckKind.PERMANENT_FAILURE, status, error=detail or f"gateway returned HTTP {status}: {_preview(body)}")
    if word and word not in GATEWAY_ACCEPTED:
        return DeliveryAck(AckKind.RETRYABLE_FAILURE, status, error=f"unrecognized gateway status: {word[:64]}")
    return DeliveryAck(AckKind.ACCEPTED, status, remote_id=remote_id, remote_status=word or None)


# ---------------------------------------------------------------------------------------------
# Worker handling table
# ---------------------------------------------------------------------------------------------

HISTORICAL_DUPLICATE_REASON = "historical_duplicate"
HISTORICAL_DUPLICATE_CELL_ERROR = "downstream attested historical duplicate"


@dataclass(frozen=True)
class Settlement:
    """What the outbox worker does with one ACK of a ``delivery`` row.

    ``ledger_status`` / ``cell_outcome`` of ``None`` mean "leave unchanged".
    ``outbox_status`` ``retry_wait`` is the intent only: the worker's ``markRetry``
    still turns it into ``dead`` once the attempt budget is spent.
    ``ledger_error`` is the ``last_error`` recorded on the intent; ``cell_error`` the
    reason handed to the cell, and ``cell_reason`` the terminal reason code it ends with.
    Failed cells from an ACK are never retryable.
    """

    ledger_status: str | None
    cell_outcome: str | None
    outbox_status: str
    cell_error: str | None = None
    cell_reason: str | None = None
    remote_id: str | None = None
    remote_status: str | None = None
    reuse_reason: str | None = None
    ledger_error: str | None = None
    delete_cached_files: bool = False  # subject to the target's deleteAfterDelivery
    duplicate_event: bool = False  # record `delivery.duplicate`


def settlement_for(ack: DeliveryAck) -> Settlement:
    kind = ack.kind
    if kind in (AckKind.ACCEPTED, AckKind.IDEMPOTENT_REPLAY):
        return Settlement(
            ledger_status=LedgerStatus.DELIVERED,
            cell_outcome="submitted",
            outbox_status=OutboxStatus.DONE,
            remote_id=ack.remote_id,
            remote_status=ack.remote_status or kind.value,
            reuse_reason=ack.reuse_reason,
            delete_cached_files=True,
            duplicate_event=kind is AckKind.IDEMPOTENT_REPLAY,
        )
    if kind is AckKind.DUPLICATE_EXISTING:
        return Settlement(
            ledger_status=LedgerStatus.DUPLICATE,
            cell_outcome="duplicate",
            outbox_status=OutboxStatus.DONE,
            cell_error=HISTORICAL_DUPLICATE_CELL_ERROR,
            remote_id=ack.remote_id,
            remote_status=ack.remote_status,
            reuse_reason=HISTORICAL_DUPLICATE_REASON,
            duplicate_event=True,
        )
    if kind is AckKind.REMOTE_FAILED:
        return Settlement(
            ledger_status=LedgerStatus.FAILED,
            cell_outcome="failed",
            outbox_status=OutboxStatus.DONE,
            cell_error=(
                f"downstream reported terminal status {ack.remote_status} "
                f"(review {ack.remote_id or 'unknown'})"
            ),
            cell_reason=remote_failed_reason(ack.remote_status),
            remote_id=ack.remote_id,
            remote_status=ack.remote_status,
            ledger_error=ack.error,
        )
    if kind is AckKind.PERMANENT_FAILURE:
        return Settlement(
            ledger_status=LedgerStatus.FAILED,
            cell_outcome="failed",
            outbox_status=OutboxStatus.DEAD,
            cell_error=ack.error,
            ledger_error=ack.error,
        )
    return Settlement(
        ledger_status=None,
        cell_outcome=None,
        outbox_status=OutboxStatus.RETRY_WAIT,
        ledger_error=ack.error,
    )


# ---------------------------------------------------------------------------------------------
# Error classification
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorClass:
    code: str
    retryable: bool


_HTTP_4XX = re.compile(r"http 4\d\d")


def _has(text: str, *needles: str) -> bool:
    return any(n in text for n in needles)


def classify_outbox_error(message: str, status: int | None = None, error_name: str | None = None) -> ErrorClass:
    """Classify a failed outbox attempt; the first matching rule wins.

    Message rules match case-insensitively on substrings. An explicit ``status``
    outranks every message rule except configuration errors. ``error_name`` is the
    exception's class name: ``ConfigError``, ``AbortError`` or any name containing
    ``Timeout`` (Python/httpx timeouts) are recognised.
    """
    text = (message or "").lower()
    name = error_name or ""

    if name == "ConfigError" or _has(text, "does not configure", "unsupported delivery target"):
        return ErrorClass("configuration_error", False)
    if status is not None:
        if status == 429:
            return ErrorClass("rate_limited", True)
        if status >= 500:
            return ErrorClass("remote_5xx", True)
        if status == 409:
            return ErrorClass("duplicate", False)
        if 400 <= status <= 499:
            return ErrorClass("remote_4xx", False)
    if name == "AbortError" or "timeout" in name.lower() or _has(text, "timeout", "timed out", "abort"):
        return ErrorClass("network_timeout", True)
    if _has(text, "429", "rate limit"):
        return ErrorClass("rate_limited", True)
    if _has(text, "duplicate", "idempotent", "replay", "409"):
        return ErrorClass("duplicate", False)
    if _has(text, "invalid", "validation", "bad request", "payload") or _HTTP_4XX.search(text):
        return ErrorClass("invalid_payload", False)
    if "telegram" in text:
        return ErrorClass("telegram_send_failed", False)
    if _has(text, "not ready", "refused", "unavailable", "connection", "network", "fetch", "econn"):
        return ErrorClass("network_timeout", True)
    return ErrorClass("internal_error", True)


# ---------------------------------------------------------------------------------------------
# Backoff
# ---------------------------------------------------------------------------------------------

DEFAULT_RETRY_BASE_MS = 30_000
DEFAULT_RETRY_MAX_MS = 21_600_000
MAX_BACKOFF_EXPONENT = 18


def retry_delay_ms(attempt: int, u: float, base_ms: int = DEFAULT_RETRY_BASE_MS, max_ms: int = DEFAULT_RETRY_MAX_MS) -> int:
    """Delay before the next try after attempt number ``attempt`` (1-based) failed.

    ``attempt`` is n in ``base * 2^(n-1)``, i.e. the row's stored ``attempts`` + 1. ``u`` is a
    uniform sample from [0, 1) (``random.random()``), mapped linearly onto the jitter
    factor ``0.5 + 0.5 * u`` in [0.5, 1.0); ``u == 1`` is accepted and gives exactly
    1.0. Halves round up, as PixivFlow's ``Math.round`` does.
    """
    if not 0.0 <= u <= 1.0:
        raise ValueError(f"u must lie in [0, 1], got {u!r}")
    exponent = min(max(0, attempt - 1), MAX_BACKOFF_EXPONENT)
    capped: int = min(max_ms, base_ms * (2**exponent))  # int ** int is Any to mypy
    return math.floor(capped * (0.5 + 0.5 * u) + 0.5)


# ---------------------------------------------------------------------------------------------
# Delivery intent keys
# ---------------------------------------------------------------------------------------------

KEY_PREFIX = "pixivflow"
ADHOC_SUFFIX = "adhoc"


def _check_part(label: str, value: str | None, *, colon_ok: bool = False) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{label} must be a non-empty string")
    if not colon_ok and ":" in value:
        raise ValueError(f"{label} must not contain ':' ({value!r})")
    return value


def idempotency_key(
    route: str,
    work_type: str,
    work_id: str,
    slot_id: str | None = None,
    target_id: str | None = None,
) -> str:
    """``pixivflow:<route>:<workType>:<workId>:<slotId>:<targetId>`` or ``...:<workId>:adhoc``.

    Slot and target come together or not at all. A slot id may contain ``':'`` (manual
    slots embed a client key); every other part may not, which keeps the key parseable.
    """
    parts = [
        KEY_PREFIX,
        _check_part("route", route),
        _check_part("work_type", work_type),
        _check_part("work_id", str(work_id) if isinstance(work_id, int) else work_id),
    ]
    if slot_id is None and target_id is None:
        parts.append(ADHOC_SUFFIX)
    elif slot_id is None or target_id is None:
        raise ValueError("slot_id and target_id must be given together (or neither, for an ad-hoc intent)")
    else:
        parts.append(_check_part("slot_id", slot_id, colon_ok=True))
        parts.append(_check_part("target_id", target_id))
    return ":".join(parts)


def parse_idempotency_key(key: str) -> tuple[str, str, str, str | None, str | None]:
    """Inverse of :func:`idempotency_key`: ``(route, work_type, work_id, slot_id, target_id)``."""
    if not isinstance(key, str):
        raise ValueError("idempotency key must be a string")
    pieces = key.split(":", 4)
    if len(pieces) != 5 or pieces[0] != KEY_PREFIX or not all(pieces[1:4]):
        raise ValueError(f"not a delivery intent key: {key!r}")
    _, route, work_type, work_id, rest = pieces
    if rest == ADHOC_SUFFIX:
        return route, work_type, work_id, None, None
    slot_id, sep, target_id = rest.rpartition(":")
    if not sep or not slot_id or not target_id:
        raise ValueError(f"not a delivery intent key: {key!r}")
    return route, work_type, work_id, slot_id, target_id
