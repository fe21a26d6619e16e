"""What the alarms of template.yaml watch, produced by the real handlers on the embedded runtime (issue 16).

* an occurrence whose ``schedule.outcome`` is alertable emits exactly one ``AlertableOutcomes``
  metric; success, partial and no-content occurrences emit none;
* a fire of an enabled schedule with no slot past its grace window is logged
  ``schedule.fire_missed`` and metered ``MissedFires`` exactly once, counting only fires after the
  sweep first saw the schedule enabled;
* one sweep runs at a time: a tick that starts while another holds the lease does nothing.

Metrics are read from the EMF blobs on stdout, with ``POWERTOOLS_SERVICE_NAME`` set as the template
sets it, and compared with the alarm that watches them, so an alarm cannot watch a metric (or a
dimension set) the code never emits.
"""

from __future__ import annotations

from pathlib import Path

from pixivflow import aws
import pytest
import yaml

from conftest import ms
from pixivflow import runtime
from pixivflow.config import load_config
from pixivflow.local.template import load_template
from pixivflow.services.sweep import SWEEP_LEASE_MS
from support.builders import emf_blobs, only, schedule
from support.queues import drop_executions

REPO = Path(__file__).resolve().parents[3]
T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
T0_MS = ms(T0)
MIN = 60_000
DAY = 86_400_000
GRACE = 90  # the demo config's schedulerRuntime.trigger.graceMinutes
NOTHING = {"id": "nothing", "type": "illustration", "mode": "search", "tag": "no-such-tag-anywhere", "limit": 1,
           "storageMode": "cache", "delivery": {"target": "review"}}
TEMPLATE = load_template(REPO / "template.yaml")


@pytest.fixture(autouse=True)
def _service_dimension(monkeypatch):
    """As deployed: Powertools adds a ``service`` dimension to every metric from this variable."""
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"])


class Emf:
    """Every EMF blob printed while the test runs. It taps the ``logs`` fixture's stdout reads, so
    reading log events (which consumes stdout) never hides a metric from the test."""

    def __init__(self, logs):
        self.blobs: list[dict] = []
        self._logs = logs
        real, blobs = logs._capsys, self.blobs

        class Tap:
            def readouterr(self):
                captured = real.readouterr()
                blobs.extend(emf_blobs(captured.out))
                return captured

        logs._capsys = Tap()

    def read(self) -> None:
        self._logs()

    def of(self, name: str) -> list[dict]:
        self.read()
        return [b for b in self.blobs if name in b]


def alarm_metric(logical_id: str) -> dict:
    """The custom metric an alarm watches: its own, or (an alarm on an expression, HealthAlarm) the
    one of its inputs in the stack's namespace."""
    props = TEMPLATE["Resources"][logical_id]["Properties"]
    if "Metrics" not in props:
        return props
    (metric,) = [m["MetricStat"]["Metric"] for m in props["Metrics"]
                 if "MetricStat" in m and m["MetricStat"]["Metric"]["Namespace"] == {"Ref": "MetricsNamespace"}]
    return metric


def alarm_dimensions(logical_id: str) -> dict[str, str]:
    return {d["Name"]: d["Value"] for d in alarm_metric(logical_id)["Dimensions"]}


def emitted_dimensions(blob: dict) -> dict[str, str]:
    (directive,) = blob["_aws"]["CloudWatchMetrics"]
    (names,) = directive["Dimensions"]
    return {name: blob[name] for name in names}


def assert_watched_by(blob: dict, logical_id: str) -> None:
    """The alarm watches exactly this metric: same name, same dimension names and values."""
    props = alarm_metric(logical_id)
    (directive,) = blob["_aws"]["CloudWatchMetrics"]
    assert [m["Name"] for m in directive["Metrics"]] == [props["MetricName"]]
    assert emitted_dimensions(blob) == alarm_dimensions(logical_id)
    # deployed, both are the MetricsNamespace parameter (the functions get it as POWERTOOLS_METRICS_NAMESPACE)
    assert props["Namespace"] == {"Ref": "MetricsNamespace"}


def reconfigure(rt, tmp_path: Path, name: str, mutate) -> None:
    """Deploy a changed config: the next invocation builds its engine from it (a cold start)."""
    cfg = yaml.safe_load(Path(rt.config_path).read_text())
    mutate(cfg)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    runtime.override(config=load_config(str(path)))


def missed_items(rt) -> list[str]:
    pages = aws.client("dynamodb").get_paginator("scan").paginate(
        TableName=rt.env["LEDGER_TABLE"], FilterExpression="begins_with(pk, :p)",
        ExpressionAttributeValues={":p": {"S": "MISSED#"}})
    return sorted(item["slotId"]["S"] for page in pages for item in page["Items"])


# -- alertable outcomes --------------------------------------------------------------------------


