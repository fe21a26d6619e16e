"""Occurrence resolution: which cron fire a trigger belongs to (docs/explanation/scheduling.md).

A schedule is a 5-field cron read in an IANA time zone. Its *fires* are the
instants at which EventBridge Scheduler would invoke the target, and every fire
is one occurrence with a slot id ``<scheduleId>@<YYYY-MM-DD>T<HHMM>`` taken from
the zone's wall clock.

Daylight saving time
--------------------
EventBridge Scheduler evaluates a cron expression against the local wall clock
of ``ScheduleExpressionTimezone``. AWS documents two rules (re:Post knowledge
center article "eventbridge-scheduler-adjust-dst" and the "Daylight savings
time" section of the Scheduler user guide, *Schedule types*):

* spring forward: a local time that does not exist is **skipped** -- no
  invocation, so no occurrence and no slot;
* fall back: a local time that happens twice runs **only once** and "doesn't
  repeat its invocation".

The documentation does not name the instant used for a repeated time. We take
the **first (earlier) one**, i.e. the instant still on the pre-transition
offset (``fold=0`` in PEP 495 terms). Reasoning: the docs describe the second
pass as the *repeat* that is suppressed, which only makes sense if the first
pass already fired; and a wall-clock scheduler that advances from "the last
local time it fired" reaches the first pass first and, having fired 01:30,
looks for the next wall time after 01:30 and so never revisits it an hour later.

croniter does neither: it shifts a nonexistent time forward (02:30 becomes
03:00) and yields a repeated time twice. So croniter never sees a zone here.
It parses and expands the expression; the matching *wall-clock* times are
enumerated from those field sets (croniter itself steps only for ``L``, ``W``
and ``#``, on UTC-tagged wall times so it does plain calendar arithmetic), and
each wall time is mapped to an instant by this module: nonexistent wall times
are dropped, repeated ones take ``fold=0``.

Property relied on below: with this policy the map "existing wall time ->
instant" is strictly increasing, so scanning wall times in order yields fires
in order. Fires of a repeated minute are unique, and every slot id names
exactly one fire.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from typing import cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from .errors import StatusError

LEAD_MS = 15 * 60_000
NUDGE_MS = 60_000
DEFAULT_GRACE_MINUTES = 90

_MINUTE_MS = 60_000
_UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)
# How far back a backward offset change can push wall-clock readings; real
# zones never change offset twice within this span.
_LOOKBACK = timedelta(hours=6)
# Wall times inspected before giving up on one search (a minutely cron sitting
# in a repeated hour needs ~60; anything near this cap is a pathological cron).
_MAX_STEPS = 20_000


class OccurrenceError(StatusError):
    """A trigger cannot be mapped to a runnable occurrence.

    ``status`` is the HTTP status the trigger endpoint answers with: 400 (no or
    invalid cron/zone), 410 (past the grace window) or 425 (too early).
    """


@dataclass(frozen=True)
class Occurrence:
    schedule_id: str
    slot_id: str
    occurrence_at: int  # epoch ms, UTC
    occurrence_iso: str  # e.g. "2026-09-08T02:00:00.000Z"
    occurrence_date: str  # YYYY-MM-DD in the schedule zone
    occurrence_label: str  # HH:MM in the schedule zone
    timezone: str


# --------------------------------------------------------------------------- validation


def validate_cron(expr: str) -> None:
    """Raise ValueError unless ``expr`` is a 5-field cron croniter can parse."""
    _prototype_for(expr)


def validate_timezone(name: str) -> None:
    """Raise ValueError unless ``name`` is an IANA zone known to zoneinfo."""
    _zone(name)


def _prototype_for(expr: str) -> croniter:
    if not isinstance(expr, str):
        raise ValueError(f"cron expression must be a string, got {type(expr).__name__}")
    return _parse_cron(expr)


@lru_cache(maxsize=256)
def _parse_cron(expr: str) -> croniter:
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"cron expression must have exactly 5 fields, got {len(fields)}: {expr!r}")
    try:
        return croniter(" ".join(fields), _EPOCH)
    except (ValueError, KeyError, TypeError) as exc:  # croniter's errors are ValueErrors
        raise ValueError(f"invalid cron expression {expr!r}: {exc}") from None


def _zone(name: str) -> ZoneInfo:
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"invalid time zone {name!r}")
    return _load_zone(name)


@lru_cache(maxsize=256)
def _load_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


# --------------------------------------------------------------------------- wall clock helpers
# A "wall" is a datetime whose fields are the zone's local reading, tagged UTC
# only so croniter does plain calendar arithmetic on it.


def _ms_of(dt: datetime) -> int:
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def _utc_of(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _wall_of(ms: int, zone: ZoneInfo) -> datetime:
    return _utc_of(ms).astimezone(zone).replace(tzinfo=_UTC, fold=0)


def _floor_minute(dt: datetime) -> datetime:
    return dt.replace(second=0, microsecond=0)


def _instant_of(wall: datetime, zone: ZoneInfo) -> int | None:
    """Epoch ms at which EventBridge fires for this wall time, None if it never exists."""
    local = wall.replace(tzinfo=zone, fold=0)  # fold=0: the earlier of a repeated pair
    utc = local.astimezone(_UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != wall.replace(tzinfo=None):
        return None  # fell in a spring-forward gap
    return _ms_of(utc)


@dataclass(frozen=True)
class _Plain:
    """A cron made only of numbers, ranges, lists and steps, as croniter expands it."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    doms: frozenset[int] | None  # None: unrestricted
    months: frozenset[int]
    dows: frozenset[int] | None  # 0 = Sunday; None: unrestricted

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom_ok = self.doms is None or day.day in self.doms
        dow_ok = self.dows is None or day.isoweekday() % 7 in self.dows
        if self.doms is not None and self.dows is not None:
            return dom_ok or dow_ok  # Unix cron: either restricted day field may match
        return dom_ok and dow_ok


