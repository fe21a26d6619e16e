"""The two stall rules, per slot, with per-cell leases (docs/explanation/stall-rules.md).

A live cell lease, or a fresh progress clock, protects a slot. The progress clock is the
newest cell heartbeat, else the slot's start, else its creation; dispatching never moves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

from .model import Cell, Slot

Rule = Literal["queued_too_long", "stalled_no_heartbeat"]


@dataclass(frozen=True)
class StallVerdict:
    rule: Rule
    since: int  # the clock the budget was measured from (epoch ms)


def progress_clock(slot: Slot, cells: Iterable[Cell]) -> int:
    beats = [c.heartbeat_at for c in cells if c.heartbeat_at is not None]
    if beats:
        return max(beats)
    if slot.started_at is not None:
        return slot.started_at
    return slot.created_at


def judge_slot(slot: Slot, cells: list[Cell], now_ms: int, *, queued_timeout_ms: int, stall_timeout_ms: int) -> StallVerdict | None:
    if any(c.lease_live(now_ms) for c in cells):
        return None
    if slot.status == "pending":
        if slot.created_at <= now_ms - queued_timeout_ms:
            return StallVerdict("queued_too_long", slot.created_at)
        return None
    if slot.status == "running":
        clock = progress_clock(slot, cells)
        if clock <= now_ms - stall_timeout_ms:
            return StallVerdict("stalled_no_heartbeat", clock)
    return None