def test_only_an_alertable_occurrence_emits_the_alertable_outcome_metric_once(make_runtime, downstream, logs):
    emf = Emf(logs)
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=only(
        schedule("good", ["cats"]),
        schedule("mixed", ["landscape", "nothing"]),
        schedule("empty", ["nothing"]),
        schedule("lost", ["dogs"], cron="30 8 * * *"),
        targets=[NOTHING],
    ))
    for sid in ("good", "mixed", "empty"):
        rt.fire(sid, iso=T0)
    rt.settle()
    # The execute consumer is down for 40 minutes: the sweep ends "lost" queued_too_long.
    fire = T0_MS + 30 * MIN
    rt.clock.set(fire)
    rt.outages.append(("execute", fire, fire + 40 * MIN))
    rt.fire("lost", iso="2026-11-30T23:30:00Z")
    rt.settle()
    for minute in range(1, 30):  # later sweeps never re-emit anything for a closed occurrence
        rt.clock.advance(MIN)
        rt.sweep()

    emf.read()
    verdicts = {}
    for sid, day in (("good", "T0800"), ("mixed", "T0800"), ("empty", "T0800"), ("lost", "T0830")):
        [outcome] = logs.outcomes(f"{sid}@2026-12-01{day}")
        verdicts[sid] = (outcome["status"], outcome["business_status"], outcome["alertable"])
    assert verdicts == {
        "good": ("success", "success", False),
        "mixed": ("partial", "partial_success", False),
        "empty": ("failed", "no_candidate", False),  # a failed slot that is not an alert (spec §9.2)
        "lost": ("failed", "failed", True),
    }
    [blob] = emf.of("AlertableOutcomes")
    assert blob["AlertableOutcomes"] == [1.0]
    assert blob["status"] == "failed"
    assert_watched_by(blob, "AlertableOutcomeAlarm")
    # the outcome metric everyone gets is still there, for every occurrence
    assert sorted(b["status"] for b in emf.of("SlotsFinished")) == ["failed", "failed", "partial", "success"]


# -- missed fires --------------------------------------------------------------------------------


def test_a_fire_with_no_slot_past_its_grace_is_missed_exactly_once(make_runtime, downstream, logs):
    emf = Emf(logs)
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=only(schedule("kept", ["cats"]), schedule("forgotten", ["landscape"])))
    rt.sweep()  # the sweep sees both schedules enabled for the first time at 22:58
    rt.fire("kept", iso=T0)  # "forgotten" is never fired: its 08:00 occurrence has no slot
    rt.settle()

    rt.clock.set(T0_MS + (GRACE - 1) * MIN)
    rt.sweep()
    rt.clock.set(T0_MS + GRACE * MIN - 1)
    rt.sweep()
    assert logs.events("schedule.fire_missed") == []
    assert emf.of("MissedFires") == []

    rt.clock.set(T0_MS + GRACE * MIN)  # now >= F + graceMinutes
    rt.sweep()
    for minutes in (GRACE + 1, GRACE + 30, 600):
        rt.clock.set(T0_MS + minutes * MIN)
        rt.sweep()

    [blob] = emf.of("MissedFires")
    assert blob["MissedFires"] == [1.0]
    assert_watched_by(blob, "MissedFireAlarm")
    [missed] = logs.events("schedule.fire_missed")
    assert missed["level"] == "WARNING"
    assert (missed["schedule_id"], missed["slot_id"]) == ("forgotten", "forgotten@2026-12-01T0800")
    assert missed["occurrence_at"] == "2026-11-30T23:00:00.000Z" and missed["grace_minutes"] == GRACE
    assert missed_items(rt) == ["forgotten@2026-12-01T0800"]
    assert rt.wiring.ledger.get_slot("forgotten@2026-12-01T0800") is None  # detection never back-fills
    assert rt.wiring.ledger.get_slot("kept@2026-12-01T0800").status == "success"


def test_only_fires_after_the_sweep_first_saw_the_schedule_enabled_can_be_missed(make_runtime, downstream, logs, tmp_path):
    emf = Emf(logs)
    # The sweep first runs at 23:01, after the 23:00 fire: that fire is history, never an alert.
    rt = make_runtime("2026-11-30T23:01:00Z", mutate=only(schedule("plan", ["cats"])))
    rt.sweep()
    rt.clock.set(T0_MS + 3 * 60 * MIN)
    rt.sweep()
    assert logs.events("schedule.fire_missed") == []

    # Disabled before day 2's fire, enabled again after it: that stretch is not "missed" either.
    rt.clock.set(T0_MS + DAY - 60 * MIN)
    reconfigure(rt, tmp_path, "disabled.yaml", lambda cfg: cfg["schedules"][-1].update(enabled=False))
    rt.sweep()
    rt.clock.set(T0_MS + DAY + 30 * MIN)
    rt.sweep()
    reconfigure(rt, tmp_path, "enabled.yaml", lambda cfg: cfg["schedules"][-1].update(enabled=True))
    rt.sweep()  # seen enabled again at day 2 + 30 min
    rt.clock.set(T0_MS + DAY + 3 * 60 * MIN)
    rt.sweep()
    assert logs.events("schedule.fire_missed") == []
    assert emf.of("MissedFires") == []

    # Day 3's fire comes after the sweep saw it enabled again: missed, once.
    for minutes in (GRACE, GRACE + 1, 5 * 60):
        rt.clock.set(T0_MS + 2 * DAY + minutes * MIN)
        rt.sweep()
    assert [e["slot_id"] for e in logs.events("schedule.fire_missed")] == ["plan@2026-12-03T0800"]
    assert len(emf.of("MissedFires")) == 1
    assert missed_items(rt) == ["plan@2026-12-03T0800"]

    # The history strip, the CLI's view and the MISSED# items agree: only day 3's fire is missed;
    # the fires before the watch began and the disabled stretch are "no data", never "missed".
    from pixivflow.services.schedule_views import schedule_history

    history = schedule_history(rt.wiring.reads, rt.wiring.config.schedule("plan"), 30)
    assert [h["status"] for h in history][-3:] == ["no_data", "no_data", "missed"]
    assert {h["status"] for h in history} == {"no_data", "missed"}
    assert [h["slotId"] for h in history if h["status"] == "missed"] == missed_items(rt)


