"""`pixivflow outbox list --dead` and `pixivflow outbox redrive <key>` (issue 12; spec §10.4 ``requeue``).

OutboxDLQAlarm's description tells the operator to run ``pixivflow outbox list --dead``. A redrive
re-arms exactly one dead row, conditionally (a row that is not dead is refused and nothing
changes), records the operator's action (``--verbose`` prints it on stderr, ``--json`` puts it in the
document: ``test_cli_audit.py``), and sends the row at once when the outbox queue is known.
A dead delivery whose cell already ended is refused: its occurrence's outcome is final."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr

import pytest

from support.builders import fan_out_with_a_dead_second_route
from support.cli import T0_ISO, pixivflow
from support.jobs import PLAN, Receiver, jobs_runtime, post_job, task

from pixivflow.cli import main, render_dead
from pixivflow.domain.outbox import OutboxRow

JOB = f"{PLAN}@manual-job-key-1"
FAN = "fan@2026-12-01T0800"
SECOND_KEY = f"pixivflow:second:illustration:111356:{FAN}:both"




def callback_keys() -> list[str]:
    return [f"job-event:{JOB}:evt-1796079540000-{n}" for n in (1, 2, 3)]


def test_list_dead_names_every_dead_row_with_its_error(make_runtime, downstream):
    from conftest import ms

    rt = make_runtime(T0_ISO, mutate=fan_out_with_a_dead_second_route(downstream))
    rt.fire("fan", ms(T0_ISO))
    rt.settle()
    run = pixivflow("outbox", "list", "--dead", now=rt.clock.now_ms())
    assert (run.code, run.err) == (0, "")
    assert run.out.splitlines() == [
        "KIND      KEY                                                            TARGET  ATTEMPTS  DIED AT                   ERROR",
        'delivery  pixivflow:second:illustration:111356:fan@2026-12-01T0800:both  second  1/12      2026-11-30T23:00:00.000Z  '
        'delivery endpoint HTTP 404: {"error":"no such board"}',
    ]
    rows = json.loads(pixivflow("outbox", "list", "--dead", "--json", now=rt.clock.now_ms()).out)
    assert rows == [{"kind": "delivery", "key": SECOND_KEY, "target": "second", "status": "dead", "attempts": 1,
                     "maxAttempts": 12, "lastError": 'delivery endpoint HTTP 404: {"error":"no such board"}',
                     "createdAt": ms(T0_ISO), "updatedAt": ms(T0_ISO), "completedAt": None, "nextAttemptAt": None,
                     "slotId": FAN, "targetId": "both"}]
    assert "\n".join(render_dead(rows)) + "\n" == run.out


def test_a_dead_delivery_whose_cell_ended_is_refused_and_nothing_changes(make_runtime, downstream):
    from conftest import ms

    rt = make_runtime(T0_ISO, mutate=fan_out_with_a_dead_second_route(downstream))
    rt.fire("fan", ms(T0_ISO))
    rt.settle()
    before = rt.wiring.ledger.load(FAN)
    assert before.cells["both"].status == "failed"
    run = pixivflow("outbox", "redrive", SECOND_KEY, now=rt.clock.now_ms())
    message = (f"cell both of {FAN} ended failed (delivery_abandoned): its outcome is final, so this delivery is not "
               "re-armed; request a refetch to deliver a new work")
    assert (run.code, run.out, run.err) == (1, "", f"pixivflow outbox redrive: {message}\n")
    verbose = pixivflow("outbox", "redrive", SECOND_KEY, "--verbose", now=rt.clock.now_ms())  # the refusal's audit line too
    audit = json.loads(verbose.err.splitlines()[0])
    assert (audit["event"], audit["key"], audit["reason"]) == ("outbox.redrive_refused", SECOND_KEY, message)
    assert verbose.err.splitlines()[1:] == [f"pixivflow outbox redrive: {message}"]
    after = rt.wiring.ledger.load(FAN)
    assert [(i.route, i.outbox_status, i.attempts) for i in after.intents] == [(i.route, i.outbox_status, i.attempts)
                                                                               for i in before.intents]
    # a row that is not dead (the delivered one) and a key nobody wrote are refused the same way
    done = pixivflow("outbox", "redrive", SECOND_KEY.replace(":second:", ":review:"), now=rt.clock.now_ms())
    assert done.code == 1 and done.err.splitlines()[-1] == (
        f"pixivflow outbox redrive: outbox row {SECOND_KEY.replace(':second:', ':review:')} is done, not dead: nothing to redrive")
    missing = pixivflow("outbox", "redrive", f"pixivflow:second:illustration:999:{FAN}:both", now=rt.clock.now_ms())
    assert missing.code == 1 and missing.err.splitlines()[-1] == (
        f"pixivflow outbox redrive: no outbox row 'pixivflow:second:illustration:999:{FAN}:both'")


def test_redrive_rearms_a_dead_callback_once_and_the_outbox_delivers_it(make_runtime):
    with Receiver(default=404) as receiver:
        rt = jobs_runtime(make_runtime)
        assert post_job(rt, task(callback_url=receiver.url))[0] == 202
        rt.settle()  # accepted, started, succeeded: each POSTed once, each answered 404: dead
        assert len(receiver.received) == 3
        keys = callback_keys()
        now = rt.clock.now_ms()
        listed = pixivflow("outbox", "list", "--dead", now=now)
        assert listed.out.splitlines() == [
            f"KIND            KEY{' ' * 59}TARGET{' ' * (len(receiver.url) - 6)}  ATTEMPTS  DIED AT                   ERROR",
            *[f"event_callback  {key}  {receiver.url}  1/8       2026-11-30T22:59:00.000Z  remote_4xx: HTTP 404" for key in keys],
        ]

        receiver.default = 200  # the consumer fixed its endpoint
        run = pixivflow("outbox", "redrive", keys[0], "--verbose", now=now)
        assert run.code == 0
        assert run.out == (f"re-armed event_callback row {keys[0]}: retry_wait, attempts 0/8 (was 1 attempt(s), "
                           "last error: remote_4xx: HTTP 404); sent to the outbox queue now\n")
        audit = json.loads(run.err)  # --verbose: the audit line, alone on stderr
        assert {k: audit[k] for k in ("event", "kind", "key", "previous_attempts", "previous_error", "sent")} == {
            "event": "outbox.redriven", "kind": "event_callback", "key": keys[0], "previous_attempts": 1,
            "previous_error": "remote_4xx: HTTP 404", "sent": True}
        row = rt.wiring.outbox_rows.get("event_callback", keys[0])
        assert (row.status, row.attempts, row.next_attempt_at) == ("retry_wait", 0, now)

        rt.pump()  # the message the redrive sent reaches the deliver function
        assert len(receiver.received) == 4 and receiver.received[-1].body["event_id"] == keys[0].rsplit(":", 1)[1]
        assert rt.wiring.outbox_rows.get("event_callback", keys[0]).status == "done"
        again = pixivflow("outbox", "redrive", keys[0], now=now)
        assert (again.code, again.out) == (1, "")
        assert again.err.splitlines()[-1] == f"pixivflow outbox redrive: outbox row {keys[0]} is done, not dead: nothing to redrive"
        assert [r["key"] for r in json.loads(pixivflow("outbox", "list", "--dead", "--json", now=now).out)] == keys[1:]
        assert len(receiver.received) == 4  # the refused redrive sent nothing


def test_a_dead_notification_is_rearmed_and_left_to_the_sweep_without_a_queue(make_runtime, monkeypatch):
    rt = make_runtime(T0_ISO)
    rows = rt.wiring.outbox_rows
    key = "notification:morning-tokyo@2026-12-01T0800:summary"
    at = rt.clock.now_ms()
    rows.enqueue(OutboxRow(kind="notification", key=key, target="review", payload={"text": "summary"},
                           next_attempt_at=at, created_at=at, updated_at=at, max_attempts=3))
    claimed = rows.claim(rows.get("notification", key), "w1", at, 120_000)
    rows.settle(claimed, "w1", at, status="dead", error="remote_4xx: HTTP 410")
    monkeypatch.delenv("OUTBOX_QUEUE_URL")
    run = pixivflow("outbox", "redrive", key, now=at + 1000)
    assert run.code == 0
    assert run.out == (f"re-armed notification row {key}: retry_wait, attempts 0/3 (was 1 attempt(s), last error: "
                       "remote_4xx: HTTP 410); the sweep re-drives it within 2 minutes plus one sweep "
                       "interval (3 minutes with SweepIntervalMinutes=1)\n")
    stored = rows.get("notification", key)
    assert (stored.status, stored.attempts, stored.next_attempt_at) == ("retry_wait", 0, at + 1000)
    assert ("notification", key) in rows.due(at + 1000)
    assert pixivflow("outbox", "redrive", key, now=at + 2000).code == 1


def test_list_shows_every_row_by_status_with_its_last_error_and_filters(make_runtime, downstream):
    """``outbox list`` without ``--dead``: deliveries and notifications of every status, the ones that
    need the operator first; ``--status`` one status; a hostile error text is shown escaped."""
    from conftest import ms

    rt = make_runtime(T0_ISO, mutate=fan_out_with_a_dead_second_route(downstream))
    rt.fire("fan", ms(T0_ISO))
    rt.settle()
    rows, at = rt.wiring.outbox_rows, rt.clock.now_ms()
    key = "notification:fan@2026-12-01T0800:hostile"
    rows.enqueue(OutboxRow(kind="notification", key=key, target="review", payload={"text": "x"},
                           next_attempt_at=at, created_at=at, updated_at=at, max_attempts=3))
    rows.settle(rows.claim(rows.get("notification", key), "w1", at, 120_000), "w1", at, status="retry_wait",
                error="remote_5xx: \x1b[2J\u202egnp.exe", next_attempt_at=at + 60_000)

    everything = pixivflow("outbox", "list", now=at)
    assert (everything.code, everything.err) == (0, "")
    lines = everything.out.splitlines()
    assert lines[0].split() == ["STATUS", "KIND", "KEY", "TARGET", "ATTEMPTS", "UPDATED", "AT", "NEXT", "ATTEMPT", "ERROR"]
    statuses = [line.split()[0] for line in lines[1:-2]]
    assert statuses[0] == "dead" and statuses[1] == "retry_wait" and set(statuses[2:]) == {"done"}  # dead first
    dead = lines[1].split()
    assert dead[1:5] == ["delivery", SECOND_KEY, "second", "1/12"]
    hostile = lines[2]
    assert "\x1b" not in everything.out and "\u202e" not in everything.out
    assert hostile.endswith("remote_5xx: \\x1b[2J\\u202egnp.exe") and "2026-11-30T23:01:00.000Z" in hostile
    assert SECOND_KEY.replace(":second:", ":review:") in everything.out  # the delivered row is listed too
    assert lines[-1] == f"{len(statuses)} row(s): 1 dead, 1 retry_wait, {len(statuses) - 2} done"

    listed = json.loads(pixivflow("outbox", "list", "--json", now=at).out)
    assert sorted(r["status"] for r in listed) == sorted(statuses)
    only = json.loads(pixivflow("outbox", "list", "--status", "retry_wait", "--json", now=at).out)
    assert [(r["kind"], r["key"], r["lastError"], r["nextAttemptAt"]) for r in only] == [
        ("notification", key, "remote_5xx: \x1b[2J\u202egnp.exe", at + 60_000)]
    assert [r["key"] for r in json.loads(pixivflow("outbox", "list", "--status", "dead", "--json", now=at).out)] == [SECOND_KEY]
    assert pixivflow("outbox", "list", "--status", "cancelled", now=at).out == "no outbox rows\n"
    for argv, message in ((["--status", "bogus"], "invalid choice: 'bogus'"),
                          (["--dead", "--status", "done"], "not allowed with argument")):
        err = io.StringIO()
        with pytest.raises(SystemExit) as exit_, redirect_stderr(err):  # argparse's usage error: exit 2
            main(["outbox", "list", *argv], now_ms=lambda: at)
        assert exit_.value.code == 2 and message in err.getvalue()
