"""``make bench`` writes what it prints as JSON (issue 25): the three monthly profiles, the cold start
that counts (INIT + first invocation against the bare function) and the compute measured over a run,
read back from the file a cheap smoke run writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import urlsplit

import botocore.httpsession
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's meter and scenarios

import report  # noqa: E402

_SEND = botocore.httpsession.URLLib3Session.send  # taken before conftest's refusal is patched in


def _loopback_only(self, request):
    """The cold start provisions the moto server it runs on 127.0.0.1: loopback only, still."""
    assert urlsplit(request.url).hostname == "127.0.0.1", f"a non-loopback AWS request: {request.url}"
    return _SEND(self, request)


@pytest.mark.size("large")  # a whole smoke run of make bench, cold-start probes in subprocesses included
def test_the_report_json_carries_the_three_monthly_profiles_the_cold_start_and_the_measured_compute(tmp_path, capsys,
                                                                                                   monkeypatch):
    monkeypatch.setattr(botocore.httpsession.URLLib3Session, "send", _loopback_only)
    out = tmp_path / "report.json"
    assert report.main(["--smoke", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())

    profiles = {b["key"]: b for b in data["monthly"]["profiles"]}
    assert set(profiles) == {"a", "b", "c"}
    for bill in profiles.values():
        assert bill["total"] > 0 and bill["cells_per_month"] > 0 and bill["lines"]
        assert bill["total"] == sum(line["usd"] for line in bill["lines"] if line["usd"] is not None)
    assert f"${profiles['a']['total']:.2f}" in printed

    cs = data["cold_start"]
    bare = cs["bare_function"]
    assert bare["init_first_ms"] > bare["import_ms"] > 0 and bare["first_ms"] > 0
    trigger = cs["handlers"]["trigger"]
    # INIT + first invocation, each measured, as a ratio to the bare function's INIT + first call
    assert trigger["init_ms"] > 0 and trigger["first_invocation_ms"] > 0
    assert abs(trigger["init_first_ratio"] - trigger["init_first_ms"] / bare["init_first_ms"]) < 1e-9
    assert cs["worst_ratio"] == trigger["init_first_ratio"]
    assert f"{cs['worst_ratio']:.2f}x" in printed
    # the same span in the probe's CPU, beside the wall clock (a loaded machine stretches the latter)
    assert 0 < trigger["init_first_cpu_ms"] and 0 < bare["init_first_cpu_ms"] <= bare["init_first_ms"] * 1.05
    assert abs(trigger["init_first_cpu_ratio"] - trigger["init_first_cpu_ms"] / bare["init_first_cpu_ms"]) < 1e-9
    assert f"{cs['worst_cpu_ratio']:.2f}x CPU" in printed

    # the compute is the measured CPU of the run, scaled to the template's memory
    load = data["load"]
    assert load["cells"] == 20 and load["target_cells"] == 100_000
    execute = data["compute"]["catalog"]["functions"]["execute"]
    assert load["functions"]["execute"]["cpu_ms_per_cell"] > 0
    assert execute["memory_mb"] == data["template"]["functions"]["execute"]["memory_mb"]
    assert execute["compute_s_per_cell"] > execute["cpu_s_per_cell"]  # 512 MB is under one vCPU
    pixiv = data["compute"]["pixiv"]["functions"]["execute"]
    assert pixiv["seconds_per_cell"] > execute["seconds_per_cell"]  # the Pixiv wait is billed time

    # the scale follows the template's knobs and the measured seconds a cell, not constants
    sc = data["scale"]
    execute_fn = data["template"]["functions"]["execute"]
    assert execute_fn["max_concurrency_parameter"] == "ExecuteMaxConcurrency"
    assert abs(sc["template_reaches_cells_per_s"]["execute"] - execute_fn["max_concurrency"] / execute["seconds_per_cell"]) < 1e-6
    assert sc["knobs_for_rate"]["ExecuteMaxConcurrency"] == min(1000, -(-10_000 * execute["seconds_per_cell"] // 1))
    assert "Concurrent executions" in sc["first_binding_aws_limit"]
    # the sweep's rows come from a measured tick over live slots (issue 25): one read a healthy slot,
    # a tick under half its timeout and a pass inside the rules' shortest wait at 1,000 admissions/s
    sweep = sc["sweep"]
    assert sweep["measured_live"] == 20 and sweep["slot_ms"] > 0 and sweep["timeout_s"] == data["template"]["functions"]["stall_sweep"]["timeout_s"]
    rows = {lim["limit"].split(" (")[0]: lim for lim in sc["limits"] if lim["limit"].startswith("the sweep")}
    assert set(rows) == {"the sweep: a tick's time", "the sweep: one pass over the live slots"}
    assert all(0 < row["share"] < 0.5 for row in rows.values())
    assert f"{sweep['slot_ms']:.1f} ms" in printed

    # the table's steady state and the always-free tiers, beside the list-price bill
    table = data["monthly"]["steady_state_table"]
    assert set(table) == {"a", "b", "c"} and table["c"]["items"] > table["b"]["items"] > table["a"]["items"] > 0
    assert profiles["a"]["total_with_free_tier"] < profiles["a"]["total"]
