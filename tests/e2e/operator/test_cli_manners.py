"""The CLI's manners (issue 26): an ordinary mistake is one line naming what to do, never a traceback,
with the documented exit code (0 done, 1 not found / refused / failed, 2 usage); ``--version``;
argument values checked against their choices."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import pixivflow

from pixivflow import __version__
from pixivflow.cli import main

ROOT = Path(__file__).resolve().parents[3]


def _closed_loopback_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "pixivflow.cli", *argv], capture_output=True, text=True,
                          env={**base, **env}, cwd=ROOT, timeout=60)


def test_no_dev_server_running_is_one_line_naming_the_endpoint_and_what_to_start():
    endpoint = f"http://127.0.0.1:{_closed_loopback_port()}"
    run = _cli("slots", "list", "--table", "pixivflow-local-ledgertable",
               env={"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_MAX_ATTEMPTS": "1"})
    assert run.returncode == 1
    assert run.stdout == ""
    assert run.stderr.splitlines() == [
        f"pixivflow slots list: cannot connect to {endpoint}/: is the dev server running? "
        "start it with `make dev` and use the export line its banner prints"]


def test_no_region_is_one_line_and_a_usage_exit(monkeypatch):
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.delenv("AWS_REGION")
    run = pixivflow("slots", "list", "--table", "t", now=0)
    assert (run.code, run.out) == (2, "")
    assert run.err.splitlines() == ["pixivflow slots list: no AWS region: set AWS_DEFAULT_REGION (the variable boto3 "
                                    "reads), or use the dev server's export line"]


def test_a_table_that_is_not_there_is_not_found(monkeypatch):
    from moto import mock_aws

    with mock_aws():
        run = pixivflow("slots", "show", "a@2026-12-01T0800", "--table", "no-such-table", now=0)
    assert (run.code, run.out) == (1, "")
    assert "Traceback" not in run.err and len(run.err.splitlines()) == 1
    assert run.err.startswith("pixivflow slots show: not found: ")
    assert "is --table / LEDGER_TABLE right for this endpoint?" in run.err


def test_a_bad_config_for_the_dev_server_names_every_field_then_exits_1(tmp_path, monkeypatch):
    # `pixivflow dev` quiets the logs and metrics of its own process (setdefault): pin what the rest of
    # this test process runs with, so a Logger or Metrics first made during this call is made as usual
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", os.environ.get("POWERTOOLS_LOG_LEVEL", "INFO"))
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", os.environ.get("POWERTOOLS_METRICS_DISABLED", "false"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("schedules:\n  - id: a\n    cron: 'bad cron'\n  - id: b\n    cron: '0 8 * * *'\n    timezone: Mars/Olympus\n"
                   "targets: []\nsource: {kind: catalog, path: c.json}\n")
    run = pixivflow("dev", "--config", str(bad), "--port", "0", now=0)
    assert (run.code, run.out) == (1, "")
    lines = run.err.splitlines()
    assert lines == [
        "pixivflow dev: error: schedules[0].cron: cron expression must have exactly 5 fields, got 2: 'bad cron'",
        "pixivflow dev: error: schedules[1].timezone: unknown IANA time zone 'Mars/Olympus'",
    ]


def test_a_value_outside_the_choices_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["slots", "list", "--status", "bogus"])
    assert exit_.value.code == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"pixivflow {__version__}\n"


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "2  usage" in out
