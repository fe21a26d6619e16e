"""What an operator reads of the schedules: each one's last fires (the history strip and
``pixivflow schedules history``), the outcomes by day, the next fires, and the one write an
operator makes on a schedule (pause and resume). Reads through the ports only, like
``inspection``; a view is a plain, JSON-ready dict."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from ..domain.occurrence import occurrence_for_fire, previous_fire, upcoming_fires
from ..ports import ScheduleSettings, Settings
from .inspection import InspectionError, Reads


def schedule_history(reads: Reads, schedule: ScheduleSettings, count: int = 30) -> list[dict[str, Any]]:
    """The schedule's last ``count`` fires, oldest first, each with its slot's status. A fire that
    made no slot is ``paused`` when the operator's pause covers it, ``missed`` when the sweep
    recorded it missed (its ``MISSED#`` item: the one place that says so), and ``no_data``
    otherwise: a fire before the sweep began watching the schedule (before the deployment, the dev
    server, a re-timing or an enabling existed) was never due here, and one inside its grace window
    has not been judged yet. Item reads only: one GetItem a fire, one batched read of the
    ``MISSED#`` items."""
    cron = schedule.cron
    if not cron:
        return []  # a schedule without a cron never fires
    fires: list[int] = []
    before = reads.now_ms() + 1
    for _ in range(count):
        try:
            before = previous_fire(cron, schedule.timezone, before)
        except ValueError:
            break
        fires.append(before)
    out = []
    pause = reads.ledger.schedule_pause(schedule.id)
    slot_ids = [occurrence_for_fire(schedule.id, cron, schedule.timezone, fire).slot_id for fire in reversed(fires)]
    missed = reads.sweep_state.missed_among(slot_ids) if reads.sweep_state is not None else set()
    for fire, slot_id in zip(reversed(fires), slot_ids):
        slot = reads.ledger.get_slot(slot_id)
        if slot is not None:
            status = slot.status
        elif pause is not None and pause.covers(fire):
            status = "paused"  # refused on purpose, never missed
        else:
            status = "missed" if slot_id in missed else "no_data"
        out.append({"slotId": slot_id, "at": fire, "timezone": schedule.timezone, "status": status})
    return out


CHART_PAGE = 500


def daily_outcomes(reads: Reads, days: int = 14, zone: str = "UTC") -> list[dict[str, Any]]:
    """Slots by status for each of the last ``days`` days (in ``zone``), oldest first: the
    chart's data, read from the occurrence index from the first day on (its pages of ids, then
    the slots in batches): what it reads grows with those days' slots, never with the ledger."""
    tz = ZoneInfo(zone)
    today = datetime.fromtimestamp(reads.now_ms() / 1000, tz=tz).date()
    first = today.toordinal() - days + 1
    start = datetime.combine(datetime.fromordinal(first).date(), datetime.min.time(), tzinfo=tz)
    counts: dict[str, dict[str, int]] = {datetime.fromordinal(first + n).date().isoformat(): {} for n in range(days)}
    since, ids, cursor = int(start.timestamp() * 1000), [], None
    while True:
        page, cursor = reads.ledger.slot_page(CHART_PAGE, cursor, since_ms=since)
        ids += page
        if cursor is None:
            break
    for slot in (state.slot for state in reads.ledger.slot_heads(ids, with_cells=False)):
        day = datetime.fromtimestamp(int(slot.created_at or 0) / 1000, tz=tz).date().isoformat()
        if day in counts:
            counts[day][slot.status] = counts[day].get(slot.status, 0) + 1
    return [{"day": day, "counts": dict(sorted(c.items()))} for day, c in counts.items()]


# -- schedules ----------------------------------------------------------------------------------------


def pause_view(schedule_id: str, pause: Any) -> dict[str, Any]:
    """A schedule's pause state (``domain.pause.SchedulePause``; never paused reads as running)."""
    return {"scheduleId": schedule_id, "paused": bool(pause is not None and pause.paused),
            "pausedAt": getattr(pause, "paused_at", None), "resumedAt": getattr(pause, "resumed_at", None),
            "by": getattr(pause, "by", None)}


def set_paused(reads: Reads, schedule_id: str, paused: bool, *, by: str | None) -> dict[str, Any]:
    """Pause or resume one schedule of the config, conditionally: a schedule that is
    already in that state is refused (``InspectionError("refused")``) and nothing changes; an id
    the config does not name is ``not_found`` (no item is written for a typo)."""
    config = reads.config
    schedule = config.schedule(schedule_id) if config is not None else None
    if schedule is None:
        raise InspectionError("not_found", f"no schedule {schedule_id!r} in the config")
    ledger = reads.ledger
    flipped = (ledger.pause_schedule if paused else ledger.resume_schedule)(schedule.id, by, reads.now_ms())
    if flipped is None:
        state = "paused" if paused else "not paused"
        raise InspectionError("refused", f"schedule {schedule.id} is already {state}: nothing changed")
    return pause_view(schedule.id, flipped)


def next_fires(config: Settings, now_ms: int, count: int = 3) -> list[dict[str, Any]]:
    """The next ``count`` fires of every enabled schedule, in its zone and in UTC, with the local
    times DST skips (no fire) and repeats (one fire, at the first instant) marked."""
    out = []
    for schedule in config.schedules:
        if not schedule.enabled or not schedule.cron:
            continue
        for fire in upcoming_fires(schedule.id, schedule.cron, schedule.timezone, now_ms, count):
            out.append({"scheduleId": schedule.id, "cron": schedule.cron, "timezone": schedule.timezone,
                        "local": fire.wall, "at": fire.at_ms, "slotId": fire.slot_id, "note": fire.note})
    return out


__all__ = ["daily_outcomes", "next_fires", "pause_view", "schedule_history", "set_paused"]
