"""`pixivflow slots list|show` against a known ledger written by the real handlers (issue 12).

The ledger holds a success (``morning-tokyo``: three cells delivered), a partial (``mixed``: one
delivered, one with no candidate) and a stalled occurrence (``solo``: its executor claimed the
cell and died; first seen running on an expired lease, then failed by the sweep with
``stalled_no_heartbeat``). The human output is asserted line for line: it is what an operator
reads when an alarm names the slot (template.yaml's alarm descriptions say
``pixivflow slots show <slotId>`` and ``pixivflow slots list --status failed``)."""

from __future__ import annotations

import json

from support.cli import PARTIAL, STALLED, SUCCESS, known_ledger, pixivflow, stall

from pixivflow.cli import render_slot, render_slot_list
from pixivflow.services.inspection import Reads, show_slot

SUCCESS_TEXT = """\
slot morning-tokyo@2026-12-01T0800
  status      success
  schedule    morning-tokyo (cron)
  occurrence  2026-12-01 08:00 JST = 2026-11-30T23:00:00.000Z
  name        08:00
  created     2026-11-30T23:00:00.000Z
  started     2026-11-30T23:00:02.000Z
  completed   2026-11-30T23:00:02.000Z
  last error  -
  outcome     success (business status success)

cells
  TARGET         STATUS     WORK                 ATTEMPTS  LEASE  REASON
  cats           submitted  illustration 111356  1         -      -
  landscape      submitted  illustration 110498  1         -      -
  ranking-daily  submitted  illustration 111126  1         -      -
  candidate reports
    cats: bound 5, attempted 1; supply fetched 20, selected 20, rejected 0
    landscape: bound 5, attempted 1; supply fetched 30, selected 30, rejected 0
    ranking-daily: bound 5, attempted 1; supply fetched 12, selected 12, rejected 0

deliveries
  TARGET         ROUTE   WORK    LEDGER     OUTBOX  ATTEMPTS  ACK       REMOTE                          NEXT ATTEMPT  ERROR
  cats           review  111356  delivered  done    1/12      accepted  r-cats pending_review           -             -
  landscape      review  110498  delivered  done    1/12      accepted  r-landscape pending_review      -             -
  ranking-daily  review  111126  delivered  done    1/12      accepted  r-ranking-daily pending_review  -             -
  idempotency keys
    cats -> review: pixivflow:review:illustration:111356:morning-tokyo@2026-12-01T0800:cats
    landscape -> review: pixivflow:review:illustration:110498:morning-tokyo@2026-12-01T0800:landscape
    ranking-daily -> review: pixivflow:review:illustration:111126:morning-tokyo@2026-12-01T0800:ranking-daily

events
  AT                        KIND               TYPE  EVENT ID  CALLBACK
  2026-11-30T23:00:02.000Z  execution.summary  -     -         -

timeline
  2026-11-30T23:00:00.000Z  slot                              admitted (cron)
  2026-11-30T23:00:00.000Z  cell cats                         pending
  2026-11-30T23:00:00.000Z  cell landscape                    pending
  2026-11-30T23:00:00.000Z  cell ranking-daily                pending
  2026-11-30T23:00:02.000Z  slot                              running
  2026-11-30T23:00:02.000Z  cell cats                         claimed (attempt 1)
  2026-11-30T23:00:02.000Z  cell landscape                    claimed (attempt 1)
  2026-11-30T23:00:02.000Z  cell ranking-daily                claimed (attempt 1)
  2026-11-30T23:00:02.000Z  delivery cats -> review           intent recorded (illustration 111356)
  2026-11-30T23:00:02.000Z  delivery landscape -> review      intent recorded (illustration 110498)
  2026-11-30T23:00:02.000Z  delivery ranking-daily -> review  intent recorded (illustration 111126)
  2026-11-30T23:00:02.000Z  delivery cats -> review           ACK accepted (r-cats pending_review)
  2026-11-30T23:00:02.000Z  delivery landscape -> review      ACK accepted (r-landscape pending_review)
  2026-11-30T23:00:02.000Z  delivery ranking-daily -> review  ACK accepted (r-ranking-daily pending_review)
  2026-11-30T23:00:02.000Z  cell cats                         submitted
  2026-11-30T23:00:02.000Z  cell landscape                    submitted
  2026-11-30T23:00:02.000Z  cell ranking-daily                submitted
  2026-11-30T23:00:02.000Z  event                             execution.summary
  2026-11-30T23:00:02.000Z  slot                              success
"""
PARTIAL_TEXT = """\
slot mixed@2026-12-01T0800
  status      partial
  schedule    mixed (cron)
  occurrence  2026-12-01 08:00 JST = 2026-11-30T23:00:00.000Z
  name        08:00
  created     2026-11-30T23:00:03.000Z
  started     2026-11-30T23:00:04.000Z
  completed   2026-11-30T23:00:04.000Z
  last error  -
  outcome     partial (business status partial_success)

cells
  TARGET   STATUS        WORK                 ATTEMPTS  LEASE  REASON
  cats     submitted     illustration 111299  1         -      -
  nothing  no_candidate  -                    1         -      no_candidate: 没有找到合适的新作品
  last error of nothing: no eligible candidate found after scanning 0 candidate(s): the source returned no works
  candidate reports
    cats: bound 5, attempted 1; supply fetched 20, selected 20, rejected 0; skipped duplicate 111356 (already delivered or pending on route review)
    nothing: bound 5, attempted 0; supply fetched 0, selected 0, rejected 0

deliveries
  TARGET  ROUTE   WORK    LEDGER     OUTBOX  ATTEMPTS  ACK       REMOTE                 NEXT ATTEMPT  ERROR
  cats    review  111299  delivered  done    1/12      accepted  r-cats pending_review  -             -
  idempotency keys
    cats -> review: pixivflow:review:illustration:111299:mixed@2026-12-01T0800:cats

events
  AT                        KIND               TYPE  EVENT ID  CALLBACK
  2026-11-30T23:00:04.000Z  execution.summary  -     -         -

timeline
  2026-11-30T23:00:03.000Z  slot                     admitted (cron)
  2026-11-30T23:00:03.000Z  cell cats                pending
  2026-11-30T23:00:03.000Z  cell nothing             pending
  2026-11-30T23:00:04.000Z  slot                     running
  2026-11-30T23:00:04.000Z  cell cats                claimed (attempt 1)
  2026-11-30T23:00:04.000Z  cell nothing             claimed (attempt 1)
  2026-11-30T23:00:04.000Z  delivery cats -> review  intent recorded (illustration 111299)
  2026-11-30T23:00:04.000Z  delivery cats -> review  ACK accepted (r-cats pending_review)
  2026-11-30T23:00:04.000Z  cell cats                submitted
  2026-11-30T23:00:04.000Z  cell nothing             no_candidate [no_candidate] 没有找到合适的新作品
  2026-11-30T23:00:04.000Z  event                    execution.summary
  2026-11-30T23:00:04.000Z  slot                     partial
"""
RUNNING_TEXT = """\
slot solo@2026-12-01T0800
  status      running (open)
  schedule    solo (cron)
  occurrence  2026-12-01 08:00 JST = 2026-11-30T23:00:00.000Z
  name        08:00
  created     2026-11-30T23:00:05.000Z
  started     2026-11-30T23:00:06.000Z
  completed   -
  last error  -

cells
  TARGET  STATUS   WORK  ATTEMPTS  LEASE                                                          REASON
  cats    pending  -     1         exec-ghost-that-died until 2026-11-30T23:03:06.000Z (expired)  -

deliveries
  (none)

events
  (none)

timeline
  2026-11-30T23:00:05.000Z  slot       admitted (cron)
  2026-11-30T23:00:05.000Z  cell cats  pending
  2026-11-30T23:00:06.000Z  slot       running
  2026-11-30T23:00:06.000Z  cell cats  claimed (attempt 1)
  2026-11-30T23:03:06.000Z  cell cats  lease of exec-ghost-that-died expired (no executor holds the cell)
"""
STALLED_TEXT = """\
slot solo@2026-12-01T0800
  status      failed
  schedule    solo (cron)
  occurrence  2026-12-01 08:00 JST = 2026-11-30T23:00:00.000Z
  name        08:00
  created     2026-11-30T23:00:05.000Z
  started     2026-11-30T23:00:06.000Z
  completed   2026-11-30T23:16:00.000Z
  last error  执行中断，长时间没有进展
  outcome     failed (business status failed, alertable)

cells
  TARGET  STATUS  WORK  ATTEMPTS  LEASE  REASON
  cats    failed  -     1         -      stalled_no_heartbeat: 执行中断，长时间没有进展

deliveries
  (none)

events
  AT                        KIND               TYPE  EVENT ID  CALLBACK
  2026-11-30T23:16:00.000Z  execution.summary  -     -         -

timeline
  2026-11-30T23:00:05.000Z  slot       admitted (cron)
  2026-11-30T23:00:05.000Z  cell cats  pending
  2026-11-30T23:00:06.000Z  slot       running
  2026-11-30T23:00:06.000Z  cell cats  claimed (attempt 1)
  2026-11-30T23:16:00.000Z  cell cats  failed [stalled_no_heartbeat] 执行中断，长时间没有进展
  2026-11-30T23:16:00.000Z  event      execution.summary
  2026-11-30T23:16:00.000Z  slot       failed: 执行中断，长时间没有进展
"""


