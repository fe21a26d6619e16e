"""The consumers are in the seeded world (issue 20 "everything the product does is in the
scenarios"): a few ``make sim`` seeds, in a subprocess of their own like ``test_sim_seeds``, whose
summary shows jobs admitted and replayed, callbacks sent through every receiver behaviour,
cancels, and no violation of the §13 and job rules (``oracle_jobs``)."""

from __future__ import annotations

import pytest

import os
import re
import subprocess
import sys
from pathlib import Path

SIM = Path(__file__).resolve().parent / "sim.py"
DROP = ("POWERTOOLS_", "LOG_LEVEL", "AWS_", "PIXIV", "TRIGGER_", "JOBS_", "LEDGER_", "EXECUTION_", "OUTBOX_", "ARTIFACT_")


@pytest.mark.size("large")  # four simulation seeds with the jobs world (tests/README.md, test sizes)
def test_a_few_seeds_drive_jobs_callbacks_cancels_and_acks_through_the_real_handlers():
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROP)}
    done = subprocess.run([sys.executable, str(SIM), "--seeds", "4", "--first", "1", "--jobs", "1"],
                          capture_output=True, text=True, timeout=600, env=env)
    summary = next((line for line in done.stdout.splitlines() if line.startswith("sim: seeds=")), "")
    assert done.returncode == 0 and "violations=0" in summary, done.stdout[-3000:] + done.stderr[-2000:]
    counts = {k: int(v) for k, v in re.findall(r"([a-z_.0-9]+)=(\d+)", summary.split("|", 1)[1])}
    assert counts.get("job.http.post.202", 0) >= 4  # every seed admits jobs ...
    assert counts.get("job.http.post.200", 0) >= 1  # ... and replays a key (duplicate POSTs, acks, cancels)
    assert counts.get("job.http.get.200", 0) >= 4  # event pages read
    assert counts.get("callback.ok", 0) >= 4 and counts.get("callback.down", 0) >= 8  # a receiver down for good
    assert sum(v for k, v in counts.items() if k.startswith("callback.") and k not in ("callback.ok", "callback.down")) >= 1
