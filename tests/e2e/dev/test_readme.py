"""The README's first five minutes, verbatim (issue 26): every fenced block the README marks
``sh readme-test`` runs, in order, in one bash session per block (``set -euo pipefail``), against a
fresh ``pixivflow dev --demo`` started as a user starts it, with the working directory the user
would have (where ``.pixivflow-dev.env`` is written). A command that fails fails the test, so the
README cannot drift from what the commands do.

The dev server and the blocks talk only to 127.0.0.1 (the demo's fake Pixiv and loopback review
endpoint); waits are the CLI's own ``--wait`` polls, bounded."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FENCE = re.compile(r"^```sh readme-test\n(.*?)^```$", re.M | re.S)


def readme_blocks() -> list[str]:
    return FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dev_server(tmp_path):
    env_file = tmp_path / ".pixivflow-dev.env"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PIXIVFLOW_", "TRIGGER_", "JOBS_"))}
    proc = subprocess.Popen([sys.executable, "-m", "pixivflow.cli", "dev", "--demo", "--port", str(_free_port()),
                             "--env-file", str(env_file)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not env_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("pixivflow dev did not start:\n" + (proc.stdout.read() if proc.poll() is not None else ""))
            time.sleep(0.1)
        yield tmp_path, env
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung stop is a failure of its own
            proc.kill()
            raise
    assert not env_file.exists(), "the env file outlived the dev server"


def test_the_readme_marks_its_runnable_blocks():
    blocks = readme_blocks()
    assert blocks, "no ```sh readme-test block in README.md"
    assert any("source .pixivflow-dev.env" in b for b in blocks)


@pytest.mark.size("large")  # a dev server and every README block (tests/README.md, test sizes)
def test_every_readme_test_block_runs_verbatim_against_the_dev_server(dev_server):
    cwd, env = dev_server
    outputs = []
    for block in readme_blocks():
        run = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block], cwd=cwd, env=env, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, f"README block failed ({run.returncode}):\n{block}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
        outputs.append(run.stdout)
    text = "\n".join(outputs)
    # what the README's comments promise a newcomer sees
    assert re.search(r"dev-every-5-min@\S+\s+success\s+http\s+\S+\s+1 submitted", text), text
    assert re.search(r"^job morning-tokyo@manual-try-1$", text, re.M), text
    assert re.search(r"^  status\s+succeeded$", text, re.M), text
    assert re.search(r"^  result\s+1 candidate\(s\): illustration \d+", text, re.M), text
    assert re.search(r"^schedule dev-every-5-min paused at \S+Z: its fires are refused", text, re.M), text
    assert re.search(r"^schedule dev-every-5-min resumed at \S+Z: it runs again from its next fire$", text, re.M), text
    assert re.search(r"^\d+ row\(s\): .*\d+ done$", text, re.M), text  # outbox list's count line
