"""Where the CLI's audit records go: each command that acts (``outbox redrive``, ``schedules pause``,
``schedules resume``, ``jobs reindex``; ``schedules sync`` in ``tests/integration/test_sync_cli.py``)
records who did what and when.

* ``--json``: stdout is exactly one JSON document, the command's view with the records as its
  ``audit`` list; stderr stays empty on success (also with ``--verbose``).
* human output: the text on stdout and nothing on stderr; ``--verbose`` adds each record on stderr
  as one JSON line.
* a refused action: the error is one line on stderr in every mode (exit 1); the refusal's record
  is in the ``--json`` document, or on stderr before the error with ``--verbose``.

The operator is ``$USER``; the timestamp is the command's clock."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
from support.builders import SUMMARY_NOTICE, dead_notification
from support.cli import T0_ISO, pixivflow

from pixivflow.services.inspection import iso

OPERATOR = "ops-alice"
NOTIFICATION = SUMMARY_NOTICE


@pytest.fixture(autouse=True)
def _operator(monkeypatch):
    monkeypatch.setenv("USER", OPERATOR)


def line(record: dict[str, Any]) -> str:
    """One audit record as the operator reads it on stderr: one JSON line, keys sorted."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n"


def record(event: str, at: int, level: str = "INFO", **fields: Any) -> dict[str, Any]:
    return {"level": level, "event": event, "timestamp": iso(at), "operator": OPERATOR, **fields}


def _pause(rt, monkeypatch) -> tuple[list[str], dict[str, Any], str, dict[str, Any]]:
    at = rt.clock.now_ms()
    return (["schedules", "pause", "morning-tokyo"],
            record("schedule.paused", at, schedule_id="morning-tokyo", paused_at=at),
            f"schedule morning-tokyo paused at {iso(at)}: its fires are refused and not counted as missed until it is resumed\n",
            {"scheduleId": "morning-tokyo", "paused": True, "pausedAt": at, "resumedAt": None, "by": OPERATOR})


def _resume(rt, monkeypatch) -> tuple[list[str], dict[str, Any], str, dict[str, Any]]:
    paused_at = rt.clock.now_ms()
    assert pixivflow("schedules", "pause", "morning-tokyo", now=paused_at).code == 0
    at = paused_at + 60_000
    rt.clock.set(at)
    return (["schedules", "resume", "morning-tokyo"],
            record("schedule.resumed", at, schedule_id="morning-tokyo", paused_at=paused_at, resumed_at=at),
            f"schedule morning-tokyo resumed at {iso(at)}: it runs again from its next fire\n",
            {"scheduleId": "morning-tokyo", "paused": False, "pausedAt": paused_at, "resumedAt": at, "by": OPERATOR})


def _redrive(rt, monkeypatch) -> tuple[list[str], dict[str, Any], str, dict[str, Any]]:
    at = dead_notification(rt)
    monkeypatch.delenv("OUTBOX_QUEUE_URL")
    return (["outbox", "redrive", NOTIFICATION],
            record("outbox.redriven", at, kind="notification", key=NOTIFICATION, previous_attempts=1,
                   previous_error="remote_4xx: HTTP 410", sent=False),
            f"re-armed notification row {NOTIFICATION}: retry_wait, attempts 0/3 (was 1 attempt(s), last error: "
            "remote_4xx: HTTP 410); the sweep re-drives it within 2 minutes plus one sweep interval (3 minutes with "
            "SweepIntervalMinutes=1)\n",
            {"kind": "notification", "key": NOTIFICATION, "previousAttempts": 1, "previousError": "remote_4xx: HTTP 410",
             "sent": False, "redrivenAt": at})


def _reindex(rt, monkeypatch) -> tuple[list[str], dict[str, Any], str, dict[str, Any]]:
    at = rt.clock.now_ms()
    return (["jobs", "reindex"], record("jobs.reindexed", at, indexed=0), "0 job(s) added to the jobs index\n",
            {"indexed": 0})


# Each auditing command on the demo ledger: its argv, the audit record it makes, its human output,
# and what its --json document says besides the record.
ACTIONS: dict[str, Callable] = {"schedules pause": _pause, "schedules resume": _resume, "outbox redrive": _redrive,
                                "jobs reindex": _reindex}


