"""`pixivflow demo` (`make run`): several simulated days of the demo schedules on the embedded runtime.

Everything runs through the real Lambda handlers on moto, with a loopback downstream endpoint
and a virtual clock. Two faults are injected so the liveness rules show up in the table:
the `noon-flaky` schedule's only works fail transiently (its cell retries until the 10 min
schedule timeout ends it with `execution_timeout`), and on the second day the execution
consumer is down for 40 minutes during the evening occurrence (the sweep ends that slot with
`queued_too_long`). Exit status is non-zero if any slot is not terminal or any work was
delivered twice.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, TextIO

import yaml

from ..clock import VirtualClock
from ..domain.cells import TERMINAL_SLOT_STATES
from ..domain.occurrence import fires_between
from .downstream import Downstream
from .harness import EmbeddedRuntime

DEMO_DIR = Path(__file__).resolve().parents[3] / "events" / "demo"
OUTAGE_SCHEDULE = "evening-berlin"
OUTAGE_MS = 40 * 60_000


@contextmanager
def _env_var(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%MZ")


def run_demo(days: int = 3, start: str = "2026-12-01T00:00:00Z", *, seed: int = 7, outage: bool = True,
             config_dir: Path | None = None, out: TextIO = sys.stdout, source: str = "catalog", as_json: bool = False) -> int:
    """The demo's run: a line per occurrence as it happens, then the summary (text on ``out``), or with
    ``as_json`` nothing until the end and then one JSON document of the same facts."""
    config_dir = config_dir or DEMO_DIR
    start_ms = int(datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp() * 1000)
    end_ms = start_ms + days * 86_400_000
    doc: dict[str, Any] = {"days": days, "start": _iso(start_ms), "source": source, "faults": [], "occurrences": []}

    def say(line: str) -> None:
        if not as_json:
            print(line, file=out, flush=True)

    with ExitStack() as stack:
        downstream = stack.enter_context(Downstream())
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="pixivflow-demo-"))
        cfg = yaml.safe_load((config_dir / "config.yaml").read_text())
        for route in cfg["delivery"]["targets"].values():
            route["url"] = downstream.url
        cfg["source"]["path"] = str((config_dir / cfg["source"]["path"]).resolve())
        clock = VirtualClock(start_ms)
        overrides: dict[str, Any] = {}
        if source == "fake-pixiv":
            # The real Pixiv client against the loopback fake: OAuth, App API, images.
            from .fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv

            fake = stack.enter_context(FakePixiv())
            cfg["source"] = {"kind": "pixiv", "baseUrls": fake.base_urls}
            cfg["pixiv"] = {"refreshToken": "${PIXIVFLOW_DEMO_REFRESH_TOKEN}"}
            stack.enter_context(_env_var("PIXIVFLOW_DEMO_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN))
            overrides["sleep"] = lambda seconds: clock.advance(int(seconds * 1000))  # pacing passes virtual time
        config_path = Path(tmp) / "config.yaml"
        config_path.write_text(yaml.safe_dump(cfg))
        with EmbeddedRuntime(config_path, clock, tokens={"trigger": "demo-trigger-token", "jobs": "demo-jobs-token"}, seed=seed,
                             overrides=overrides) as rt:
            config = rt.wiring.config
            enabled = [s for s in config.schedules if s.enabled]
            doc.update(schedules=len(enabled), targets=len(config.targets))
            say(f"PixivFlow demo: {days} simulated days from {_iso(start_ms)}, {len(enabled)} schedules, "
                f"{len(config.targets)} targets, {source} source, downstream {downstream.url}")
            if outage:
                fires = [f for s in enabled if s.id == OUTAGE_SCHEDULE for f in fires_between(s.cron, s.timezone, start_ms - 1, end_ms)]
                if len(fires) >= 2:
                    rt.outages.append(("execute", fires[1], fires[1] + OUTAGE_MS))
                    doc["faults"].append({"consumer": "execute", "from": _iso(fires[1]), "minutes": OUTAGE_MS // 60_000})
                    say(f"  (fault) execution consumer down {_iso(fires[1])} for 40 min")

            def progress(schedule_id: str, at: int, result: Any) -> None:
                slot_id = result.get("slot_id") if isinstance(result, dict) else None
                state = rt.wiring.ledger.load(slot_id) if slot_id else None
                if state is None:
                    doc["occurrences"].append({"at": _iso(at), "scheduleId": schedule_id, "refused": str(result)})
                    say(f"  {_iso(at)}  {schedule_id:<16} refused: {result}")
                    return
                cells = Counter(c.status for c in state.snapshot_cells())
                reasons = sorted({c.terminal_reason_code for c in state.snapshot_cells() if c.terminal_reason_code})
                doc["occurrences"].append({"at": _iso(at), "scheduleId": schedule_id, "slotId": slot_id,
                                           "status": state.slot.status, "cells": dict(sorted(cells.items())), "reasons": reasons})
                line = ", ".join(f"{n} {s}" for s, n in sorted(cells.items()))
                extra = f"  [{', '.join(reasons)}]" if reasons else ""
                say(f"  {_iso(at)}  {slot_id:<36} {state.slot.status:<8} {line}{extra}")

            rt.run_schedules(end_ms, on_fire=progress)
            rt.settle()
            doc.update(_summary(rt, downstream))
    if as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True), file=out)
    else:
        _print_summary(doc, out)
    return 0 if doc["ok"] else 1


def _summary(rt: EmbeddedRuntime, downstream: Downstream) -> dict[str, Any]:
    """What the demo found: counts of slots, cells, terminal reasons and ACK kinds, the downstream's
    tally, and each check that failed (``problems``; ``ok`` when there is none)."""
    ledger = rt.wiring.ledger
    states = [s for s in (ledger.load(i) for i in ledger.slot_ids()) if s is not None]
    slots = Counter(s.slot.status for s in states)
    cells = Counter(c.status for s in states for c in s.snapshot_cells())
    reasons = Counter(c.terminal_reason_code for s in states for c in s.snapshot_cells() if c.terminal_reason_code)
    acks = Counter(i.ack_kind or "unsettled" for s in states for i in s.intents if i.status != "pending")
    pending = sum(1 for s in states for i in s.intents if i.status == "pending")
    records = downstream.records
    by_work = Counter((r.get("work_id"), key.split(":")[1]) for key, r in records.items())
    per_cell = Counter(tuple(key.split(":")[4:6]) for key in records)
    twice = [k for k, n in by_work.items() if n > 1]
    single_twice = [k for k, n in per_cell.items() if n > 1 and _single(rt, k[1])]
    open_slots = [s.slot.slot_id for s in states if s.slot.status not in TERMINAL_SLOT_STATES]
    submitted = cells.get("submitted", 0)
    problems = []
    if open_slots:
        problems.append(f"{len(open_slots)} slot(s) not terminal: {', '.join(open_slots)}")
    if twice or single_twice:
        problems.append(f"delivered twice: {twice or single_twice}")
    if len(records) != submitted + cells.get("duplicate", 0) and not any(_multi(rt, s) for s in states):
        problems.append(f"{len(records)} downstream records but {submitted} submitted cells")
    return {"slots": _counts(slots), "cells": _counts(cells), "reasons": _counts(reasons), "deliveries": _counts(acks),
            "pendingDeliveries": pending, "downstream": {"requests": len(downstream.requests), "records": len(records)},
            "submittedCells": submitted, "problems": problems, "ok": not problems}


def _print_summary(doc: dict[str, Any], out: TextIO) -> None:
    pending = doc["pendingDeliveries"]
    print("", file=out)
    print("slots      " + _row(doc["slots"]), file=out)
    print("cells      " + _row(doc["cells"]), file=out)
    print("reasons    " + (_row(doc["reasons"]) or "-"), file=out)
    print("deliveries " + (_row(doc["deliveries"]) or "-") + (f"  (still pending: {pending})" if pending else ""), file=out)
    print(f"downstream {doc['downstream']['requests']} requests, {doc['downstream']['records']} records; "
          f"submitted cells {doc['submittedCells']}", file=out)
    for problem in doc["problems"]:
        print(f"FAIL: {problem}", file=out)
    print("OK: every slot terminal, every work delivered once" if doc["ok"] else "demo found a problem", file=out)


def _counts(counter: Counter) -> dict[str, int]:
    """A counter as a plain mapping, the most frequent first (ties by name): the order the text shows."""
    return {str(k): v for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))}


def _row(counts: dict[str, int]) -> str:
    return "  ".join(f"{k} {v}" for k, v in counts.items())


def _single(rt: EmbeddedRuntime, target_id: str) -> bool:
    target = rt.wiring.config.target(target_id)
    return bool(target and target.single_work)


def _multi(rt: EmbeddedRuntime, state) -> bool:
    return any(not _single(rt, c.target_id) for c in state.snapshot_cells())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(run_demo())