@lru_cache(maxsize=256)
def _plain_fields(expr: str) -> _Plain | None:
    """Field sets for the fast stepper, or None when croniter must step (L, W, #)."""
    fields = expr.split()
    if any(ch in fields[2].upper() + fields[4].upper() for ch in "LW#"):
        return None
    expanded, nth = croniter.expand(" ".join(fields))
    if nth or any(v != "*" and not isinstance(v, int) for f in expanded for v in f):
        return None

    def ints(index: int) -> list[int]:
        return cast("list[int]", expanded[index])  # the check above left only ints or a lone "*"

    def values(index: int, low: int, high: int) -> list[int]:
        return list(range(low, high + 1)) if expanded[index] == ["*"] else sorted(ints(index))

    return _Plain(
        minutes=tuple(values(0, 0, 59)),
        hours=tuple(values(1, 0, 23)),
        doms=None if expanded[2] == ["*"] else frozenset(ints(2)),
        months=frozenset(values(3, 1, 12)),
        dows=None if expanded[4] == ["*"] else frozenset(v % 7 for v in ints(4)),
    )


# Days the fast stepper walks without a match before deciding a cron never
# fires (covers the 8-year gap of a 29 February around 2100), and how far from
# the start any search may go (a cron whose every match falls into a DST gap
# would otherwise be stepped through forever).
_MAX_DAYS = 366 * 9
_HORIZON = timedelta(days=366 * 10)


def _plain_up(plain: _Plain, first: datetime) -> Iterator[datetime]:
    day, is_first, idle = first.date(), True, 0
    while idle < _MAX_DAYS:  # consecutive days without a fire
        idle += 1
        if plain.day_matches(day):
            for hour in plain.hours:
                if is_first and hour < first.hour:
                    continue
                for minute in plain.minutes:
                    if is_first and hour == first.hour and minute < first.minute:
                        continue
                    idle = 0
                    yield datetime(day.year, day.month, day.day, hour, minute, tzinfo=_UTC)
        day += timedelta(days=1)
        is_first = False


def _plain_down(plain: _Plain, last: datetime) -> Iterator[datetime]:
    day, is_first, idle = last.date(), True, 0
    while idle < _MAX_DAYS:
        idle += 1
        if plain.day_matches(day):
            for hour in reversed(plain.hours):
                if is_first and hour > last.hour:
                    continue
                for minute in reversed(plain.minutes):
                    if is_first and hour == last.hour and minute > last.minute:
                        continue
                    idle = 0
                    yield datetime(day.year, day.month, day.day, hour, minute, tzinfo=_UTC)
        day -= timedelta(days=1)
        is_first = False


def _croniter_steps(expr: str, start: datetime, descending: bool) -> Iterator[datetime]:
    it = copy.copy(_prototype_for(expr))
    if descending:
        it.set_current(start + timedelta(seconds=1), force=True)
        step = it.get_prev
    else:
        it.set_current(start - timedelta(seconds=1), force=True)
        step = it.get_next
    for _ in range(_MAX_STEPS):
        try:
            yield step(datetime)
        except CroniterBadDateError:
            return  # croniter found no further match


