"""`pixivflow schedules next [--count N]` (issue 12): the next fires in each schedule's zone and in UTC,
with the local times daylight saving skips (no fire, no slot) and repeats (one fire, the first) marked,
exactly as EventBridge Scheduler and the occurrence resolver treat them (domain/occurrence.py)."""

from __future__ import annotations

import json

import yaml
from support.cli import pixivflow

from pixivflow.cli import render_fires
from pixivflow.domain.occurrence import fires_between


def config(tmp_path, schedules):
    doc = {"source": {"kind": "catalog", "path": "catalog.json"},
           "schedules": schedules,
           "targets": [{"id": "cats", "type": "illustration", "mode": "search", "tag": "cats", "storageMode": "persistent"}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


SCHEDULES = [
    {"id": "ny-0230", "cron": "30 2 * * *", "timezone": "America/New_York", "targetIds": ["cats"]},
    {"id": "ny-0130", "cron": "30 1 * * *", "timezone": "America/New_York", "targetIds": ["cats"]},
    {"id": "tokyo", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["cats"]},
    {"id": "off", "cron": "0 9 * * *", "timezone": "UTC", "enabled": False, "targetIds": ["cats"]},
]


def test_next_fires_mark_the_spring_gap_and_the_autumn_repeat(tmp_path):
    path = config(tmp_path, SCHEDULES)
    spring = pixivflow("schedules", "next", "--config", path, "--count", "2", "--at", "2027-03-13T12:00:00Z", now=0)
    assert (spring.code, spring.err) == (0, "")
    gap = "DST gap: this local time does not exist that day; no fire, no slot"
    assert spring.out.splitlines() == [
        "SCHEDULE  ZONE              LOCAL                       UTC                       SLOT                     NOTE",
        f"ny-0230   America/New_York  2027-03-14 02:30 (skipped)  -                         -                        {gap}",
        "ny-0230   America/New_York  2027-03-15 02:30 EDT        2027-03-15T06:30:00.000Z  ny-0230@2027-03-15T0230  -",
        "ny-0230   America/New_York  2027-03-16 02:30 EDT        2027-03-16T06:30:00.000Z  ny-0230@2027-03-16T0230  -",
        "ny-0130   America/New_York  2027-03-14 01:30 EST        2027-03-14T06:30:00.000Z  ny-0130@2027-03-14T0130  -",
        "ny-0130   America/New_York  2027-03-15 01:30 EDT        2027-03-15T05:30:00.000Z  ny-0130@2027-03-15T0130  -",
        "tokyo     Asia/Tokyo        2027-03-14 08:00 JST        2027-03-13T23:00:00.000Z  tokyo@2027-03-14T0800    -",
        "tokyo     Asia/Tokyo        2027-03-15 08:00 JST        2027-03-14T23:00:00.000Z  tokyo@2027-03-15T0800    -",
    ]
    autumn = pixivflow("schedules", "next", "--config", path, "--count", "1", "--at", "2026-11-01T04:00:00Z", now=0)
    repeat = "DST repeat: this local time happens twice; it fires once, at the first"
    assert autumn.out.splitlines()[1:3] == [
        "ny-0230   America/New_York  2026-11-01 02:30 EST  2026-11-01T07:30:00.000Z  ny-0230@2026-11-01T0230  -",
        f"ny-0130   America/New_York  2026-11-01 01:30 EDT  2026-11-01T05:30:00.000Z  ny-0130@2026-11-01T0130  {repeat}"]


def test_json_round_trips_and_agrees_with_the_resolver(tmp_path, monkeypatch):
    path = config(tmp_path, SCHEDULES)
    monkeypatch.setenv("PIXIVFLOW_CONFIG", path)  # the default config location
    run = pixivflow("schedules", "next", "--count", "3", "--at", "2027-03-13T12:00:00Z", "--json", now=0)
    rows = json.loads(run.out)
    assert "\n".join(render_fires(rows)) + "\n" == pixivflow("schedules", "next", "--count", "3", "--at",
                                                            "2027-03-13T12:00:00Z", now=0).out
    assert {r["scheduleId"] for r in rows} == {"ny-0230", "ny-0130", "tokyo"}  # a disabled schedule has no fires
    start = 1_804_939_200_000  # 2027-03-13T12:00:00Z
    for schedule in SCHEDULES[:3]:
        fires = [r["at"] for r in rows if r["scheduleId"] == schedule["id"] and r["at"] is not None]
        assert fires == fires_between(schedule["cron"], schedule["timezone"], start, fires[-1])
    assert [r["note"] for r in rows if r["scheduleId"] == "ny-0230"] == ["dst_gap", "", "", ""]


def test_without_a_config_or_with_a_bad_count_it_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("PIXIVFLOW_CONFIG", raising=False)
    run = pixivflow("schedules", "next", now=0)
    assert (run.code, run.err) == (2, "pixivflow schedules next: the config is unknown: pass --config, or set "
                                      "PIXIVFLOW_CONFIG (a path or ssm:<name>)\n")
    bad = pixivflow("schedules", "next", "--config", config(tmp_path, SCHEDULES), "--count", "0", now=0)
    assert (bad.code, bad.err) == (2, "pixivflow schedules next: --count must be between 1 and 100\n")
