"""DST property walk: the resolver agrees with an independent model of EventBridge Scheduler.

For every UTC-offset change between 2026 and 2030 in each zone below, and for a
few crons, the fires computed by ``pixivflow.domain.occurrence`` must equal a
deliberately naive model: enumerate every UTC minute of a window around the
change, read the zone's wall clock for it, keep the minutes whose wall clock
matches the cron, and keep only the first UTC minute of each wall-clock
reading (a repeated local time fires once, on its first pass; a local time
that never appears on the wall clock never fires).

The model shares no code with the implementation: its cron matcher handles just
the syntax used here, and transitions are found by scanning ``utcoffset``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from pixivflow.domain.occurrence import (
    OccurrenceError,
    fires_between,
    occurrence_for_fire,
    resolve_occurrence,
)

UTC = timezone.utc
MIN_S = 60

ZONES = [
    # required
    "Asia/Tokyo", "Asia/Shanghai", "Europe/London", "Europe/Berlin", "America/New_York",
    "America/Los_Angeles", "America/Sao_Paulo", "Australia/Sydney", "Australia/Lord_Howe",
    "Pacific/Chatham", "Asia/Tehran",
    # Europe: EU rule at 01:00 UTC, Dublin's negative DST, Moldova's local-time rule
    "Europe/Paris", "Europe/Dublin", "Europe/Lisbon", "Europe/Athens", "Europe/Helsinki",
    "Europe/Kyiv", "Europe/Chisinau", "Europe/Moscow", "Europe/Istanbul", "Atlantic/Azores",
    "Atlantic/Canary",
    # Americas: US/Canada rule, half-hour zone, midnight changes, southern hemisphere
    "America/Chicago", "America/Denver", "America/Phoenix", "America/Anchorage",
    "America/Halifax", "America/St_Johns", "America/Havana", "America/Santiago",
    "America/Asuncion", "America/Mexico_City", "America/Nuuk", "America/Scoresbysund",
    "America/Miquelon", "Pacific/Easter", "Pacific/Honolulu",
    # Oceania: 30-min DST (Lord Howe), +12:45 (Chatham), Norfolk
    "Pacific/Auckland", "Australia/Adelaide", "Australia/Hobart", "Australia/Brisbane",
    "Pacific/Norfolk", "Pacific/Fiji",
    # Middle East / Africa: Friday rules, midnight changes, Ramadan reversals
    "Asia/Jerusalem", "Asia/Beirut", "Asia/Gaza", "Africa/Cairo", "Africa/Casablanca",
    "Africa/Johannesburg",
    # Asia without DST, odd offsets
    "Asia/Kolkata", "Asia/Kathmandu", "Asia/Singapore",
    # a two-hour DST jump
    "Antarctica/Troll",
    "UTC",
]

# Zones that certainly change offset twice a year in 2026-2030.
DST_ZONES = {
    "Europe/London", "Europe/Berlin", "America/New_York", "America/Los_Angeles",
    "Australia/Sydney", "Australia/Lord_Howe", "Pacific/Chatham", "Antarctica/Troll",
}

FREQUENT = ["0 * * * *", "*/30 * * * *"]
DAILY = ["30 2 * * *", "30 1 * * *", "0 8 * * 1-5"]

SCAN_FROM = datetime(2026, 1, 1, tzinfo=UTC)
SCAN_TO = datetime(2031, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- transitions


def _offset(zone: ZoneInfo, seconds: int) -> timedelta:
    return datetime.fromtimestamp(seconds, zone).utcoffset()


def transitions(zone: ZoneInfo) -> list[int]:
    """UTC seconds (minute aligned) at which the zone's offset changes, 2026-2030."""
    found = []
    step = 86_400
    t = int(SCAN_FROM.timestamp())
    end = int(SCAN_TO.timestamp())
    current = _offset(zone, t)
    while t < end:
        nxt = t + step
        off = _offset(zone, nxt)
        if off != current:
            lo, hi = t, nxt  # offset(lo) == current, offset(hi) == off
            while hi - lo > MIN_S:
                mid = (lo + hi) // 2 // MIN_S * MIN_S
                if mid <= lo:
                    mid = lo + MIN_S
                if _offset(zone, mid) == current:
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
            current = off
        t = nxt
    return found


