"""Failed cells as an operator works on them, and the retry of one (docs/explanation/failure-center.md).

A failed cell is listed in the Failure Center from the write that fails it (a consumer's cancel
excepted: it ends a job on purpose). Its retry is a refetch of that one target into a manual slot
of the failed occurrence's schedule, in one of two modes:

* ``normal`` runs the target as configured;
* ``relaxed`` widens the target's soft limits for that one slot, never its rules: the scan bound
  (``candidateScanLimit``, when the target sets one) three times, at most 100; the novel
  language window (``languageCandidateLimit``) twice, at most 100 (the config's own bound); the
  topic look-back (``noMatchPolicy.lookbackDays``, when the target sets it) three times, at most 7.
  Tags, work type, AI and R-18 rules, language, bans and the delivery are untouched, and the config
  itself never changes: the mode lives on the retry's slot.

A retry's request id is derived from (slot, target, mode): retrying the same failure in the same
mode twice names the same slot, so a double click or two operators run it once. A retry that
fails is a failure of its own, with its own retry.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from .protocol import CANCELLED_REASON

NORMAL, RELAXED = "normal", "relaxed"
RETRY_MODES = (NORMAL, RELAXED)

SCAN_LIMIT_FACTOR, SCAN_LIMIT_CAP = 3, 100
LOOKBACK_FACTOR, LOOKBACK_CAP = 3, 7
LANGUAGE_WINDOW_FACTOR, LANGUAGE_WINDOW_CAP = 2, 100

_RETRY_NAMESPACE = uuid.UUID("5b0d3c1e-8f2a-4c61-9a57-2f1e4b8d7c30")


@dataclass(frozen=True)
class FailureEntry:
    """One failed cell as the Failure Center's index lists it."""

    slot_id: str
    target_id: str
    failed_at: int
    reason_code: str | None


def is_listed_failure(reason_code: str | None) -> bool:
    """Whether a cell failed with ``reason_code`` belongs in the Failure Center: every failure but
    a consumer's cancel, which ends a job on purpose. The one rule the failing writes and the
    reindex both apply."""
    return reason_code != CANCELLED_REASON


def failure_position(cursor: str) -> tuple[int, str, str] | None:
    """(failed at, slot id, target id) of a failure's index position ``<13 digits>#<slotId>#<targetId>``
    (what a Failure Center page's cursor carries); None when the text is not one."""
    parts = cursor.split("#")
    if len(parts) != 3 or len(parts[0]) != 13 or not parts[0].isascii() or not parts[0].isdigit() or not all(parts[1:]):
        return None
    return int(parts[0]), parts[1], parts[2]


def retry_request_id(slot_id: str, target_id: str, mode: str) -> str:
    """The refetch request id of a failure's retry in ``mode``: the same for the same failure and mode."""
    return str(uuid.uuid5(_RETRY_NAMESPACE, f"{slot_id}\n{target_id}\n{mode}"))


def _widen(value: int, factor: int, cap: int) -> int:
    return min(cap, max(1, value * factor))


def relaxed_target(target: Any) -> Any:
    """The target a ``relaxed`` retry runs: a copy with its soft limits widened (pure; the
    configured target is never changed). Limits the target leaves to their defaults stay as they
    are, except the language window, which always has a value."""
    updates: dict[str, Any] = {}
    if target.candidateScanLimit is not None:
        updates["candidateScanLimit"] = _widen(target.candidateScanLimit, SCAN_LIMIT_FACTOR, SCAN_LIMIT_CAP)
    updates["languageCandidateLimit"] = _widen(target.languageCandidateLimit, LANGUAGE_WINDOW_FACTOR, LANGUAGE_WINDOW_CAP)
    policy = target.noMatchPolicy
    if policy is not None and "lookbackDays" in policy.model_fields_set:
        updates["noMatchPolicy"] = policy.model_copy(
            update={"lookbackDays": _widen(policy.lookbackDays, LOOKBACK_FACTOR, LOOKBACK_CAP)})
    return target.model_copy(update=updates)


def retry_target(target: Any, mode: str | None) -> Any:
    """The target a slot runs, given its retry mode (None or ``normal``: as configured)."""
    return relaxed_target(target) if mode == RELAXED else target


__all__ = ["FailureEntry", "failure_position", "is_listed_failure", "NORMAL", "RELAXED", "RETRY_MODES", "relaxed_target", "retry_request_id", "retry_target"]
