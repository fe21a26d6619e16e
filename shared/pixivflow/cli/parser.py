"""The ``pixivflow`` command line's grammar: every command, its options and the function that runs
it (``cli/__init__.py``). Built once per invocation by ``cli._main``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from . import (_check, _demo, _dev, _jobs_reindex, _jobs_show, _ledger_options, _operator, _outbox_list, _outbox_redrive, _slots_reindex,
               _schedules_history, _schedules_next, _schedules_pause, _slots_list, _slots_show, _sync)

EXIT_CODES = """exit codes:
  0  done
  1  not found, refused, or failed (a wrong id, a bad config, an endpoint that does not answer)
  2  usage: a wrong argument, or nothing says where to look (no table, no config, no region)"""


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    from .failures import add_failures

    parser = argparse.ArgumentParser(prog="pixivflow", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"pixivflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_dev(sub)
    _add_schedules(sub)
    _add_slots(sub)
    _add_outbox(sub)
    _add_jobs(sub)
    add_failures(sub)
    _add_config(sub)
    return parser


def _add_demo(sub: Any) -> None:
    """`pixivflow demo`: the demo: several simulated days on the embedded runtime."""
    demo = sub.add_parser("demo", help="simulate several days of the demo schedules on the embedded runtime")
    demo.add_argument("--days", type=int, default=3)
    demo.add_argument("--start", default="2026-12-01T00:00:00Z")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--no-faults", action="store_true", help="skip the injected executor outage")
    demo.add_argument("--verbose", action="store_true", help="show handler logs and metrics")
    demo.add_argument("--json", action="store_true",
                      help="one JSON document at the end (each occurrence, the counts, the checks) instead of text; "
                           "handler logs, with --verbose, go to stderr")
    demo.add_argument("--source", choices=("catalog", "fake-pixiv"), default="catalog",
                      help="the offline catalogue, or the real Pixiv client against a loopback fake Pixiv")
    demo.set_defaults(func=_demo)


def _add_dev(sub: Any) -> None:
    """`pixivflow dev`: the local dev server."""
    dev = sub.add_parser("dev", help="the local dev server: both HTTP functions, moto, queue pumps, schedules, /docs, /ui")
    dev.add_argument("--port", type=int, default=8000, help="the HTTP port on 127.0.0.1 (default 8000)")
    dev.add_argument("--config", default=None, help="the config (default: PIXIVFLOW_CONFIG; --demo brings its own)")
    dev.add_argument("--speed", type=float, default=1.0, help="run a virtual clock N times faster than the wall clock")
    dev.add_argument("--sweep-interval", type=int, default=None, metavar="MINUTES",
                     help="minutes between sweep ticks, one of template.yaml's SweepIntervalMinutes values "
                          "(default: its default)")
    dev.add_argument("--demo", action="store_true", help="the demo config with a loopback downstream and the fake Pixiv")
    dev.add_argument("--source", choices=("fake-pixiv", "catalog"), default="fake-pixiv",
                     help="with --demo: the source the demo schedules use")
    dev.add_argument("--moto-port", type=int, default=0, help="the moto endpoint's port (default: a free one)")
    dev.add_argument("--env-file", default=".pixivflow-dev.env",
                     help="write export lines for a second shell here (default .pixivflow-dev.env; '' for none)")
    dev.add_argument("--state-dir", default=None, metavar="DIR",
                     help="keep the local table, queues and bucket in DIR across restarts (and the moto port)")
    dev.add_argument("--verbose", action="store_true", help="also print every handler's JSON log lines (INFO and up)")
    dev.add_argument("--allow-egress", action="store_true",
                     help="let the server connect beyond loopback (default: 127.0.0.0/8 and ::1 only)")
    dev.set_defaults(func=_dev)


def _add_schedules(sub: Any) -> None:
    """`pixivflow schedules`: schedule sync, the next fires, pause and resume."""
    schedules = sub.add_parser("schedules", help="EventBridge Scheduler and the schedules' fires")
    ssub = schedules.add_subparsers(dest="action", required=True)
    sync = ssub.add_parser("sync", help="make the scheduler group match the config")
    sync.add_argument("--dry-run", action="store_true")
    sync.add_argument("--config", default=None, help="defaults to PIXIVFLOW_CONFIG")
    sync.add_argument("--group", default=os.environ.get("SCHEDULER_GROUP", "pixivflow"))
    sync.add_argument("--function-arn", default=os.environ.get("SCHEDULER_TARGET_ARN"))
    sync.add_argument("--role-arn", default=os.environ.get("SCHEDULER_ROLE_ARN"))
    sync.add_argument("--dlq-arn", default=os.environ.get("SCHEDULER_DLQ_ARN"))
    sync.add_argument("--json", action="store_true",
                      help="one JSON document: the plan, whether it was applied, and the audit record")
    _audit_options(sync)
    sync.set_defaults(func=_sync)
    nxt = ssub.add_parser("next", help="the next fires of every enabled schedule, in its zone and in UTC")
    nxt.add_argument("--count", type=int, default=3, help="fires per schedule (default 3)")
    nxt.add_argument("--at", default=None, help="from this instant instead of now (ISO 8601)")
    nxt.add_argument("--config", default=None, help="defaults to PIXIVFLOW_CONFIG")
    nxt.add_argument("--endpoint-url", default=None, help="an AWS endpoint for an ssm: config")
    nxt.add_argument("--json", action="store_true")
    nxt.set_defaults(func=_schedules_next)

    for action, text in (("pause", "pause a schedule: its fires are refused and not counted as missed (audited)"),
                         ("resume", "resume a paused schedule from its next fire (audited)")):
        flip = ssub.add_parser(action, help=text)
        _ledger_options(flip)
        flip.add_argument("schedule_id", help="a schedule of the config")
        flip.add_argument("--by", default=_operator() or "cli",
                          help="who is flipping it, recorded on the pause (default: the user, else 'cli')")
        _audit_options(flip)
        flip.set_defaults(func=_schedules_pause)

    hist = ssub.add_parser("history", help="a schedule's last fires: the slot's status, paused, missed (the sweep "
                                           "recorded it) or no data (before the schedule was watched)")
    _ledger_options(hist)
    hist.add_argument("schedule_id", help="a schedule of the config")
    hist.add_argument("--count", type=int, default=30, help="fires, newest last (1-100, default 30)")
    hist.set_defaults(func=_schedules_history)


def _add_slots(sub: Any) -> None:
    """`pixivflow slots`: the ledger's slots."""
    slots = sub.add_parser("slots", help="occurrences in the ledger")
    slsub = slots.add_subparsers(dest="action", required=True)
    sl = slsub.add_parser("list", help="the newest slots, filtered")
    _ledger_options(sl)
    sl.add_argument("--schedule", default=None, help="only this schedule's slots")
    sl.add_argument("--status", default=None, choices=("pending", "running", "success", "partial", "failed"),
                    help="only slots in this status")
    sl.add_argument("--since", default=None, help="created at or after: an ISO 8601 time, or an age like 24h or 7d")
    sl.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    sl.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                    help="wait up to this long until a slot matches and none is pending or running (exit 1 if not)")
    sl.set_defaults(func=_slots_list)
    ss = slsub.add_parser("show", help="one slot: cells, deliveries, ACKs, events, as a timeline")
    _ledger_options(ss)
    ss.add_argument("slot_id")
    ss.set_defaults(func=_slots_show)
    reindex = slsub.add_parser("reindex", help="list on the occurrence page the slots written before its index "
                                               "existed (a scan; safe to run again)")
    _ledger_options(reindex)
    _audit_options(reindex)
    reindex.set_defaults(func=_slots_reindex)


