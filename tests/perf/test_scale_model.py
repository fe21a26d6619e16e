"""``make bench`` section 7 (issue 25): the scale rows are derived from the template and the
measured request model, never typed in: change the template and the row changes. The request
model here is a small stand-in (the smoke run of ``test_report_json`` feeds the measured one)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's report and meter

import report  # noqa: E402
from meter import Call  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

TEN = {"sqs": {"billed_requests": 1.5}}
CALLS = [Call("dynamodb", "PutItem", "admit", "create_slot", wru=3.0, index_wru=1.0),
         Call("dynamodb", "UpdateItem", "claim", "claim_cell", wru=78.0),
         Call("dynamodb", "PutItem", "reserve", "reserve_work", wru=1.0)]
COMPUTE = {"catalog": {"functions": {"execute": {"seconds_per_cell": 0.2}, "deliver": {"seconds_per_cell": 0.1},
                                     "trigger": {"seconds_per_cell": 0.01}}},
           "pixiv": {"functions": {"execute": {"outside_s_per_cell": 5.0}}}}
# a tick with no live slot: 80 requests, 10 ms CPU; with 100: 180 requests, 30 ms CPU (measured shape)
SWEEP = {"live_measured": 100, "vcpu_share": 0.29,
         "per_slot": {"requests": 1.0, "rru": 1.0, "index_rru": 0.05, "cpu_s": 0.0002},
         "fixed": {"requests": 80.0, "rru": 40.0, "index_rru": 8.0, "cpu_s": 0.01}}


def _model(facts):
    return report.scale_model(TEN, CALLS, SWEEP, facts, 10, COMPUTE)


def _limit(model, start):
    [row] = [lim for lim in model["limits"] if lim["limit"].startswith(start)]
    return row


def test_the_sweep_rows_follow_the_template_schedule_and_the_measured_cost():
    base = _model(report.template_facts())
    latency = report.A["latency_ms"]["dynamodb"] / 1000
    slot_s = latency + 0.0002
    live = base["live_slots"]
    assert live == 1_000  # 1,000 admissions/s x ceil(0.2 + 0.1 s a cell)
    tick = _limit(base, "the sweep: a tick's time")
    assert tick["have"] == 60 and abs(tick["need"] - (live * slot_s + 80 * latency + 0.01)) < 1e-9
    walk = _limit(base, "the sweep: one pass")
    assert walk["have"] == 2 * 25 and abs(walk["need"] - live * slot_s) < 1e-9  # 120 s re-drive grace = 2 ticks of 25 s
    assert walk["share"] < 0.5 and tick["share"] < 0.5
    [lease] = [r for r in base["partitions"] if r["key"] == "SWEEP#LEASE"]
    assert abs(lease["wcu_s"] - 2 / 60) < 1e-12

    # a stack whose sweep runs every 5 minutes: a tick falls inside the 120 s wait less than once
    facts = report.template_facts(SweepIntervalMinutes=5)
    assert facts["sweep_every_s"] == 300
    changed = _model(facts)
    walk5 = _limit(changed, "the sweep: one pass")
    assert abs(walk5["have"] - 120 / 300 * 25) < 1e-9 and walk5["share"] > walk["share"]
    [lease5] = [r for r in changed["partitions"] if r["key"] == "SWEEP#LEASE"]
    assert abs(lease5["wcu_s"] - 2 / 300) < 1e-12


def test_the_concurrency_rows_follow_the_template_parameters():
    base = _model(report.template_facts())
    wider = _model(report.template_facts(ExecuteMaxConcurrency=400))
    assert _limit(base, "execute ESM").get("have") == report.template_facts()["functions"]["execute"]["max_concurrency"]
    row = _limit(wider, "execute ESM")
    assert row["have"] == 400 and "ExecuteMaxConcurrency=400" in row["limit"]
    assert abs(wider["template_reaches_cells_per_s"]["execute"] - 400 / 0.2) < 1e-9
    assert wider["template_ceiling"] > base["template_ceiling"]