@pytest.mark.parametrize("command", ACTIONS)
def test_json_is_one_document_carrying_the_audit_record_and_stderr_stays_empty(command, make_runtime, monkeypatch):
    rt = make_runtime(T0_ISO)
    argv, audit, _, view = ACTIONS[command](rt, monkeypatch)
    run = pixivflow(*argv, "--json", now=rt.clock.now_ms())
    assert (run.code, run.err) == (0, "")
    document = json.loads(run.out)  # the whole of stdout parses as one JSON document
    assert document["audit"] == [audit]
    assert {k: document[k] for k in view} == view


@pytest.mark.parametrize("command", ACTIONS)
def test_json_with_verbose_still_keeps_stderr_empty(command, make_runtime, monkeypatch):
    """``--verbose`` adds nothing beside a ``--json`` document: the record is already in it."""
    rt = make_runtime(T0_ISO)
    argv, audit, _, _ = ACTIONS[command](rt, monkeypatch)
    run = pixivflow(*argv, "--verbose", "--json", now=rt.clock.now_ms())
    assert (run.code, run.err) == (0, "")
    assert json.loads(run.out)["audit"] == [audit]


@pytest.mark.parametrize("command", ACTIONS)
def test_without_verbose_stdout_is_the_text_and_stderr_is_empty(command, make_runtime, monkeypatch):
    rt = make_runtime(T0_ISO)
    argv, _, text, _ = ACTIONS[command](rt, monkeypatch)
    run = pixivflow(*argv, now=rt.clock.now_ms())
    assert (run.code, run.out, run.err) == (0, text, "")


@pytest.mark.parametrize("command", ACTIONS)
def test_verbose_prints_the_audit_line_on_stderr(command, make_runtime, monkeypatch):
    rt = make_runtime(T0_ISO)
    argv, audit, text, _ = ACTIONS[command](rt, monkeypatch)
    run = pixivflow(*argv, "--verbose", now=rt.clock.now_ms())
    assert (run.code, run.out, run.err) == (0, text, line(audit))


def test_a_refused_redrive_is_an_error_line_in_every_mode_and_its_record_follows_the_mode(make_runtime, monkeypatch):
    rt = make_runtime(T0_ISO)
    at = rt.clock.now_ms()
    missing = "notification:nobody-wrote-this"
    error = f"pixivflow outbox redrive: no outbox row {missing!r} of kind notification\n"
    refused = record("outbox.redrive_refused", at, level="WARNING", key=missing,
                     reason=f"no outbox row {missing!r} of kind notification")

    assert (pixivflow("outbox", "redrive", missing, now=at).__dict__) == {"code": 1, "out": "", "err": error}
    assert pixivflow("outbox", "redrive", missing, "--verbose", now=at).__dict__ == {
        "code": 1, "out": "", "err": line(refused) + error}
    as_json = pixivflow("outbox", "redrive", missing, "--json", "--verbose", now=at)
    assert (as_json.code, as_json.err) == (1, error)
    assert json.loads(as_json.out) == {"audit": [refused], "error": refused["reason"]}


def test_a_refused_pause_is_an_error_line_in_every_mode_and_its_record_follows_the_mode(make_runtime):
    rt = make_runtime(T0_ISO)
    at = rt.clock.now_ms()
    assert pixivflow("schedules", "pause", "morning-tokyo", now=at).code == 0
    reason = "schedule morning-tokyo is already paused: nothing changed"
    error = f"pixivflow schedules pause: {reason}\n"
    refused = record("schedule.pause_refused", at + 1, level="WARNING", schedule_id="morning-tokyo", reason=reason)

    assert pixivflow("schedules", "pause", "morning-tokyo", now=at + 1).__dict__ == {"code": 1, "out": "", "err": error}
    assert pixivflow("schedules", "pause", "morning-tokyo", "--verbose", now=at + 1).__dict__ == {
        "code": 1, "out": "", "err": line(refused) + error}
    as_json = pixivflow("schedules", "pause", "morning-tokyo", "--json", now=at + 1)
    assert (as_json.code, as_json.err) == (1, error)
    assert json.loads(as_json.out) == {"audit": [refused], "error": reason}


def test_a_mistake_before_any_action_makes_no_record_and_prints_no_document(make_runtime, monkeypatch):
    make_runtime(T0_ISO)
    monkeypatch.delenv("LEDGER_TABLE")
    for argv in (["schedules", "resume", "morning-tokyo"], ["outbox", "redrive", NOTIFICATION], ["jobs", "reindex"]):
        run = pixivflow(*argv, "--json", "--verbose", now=0)
        assert run.__dict__ == {"code": 2, "out": "", "err": f"pixivflow {' '.join(argv[:2])}: the ledger table is unknown: "
                                                            "pass --table or --stack, or set LEDGER_TABLE\n"}, argv