# --------------------------------------------------------------------------- independent model


def _field(text: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step = part.partition("/")
        if base == "*":
            a, b = low, high
        elif "-" in base:
            a, b = (int(x) for x in base.split("-"))
        else:
            a = b = int(base)
        values.update(range(a, b + 1, int(step or 1)))
    return values


class Cron:
    def __init__(self, expr: str) -> None:
        m, h, dom, mon, dow = expr.split()
        self.minutes = _field(m, 0, 59)
        self.hours = _field(h, 0, 23)
        self.doms = _field(dom, 1, 31)
        self.months = _field(mon, 1, 12)
        self.dows = {d % 7 for d in _field(dow, 0, 6)}
        self.dom_any, self.dow_any = dom == "*", dow == "*"

    def matches(self, wall: datetime) -> bool:
        if wall.minute not in self.minutes or wall.hour not in self.hours or wall.month not in self.months:
            return False
        dom_ok = wall.day in self.doms
        dow_ok = (wall.weekday() + 1) % 7 in self.dows  # cron: 0 = Sunday
        if self.dom_any or self.dow_any:
            return dom_ok and dow_ok
        return dom_ok or dow_ok


def wall_minutes(zone: ZoneInfo, start_s: int, end_s: int) -> list[tuple[int, datetime]]:
    """(UTC second, naive wall-clock reading) for every UTC minute of [start, end]."""
    return [(s, datetime.fromtimestamp(s, zone).replace(tzinfo=None)) for s in range(start_s, end_s + 1, MIN_S)]


class Window:
    """A run of consecutive UTC minutes and what the wall clock showed during them."""

    def __init__(self, minutes: list[tuple[int, datetime]]) -> None:
        self.start_s, self.end_s = minutes[0][0], minutes[-1][0]
        self.instants: dict[datetime, list[int]] = {}  # wall -> UTC seconds showing it, ascending
        for s, wall in minutes:
            self.instants.setdefault(wall, []).append(s)
        walls = sorted(self.instants)
        self.missing: set[datetime] = set()  # wall readings the clock jumps over
        w = walls[0]
        while w < walls[-1]:
            if w not in self.instants:
                self.missing.add(w)
            w += timedelta(minutes=1)
        self.repeated = {w for w, seconds in self.instants.items() if len(seconds) > 1}

    def fires(self, cron: Cron) -> list[int]:
        """EventBridge model: matching wall readings, each on its first UTC minute only."""
        return sorted(seconds[0] * 1000 for w, seconds in self.instants.items() if cron.matches(w))


LEAD = 15 * 60_000
NUDGE = 60_000


def expected_resolution(fires: list[int], window: Window, at: int) -> int | None:
    """Spec §1.3 applied to the model's fires; None when the window cannot decide."""
    if at + LEAD > window.end_s * 1000:
        return None
    upcoming = next((f for f in fires if f > at), None)
    if upcoming is not None and upcoming - at <= LEAD:
        return upcoming
    earlier = [f for f in fires if f < at + NUDGE]
    return earlier[-1] if earlier else None


# --------------------------------------------------------------------------- the walk


def _check_window(zone_name, zone, window, crons, probes, seen, stats) -> None:
    for expr in crons:
        cron = Cron(expr)
        expected = window.fires(cron)
        actual = fires_between(expr, zone_name, window.start_s * 1000 - 1, window.end_s * 1000)
        assert actual == expected, (zone_name, expr, datetime.fromtimestamp(window.start_s, UTC))

        skipped = {w for w in window.missing if cron.matches(w)}
        repeated = {w for w in window.repeated if cron.matches(w)}
        stats["skipped"] += len(skipped)
        stats["repeated"] += len(repeated)

        slots = []
        for fire in actual:
            occ = occurrence_for_fire("p", expr, zone_name, fire)
            slots.append(occ.slot_id)
            wall = datetime.strptime(occ.slot_id.split("@", 1)[1], "%Y-%m-%dT%H%M")
            assert wall not in window.missing, (zone_name, expr, occ.slot_id)
            # one slot id <-> one instant, across every window of this zone/cron
            assert seen.setdefault((expr, occ.slot_id), fire) == fire, (zone_name, expr, occ.slot_id)
            for at in (fire, fire - 10 * MIN_S * 1000, fire + 5 * MIN_S * 1000):
                resolved = resolve_occurrence("p", expr, zone_name, at)
                assert resolved.occurrence_at == fire, (zone_name, expr, at)
                assert resolved.slot_id == occ.slot_id
        assert len(slots) == len(set(slots)), (zone_name, expr)

        for wall in repeated:
            label = f"p@{wall:%Y-%m-%dT%H%M}"
            assert slots.count(label) == 1, (zone_name, expr, label)
            # the later passes are not fires: a clock claiming one is refused
            for second_pass in window.instants[wall][1:]:
                with pytest.raises(OccurrenceError):
                    occurrence_for_fire("p", expr, zone_name, second_pass * 1000)

        # Triggers at arbitrary instants (HTTP path) resolve like the model says.
        for at_s in probes:
            want = expected_resolution(expected, window, at_s * 1000)
            if want is None:
                continue
            stats["probes"] += 1
            got = resolve_occurrence("p", expr, zone_name, at_s * 1000).occurrence_at
            assert got == want, (zone_name, expr, datetime.fromtimestamp(at_s, UTC))


@pytest.mark.parametrize("zone_name", ZONES)
def test_fires_agree_with_the_eventbridge_model(zone_name):
    zone = ZoneInfo(zone_name)
    changes = transitions(zone)
    if zone_name in DST_ZONES:
        assert len(changes) >= 10, changes

    seen: dict = {}
    stats = {"skipped": 0, "repeated": 0, "probes": 0}
    # A quiet mid-year day, so zones without any change still run every check.
    anchors = [int(datetime(2026, 6, 15, tzinfo=UTC).timestamp())] + changes
    hour = 3600
    for t in anchors:
        minutes = wall_minutes(zone, t - 26 * hour, t + 26 * hour)
        wide = Window(minutes)
        narrow = Window([m for m in minutes if t - 4 * hour <= m[0] <= t + 4 * hour])
        # probe steps are prime numbers of minutes so they drift across fire phases
        _check_window(zone_name, zone, narrow, FREQUENT, range(t - 4 * hour, t + 4 * hour, 11 * MIN_S), seen, stats)
        _check_window(zone_name, zone, wide, DAILY, range(t - 2 * hour, t + 6 * hour, 17 * MIN_S), seen, stats)

    assert stats["probes"] > 100 * len(anchors)
    if changes:
        # A zone that changes offset has both gaps and repeats, and the
        # frequent crons always hit at least one minute of each.
        assert stats["skipped"] > 0 and stats["repeated"] > 0, stats
    else:
        assert stats["skipped"] == stats["repeated"] == 0, stats


def test_the_model_is_not_what_plain_croniter_does():
    """Guard for the walk itself: croniter's own DST handling must fail the model."""
    from croniter import croniter

    zone = ZoneInfo("America/New_York")
    spring, autumn = transitions(zone)[:2]
    for t, expr in ((spring, "30 2 * * *"), (autumn, "30 1 * * *")):
        window = Window(wall_minutes(zone, t - 26 * 3600, t + 26 * 3600))
        it = croniter(expr, datetime.fromtimestamp(window.start_s - 1, zone))
        raw = []
        while True:
            nxt = it.get_next(datetime)
            if nxt.timestamp() > window.end_s:
                break
            raw.append(int(nxt.timestamp()) * 1000)
        assert raw != window.fires(Cron(expr))
        assert fires_between(expr, "America/New_York", window.start_s * 1000 - 1, window.end_s * 1000) == window.fires(Cron(expr))
