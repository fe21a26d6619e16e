"""The test-size guard of tests/conftest.py (issue 20: make test stays inside its budget) judges CPU
in the reference machine's seconds: a small test over its budget fails with the figure, the same
test on a machine that runs Python twice as slowly is within it, and a large test is never judged.
Each case runs a tiny pytest session of its own, under a lowered budget so that it stays cheap."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

BURN = '''
import time

import pytest

import conftest


def burn(seconds):
    began = time.process_time()
    while time.process_time() - began < seconds:
        pass


def test_first():  # the session's first call imports what later calls share: it is not judged
    burn(0.01)


def test_small_over_its_budget():
    conftest._speed[:] = [1.0]  # this machine taken as the reference, whatever it measures
    burn(0.15)


def test_small_over_its_budget_on_a_machine_twice_as_slow():
    conftest._speed[:] = [2.0]  # as machine_factor() would have measured there
    burn(0.15)


@pytest.mark.size("large")  # the size is the point
def test_large():
    burn(0.15)
'''


def _session(tmp_path: Path) -> subprocess.CompletedProcess:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_burn.py").write_text(BURN)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    size(name): small or large\n")
    env = {**os.environ, "PIXIVFLOW_SMALL_CPU_S": "0.1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-p", "no:randomly", "-rA", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)


@pytest.mark.size("large")  # a pytest session of its own in a subprocess (tests/README.md, test sizes)
def test_a_small_test_over_the_scaled_budget_fails_with_its_figure_and_a_large_one_is_not_judged(tmp_path):
    done = _session(tmp_path)
    out = done.stdout
    assert "FAILED test_burn.py::test_small_over_its_budget " in out, out[-3000:]
    assert "over the 0.1 s of a small test on this machine (0.1 s x 1.00, its speed against the reference)" in out, out[-3000:]
    assert "PASSED test_burn.py::test_small_over_its_budget_on_a_machine_twice_as_slow" in out, out[-3000:]
    assert "PASSED test_burn.py::test_large" in out, out[-3000:]
    assert done.returncode == 1
