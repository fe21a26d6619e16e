"""The default alarm profile (issue 25; template AlarmProfile=health): HealthAlarm is the one alarm.
The stall sweep logs its Health value every tick and publishes it as the metric only in a tick that
counts a problem (a custom metric is billed for the hours it is published). What a deployment is
watched for must still reach it: stalls, missed fires, dead letters, alertable outcomes; and in
that profile no other series is emitted (each series is a billed metric-month). That the sweep runs
at all, the alarm reads from the function's own metrics (tests/unit/test_template.py)."""

from __future__ import annotations

import json

import pytest
from test_operability import MIN, T0, T0_MS, Emf, _service_dimension, assert_watched_by  # noqa: F401 (autouse)

from pixivflow import aws
from support.builders import only, schedule
from support.queues import drop_executions


def health_values(emf: Emf) -> list[float]:
    return [v for b in emf.of("Health") for v in b["Health"]]


def logged_health(logs) -> list[int]:
    """Each tick's Health value, as its ``sweep.health`` line says."""
    return [line["health"] for line in logs.events("sweep.health")]


def test_a_quiet_tick_logs_zero_and_publishes_no_health_data_point(make_runtime, downstream, logs):
    emf = Emf(logs)
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=only(schedule("kept", ["cats"])))
    rt.sweep()
    assert emf.of("Health") == []  # a healthy month publishes none: no metric-hour billed
    [line] = logs.events("sweep.health")
    assert (line["health"], line["dead_letters"], line["missed_fires"]) == (0, 0, 0)


def test_a_tick_that_counts_a_problem_publishes_it_on_the_series_the_health_alarm_watches(make_runtime, downstream, logs):
    emf = Emf(logs)
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=only(schedule("kept", ["cats"])))
    sqs = aws.client("sqs")
    sqs.send_message(QueueUrl=rt.env["EXECUTION_DLQ_URL"], MessageBody=json.dumps({"slotId": "x", "targetId": "y"}))
    rt.sweep()
    [blob] = emf.of("Health")
    assert blob["Health"] == [1.0]
    assert_watched_by(blob, "HealthAlarm")


def test_a_missed_fire_raises_health_for_the_tick_that_finds_it_only(make_runtime, downstream, logs):
    emf = Emf(logs)
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=only(schedule("forgotten", ["landscape"])))
    rt.sweep()
    for minutes in (89, 90, 91):  # graceMinutes 90: found at +90, and only then
        rt.clock.set(T0_MS + minutes * MIN)
        rt.sweep()
    assert logged_health(logs) == [0, 0, 1, 0]
    assert health_values(emf) == [1.0]  # published by the tick that found it, and by no other


def test_messages_in_a_dead_letter_queue_count_until_someone_removes_them(make_runtime, downstream, logs):
    emf = Emf(logs)
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=only(schedule("kept", ["cats"])))
    sqs = aws.client("sqs")
    for url in (rt.env["EXECUTION_DLQ_URL"], rt.env["OUTBOX_DLQ_URL"], rt.env["OUTBOX_DLQ_URL"]):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"slotId": "x", "targetId": "y"}))
    rt.sweep()
    for url in (rt.env["EXECUTION_DLQ_URL"], rt.env["OUTBOX_DLQ_URL"]):
        sqs.purge_queue(QueueUrl=url)
    rt.clock.advance(MIN)
    rt.sweep()
    assert logged_health(logs) == [3, 0]
    assert health_values(emf) == [3.0]


def test_a_queued_too_long_occurrence_raises_health(make_runtime, downstream, logs):
    emf = Emf(logs)
    rt = make_runtime("2026-11-30T22:59:00Z", mutate=only(schedule("lost", ["dogs"])))
    rt.fire("lost", iso=T0)
    drop_executions(rt)  # the execute consumer never sees it; the sweep's re-dispatch is dropped too
    values = []
    for _ in range(35):
        rt.clock.advance(MIN)
        drop_executions(rt)
        rt.sweep()
    values = health_values(emf)
    assert rt.wiring.ledger.get_slot("lost@2026-12-01T0800").status == "failed"
    assert max(values) >= 1.0 and logged_health(logs)[-1] == 0
    assert len(values) == sum(1 for v in logged_health(logs) if v) + 1  # + the alertable outcome's own point


@pytest.mark.parametrize("profile, others", [("health", False), ("full", True)])
def test_the_health_profile_emits_the_health_metric_and_no_other_series(make_runtime, downstream, logs, monkeypatch,
                                                                        profile, others):
    monkeypatch.setenv("PIXIVFLOW_METRICS", profile)
    emf = Emf(logs)
    rt = make_runtime("2026-11-30T22:58:00Z", mutate=only(schedule("lost", ["dogs"])))
    rt.fire("lost", iso=T0)
    rt.settle()
    aws.client("sqs").send_message(QueueUrl=rt.env["OUTBOX_DLQ_URL"], MessageBody=json.dumps({"slotId": "x"}))
    rt.sweep()  # a dead letter: this tick publishes Health
    emf.read()
    names = {m["Name"] for b in emf.blobs for d in b["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
    assert "Health" in names
    assert (names - {"Health"} != set()) is others, names