def _add_outbox(sub: Any) -> None:
    """`pixivflow outbox`: the outbox rows and their redrive."""
    from ..domain.model import OutboxStatus  # pure: the one list of outbox statuses

    outbox = sub.add_parser("outbox", help="outbox rows")
    osub = outbox.add_subparsers(dest="action", required=True)
    ol = osub.add_parser("list", help="every outbox row by status, with its last error")
    _ledger_options(ol)
    which = ol.add_mutually_exclusive_group()
    which.add_argument("--dead", action="store_true", help="only the dead rows (deliveries, notifications, callbacks)")
    which.add_argument("--status", default=None, choices=tuple(str(s) for s in OutboxStatus),
                       help="only the rows in this status")
    ol.set_defaults(func=_outbox_list)
    orv = osub.add_parser("redrive", help="re-arm one dead row (conditionally; audited)")
    _ledger_options(orv)
    orv.add_argument("key", help="the row's key, as `outbox list --dead` prints it")
    orv.add_argument("--kind", default=None, choices=("delivery", "notification", "event_callback"),
                     help="the row's kind (default: from the key's shape)")
    orv.add_argument("--outbox-queue", default=None, help="send the row at once (default: OUTBOX_QUEUE_URL, the --stack output)")
    _audit_options(orv)
    orv.set_defaults(func=_outbox_redrive)


def _add_jobs(sub: Any) -> None:
    """`pixivflow jobs`: Workflow Protocol v1 jobs."""
    jobs = sub.add_parser("jobs", help="Workflow Protocol v1 jobs")
    jsub = jobs.add_subparsers(dest="action", required=True)
    js = jsub.add_parser("show", help="one job: its projection, events and callbacks")
    _ledger_options(js)
    js.add_argument("job_id")
    js.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                    help="wait up to this long until the job is succeeded, failed or cancelled (exit 1 if not)")
    js.set_defaults(func=_jobs_show)
    reindex = jsub.add_parser("reindex", help="list on the jobs page the jobs written before its index existed "
                                              "(a scan; safe to run again)")
    _ledger_options(reindex)
    _audit_options(reindex)
    reindex.set_defaults(func=_jobs_reindex)


def _audit_options(parser: argparse.ArgumentParser) -> None:
    """A command that acts keeps an audit record of it (``cli._audit``): inside the ``--json`` document,
    else on stderr with ``--verbose``."""
    parser.add_argument("--verbose", action="store_true",
                        help="print the audit record (one JSON line: who, when, what) on stderr; with --json it is "
                             "the document's 'audit' list instead")
    parser.set_defaults(audits=True)


def _add_config(sub: Any) -> None:
    """`pixivflow config`: config check."""
    config = sub.add_parser("config", help="configuration")
    csub = config.add_subparsers(dest="action", required=True)
    check = csub.add_parser("check", help="validate a config file: its warnings and errors, each naming its field")
    check.add_argument("file", nargs="?", default=None, help="the config (or --config; default: PIXIVFLOW_CONFIG)")
    check.add_argument("--config", default=None, help=argparse.SUPPRESS)
    check.add_argument("--json", action="store_true", help="one JSON document instead of text")
    check.set_defaults(func=_check)
