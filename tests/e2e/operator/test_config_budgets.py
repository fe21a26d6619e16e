"""A malformed budget or scan limit warns and falls back; it never takes the service down
(issue 15 item 3; spec §1.1, §6.1, §7.2; DESIGN §7).

Through the real handlers: the HTTP run answers 202 (it used to be 500 for every run), the
``config.warning`` log line names the field, and the liveness rule then behaves with the
DEFAULT budget (queued_too_long at 30 min, stalled_no_heartbeat at 15 min), not the bad value.
"""

from __future__ import annotations

import json

import pytest

from conftest import claim, TRIGGER_TOKEN, ms
from support.queues import take

T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo: a fire of "0 8 * * *"
T0_MS = ms(T0)
MIN = 60_000
SLOT = "solo@2026-12-01T0800"


def schedule(cfg, **runtime):
    cfg["schedules"].append({"id": "solo", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["cats"]})
    cfg["schedulerRuntime"].update(runtime)


def drop(rt, queue="EXECUTION_QUEUE_URL") -> int:
    return len(take(rt, queue, visibility_s=30))


def sweep_at(rt, minutes: float) -> dict:
    rt.clock.set(T0_MS + int(minutes * MIN))
    result = rt.sweep()
    drop(rt)  # whatever recovery re-sends is lost as well
    return result


def run_http(rt):
    status, body = rt.http("POST", "/internal/schedules/solo/run", token=TRIGGER_TOKEN)
    return status, body


def warnings_of(logs) -> dict[str, str]:
    return {line["field"]: line["detail"] for line in logs.events("config.warning")}


@pytest.mark.parametrize("bad", ["nonsense", 1000, 90_000.5, True])
def test_a_bad_queued_budget_warns_and_the_30_minute_default_applies(make_runtime, logs, bad):
    rt = make_runtime(T0, mutate=lambda cfg: schedule(cfg, queuedTimeoutMs=bad))
    status, body = run_http(rt)
    assert status == 202 and body["status"] == "accepted"
    assert warnings_of(logs) == {
        "schedulerRuntime.queuedTimeoutMs": f"{bad!r} " + ("is below the 60000 ms floor" if bad == 1000 else
                                                           "is not an integer number of milliseconds")
        + "; the default 1800000 is used"}
    assert drop(rt) == 1  # the execution message is lost: the slot stays admitted, never claimed
    assert sweep_at(rt, 29)["queuedTooLong"] == 0
    assert rt.wiring.ledger.get_slot(SLOT).status == "pending"
    assert sweep_at(rt, 30)["queuedTooLong"] == 1
    assert rt.wiring.ledger.get_cell(SLOT, "cats").terminal_reason_code == "queued_too_long"


@pytest.mark.parametrize("bad", ["nonsense", 59_999, [900_000]])
def test_a_bad_stall_budget_warns_and_the_15_minute_default_applies(make_runtime, logs, bad):
    rt = make_runtime(T0, mutate=lambda cfg: schedule(cfg, stallTimeoutMs=bad))
    status, _ = run_http(rt)
    assert status == 202
    assert list(warnings_of(logs)) == ["schedulerRuntime.stallTimeoutMs"]
    assert "the default 900000 is used" in warnings_of(logs)["schedulerRuntime.stallTimeoutMs"]
    drop(rt)
    now = rt.clock.now_ms()
    assert claim(rt.wiring.ledger, SLOT, "cats", "exec-died", now, 180_000) is not None  # claimed, then died
    assert rt.wiring.ledger.mark_slot_running(SLOT, now)
    assert sweep_at(rt, 14)["stalledNoHeartbeat"] == 0
    assert sweep_at(rt, 15)["stalledNoHeartbeat"] == 1
    assert rt.wiring.ledger.get_cell(SLOT, "cats").terminal_reason_code == "stalled_no_heartbeat"


def test_the_issues_config_runs_and_delivers(make_runtime, downstream, logs):
    """``{"queuedTimeoutMs": 1000, "stallTimeoutMs": "nonsense"}``: both fall back, the run delivers."""
    rt = make_runtime(T0, mutate=lambda cfg: schedule(cfg, queuedTimeoutMs=1000, stallTimeoutMs="nonsense"))
    assert run_http(rt)[0] == 202
    rt.settle()
    assert rt.wiring.ledger.get_slot(SLOT).status == "success"
    assert len(downstream.requests) == 1
    assert set(warnings_of(logs)) == {"schedulerRuntime.queuedTimeoutMs", "schedulerRuntime.stallTimeoutMs"}
    assert rt.wiring.config.schedulerRuntime.queued_timeout_ms == 1_800_000


def test_a_target_scan_limit_of_zero_is_clamped_to_one(make_runtime, downstream, logs):
    catalog = {"illusts": [
        {"id": 1, "title": "gone", "tags": [{"name": "cats"}], "user": {"id": 1}, "create_date": "2026-11-20T10:00:00+09:00",
         "x_fault": "gone"},
        {"id": 2, "title": "fine", "tags": [{"name": "cats"}], "user": {"id": 1}, "create_date": "2026-11-19T10:00:00+09:00"},
    ]}

    def mutate(cfg):
        schedule(cfg)
        next(t for t in cfg["targets"] if t["id"] == "cats")["candidateScanLimit"] = 0

    rt = make_runtime(T0, mutate=mutate, catalog=catalog)
    rt.fire("solo", iso=T0)
    rt.settle()
    cell = rt.wiring.ledger.get_cell(SLOT, "cats")
    assert cell.status == "no_candidate" and cell.candidate_report["bound"] == 1  # 1, not the default 5
    assert downstream.requests == []
    assert warnings_of(logs) == {"targets[0].candidateScanLimit": "0 is below 1; 1 is used"}


def test_a_global_scan_limit_above_100_is_clamped_to_100(make_runtime, downstream, logs):
    def mutate(cfg):
        schedule(cfg)
        cfg["download"] = {"candidateScanLimit": 5000}

    rt = make_runtime(T0, mutate=mutate)
    rt.fire("solo", iso=T0)
    rt.settle()
    assert rt.wiring.ledger.get_cell(SLOT, "cats").candidate_report["bound"] == 100
    assert warnings_of(logs) == {"download.candidateScanLimit": "5000 is above 100; 100 is used"}
    assert len(downstream.requests) == 1


def test_any_other_bad_value_is_still_fatal_and_names_its_field(make_runtime, logs):
    def mutate(cfg):
        schedule(cfg, stallTimeoutMs="nonsense")
        cfg["targets"][0]["minBookmarks"] = "lots"

    rt = make_runtime(T0, mutate=mutate)
    status, body = run_http(rt)
    assert status == 500
    assert "targets[0].minBookmarks" not in json.dumps(body)  # the body never echoes config internals
    errors = [line for line in logs.all() if "targets[0].minBookmarks" in json.dumps(line)]
    assert errors, "the failure is logged with the field it names"
