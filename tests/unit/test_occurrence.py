"""Occurrence resolution (spec §1.3), window check (§1.4), scheduled fires, cron translation."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pixivflow.domain.cron import to_eventbridge_cron, to_eventbridge_expression
from pixivflow.domain.occurrence import (
    DEFAULT_GRACE_MINUTES,
    LEAD_MS,
    NUDGE_MS,
    Occurrence,
    OccurrenceError,
    check_window,
    fires_between,
    next_fire,
    occurrence_for_fire,
    previous_fire,
    resolve_occurrence,
    slot_id_for,
    validate_cron,
    validate_timezone,
)

MIN = 60_000
HOUR = 60 * MIN


def ms(text: str) -> int:
    """'2026-09-08T02:00:00Z' (or with millis) -> epoch ms."""
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(dt.timestamp() * 1000)


# --------------------------------------------------------------------------- constants


def test_public_constants_match_the_spec():
    assert LEAD_MS == 15 * MIN
    assert NUDGE_MS == MIN
    assert DEFAULT_GRACE_MINUTES == 90


# --------------------------------------------------------------------------- resolution


def test_shanghai_daily_resolved_half_an_hour_late_names_that_mornings_slot():
    occ = resolve_occurrence("schedule-a", "0 10 * * *", "Asia/Shanghai", ms("2026-09-08T02:30:00Z"))
    assert occ == Occurrence(
        schedule_id="schedule-a",
        slot_id="schedule-a@2026-09-08T1000",
        occurrence_at=ms("2026-09-08T02:00:00Z"),
        occurrence_iso="2026-09-08T02:00:00.000Z",
        occurrence_date="2026-09-08",
        occurrence_label="10:00",
        timezone="Asia/Shanghai",
    )


@pytest.mark.parametrize(
    "trigger",
    [
        "2026-09-08T01:50:00Z",  # 10 min early: the upcoming fire
        "2026-09-08T01:45:00Z",  # exactly the 15 min lead
        "2026-09-08T02:00:00Z",  # exactly on time: its own fire, not yesterday's
        "2026-09-08T02:00:59.999Z",  # a few seconds late
        "2026-09-08T02:10:00Z",  # the 10:10 watchdog
    ],
)
def test_triggers_around_a_fire_all_name_the_same_slot(trigger):
    occ = resolve_occurrence("schedule-a", "0 10 * * *", "Asia/Shanghai", ms(trigger))
    assert occ.slot_id == "schedule-a@2026-09-08T1000"
    assert occ.occurrence_at == ms("2026-09-08T02:00:00Z")


def test_a_trigger_just_beyond_the_lead_names_the_previous_fire():
    occ = resolve_occurrence("schedule-a", "0 10 * * *", "Asia/Shanghai", ms("2026-09-08T01:44:59Z"))
    assert occ.slot_id == "schedule-a@2026-09-07T1000"


def test_twelve_hour_gap_late_trigger_boundary():
    # Fires 12 h apart: up to gap - 15 - 1 = 704 min late names the intended
    # fire; one minute later the next fire is inside the lead and wins silently.
    base = ms("2026-05-01T00:00:00Z")
    late = resolve_occurrence("p", "0 0,12 * * *", "UTC", base + 704 * MIN)
    assert late.slot_id == "p@2026-05-01T0000"
    later = resolve_occurrence("p", "0 0,12 * * *", "UTC", base + 705 * MIN)
    assert later.slot_id == "p@2026-05-01T1200"


def test_blank_timezone_means_utc():
    for tz in (None, "", "   "):
        occ = resolve_occurrence("p", "0 8 * * *", tz, ms("2026-05-01T08:00:00Z"))
        assert occ.timezone == "UTC"
        assert occ.slot_id == "p@2026-05-01T0800"


def test_timezone_is_trimmed_and_the_local_date_may_differ_from_utc():
    occ = resolve_occurrence("p", "0 8 * * *", " Asia/Tokyo ", ms("2026-04-30T23:00:00Z"))
    assert occ.timezone == "Asia/Tokyo"
    assert occ.occurrence_date == "2026-05-01"
    assert occ.slot_id == "p@2026-05-01T0800"


@pytest.mark.parametrize("cron", [None, "", "   "])
def test_missing_cron_is_400(cron):
    with pytest.raises(OccurrenceError) as info:
        resolve_occurrence("night", cron, "UTC", ms("2026-05-01T00:00:00Z"))
    assert info.value.status == 400
    assert str(info.value) == "schedule night has no cron expression"


@pytest.mark.parametrize("cron", ["not a cron", "61 * * * *", "0 8 * * ? *", "@daily", "0 8 * *"])
def test_unparseable_cron_is_400(cron):
    with pytest.raises(OccurrenceError) as info:
        resolve_occurrence("night", cron, "UTC", ms("2026-05-01T00:00:00Z"))
    assert info.value.status == 400
    assert "night" in str(info.value)


def test_unknown_timezone_is_400():
    with pytest.raises(OccurrenceError) as info:
        resolve_occurrence("night", "0 8 * * *", "Mars/Olympus", ms("2026-05-01T00:00:00Z"))
    assert info.value.status == 400


def test_cron_that_never_fires_is_400():
    with pytest.raises(OccurrenceError) as info:
        resolve_occurrence("never", "0 0 30 2 *", "UTC", ms("2026-05-01T00:00:00Z"))
    assert info.value.status == 400


# --------------------------------------------------------------------------- window


def test_three_hours_late_on_a_daily_schedule_is_410():
    at = ms("2026-09-08T05:00:00Z")
    occ = resolve_occurrence("schedule-a", "0 10 * * *", "Asia/Shanghai", at)
    assert occ.slot_id == "schedule-a@2026-09-08T1000"
    with pytest.raises(OccurrenceError) as info:
        check_window(occ, at)
    assert info.value.status == 410
    assert str(info.value) == "occurrence schedule-a@2026-09-08T1000 has expired (grace 90m)"


def test_grace_edges_and_custom_grace():
    occ = resolve_occurrence("s", "0 10 * * *", "Asia/Shanghai", ms("2026-09-08T02:00:00Z"))
    check_window(occ, occ.occurrence_at + 90 * MIN)  # last accepted instant
    with pytest.raises(OccurrenceError) as info:
        check_window(occ, occ.occurrence_at + 90 * MIN + 1)
    assert info.value.status == 410
    check_window(occ, occ.occurrence_at + 170 * MIN, grace_minutes=180)
    with pytest.raises(OccurrenceError) as info:
        check_window(occ, occ.occurrence_at + 31 * MIN, grace_minutes=30)
    assert "has expired (grace 30m)" in str(info.value)


def test_early_trigger_is_425():
    # The resolver only picks a future fire inside the lead, so build the
    # occurrence by hand to reach the "not due yet" branch.
    fire = ms("2026-09-08T02:00:00Z")
    occ = Occurrence("s", "s@2026-09-08T1000", fire, "2026-09-08T02:00:00.000Z", "2026-09-08", "10:00", "Asia/Shanghai")
    check_window(occ, fire - LEAD_MS)  # exactly 15 min early is fine
    with pytest.raises(OccurrenceError) as info:
        check_window(occ, fire - LEAD_MS - 1)
    assert info.value.status == 425
    assert str(info.value) == "occurrence s@2026-09-08T1000 is not due yet"


# --------------------------------------------------------------------------- fires


def test_fires_between_is_start_exclusive_end_inclusive_and_ascending():
    start, end = ms("2026-05-01T08:00:00Z"), ms("2026-05-03T08:00:00Z")
    assert fires_between("0 8 * * *", "UTC", start, end) == [ms("2026-05-02T08:00:00Z"), end]
    assert fires_between("0 8 * * *", "UTC", start - 1, start) == [start]
    assert fires_between("0 8 * * *", "UTC", end, start) == []
    quarter = fires_between("*/15 * * * *", "UTC", start, start + HOUR)
    assert quarter == [start + 15 * MIN, start + 30 * MIN, start + 45 * MIN, start + HOUR]


def test_fires_follow_the_local_clock():
    # 08:00 Tokyo is 23:00 UTC the day before.
    fires = fires_between("0 8 * * *", "Asia/Tokyo", ms("2026-05-01T00:00:00Z"), ms("2026-05-03T00:00:00Z"))
    assert fires == [ms("2026-05-01T23:00:00Z"), ms("2026-05-02T23:00:00Z")]


def test_weekday_cron_skips_the_weekend():
    # 2026-05-01 is a Friday.
    fires = fires_between("0 8 * * 1-5", "UTC", ms("2026-05-01T00:00:00Z"), ms("2026-05-05T00:00:00Z"))
    assert fires == [ms("2026-05-01T08:00:00Z"), ms("2026-05-04T08:00:00Z")]


def test_next_and_previous_are_strict():
    fire = ms("2026-05-01T08:00:00Z")
    assert next_fire("0 8 * * *", "UTC", fire) == fire + 24 * HOUR
    assert next_fire("0 8 * * *", "UTC", fire - 1) == fire
    assert previous_fire("0 8 * * *", "UTC", fire) == fire - 24 * HOUR
    assert previous_fire("0 8 * * *", "UTC", fire + 1) == fire


def test_spring_forward_time_is_skipped_not_shifted():
    # New York 2026-03-08: 02:00 EST jumps to 03:00 EDT, 02:30 never happens.
    fires = fires_between("30 2 * * *", "America/New_York", ms("2026-03-07T00:00:00Z"), ms("2026-03-10T00:00:00Z"))
    assert fires == [ms("2026-03-07T07:30:00Z"), ms("2026-03-09T06:30:00Z")]


def test_fall_back_time_fires_once_on_the_first_pass():
    # New York 2026-11-01: 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST).
    fires = fires_between("30 1 * * *", "America/New_York", ms("2026-10-31T12:00:00Z"), ms("2026-11-02T00:00:00Z"))
    assert fires == [ms("2026-11-01T05:30:00Z")]
    half_hourly = fires_between("*/30 * * * *", "America/New_York", ms("2026-11-01T04:59:00Z"), ms("2026-11-01T07:30:00Z"))
    assert half_hourly == [ms(f"2026-11-01T{t}:00Z") for t in ("05:00", "05:30", "07:00", "07:30")]


def test_a_trigger_in_the_repeated_hour_names_the_first_pass_fire():
    occ = resolve_occurrence("n", "30 1 * * *", "America/New_York", ms("2026-11-01T06:35:00Z"))
    assert occ.occurrence_at == ms("2026-11-01T05:30:00Z")
    assert occ.slot_id == "n@2026-11-01T0130"


# --------------------------------------------------------------------------- scheduled fires


def test_a_scheduled_fire_is_its_own_occurrence():
    occ = occurrence_for_fire("m", "0 8 * * *", "Asia/Tokyo", ms("2026-11-30T23:00:00Z"))
    assert occ.slot_id == "m@2026-12-01T0800"
    assert occ.occurrence_iso == "2026-11-30T23:00:00.000Z"


def test_scheduled_time_is_truncated_to_the_minute():
    occ = occurrence_for_fire("m", "0 8 * * *", "Asia/Tokyo", ms("2026-11-30T23:00:42.123Z"))
    assert occ.occurrence_at == ms("2026-11-30T23:00:00Z")


def test_a_short_period_fire_keeps_its_own_slot():
    # The lead heuristic would move a */5 fire to the next one; a fire never moves.
    occ = occurrence_for_fire("q", "*/5 * * * *", "UTC", ms("2026-05-01T10:05:00Z"))
    assert occ.slot_id == "q@2026-05-01T1005"


@pytest.mark.parametrize(
    ("cron", "tz", "when"),
    [
        ("0 8 * * *", "Asia/Tokyo", "2026-11-30T23:01:00Z"),  # not a fire minute
        ("30 1 * * *", "America/New_York", "2026-11-01T06:30:00Z"),  # second pass of 01:30
        ("30 2 * * *", "America/New_York", "2026-03-08T07:00:00Z"),  # croniter's shifted 03:00
    ],
)
def test_a_time_that_is_not_a_fire_is_refused(cron, tz, when):
    with pytest.raises(OccurrenceError) as info:
        occurrence_for_fire("m", cron, tz, ms(when))
    assert info.value.status == 400


def test_scheduled_fire_without_cron_is_400():
    with pytest.raises(OccurrenceError) as info:
        occurrence_for_fire("m", "", "UTC", ms("2026-05-01T00:00:00Z"))
    assert (info.value.status, str(info.value)) == (400, "schedule m has no cron expression")


# --------------------------------------------------------------------------- helpers


def test_slot_id_uses_the_wall_clock():
    from zoneinfo import ZoneInfo

    local = datetime(2026, 9, 8, 2, 0, tzinfo=timezone.utc).astimezone(ZoneInfo("Asia/Shanghai"))
    assert slot_id_for("schedule-a", local) == "schedule-a@2026-09-08T1000"


def test_validators():
    validate_cron("0 8 * * 1-5")
    validate_timezone("Europe/Berlin")
    for bad in ("0 8 * * ? *", "0 8 * *", "x y z w v", "", 5):
        with pytest.raises(ValueError):
            validate_cron(bad)
    for bad in ("Mars/Olympus", "", " UTC", "../etc/passwd", None):
        with pytest.raises(ValueError):
            validate_timezone(bad)


# --------------------------------------------------------------------------- cron translation

TRANSLATIONS = [
    ("0 8 * * *", "cron(0 8 * * ? *)"),
    ("30 2 1 * *", "cron(30 2 1 * ? *)"),
    ("0 8 L * *", "cron(0 8 L * ? *)"),
    ("0 8 ? * 1", "cron(0 8 ? * MON *)"),
    ("0 8 * * 1-5", "cron(0 8 ? * MON-FRI *)"),
    ("0 8 * * mon-fri", "cron(0 8 ? * MON-FRI *)"),
    ("0 8 * * 0", "cron(0 8 ? * SUN *)"),
    ("0 8 * * 7", "cron(0 8 ? * SUN *)"),
    ("0 8 * * 1,3,5", "cron(0 8 ? * MON,WED,FRI *)"),
    ("0 8 * * */2", "cron(0 8 ? * SUN,TUE,THU,SAT *)"),
    ("0 8 * * 1-5/2", "cron(0 8 ? * MON,WED,FRI *)"),
    ("0 8 * * 5-7", "cron(0 8 ? * FRI,SAT,SUN *)"),
    ("0 8 * * 5#3", "cron(0 8 ? * 6#3 *)"),
    ("0 8 * * L5", "cron(0 8 ? * 6L *)"),
    ("*/15 */2 * * *", "cron(0/15 0/2 * * ? *)"),
    ("5/10 * * * *", "cron(5/10 * * * ? *)"),
    ("10-40/10 8 * * *", "cron(10,20,30,40 8 * * ? *)"),
    ("0 22-2 * * *", "cron(0 22,23,0,1,2 * * ? *)"),
    ("0 8 * jan,JUL *", "cron(0 8 * JAN,JUL ? *)"),
    ("0 8 1 */3 *", "cron(0 8 1 1/3 ? *)"),
    ("0 8 1,15 6 *", "cron(0 8 1,15 6 ? *)"),
]


@pytest.mark.parametrize(("unix", "eventbridge"), TRANSLATIONS)
def test_cron_translation(unix, eventbridge):
    assert to_eventbridge_cron(unix) == eventbridge
    assert to_eventbridge_expression(unix) == eventbridge


@pytest.mark.parametrize(
    "unix",
    [
        "0 8 1 * 1",  # both day fields restricted: Unix ORs them
        "0 8 */2 * 1-5",
        "0 8 * * ? *",  # already 6 fields
        "0 8 * *",
        "61 * * * *",
        "@daily",
    ],
)
def test_cron_translation_refuses(unix):
    with pytest.raises(ValueError):
        to_eventbridge_cron(unix)


# --------------------------------------------------------------------------- steppers agree

STEPPER_CRONS = [
    "0 8 * * *",
    "*/7 */5 * * *",
    "15,45 9-17 * * 1-5",
    "0 0 29 2 1",  # 29 February or any Monday
    "0 12 1,15 * 5",  # both day fields restricted: either may match
    "0 8 */3 * *",
    "30 6 * jan-mar sun",
    "0 22-2 * * 5-7",
    "0 0 1-31 * 1-5",  # croniter ORs a full dom list with a weekday list: every day
]


@pytest.mark.parametrize("expr", STEPPER_CRONS)
@pytest.mark.parametrize("descending", [False, True])
def test_fast_stepper_matches_croniter(expr, descending):
    from itertools import islice

    from pixivflow.domain.occurrence import _wall_steps

    start = datetime(2027, 12, 30, 13, 7, tzinfo=timezone.utc)
    fast = list(islice(_wall_steps(expr, start, descending), 30))
    slow = list(islice(_wall_steps(expr, start, descending, fast=False), 30))
    assert fast == slow


def test_croniter_only_syntax_still_resolves():
    # L / # / W go through croniter's stepper, with the same DST handling.
    last = resolve_occurrence("l", "0 8 L * *", "Europe/Berlin", ms("2026-03-31T06:05:00Z"))
    assert last.slot_id == "l@2026-03-31T0800"
    third_friday = fires_between("0 8 * * 5#3", "UTC", ms("2026-05-01T00:00:00Z"), ms("2026-06-30T00:00:00Z"))
    assert third_friday == [ms("2026-05-15T08:00:00Z"), ms("2026-06-19T08:00:00Z")]
    # Last Sunday of March 02:30 in Berlin never exists (02:00 -> 03:00).
    assert fires_between("30 2 * 3 L0", "Europe/Berlin", ms("2026-03-28T00:00:00Z"), ms("2026-03-30T00:00:00Z")) == []
