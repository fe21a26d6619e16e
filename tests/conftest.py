"""Shared fixtures: the demo config pointed at a loopback downstream, and the embedded runtime on moto."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "events" / "demo"
# The project's own copy of the published Workflow Protocol v1 (tests/contract/README.md): a clone of
# the project alone passes, nothing beside the checkout is read.
PROTOCOL = ROOT / "tests" / "contract"
TRIGGER_TOKEN = "trigger-secret-0123456789"
# The end-to-end suites run on the in-memory twins by default (tests/contract pins them to moto);
# PIXIVFLOW_TEST_BACKEND=moto runs the same suites on moto.
TEST_BACKEND = __import__("os").environ.get("PIXIVFLOW_TEST_BACKEND", "twin")
JOBS_TOKEN = "jobs-secret-9876543210"


def claim(ledger, slot_id: str, target_id: str, owner: str, now_ms: int, ttl_ms: int = 180_000):
    """A live executor's claim of a cell, made the way ``execute_cell`` makes it: a cell nobody
    claimed yet has no item (admission writes the slot alone), and its first claim writes it."""
    state = ledger.load(slot_id)
    cell = state.cell(target_id) if state is not None else None
    return ledger.claim_cell(slot_id, target_id, owner, now_ms, ttl_ms,
                             unwritten=cell if cell is not None and cell.virtual else None)


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp() * 1000)


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # No test talks to AWS: moto intercepts before botocore sends, the twins never send. A request
    # that gets this far came from a client made outside both (use pixivflow.aws.client).
    import botocore.httpsession

    def refuse(self, request):
        raise AssertionError(f"a test sent a real AWS request to {request.url}: make clients with pixivflow.aws.client")

    monkeypatch.setattr(botocore.httpsession.URLLib3Session, "send", refuse)


def write_config(tmp_path: Path, downstream_url: str, mutate=None, catalog: dict | None = None) -> Path:
    """The demo config with its route pointed at ``downstream_url``; ``mutate(cfg)`` may edit it."""
    cfg = yaml.safe_load((DEMO / "config.yaml").read_text())
    cfg["delivery"]["targets"]["review"]["url"] = downstream_url
    if catalog is not None:
        path = tmp_path / "catalog.json"
        path.write_text(json.dumps(catalog))
        cfg["source"]["path"] = str(path)
    else:
        cfg["source"]["path"] = str(DEMO / "catalog.json")
    if mutate:
        mutate(cfg)
    out = tmp_path / "config.yaml"
    out.write_text(yaml.safe_dump(cfg))
    return out


@pytest.fixture
def downstream():
    from pixivflow.local.downstream import Downstream

    with Downstream() as d:
        yield d


@pytest.fixture
def make_runtime(tmp_path, downstream):
    """Factory: ``make_runtime(start_iso, mutate=None, catalog=None, tokens=...)`` -> a started EmbeddedRuntime."""
    from pixivflow.clock import VirtualClock
    from pixivflow.local.harness import EmbeddedRuntime

    started = []

    def factory(start_iso: str = "2026-11-30T22:59:00Z", *, mutate=None, catalog=None, tokens=None, overrides=None,
                backend=None, seed=0, index_lag_ms=0):
        config = write_config(tmp_path, downstream.url, mutate, catalog)
        clock = VirtualClock(ms(start_iso))
        tokens = {"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN} if tokens is None else tokens
        rt = EmbeddedRuntime(config, clock, tokens=tokens, overrides=overrides, backend=backend or TEST_BACKEND,
                            seed=seed, index_lag_ms=index_lag_ms)
        rt.__enter__()
        started.append(rt)
        return rt

    yield factory
    for rt in reversed(started):
        rt.__exit__(None, None, None)


OUTCOME_MESSAGE = "Schedule occurrence reached a terminal outcome"


class _CurrentStdout:
    """Writes to whatever ``sys.stdout`` is now: the Powertools handler keeps the stream it was
    created with (the stdout of whichever test imported the package first), so capsys alone
    would never see later lines."""

    def write(self, text):
        import sys

        return sys.stdout.write(text)

    def flush(self):
        import sys

        sys.stdout.flush()


class LogCapture:
    """The JSON log lines Powertools writes to stdout (EMF metric blobs excluded)."""

    def __init__(self, capsys):
        self._capsys = capsys
        self._lines: list[dict] = []

    def __call__(self) -> tuple[list[dict], str]:
        """Lines written since the last read, and the raw text (for scans of everything printed)."""
        out = self._capsys.readouterr().out
        fresh = []
        for raw in out.splitlines():
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {"unparsed": raw}
            if isinstance(parsed, dict) and "_aws" not in parsed:
                fresh.append(parsed)
        self._lines.extend(fresh)
        return fresh, out

    def all(self) -> list[dict]:
        self()
        return self._lines

    def events(self, name: str) -> list[dict]:
        return [line for line in self.all() if line.get("event") == name]

    def outcomes(self, slot_id: str, keys: tuple[str, ...] | None = None) -> list[dict]:
        """The logged ``schedule.outcome`` objects of one slot (optionally only ``keys``)."""
        found = [line for line in self.all() if line.get("message") == OUTCOME_MESSAGE and line.get("slot_id") == slot_id]
        return [{k: line[k] for k in keys if k in line} for line in found] if keys else found


@pytest.fixture
def logs(capsys):
    from pixivflow.observability import logger

    handler = logger.registered_handler
    previous = handler.stream
    handler.stream = _CurrentStdout()
    yield LogCapture(capsys)
    handler.stream = previous
