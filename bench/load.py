"""``make load``: the compute a delivered cell costs, measured over a long run.

    python bench/load.py [--cells 100000] [--targets 10] [--json bench/load.json]

Fires ``--targets``-target occurrences one after another (a schedule every minute) through the real
handlers on the embedded runtime's in-memory twins until ``--cells`` cells have run, and measures
each Lambda function's own CPU: the handler thread's CPU time with the time inside the twins (AWS)
and inside the work source (Pixiv) taken out, as the meter records it. The work source is a stand-in
for Pixiv's newest-first search (``FreshWorks``): every minute each tag has one new work, so a cell
takes the newest one like a steady-state deployment does, and the run's cost does not grow with its
length. A second, short run with large works gives the CPU per MB a cell stores.

The figures are this machine's CPU seconds. Lambda turns them into billed duration through the
configured memory's share of a vCPU (``compute_model``); AWS and Pixiv time are stated assumptions
(``prices.json``), never measured here: the twins answer in-process.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "shared")]

import scenarios  # noqa: E402
from pixivflow.ports import WorkSource  # noqa: E402

MINUTE_MS = 60_000
# AWS Lambda allocates CPU in proportion to memory: a function at 1,769 MB has the equivalent of
# one full vCPU (AWS Lambda Developer Guide, "Configure Lambda function memory": "At 1,769 MB, a
# function has the equivalent of one vCPU"). Below it a CPU-bound handler runs proportionally
# longer; above it a single-threaded Python handler gains nothing.
ONE_VCPU_MB = 1769
START = "2026-12-01T00:00:00Z"


class FreshWorks(WorkSource):
    """Pixiv's search as a steady-state deployment sees it: for each tag, one new work every minute,
    newest first. Only the queries the bench plans make (``search`` by tag) are answered. Every call
    runs inside ``meter.outside()``: it stands for Pixiv's time, not the function's."""

    PAGE = 30

    def __init__(self, meter: Any, now_ms: Any, file_bytes: int = 36) -> None:
        self._meter = meter
        self._now_ms = now_ms
        self._file_bytes = file_bytes
        self.calls: Counter[str] = Counter()
        self.bytes_served = 0

    def _work(self, tag: str, minute: int) -> Any:
        from pixivflow.adapters.catalog_source import _to_work

        tag_no = int(tag.rsplit("-", 1)[1])
        created = datetime.fromtimestamp(minute * 60, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        raw = {"id": (tag_no + 1) * 100_000_000 + minute, "title": f"Fresh {tag} {minute}", "tags": [{"name": tag}],
               "user": {"id": 9000 + tag_no, "name": f"artist{tag_no}"}, "create_date": created,
               "total_bookmarks": 100, "page_count": 1}
        return _to_work(raw, "illustration")

    def search_page(self, request: Any, cursor: str | None) -> Any:
        from pixivflow.domain.work import Page

        with self._meter.outside():
            self.calls["search_page"] += 1
            if request.mode != "search" or not (request.tag or "").startswith("bench-"):
                return Page(items=())
            newest = self._now_ms() // MINUTE_MS
            offset = int(cursor or 0)
            items = tuple(self._work(request.tag, newest - n) for n in range(offset, offset + self.PAGE))
            return Page(items=items, next_cursor=str(offset + self.PAGE))

    def get_work(self, work_type: str, work_id: str) -> Any:
        with self._meter.outside():
            self.calls["get_work"] += 1
            number = int(work_id)
            return self._work(f"bench-{number // 100_000_000 - 1:02d}", number % 100_000_000)

    def download(self, work: Any) -> list[Any]:
        import hashlib

        from pixivflow.domain.work import ArtifactFile

        with self._meter.outside():
            self.calls["download"] += 1
            seed = hashlib.sha256(work.work_id.encode()).digest()
            content = b"\x89PNG\r\n\x1a\n" + (seed * (self._file_bytes // len(seed) + 1))[: max(0, self._file_bytes - 8)]
            self.bytes_served += len(content)
            return [ArtifactFile(name=f"{work.work_id}_p0.png", content=content, content_type="image/png")]


def _fresh_plan(targets: int):
    def mutate(cfg: dict[str, Any]) -> None:
        for schedule in cfg["schedules"]:
            if schedule["id"] == f"bench-{targets}":
                schedule["cron"] = "* * * * *"
                schedule["timezone"] = "UTC"
    return mutate


def run(cells: int, targets: int = 10, file_bytes: int = 36) -> dict[str, Any]:
    """``cells`` cells (rounded up to whole occurrences) of ``targets``-target slots, one a minute."""
    schedule = f"bench-{targets}"
    fires = math.ceil(cells / targets)
    cpu: Counter[str] = Counter()
    own_wall: Counter[str] = Counter()
    invocations: Counter[str] = Counter()
    records: Counter[str] = Counter()
    requests: dict[str, Counter[str]] = defaultdict(Counter)
    delivered = 0
    began = time.monotonic()
    began_cpu = time.process_time()
    with scenarios.bench_runtime(backend="twin", mutate=_fresh_plan(targets), start=START) as bench:
        source = FreshWorks(bench.meter, bench.rt.clock.now_ms, file_bytes)
        bench.rt.wiring.source = source

        def next_occurrence() -> str:
            """The next whole minute (the schedule fires every minute): settling may have moved the
            clock on by a few, and a fire is never late."""
            at = (bench.rt.clock.now_ms() // MINUTE_MS + 1) * MINUTE_MS
            bench.rt.clock.set(at)
            return datetime.fromtimestamp(at / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

        bench.fire(schedule, next_occurrence())  # warm-up: lazily imported modules are cold-start time
        bench.settle()
        source.calls.clear()
        source.bytes_served = 0
        for _ in range(fires):
            iso = next_occurrence()
            with bench.measure() as window:
                result = bench.fire(schedule, iso)
                bench.settle()
            assert result.get("sent") == targets, result
            state = bench.rt.wiring.ledger.load(result["slot_id"])
            assert state is not None and state.slot.status == "success", (result["slot_id"], state and state.slot.status)
            delivered += sum(1 for c in state.snapshot_cells() if c.status == "submitted")
            for inv in window.invocations:
                cpu[inv.function] += max(0.0, inv.cpu_seconds - inv.outside_cpu_seconds)
                own_wall[inv.function] += max(0.0, inv.seconds - inv.aws_seconds)
                invocations[inv.function] += 1
                records[inv.function] += inv.records
            for call in window.calls:
                if call.function and not (call.service == "sqs" and call.step in ("esm", "idle")):
                    requests[call.function][f"{call.service}:{call.op}"] += 1
    ran = fires * targets
    return {
        "cells": ran, "delivered": delivered, "targets_per_slot": targets, "occurrences": fires, "file_bytes": file_bytes,
        "elapsed_s": time.monotonic() - began, "process_cpu_s": time.process_time() - began_cpu,
        "functions": {fn: {"invocations": invocations[fn], "records": records[fn], "own_cpu_s": cpu[fn],
                           "own_wall_s": own_wall[fn], "cpu_ms_per_cell": cpu[fn] / ran * 1000,
                           "cpu_ms_per_invocation": cpu[fn] / max(1, invocations[fn]) * 1000,
                           "requests_per_cell": {k: v / ran for k, v in sorted(requests[fn].items())}}
                      for fn in sorted(invocations)},
        "source_calls_per_cell": {k: v / ran for k, v in sorted(source.calls.items())},
        "source_bytes_per_cell": source.bytes_served / ran,
    }


def measure(cells: int, targets: int = 10, large_cells: int = 60, large_bytes: int = 2_000_000) -> dict[str, Any]:
    """The long run, then a short one with ``large_bytes`` works: the difference per MB is the CPU a
    cell spends on the bytes it stores (hashing, the S3 request), measured rather than assumed."""
    small = run(cells, targets)
    large = run(large_cells, targets, file_bytes=large_bytes)
    small_short = run(large_cells, targets)  # the same length as the large run: the per-MB slope compares like with like
    mb = (large_bytes - small_short["file_bytes"]) / 1e6
    per_mb = {fn: max(0.0, (large["functions"][fn]["cpu_ms_per_cell"] - small_short["functions"][fn]["cpu_ms_per_cell"]) / mb)
              for fn in large["functions"] if fn in small_short["functions"]}
    return {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "run": small, "large_run": large, "short_run": small_short, "cpu_ms_per_mb_per_cell": per_mb,
            "target_cells": 100_000}


def compute_model(load: dict[str, Any], facts: dict[str, Any], a: dict[str, Any], *, source: str = "pixiv",
                  work_bytes: float | None = None) -> dict[str, Any]:
    """Billed Lambda time per cell, function by function, from the measured CPU (scaled to the
    template's memory through its vCPU share), the measured requests per cell at the stated AWS
    latencies, and (execute) the stated Pixiv time per request and per MB; then GB-s per cell and
    the cells/s each function reaches at its event source's MaximumConcurrency."""
    lat = a["latency_ms"]
    px = a["pixiv_seconds_per_cell"]
    run_ = load["run"]
    size = float(work_bytes if work_bytes is not None else a["work_bytes"]["illustration_original"])
    out: dict[str, Any] = {}
    for fn, m in run_["functions"].items():
        spec = facts["functions"].get(fn, {})
        memory = int(spec.get("memory_mb", 512))
        share = min(1.0, memory / ONE_VCPU_MB)
        cpu_s = (m["cpu_ms_per_cell"] + load["cpu_ms_per_mb_per_cell"].get(fn, 0.0) * size / 1e6) / 1000
        compute_s = cpu_s / share
        aws_s = 0.0
        for key, n in m["requests_per_cell"].items():
            service, op = key.split(":", 1)
            if service == "dynamodb":
                aws_s += n * lat["dynamodb"] / 1000
            elif service == "sqs":
                aws_s += n * lat["sqs"] / 1000
            elif service == "s3":
                aws_s += n * (lat["s3_get"] if op in ("GetObject", "HeadObject") else lat["s3_put"]) / 1000
        if fn == "execute" and spec:
            aws_s += size / 1e6 / a["s3_mb_per_s"]  # the work's bytes uploaded to S3
        outside_s = 0.0
        if fn == "execute" and source == "pixiv":
            # the Pixiv requests the run counted (search pages, downloads), each at the stated pacing
            requests = sum(run_.get("source_calls_per_cell", {}).values()) or px["requests"]
            outside_s = requests * px["pacing_s"] + size / 1e6 / px["mb_per_s"]
        elif fn == "deliver":
            outside_s = lat["route_post"] / 1000 * (m["records"] / max(1, run_["cells"]))
        seconds = compute_s + aws_s + outside_s
        per_record = seconds * run_["cells"] / max(1, m["records"]) if m["records"] else None
        concurrency = spec.get("max_concurrency")
        out[fn] = {"memory_mb": memory, "vcpu_share": share, "cpu_s_per_cell": cpu_s, "compute_s_per_cell": compute_s,
                   "aws_s_per_cell": aws_s, "outside_s_per_cell": outside_s, "seconds_per_cell": seconds,
                   "gb_s_per_cell": seconds * memory / 1024, "max_concurrency": concurrency,
                   "cells_per_s": (concurrency / seconds if concurrency and seconds else None),
                   "seconds_per_record": per_record}
    return {"source": source, "work_bytes": size, "functions": out,
            "gb_s_per_cell": sum(f["gb_s_per_cell"] for f in out.values()),
            "cells_per_s": min((f["cells_per_s"] for f in out.values() if f["cells_per_s"]), default=None)}


def main(argv: list[str] | None = None) -> int:
    scenarios_env()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument("--json", default=str(HERE / "load.json"))
    args = parser.parse_args(argv)
    result = measure(args.cells, args.targets)
    Path(args.json).write_text(json.dumps(result, indent=1))
    r = result["run"]
    print(f"make load: {r['cells']:,} cells ({r['occurrences']:,} occurrences of {r['targets_per_slot']} targets), "
          f"{r['delivered']:,} delivered, {r['elapsed_s']:.0f} s")
    for fn, m in r["functions"].items():
        print(f"  {fn:12s} own CPU {m['cpu_ms_per_cell']:7.2f} ms a cell ({m['invocations']:,} invocations, "
              f"+{result['cpu_ms_per_mb_per_cell'].get(fn, 0):.2f} ms per MB stored)")
    print(f"(JSON: {args.json}; make bench reads it)")
    return 0


def scenarios_env() -> None:
    import report

    report._offline_aws_env()


if __name__ == "__main__":
    sys.exit(main())