def _wall_steps(
    expr: str, start: datetime, descending: bool, *, limit: datetime | None = None, fast: bool = True
) -> Iterator[datetime]:
    """Cron-matching wall times from ``start`` (inclusive, minute aligned) up or down.

    Plain crons use the field-set stepper; ``L``/``W``/``#`` crons step with
    croniter. Both read the same croniter expansion, so they agree (a unit test
    checks it); ``fast=False`` forces croniter, for that test. With ``limit``
    the walk simply ends past that wall time; without it, running past the
    search horizon raises ValueError ("never fires").
    """
    _prototype_for(expr)  # validation
    plain = _plain_fields(expr) if fast else None
    if plain is None:
        steps = _croniter_steps(expr, start, descending)
    else:
        steps = (_plain_down if descending else _plain_up)(plain, start)
    for wall in steps:
        if limit is not None:
            if wall < limit if descending else wall > limit:
                return
        elif abs(wall - start) > _HORIZON:
            break
        yield wall
    if limit is None:
        raise ValueError(f"cron {expr!r} has no fire within {_HORIZON.days // 365} years")


def _walls_from(expr: str, first: datetime) -> Iterator[datetime]:
    """Cron-matching wall times >= ``first`` (minute aligned), ascending."""
    return _wall_steps(expr, first, descending=False)


def _walls_down_from(expr: str, last: datetime) -> Iterator[datetime]:
    """Cron-matching wall times <= ``last`` (minute aligned), descending."""
    return _wall_steps(expr, last, descending=True)


# --------------------------------------------------------------------------- fires


def fires_between(cron: str, tz: str, start_ms: int, end_ms: int) -> list[int]:
    """Fires ``f`` with ``start_ms < f <= end_ms``, ascending (EventBridge DST rules)."""
    zone = _zone(tz)
    out: list[int] = []
    if end_ms <= start_ms:
        return out
    # Every wall time earlier than the reading at start_ms maps to an instant
    # before start_ms (monotonic map), so the scan can begin there; no wall
    # time above the highest reading up to end_ms can map inside the range.
    ceiling = _floor_minute(_highest_wall_until(end_ms, zone))
    for wall in _wall_steps(cron, _floor_minute(_wall_of(start_ms, zone)), False, limit=ceiling):
        at = _instant_of(wall, zone)
        if at is None or at <= start_ms:
            continue
        if at > end_ms:
            break
        out.append(at)
    return out


def _highest_wall_until(ms: int, zone: ZoneInfo) -> datetime:
    """The highest wall-clock reading shown at or shortly before ``ms``.

    Right after a fall-back the clock reads lower than it did an hour earlier.
    """
    return max(_wall_of(ms, zone), _wall_of(ms - _ms(_LOOKBACK), zone) + _LOOKBACK)


def next_fire(cron: str, tz: str, after_ms: int) -> int:
    """The first fire strictly after ``after_ms``; ValueError if none within ten years."""
    zone = _zone(tz)
    for wall in _walls_from(cron, _floor_minute(_wall_of(after_ms, zone))):
        at = _instant_of(wall, zone)
        if at is not None and at > after_ms:
            return at
    raise AssertionError("unreachable")  # pragma: no cover


def previous_fire(cron: str, tz: str, before_ms: int) -> int:
    """The latest fire strictly before ``before_ms``; ValueError if none within ten years."""
    zone = _zone(tz)
    for wall in _walls_down_from(cron, _floor_minute(_highest_wall_until(before_ms - 1, zone))):
        at = _instant_of(wall, zone)
        if at is not None and at < before_ms:
            return at
    raise AssertionError("unreachable")  # pragma: no cover


