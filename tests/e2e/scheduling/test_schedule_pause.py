"""Pausing and resuming a schedule (issue 26), through the real handlers on the embedded runtime.

The pause is a ledger item (``SCHEDULE#<id>`` / ``PAUSE``, ``domain.pause.SchedulePause``), flipped
conditionally by ``pixivflow schedules pause|resume`` and by the operator page's CSRF-guarded
actions. While paused, EventBridge Scheduler's fires are refused (``schedule.fire_refused``,
reason ``paused``) and the sweep does not count them missed; after a resume the next fire is
admitted again, and a fire nobody sent after the resume is missed as usual."""

from __future__ import annotations

import json
import re

from conftest import TRIGGER_TOKEN, ms
from support.builders import only, schedule
from support.cli import pixivflow
from support.ui import act, audit, csrf_of, get, login

T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01: a fire of "0 8 * * *"
T0_MS = ms(T0)
MIN = 60_000
DAY = 86_400_000
GRACE = 90  # the demo config's schedulerRuntime.trigger.graceMinutes


def plan_only(cfg: dict) -> None:
    """The demo config with its schedules disabled (never "missed") plus ``plan`` at 08:00 Tokyo."""
    only(schedule("plan", ["cats"]))(cfg)


def slot(rt, day: int):
    return rt.wiring.ledger.get_slot(f"plan@2026-12-{day:02d}T0800")


def sweep_at(rt, at_ms: int) -> None:
    rt.clock.set(at_ms)
    rt.sweep()


def test_a_paused_fire_is_neither_admitted_nor_missed_and_resume_starts_with_the_next_fire(make_runtime, logs):
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=plan_only)
    rt.sweep()  # the sweep starts watching "plan" before day 1's fire

    paused = pixivflow("schedules", "pause", "plan", "--verbose", now=rt.clock.now_ms())
    assert paused.code == 0, paused.err
    assert paused.out == ("schedule plan paused at 2026-11-30T22:58:00.000Z: its fires are refused and not counted as "
                          "missed until it is resumed\n")
    line = json.loads(paused.err)
    assert (line["event"], line["level"], line["schedule_id"], line["paused_at"]) == (
        "schedule.paused", "INFO", "plan", ms("2026-11-30T22:58:00Z"))

    rt.clock.set(T0_MS)
    fired = rt.fire("plan", iso=T0)
    assert (fired["status"], fired["reason"]) == ("refused", "paused")
    assert slot(rt, 1) is None
    [refused] = logs.events("schedule.fire_refused")
    assert (refused["reason"], refused["schedule_id"], refused["slot_id"]) == ("paused", "plan", "plan@2026-12-01T0800")
    for minutes in (GRACE, 600):  # past day 1's grace window, still paused
        sweep_at(rt, T0_MS + minutes * MIN)

    resumed = pixivflow("schedules", "resume", "plan", now=T0_MS + 12 * 60 * MIN)
    assert (resumed.code, resumed.err) == (0, "")  # no --verbose: the text alone
    assert resumed.out == "schedule plan resumed at 2026-12-01T11:00:00.000Z: it runs again from its next fire\n"
    for minutes in (12 * 60 + 1,):  # the sweep after the resume: day 1's paused fire is still not missed
        sweep_at(rt, T0_MS + minutes * MIN)
    assert logs.events("schedule.fire_missed") == []

    rt.clock.set(T0_MS + DAY)
    assert rt.fire("plan", iso="2026-12-01T23:00:00Z")["status"] == "admitted"  # day 2: admitted again
    assert slot(rt, 2) is not None and slot(rt, 2).trigger_source == "cron"
    # day 3's fire never arrives after the resume: that one is missed, as any other would be
    sweep_at(rt, T0_MS + 2 * DAY + GRACE * MIN)
    assert [e["slot_id"] for e in logs.events("schedule.fire_missed")] == ["plan@2026-12-03T0800"]


def test_a_fire_while_paused_is_not_missed_even_without_a_sweep_during_the_pause(make_runtime, logs):
    """A pause shorter than the sweep's interval: the only record of it is the item's last period."""
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=plan_only)
    rt.sweep()
    assert pixivflow("schedules", "pause", "plan", now=T0_MS - MIN).code == 0
    rt.clock.set(T0_MS)
    assert rt.fire("plan", iso=T0)["reason"] == "paused"
    assert pixivflow("schedules", "resume", "plan", now=T0_MS + MIN).code == 0
    for minutes in (GRACE, GRACE + 1):
        sweep_at(rt, T0_MS + minutes * MIN)
    assert logs.events("schedule.fire_missed") == []
    # the history strip calls that fire paused, not missed
    page = get(rt, "/ui", cookie=login(rt))
    strip = page.body.split('aria-label="last 30 fires of plan"', 1)[1].split("</svg>", 1)[0]
    statuses = re.findall(r'data-status="([a-z_]+)"', strip)
    assert statuses[-1] == "paused" and set(statuses[:-1]) == {"no_data"}  # the days before were never due here