def test_show_a_success(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    run = pixivflow("slots", "show", SUCCESS, now=rt.clock.now_ms())
    assert (run.code, run.err) == (0, "")
    assert run.out == SUCCESS_TEXT


def test_show_a_partial(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    run = pixivflow("slots", "show", PARTIAL, now=rt.clock.now_ms())
    assert (run.code, run.err) == (0, "")
    assert run.out == PARTIAL_TEXT


def test_show_a_stalled_occurrence_before_and_after_the_sweep_ends_it(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    running = pixivflow("slots", "show", STALLED, now=rt.clock.now_ms())
    assert (running.code, running.out) == (0, RUNNING_TEXT)
    stall(rt)
    run = pixivflow("slots", "show", STALLED, now=rt.clock.now_ms())
    assert (run.code, run.err) == (0, "")
    assert run.out == STALLED_TEXT


def test_json_round_trips_to_the_same_view_and_the_same_text(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    stall(rt)
    now = rt.clock.now_ms()
    reads = Reads(ledger=rt.wiring.ledger, now_ms=lambda: now, jobs=rt.wiring.jobs, outbox_rows=rt.wiring.outbox_rows)
    for slot_id, text in ((SUCCESS, SUCCESS_TEXT), (PARTIAL, PARTIAL_TEXT), (STALLED, STALLED_TEXT)):
        run = pixivflow("slots", "show", slot_id, "--json", now=now)
        assert run.code == 0
        view = json.loads(run.out)
        assert view == show_slot(reads, slot_id)
        assert "\n".join(render_slot(view)) + "\n" == text
    stalled = json.loads(pixivflow("slots", "show", STALLED, "--json", now=now).out)
    assert (stalled["slot"]["status"], stalled["cells"][0]["terminalReasonCode"]) == ("failed", "stalled_no_heartbeat")
    assert stalled["outcome"]["status"] == "failed" and stalled["outcome"]["cells"]["executor_failed"] == 1


def test_a_wrong_slot_id_exits_1_and_says_so(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    for argv in (("slots", "show", "morning-tokyo@2026-12-09T0800"), ("slots", "show", "nope", "--json")):
        run = pixivflow(*argv, now=rt.clock.now_ms())
        assert (run.code, run.out) == (1, "")
        assert run.err == f"pixivflow slots show: no slot {argv[2]!r} in the ledger\n"


def test_list_filters_by_status_schedule_and_since(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    stall(rt)
    now = rt.clock.now_ms()
    run = pixivflow("slots", "list", now=now)
    assert run.code == 0
    assert run.out.splitlines() == [
        "SLOT                           STATUS   TRIGGER  OCCURRENCE (UTC)          CELLS                        REASONS               LAST ERROR",
        "solo@2026-12-01T0800           failed   cron     2026-11-30T23:00:00.000Z  1 failed                     stalled_no_heartbeat  执行中断，长时间没有进展",
        "mixed@2026-12-01T0800          partial  cron     2026-11-30T23:00:00.000Z  1 no_candidate, 1 submitted  no_candidate          -",
        "morning-tokyo@2026-12-01T0800  success  cron     2026-11-30T23:00:00.000Z  3 submitted                  -                     -",
    ]
    failed = pixivflow("slots", "list", "--status", "failed", now=now)  # what AlertableOutcomeAlarm says to run
    assert [line.split()[0] for line in failed.out.splitlines()[1:]] == [STALLED]
    assert [r["slotId"] for r in json.loads(pixivflow("slots", "list", "--schedule", "mixed", "--json", now=now).out)] == [PARTIAL]
    recent = json.loads(pixivflow("slots", "list", "--since", "2026-11-30T23:00:04Z", "--json", now=now).out)
    assert [r["slotId"] for r in recent] == [STALLED]
    assert [r["slotId"] for r in json.loads(pixivflow("slots", "list", "--since", "16m", "--json", now=now).out)] == [
        STALLED, PARTIAL, SUCCESS]
    assert json.loads(pixivflow("slots", "list", "--since", "15m", "--json", now=now).out) == []
    rows = json.loads(pixivflow("slots", "list", "--json", now=now).out)
    assert "\n".join(render_slot_list(rows)) + "\n" == run.out  # --json round-trips
    assert rows[1]["cells"] == {"no_candidate": 1, "submitted": 1} and rows[1]["reasons"] == ["no_candidate"]
    none = pixivflow("slots", "list", "--status", "pending", now=now)
    assert (none.code, none.out) == (0, "no slots match\n")
    bad = pixivflow("slots", "list", "--since", "yesterday", now=now)
    assert bad.code == 2 and "not a time: 'yesterday'" in bad.err


def test_without_a_table_the_command_says_where_to_look(make_runtime, downstream, monkeypatch):
    rt = known_ledger(make_runtime, downstream)
    monkeypatch.delenv("LEDGER_TABLE")
    run = pixivflow("slots", "show", SUCCESS, now=rt.clock.now_ms())
    assert (run.code, run.out) == (2, "")
    assert run.err == "pixivflow slots show: the ledger table is unknown: pass --table or --stack, or set LEDGER_TABLE\n"
    assert pixivflow("slots", "show", SUCCESS, "--table", rt.env["LEDGER_TABLE"], now=rt.clock.now_ms()).out == SUCCESS_TEXT


def test_stack_outputs_name_the_table(make_runtime, downstream, monkeypatch):
    """`--stack <name>`: the deployed stack's outputs (LedgerTableName) say where to look."""
    from pixivflow import aws

    rt = known_ledger(make_runtime, downstream)
    table = rt.env["LEDGER_TABLE"]
    monkeypatch.delenv("LEDGER_TABLE")
    asked = []

    class Stacks:
        def describe_stacks(self, StackName):  # noqa: N803 (boto3's parameter name)
            asked.append(StackName)
            return {"Stacks": [{"StackName": StackName, "Outputs": [{"OutputKey": "LedgerTableName", "OutputValue": table}]}]}

    import boto3

    previous = aws.set_factory(None)  # the twins' factory, or None on moto (boto3 under mock_aws)
    aws.set_factory(lambda service, **kw: Stacks() if service == "cloudformation"
                    else (previous or boto3.client)(service, **kw))
    try:
        run = pixivflow("slots", "show", SUCCESS, "--stack", "pixivflow-prod", now=rt.clock.now_ms())
    finally:
        aws.set_factory(previous)
    assert (run.code, run.out, asked) == (0, SUCCESS_TEXT, ["pixivflow-prod"])