def test_a_re_timed_schedule_starts_a_new_watch(make_runtime, downstream, logs, tmp_path):
    rt = make_runtime("2026-11-30T22:00:00Z", mutate=only(schedule("plan", ["cats"])))
    rt.sweep()
    # Moved from 08:00 to 07:30 Tokyo (22:30Z) before any fire: its 22:30 fire counts, 08:00 never will.
    rt.clock.set(ms("2026-11-30T22:10:00Z"))
    reconfigure(rt, tmp_path, "moved.yaml", lambda cfg: cfg["schedules"][-1].update(cron="30 7 * * *"))
    rt.sweep()
    rt.clock.set(T0_MS + 4 * 60 * MIN)
    rt.sweep()
    assert [e["slot_id"] for e in logs.events("schedule.fire_missed")] == ["plan@2026-12-01T0730"]


# -- one sweep at a time ---------------------------------------------------------------------------


def test_two_concurrent_sweeps_only_one_does_the_work(make_runtime, downstream, logs, monkeypatch):
    rt = make_runtime(T0, mutate=only(schedule("pair", ["cats", "landscape"])))
    slot_id = "pair@2026-12-01T0800"
    assert rt.fire("pair", iso=T0)["sent"] == 2
    assert drop_executions(rt) == 2  # both execution messages lost: the sweep re-dispatches them at 5 min
    rt.clock.set(T0_MS + 5 * MIN)

    ledger = rt.wiring.ledger
    real_active_page = ledger.active_page
    inner: list[dict] = []

    def second_sweep_meanwhile(*args, **kwargs):
        if not inner:
            inner.append(rt.sweep())  # another invocation starts while the first is mid-tick
        return real_active_page(*args, **kwargs)

    monkeypatch.setattr(ledger, "active_page", second_sweep_meanwhile)
    outer = rt.sweep()
    monkeypatch.setattr(ledger, "active_page", real_active_page)

    [skipped] = inner
    assert skipped["skipped"] is True and skipped["reason"] == "lease_held"
    assert skipped["leaseUntil"] == T0_MS + 5 * MIN + SWEEP_LEASE_MS
    assert {k: v for k, v in skipped.items() if isinstance(v, int) and not isinstance(v, bool) and k != "leaseUntil"} == {
        "scanned": 0, "activeSlots": 0, "unrecoverable": 0, "queuedTooLong": 0, "stalledNoHeartbeat": 0, "recovered": 0,
        "timedOut": 0, "rolledUp": 0, "redriven": 0, "jobsRepaired": 0, "errors": 0, "shardsWalked": 0, "passComplete": 0,
        "indexesEmpty": 0}
    assert "skipped" not in outer
    assert outer["recovered"] == 1 and outer["activeSlots"] == 1
    assert drop_executions(rt) == 2  # each lost cell sent once, by the sweep that held the lease
    [line] = logs.events("sweep.skipped")
    assert line["lease_owner"] == skipped["leaseOwner"] and line["lease_owner"].startswith("sweep-")
    assert len(logs.events("sweep.finished")) == 1
    assert len(logs.events("sweep.recovered")) == 1

    # The winner released its lease: the next tick, even at the same instant, runs (and finds nothing to do).
    again = rt.sweep()
    assert "skipped" not in again and again["recovered"] == 0 and again["activeSlots"] == 1
    assert rt.wiring.ledger.get_slot(slot_id).status == "pending"


def test_a_sweep_that_died_holding_the_lease_delays_the_next_only_until_it_expires(make_runtime, downstream, logs):
    rt = make_runtime(T0, mutate=only(schedule("pair", ["cats", "landscape"])))
    rt.fire("pair", iso=T0)
    assert drop_executions(rt) == 2
    rt.clock.set(T0_MS + 5 * MIN)
    died = rt.wiring.sweep_state.acquire_lease("sweep-that-died", rt.clock.now_ms(), SWEEP_LEASE_MS)
    assert died.acquired

    rt.clock.advance(SWEEP_LEASE_MS - 1)
    blocked = rt.sweep()
    assert blocked["skipped"] is True and blocked["leaseOwner"] == "sweep-that-died"
    assert drop_executions(rt) == 0

    rt.clock.advance(1)
    taken_over = rt.sweep()
    assert "skipped" not in taken_over and taken_over["recovered"] == 1
    assert drop_executions(rt) == 2
