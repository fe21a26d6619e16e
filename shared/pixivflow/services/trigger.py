"""The two ways a schedule fires: EventBridge Scheduler's input, and the HTTP run route.

A scheduled fire's ``scheduledTime`` IS its occurrence: no grace window applies,
the late-fire caps live on the Scheduler and the function's event-age limits. The HTTP route
resolves the occurrence from now and applies the window check (``docs/explanation/scheduling.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..domain.errors import StatusError
from ..domain.occurrence import Occurrence, OccurrenceError, check_window, occurrence_for_fire, resolve_occurrence
from ..ports import Settings
from ..ports import Clock, Log, SchedulePauses
from .context import Clocked
from .admission import Admission, Admissions, admit, new_slot


@dataclass(frozen=True)
class Triggers(Clocked):
    """What a fire or a run-now takes: admission, the schedules' pauses, the config (schedules,
    the run-now window), the clock and the log."""

    admissions: Admissions
    pauses: SchedulePauses
    config: Settings
    clock: Clock
    log: Log


@dataclass
class FireResult:
    status: str  # admitted | refused
    slot_id: str | None = None
    disposition: str | None = None
    reason: str | None = None
    sent: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def parse_instant(value: Any) -> int:
    """An ISO-8601 UTC instant (as Scheduler's <aws.scheduler.scheduled-time>) to epoch ms."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("scheduledTime must be an ISO-8601 instant")
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError("scheduledTime must carry a zone (e.g. 2026-11-30T23:00:00Z)")
    return int(moment.timestamp() * 1000)


def handle_scheduled_fire(ctx: Triggers, event: dict[str, Any]) -> FireResult:
    """Admit the occurrence a scheduled fire names. Refusals are logged and returned, never raised."""
    schedule_id = event.get("scheduleId")
    schedule = ctx.config.schedule(schedule_id) if isinstance(schedule_id, str) else None
    if schedule is None or not schedule.enabled:
        return _refuse(ctx, schedule_id, f"unknown or disabled schedule: {schedule_id}")
    try:
        at = parse_instant(event.get("scheduledTime"))
        occ = occurrence_for_fire(schedule.id, schedule.cron or "", schedule.timezone, at)
    except (ValueError, OccurrenceError) as exc:
        return _refuse(ctx, schedule_id, str(exc))
    pause = ctx.pauses.schedule_pause(schedule.id)
    if pause is not None and pause.covers(at):
        # An operator paused it (domain.pause.SchedulePause): the fire is dropped, not deferred --
        # resume starts with the next fire -- and the sweep does not count it missed (services/sweep.py).
        ctx.log("warning", "scheduled fire refused: the schedule is paused", event="schedule.fire_refused",
                schedule_id=schedule.id, reason=PAUSED, slot_id=occ.slot_id, occurrence_at=occ.occurrence_iso,
                paused_at=pause.paused_at, paused_by=pause.by)
        return FireResult("refused", reason=PAUSED)
    label = event.get("label")  # only the dev server's fire-now sends one (a display name, never identity)
    label = label.strip()[:80] if isinstance(label, str) and label.strip() else None
    admission = admit(ctx.admissions, new_slot(ctx.admissions, schedule, occ, trigger_source="cron", label=label))
    ctx.log("info", "scheduled fire admitted", event="schedule.fire_admitted", schedule_id=schedule.id,
            slot_id=admission.slot.slot_id, disposition=admission.disposition, occurrence_at=occ.occurrence_iso,
            created=admission.created, sent=admission.sent)
    return FireResult("admitted", admission.slot.slot_id, admission.disposition, admission.reason, admission.sent)


def _refuse(ctx: Triggers, schedule_id: Any, reason: str) -> FireResult:
    ctx.log("warning", "scheduled fire refused", event="schedule.fire_refused", schedule_id=str(schedule_id), reason=reason)
    return FireResult("refused", reason=reason)


PAUSED = "paused"


def refuse_if_paused(ctx: Triggers, schedule_id: str) -> None:
    """A paused schedule admits no occurrence of its own, fired or run now: 409 naming the pause."""
    pause = ctx.pauses.schedule_pause(schedule_id)
    if pause is not None and pause.paused:
        raise StatusError(409, f"schedule {schedule_id} is paused (since {_iso(pause.paused_at)}): resume it first "
                               f"(pixivflow schedules resume {schedule_id})")


def _iso(ms: int | None) -> str:
    if ms is None:
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_now(ctx: Triggers, schedule_id: str, label: str | None) -> tuple[Occurrence, Admission]:
    """HTTP run: resolve from now (source http), window-check, admit. Raises OccurrenceError (400/410/425),
    or StatusError 409 while the schedule is paused."""
    schedule = ctx.config.schedule(schedule_id)
    assert schedule is not None and schedule.enabled
    refuse_if_paused(ctx, schedule.id)
    now = ctx.now()
    occ = resolve_occurrence(schedule.id, schedule.cron, schedule.timezone, now)
    check_window(occ, now, ctx.config.schedulerRuntime.trigger.graceMinutes)
    return occ, admit(ctx.admissions, new_slot(ctx.admissions, schedule, occ, trigger_source="http", label=label))