def _ms(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


# --------------------------------------------------------------------------- occurrences


def slot_id_for(schedule_id: str, local_dt: datetime) -> str:
    """``<scheduleId>@<YYYY-MM-DD>T<HHMM>`` from the zone's wall clock."""
    return f"{schedule_id}@{local_dt:%Y-%m-%d}T{local_dt:%H%M}"


def _iso(ms: int) -> str:
    dt = _utc_of(ms)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def _occurrence(schedule_id: str, at_ms: int, tz_name: str, zone: ZoneInfo) -> Occurrence:
    local = _utc_of(at_ms).astimezone(zone)
    return Occurrence(
        schedule_id=schedule_id,
        slot_id=slot_id_for(schedule_id, local),
        occurrence_at=at_ms,
        occurrence_iso=_iso(at_ms),
        occurrence_date=f"{local:%Y-%m-%d}",
        occurrence_label=f"{local:%H:%M}",
        timezone=tz_name,
    )


def _checked_inputs(schedule_id: str, cron: str | None, tz: str | None) -> tuple[str, str, ZoneInfo]:
    if cron is None or not str(cron).strip():
        raise OccurrenceError(400, f"schedule {schedule_id} has no cron expression")
    expr = " ".join(str(cron).split())
    tz_name = (tz or "").strip() or "UTC"
    try:
        validate_cron(expr)
    except ValueError as exc:
        raise OccurrenceError(400, f"schedule {schedule_id} has an invalid cron expression: {exc}") from None
    try:
        zone = _zone(tz_name)
    except ValueError as exc:
        raise OccurrenceError(400, f"schedule {schedule_id} has an invalid time zone: {exc}") from None
    return expr, tz_name, zone


def resolve_occurrence(schedule_id: str, cron: str | None, tz: str | None, at_ms: int) -> Occurrence:
    """Map a trigger instant to its occurrence.

    The upcoming fire wins when it is at most ``LEAD_MS`` away (a clock that
    ticked a little early); otherwise the latest fire before ``at + NUDGE_MS``
    (so a trigger exactly on time, or a few seconds late, names its own fire).
    """
    expr, tz_name, zone = _checked_inputs(schedule_id, cron, tz)
    try:
        upcoming = next_fire(expr, tz_name, at_ms)
    except ValueError:
        upcoming = None
    if upcoming is not None and upcoming - at_ms <= LEAD_MS:
        chosen = upcoming
    else:
        try:
            chosen = previous_fire(expr, tz_name, at_ms + NUDGE_MS)
        except ValueError:
            raise OccurrenceError(
                400, f"schedule {schedule_id} has no fire of {expr!r} in {tz_name} near this trigger"
            ) from None
    return _occurrence(schedule_id, chosen, tz_name, zone)


def check_window(occ: Occurrence, now_ms: int, grace_minutes: int = DEFAULT_GRACE_MINUTES) -> None:
    """Refuse a trigger outside [occurrence - 15 min, occurrence + grace]."""
    if now_ms < occ.occurrence_at - LEAD_MS:
        raise OccurrenceError(425, f"occurrence {occ.slot_id} is not due yet")
    if now_ms > occ.occurrence_at + grace_minutes * _MINUTE_MS:
        raise OccurrenceError(410, f"occurrence {occ.slot_id} has expired (grace {grace_minutes}m)")


def occurrence_for_fire(schedule_id: str, cron: str, tz: str | None, scheduled_ms: int) -> Occurrence:
    """The occurrence of a scheduled fire: the fire itself, no lead/nudge heuristics.

    ``scheduled_ms`` is truncated to the minute (EventBridge has minute
    precision); it must then be a fire of the cron under the DST rules above,
    otherwise OccurrenceError(400). The second pass of a repeated local time and
    instants that only croniter would produce are therefore refused.
    """
    expr, tz_name, zone = _checked_inputs(schedule_id, cron, tz)
    minute = scheduled_ms - scheduled_ms % _MINUTE_MS
    try:
        is_fire = next_fire(expr, tz_name, minute - 1) == minute
    except ValueError:
        is_fire = False
    if not is_fire:
        raise OccurrenceError(
            400, f"{_iso(minute)} is not a fire of schedule {schedule_id} ({expr!r} in {tz_name})"
        )
    return _occurrence(schedule_id, minute, tz_name, zone)



@dataclass(frozen=True)
class UpcomingFire:
    """One entry of :func:`upcoming_fires`: a fire, or a cron wall time DST skipped.

    ``note`` is ``""`` for a plain fire, ``"dst_repeat"`` for a fire whose local time happens
    twice (it fires once, at the first instant: ``at_ms``), ``"dst_gap"`` for a local time that
    does not exist that day (no fire and no slot: ``at_ms`` and ``slot_id`` are None)."""

    wall: str  # "YYYY-MM-DD HH:MM" on the schedule's wall clock
    at_ms: int | None
    slot_id: str | None
    note: str = ""


def upcoming_fires(schedule_id: str, cron: str, tz: str, after_ms: int, count: int) -> list[UpcomingFire]:
    """The next ``count`` fires strictly after ``after_ms`` (the same fires as :func:`next_fire`),
    with the DST gaps met on the way listed in place (for ``pixivflow schedules next``)."""
    zone = _zone(tz)
    out: list[UpcomingFire] = []
    fires = 0
    if count <= 0:
        return out
    for wall in _walls_from(cron, _floor_minute(_wall_of(after_ms, zone))):
        label = f"{wall:%Y-%m-%d %H:%M}"
        at = _instant_of(wall, zone)
        if at is None:
            out.append(UpcomingFire(label, None, None, "dst_gap"))
            continue
        if at <= after_ms:
            continue
        second = _ms_of(wall.replace(tzinfo=zone, fold=1).astimezone(_UTC))
        note = "dst_repeat" if second != at else ""
        out.append(UpcomingFire(label, at, slot_id_for(schedule_id, wall), note))
        fires += 1
        if fires >= count:
            break
    return out

__all__ = [
    "DEFAULT_GRACE_MINUTES",
    "LEAD_MS",
    "NUDGE_MS",
    "Occurrence",
    "OccurrenceError",
    "UpcomingFire",
    "check_window",
    "fires_between",
    "next_fire",
    "occurrence_for_fire",
    "previous_fire",
    "resolve_occurrence",
    "slot_id_for",
    "upcoming_fires",
    "validate_cron",
    "validate_timezone",
]
