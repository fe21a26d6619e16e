"""The cell state machine, slot status derivation and the single-work rule.

A cell is one target inside one slot. Its states and the moves between them are
the contract every writer obeys: the DynamoDB adapter builds its condition
expressions from ``ALLOWED_FROM`` so the table and this module can never disagree.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Iterable, Mapping


class CellStatus(StrEnum):
    PENDING = "pending"
    SELECTED = "selected"
    ARTIFACT_READY = "artifact_ready"
    DELIVERY_PENDING = "delivery_pending"
    SUBMITTED = "submitted"
    NO_CANDIDATE = "no_candidate"
    DUPLICATE = "duplicate"
    FAILED = "failed"


class SlotStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    PARTIAL = "partial"
    FAILED = "failed"
    EXPIRED = "expired"


TERMINAL_CELL_STATES: frozenset[str] = frozenset(
    {CellStatus.SUBMITTED, CellStatus.NO_CANDIDATE, CellStatus.DUPLICATE, CellStatus.FAILED}
)
TERMINAL_SLOT_STATES: frozenset[str] = frozenset(
    {SlotStatus.SUCCESS, SlotStatus.PARTIAL, SlotStatus.FAILED, SlotStatus.EXPIRED}
)
ACTIVE_SLOT_STATES: frozenset[str] = frozenset({SlotStatus.PENDING, SlotStatus.RUNNING})
COMPLETED_SLOT_STATES: frozenset[str] = frozenset({SlotStatus.SUCCESS, SlotStatus.PARTIAL})

# target state -> the states a cell may move there from.
_TRANSITIONS: dict[str, frozenset[str]] = {
    CellStatus.PENDING: frozenset(
        {
            CellStatus.SELECTED,
            CellStatus.ARTIFACT_READY,
            CellStatus.DELIVERY_PENDING,
            CellStatus.SUBMITTED,
            CellStatus.NO_CANDIDATE,
            CellStatus.DUPLICATE,
            CellStatus.FAILED,
        }
    ),
    CellStatus.SELECTED: frozenset(
        {
            CellStatus.ARTIFACT_READY,
            CellStatus.DELIVERY_PENDING,
            CellStatus.SUBMITTED,
            CellStatus.NO_CANDIDATE,
            CellStatus.DUPLICATE,
            CellStatus.FAILED,
        }
    ),
    CellStatus.ARTIFACT_READY: frozenset(
        {CellStatus.DELIVERY_PENDING, CellStatus.SUBMITTED, CellStatus.DUPLICATE, CellStatus.FAILED}
    ),
    CellStatus.DELIVERY_PENDING: frozenset(
        {CellStatus.SUBMITTED, CellStatus.DUPLICATE, CellStatus.FAILED}
    ),
    CellStatus.SUBMITTED: frozenset(),
    CellStatus.NO_CANDIDATE: frozenset(),
    CellStatus.DUPLICATE: frozenset(),
    CellStatus.FAILED: frozenset(),
}

ALLOWED_TARGETS: Mapping[str, frozenset[str]] = _TRANSITIONS
ALLOWED_FROM: Mapping[str, frozenset[str]] = {
    target: frozenset(src for src, targets in _TRANSITIONS.items() if target in targets)
    for target in CellStatus
}


class IllegalCellTransition(ValueError):
    def __init__(self, source: str, target: str) -> None:
        super().__init__(f"illegal slot cell transition: {source} -> {target}")
        self.source = source
        self.target = target


def can_transition(source: str, target: str) -> bool:
    """True when ``source -> target`` is in the table; a move to the same state is a no-op, not a move."""
    return target in _TRANSITIONS.get(source, frozenset())


def check_transition(source: str, target: str) -> bool:
    """Validate a move. Returns False for a same-state no-op, True for a real move, raises otherwise."""
    if source == target:
        return False
    if not can_transition(source, target):
        raise IllegalCellTransition(source, target)
    return True


def is_terminal_cell(status: str | None) -> bool:
    return status in TERMINAL_CELL_STATES


def is_terminal_slot(status: str | None) -> bool:
    return status in TERMINAL_SLOT_STATES


def derive_slot_status(cell_states: Iterable[str]) -> SlotStatus:
    """The slot's lifecycle status as a pure function of its cells."""
    states = list(cell_states)
    if not states:
        return SlotStatus.PENDING
    if any(s not in TERMINAL_CELL_STATES for s in states):
        return SlotStatus.RUNNING
    submitted = sum(1 for s in states if s == CellStatus.SUBMITTED)
    if submitted == len(states):
        return SlotStatus.SUCCESS
    if submitted > 0:
        return SlotStatus.PARTIAL
    return SlotStatus.FAILED


def is_single_work_cell(target: Mapping[str, Any] | Any) -> bool:
    """Does this target bind exactly one work per cell? Rules in order."""

    def get(name: str) -> object:
        if isinstance(target, Mapping):
            return target.get(name)
        return getattr(target, name, None)

    limit = get("limit")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0:
        return limit == 1
    kind = get("type") or "illustration"
    if kind == "novel" and get("novelId") is not None:
        return True
    if kind != "novel" and get("illustId"):
        return True
    if get("userId"):
        return False
    if kind == "novel" and get("seriesId"):
        return False
    return get("mode") == "topic"
