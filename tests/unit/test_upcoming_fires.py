"""``upcoming_fires`` (issue 12, `pixivflow schedules next`) lists exactly the fires ``next_fire`` /
``fires_between`` produce, with the DST gaps met on the way in place and repeated local times marked."""

from __future__ import annotations

import pytest

from pixivflow.domain.occurrence import fires_between, upcoming_fires

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
YEAR = 366 * 86_400_000


@pytest.mark.parametrize("cron,tz", [("30 2 * * *", "America/New_York"), ("*/20 1-3 * * *", "Europe/Berlin"),
                                     ("0 2 * * 0", "Australia/Lord_Howe"), ("15 0 * * *", "America/Santiago"),
                                     ("0 8 * * *", "Asia/Tokyo")])
def test_the_fires_are_the_resolver_fires_and_gaps_are_extra_entries(cron, tz):
    entries = upcoming_fires("s", cron, tz, START, 400)
    fires = [e.at_ms for e in entries if e.at_ms is not None]
    assert len(fires) == 400
    assert fires == fires_between(cron, tz, START, fires[-1])
    for e in entries:
        assert (e.at_ms is None) == (e.note == "dst_gap") == (e.slot_id is None)
        if e.slot_id:
            assert e.slot_id == f"s@{e.wall[:10]}T{e.wall[11:13]}{e.wall[14:16]}"


def test_a_skipped_and_a_repeated_local_time_are_marked():
    gap = upcoming_fires("ny", "30 2 * * *", "America/New_York", 1_804_939_200_000, 1)  # from 2027-03-13T12:00Z
    assert [(e.wall, e.at_ms, e.note) for e in gap] == [("2027-03-14 02:30", None, "dst_gap"),
                                                        ("2027-03-15 02:30", 1_805_092_200_000, "")]
    repeat = upcoming_fires("ny", "30 1 * * *", "America/New_York", 1_793_505_600_000, 2)  # from 2026-11-01T04:00Z
    assert [(e.wall, e.note) for e in repeat] == [("2026-11-01 01:30", "dst_repeat"), ("2026-11-02 01:30", "")]
    assert repeat[0].at_ms == 1_793_511_000_000  # the first pass (EDT), the one EventBridge fires
    assert upcoming_fires("ny", "30 1 * * *", "America/New_York", 0, 0) == []