def test_run_now_is_refused_while_paused_and_the_flips_are_conditional(make_runtime, logs):
    rt = make_runtime(T0, mutate=plan_only)  # 08:00 in Tokyo: plan's occurrence is due now
    assert pixivflow("schedules", "pause", "plan", now=T0_MS).code == 0
    status, body = rt.http("POST", "/internal/schedules/plan/run", {}, token=TRIGGER_TOKEN)
    assert status == 409 and "plan is paused" in json.dumps(body)
    assert slot(rt, 1) is None

    again = pixivflow("schedules", "pause", "plan", "--verbose", now=T0_MS + 1)
    assert (again.code, again.out) == (1, "")
    assert again.err.splitlines()[-1] == "pixivflow schedules pause: schedule plan is already paused: nothing changed"
    assert json.loads(again.err.splitlines()[0])["event"] == "schedule.pause_refused"  # --verbose: the refusal's record
    assert rt.wiring.ledger.schedule_pause("plan").paused_at == T0_MS  # the refused flip changed nothing

    unknown = pixivflow("schedules", "pause", "no-such-plan", now=T0_MS)
    assert unknown.code == 1 and unknown.err.splitlines()[-1] == (
        "pixivflow schedules pause: no schedule 'no-such-plan' in the config")
    assert rt.wiring.ledger.schedule_pause("no-such-plan") is None

    assert pixivflow("schedules", "resume", "plan", now=T0_MS + 2).code == 0
    twice = pixivflow("schedules", "resume", "plan", now=T0_MS + 3)
    assert twice.code == 1 and twice.err.splitlines()[-1].endswith("schedule plan is already not paused: nothing changed")
    status, _ = rt.http("POST", "/internal/schedules/plan/run", {}, token=TRIGGER_TOKEN)
    assert status == 202 and slot(rt, 1).trigger_source == "http"


def test_pause_and_resume_from_the_page_need_the_sessions_csrf_token(make_runtime, logs):
    rt = make_runtime(T0, mutate=plan_only)
    cookie = login(rt)
    overview = get(rt, "/ui", cookie=cookie)
    token = csrf_of(overview)
    assert "Pause plan" in overview.text() and "Run plan now" in overview.text()

    for forged in ({"schedule": "plan"}, {"schedule": "plan", "csrf": token[:-1] + ("A" if token[-1] != "A" else "B")}):
        assert act(rt, "pause", forged, cookie).status == 403
    assert rt.wiring.ledger.schedule_pause("plan") is None  # nothing was written
    assert act(rt, "pause", {"schedule": "plan", "csrf": token}, None).status == 303  # no session: the login page

    done = act(rt, "pause", {"schedule": "plan", "csrf": token}, cookie)
    assert done.status == 200 and "Schedule plan paused" in done.text()
    [line] = audit(logs, "schedule.paused")
    assert (line["operator"], line["schedule_id"], line["paused_at"]) == ("ui", "plan", T0_MS)
    page = get(rt, "/ui", cookie=cookie)
    [schedules] = [t for t in page.tables if t[0][:4] == ["Schedule", "Zone", "Cron", "State"]]
    assert [r[3] for r in schedules if r[0] == "plan"] == ["paused since 2026-11-30T23:00:00.000Z by ui"]
    assert "Resume plan" in page.text() and "Run plan now" not in page.text()
    assert rt.fire("plan", iso=T0)["reason"] == "paused"
    assert act(rt, "pause", {"schedule": "plan", "csrf": token}, cookie).status == 409  # already paused

    assert act(rt, "resume", {"schedule": "plan"}, cookie).status == 403
    assert rt.wiring.ledger.schedule_pause("plan").paused
    resumed = act(rt, "resume", {"schedule": "plan", "csrf": token}, cookie)
    assert resumed.status == 200 and "resumed" in resumed.text()
    assert [line["schedule_id"] for line in audit(logs, "schedule.resumed")] == ["plan"]
    assert not rt.wiring.ledger.schedule_pause("plan").paused
    unknown = act(rt, "pause", {"schedule": "<nope>", "csrf": token}, cookie)
    assert unknown.status == 404 and "schedule:" in unknown.text() and "<nope>" not in unknown.body


def test_a_pause_records_who_and_the_page_shows_since_when_and_by_whom_instead_of_next_fires(make_runtime, monkeypatch):
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=plan_only)
    monkeypatch.setenv("USER", "alice")
    assert pixivflow("schedules", "pause", "plan", now=rt.clock.now_ms()).code == 0
    assert rt.wiring.ledger.schedule_pause("plan").by == "alice"  # the user, when --by is not given
    assert pixivflow("schedules", "resume", "plan", "--by", "bob", now=rt.clock.now_ms()).code == 0
    assert rt.wiring.ledger.schedule_pause("plan").by == "bob"
    assert pixivflow("schedules", "pause", "plan", "--by", "carol", now=rt.clock.now_ms()).code == 0

    page = get(rt, "/ui", cookie=login(rt)).body
    row = page.split("<td>plan</td>", 1)[1].split("</tr>", 1)[0]
    assert "since 2026-11-30T22:58:00.000Z by carol" in row
    assert "<li>" not in row  # no next fires listed for a paused schedule


def test_schedules_history_prints_what_the_strip_shows(make_runtime):
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=plan_only)
    rt.sweep()  # watched from before day 1's fire, which never arrives
    sweep_at(rt, T0_MS + GRACE * MIN)
    shown = pixivflow("schedules", "history", "plan", "--count", "3", "--json", now=T0_MS + GRACE * MIN)
    assert shown.code == 0, shown.err
    assert [(r["slotId"], r["status"]) for r in json.loads(shown.out)] == [
        ("plan@2026-11-29T0800", "no_data"), ("plan@2026-11-30T0800", "no_data"), ("plan@2026-12-01T0800", "missed")]
    text = pixivflow("schedules", "history", "plan", "--count", "3", now=T0_MS + GRACE * MIN).out
    assert text.endswith("plan@2026-12-01T0800  missed\n\n3 fire(s): 2 no_data, 1 missed\n"), text
