"""An operator's pause of one schedule, and the one rule of which fires it covers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulePause:
    """An operator's pause of one schedule: the ledger item ``SCHEDULE#<id>`` / ``PAUSE``.

    The source of truth for "paused" is this item, not the config or the EventBridge schedule's
    state: a ``config`` deploy re-syncs the Scheduler group (``adapters/scheduler_sync.py``) and a
    config edit needs a deploy, so either would undo or delay an operator's pause; the item
    survives a deploy and its flips are conditional writes. ``paused_at`` / ``resumed_at`` are the
    last flips (epoch ms), ``by`` who made the last one."""

    schedule_id: str
    paused: bool
    paused_at: int | None = None
    resumed_at: int | None = None
    by: str | None = None

    def covers(self, fire_ms: int) -> bool:
        """Whether the fire scheduled at ``fire_ms`` falls in the last pause, ``[paused_at,
        resumed_at)`` (open-ended while paused). The ONE rule both the trigger (which refuses such a
        fire) and the sweep (which therefore never counts it missed) apply. A fire scheduled before
        the pause is not covered: arriving late, it is still admitted; resume starts with the next fire."""
        if self.paused_at is None or fire_ms < self.paused_at:
            return False
        return self.paused or (self.resumed_at is not None and fire_ms < self.resumed_at)
