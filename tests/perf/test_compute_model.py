"""The compute a cell costs (issue 25): the long run's CPU per cell stretched by the configured
memory's share of a vCPU (1 vCPU at 1,769 MB), plus the requests it counted at the stated latencies
and the stated Pixiv time; GB-s per cell and cells/s at the template's MaximumConcurrency follow."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's meter and scenarios

import load  # noqa: E402
import report  # noqa: E402

RUN = {"run": {"cells": 1000, "functions": {
    "execute": {"cpu_ms_per_cell": 20.0, "records": 1000, "requests_per_cell": {"dynamodb:PutItem": 2.0, "s3:PutObject": 1.0}},
    "deliver": {"cpu_ms_per_cell": 10.0, "records": 1000, "requests_per_cell": {"dynamodb:UpdateItem": 3.0}}},
    "source_calls_per_cell": {"search_page": 4.0, "download": 1.0}},
    "cpu_ms_per_mb_per_cell": {"execute": 1.0}}


@pytest.mark.parametrize("memory, stretch", [(512, 1769 / 512), (1769, 1.0), (3008, 1.0)])
def test_cpu_is_stretched_by_the_memory_share_of_a_vcpu_and_never_shrunk(memory, stretch):
    facts = report.template_facts(ExecuteMemorySize=memory)
    model = load.compute_model(RUN, facts, report.A, source="catalog", work_bytes=3_000_000)
    ex = model["functions"]["execute"]
    assert ex["memory_mb"] == memory
    cpu_s = (20.0 + 1.0 * 3) / 1000  # the run's CPU + its CPU per MB for a 3 MB work
    assert ex["compute_s_per_cell"] == pytest.approx(cpu_s * stretch)
    lat = report.A["latency_ms"]
    assert ex["aws_s_per_cell"] == pytest.approx((2 * lat["dynamodb"] + lat["s3_put"]) / 1000 + 3 / report.A["s3_mb_per_s"])
    assert ex["outside_s_per_cell"] == 0  # the catalogue source: no Pixiv time
    assert ex["gb_s_per_cell"] == pytest.approx(ex["seconds_per_cell"] * memory / 1024)
    assert ex["cells_per_s"] == pytest.approx(facts["functions"]["execute"]["max_concurrency"] / ex["seconds_per_cell"])


def test_the_pixiv_source_adds_its_stated_time_per_request_and_per_mb_and_the_knob_moves_the_rate():
    px = report.A["pixiv_seconds_per_cell"]
    catalog = load.compute_model(RUN, report.template_facts(), report.A, source="catalog", work_bytes=3_000_000)
    pixiv = load.compute_model(RUN, report.template_facts(), report.A, source="pixiv", work_bytes=3_000_000)
    wait = (4 + 1) * px["pacing_s"] + 3 / px["mb_per_s"]  # the run's counted requests, at the stated pacing
    assert pixiv["functions"]["execute"]["seconds_per_cell"] == pytest.approx(catalog["functions"]["execute"]["seconds_per_cell"] + wait)
    wider = load.compute_model(RUN, report.template_facts(ExecuteMaxConcurrency=400), report.A, source="catalog",
                               work_bytes=3_000_000)
    assert wider["functions"]["execute"]["cells_per_s"] == pytest.approx(40 * catalog["functions"]["execute"]["cells_per_s"])
