"""May a slot still run? Its schedule decides.

A disabled schedule (plan) is not instantiated, not triggerable and not recoverable in
PixivFlow; a schedule removed from the config is the same as far as its occurrences go. So
neither the sweep's recovery nor an execution message that was already on its way may run a
cell of such a slot: the slot is left to the stall rules, which end it ``queued_too_long`` or
``stalled_no_heartbeat`` (its outbox rows, if any, still belong to the outbox).

Manual slots (refetch, and protocol jobs: ``trigger_source = manual``) are named after the
plan they were admitted under. While that plan is configured, its ``enabled`` flag rules them
exactly like a cron occurrence (no exception). A manual slot whose plan is no longer
in the config at all was an explicit request, not an occurrence of that plan; it keeps running
(and being recovered) as before.
"""

from __future__ import annotations

from ..ports import Settings
from ..domain.model import Slot

MANUAL_SOURCE = "manual"
NOT_RECOVERABLE_MESSAGE = "Cannot recover slot: no enabled schedule (or occurrence) for it"


def run_blocked(config: Settings, slot: Slot) -> str | None:
    """Why this slot's cells may not run any more (``schedule_disabled``, ``schedule_removed``,
    ``no_occurrence``), or None when they may."""
    schedule = config.schedule(slot.schedule_id)
    if schedule is None:
        return None if slot.trigger_source == MANUAL_SOURCE else "schedule_removed"
    if not schedule.enabled:
        return "schedule_disabled"
    if slot.occurrence_at is None:
        return "no_occurrence"
    return None
