"""The `pixivflow` command: the demo, the dev server, schedule sync, config check, and the operator's
commands: ``slots list|show``, ``schedules next``, ``outbox list --dead|redrive``, ``jobs show``.

The operator commands read the ledger with plain boto3 clients (``pixivflow.aws``), so they work the
same against a deployed stack and against the dev server (``AWS_ENDPOINT_URL`` or ``--endpoint-url``
pointing at its moto endpoint). The table and queue come from ``--table`` / ``--outbox-queue``, else
``LEDGER_TABLE`` / ``OUTBOX_QUEUE_URL``, else the outputs of ``--stack``. Output is a human table;
``--json`` prints the same view as one JSON document. A wrong id exits 1 with a message on stderr.

A command that acts (``outbox redrive``, ``schedules pause|resume``, ``schedules sync``, ``jobs
reindex``) makes one audit record per action (:func:`_audit`). With ``--json`` the records are the
document's ``audit`` list and nothing else is printed beside it; in human mode they go to stderr,
one JSON line each, only with ``--verbose``. Errors go to stderr in every mode.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable

from .views import (emit, iso_text, json_text, render_dead, render_fires, render_history, render_job, render_outbox, render_pause,
                    render_redrive, render_slot, render_slot_list, shown)


def _demo(args: argparse.Namespace) -> int:
    if not args.verbose:
        # The demo prints its own progress; keep handler logs and EMF blobs out of the way.
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    if not args.json:
        from ..local.demo import run_demo

        return run_demo(days=args.days, start=args.start, seed=args.seed, outage=not args.no_faults, source=args.source)
    # --json: stdout is the one document. The handlers' logs and metrics write to sys.stdout (the log
    # handler keeps the stream it saw when the runtime was imported), so they go to stderr instead.
    document = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        from ..local.demo import run_demo

        return run_demo(days=args.days, start=args.start, seed=args.seed, outage=not args.no_faults, source=args.source,
                        out=document, as_json=True)


def _dev(args: argparse.Namespace) -> int:
    if not args.verbose:
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    from ..local.devserver import run_dev

    return run_dev(config=args.config, port=args.port, speed=args.speed, demo=args.demo, source=args.source,
                   moto_port=args.moto_port, env_file=args.env_file or None, state_dir=args.state_dir,
                   allow_egress=args.allow_egress, sweep_interval=args.sweep_interval)


def _sync(args: argparse.Namespace) -> int:
    from .. import aws
    from ..adapters.scheduler_sync import DesiredSchedule, SyncTarget, apply_sync, plan_sync, read_existing
    from ..config import load_config

    config = load_config(args.config)
    desired = [DesiredSchedule(s.id, s.cron or "", s.timezone, s.enabled) for s in config.schedules if s.cron]
    missing = [n for n, v in (("--function-arn", args.function_arn), ("--role-arn", args.role_arn)) if not v]
    if missing:
        print(f"pixivflow schedules sync: {', '.join(missing)} required (or SCHEDULER_TARGET_ARN / SCHEDULER_ROLE_ARN)", file=sys.stderr)
        return 2
    target = SyncTarget(function_arn=args.function_arn, role_arn=args.role_arn, dead_letter_arn=args.dlq_arn or None, group=args.group)
    client = aws.client("scheduler")
    plan = plan_sync(desired, read_existing(client, args.group), target)
    applied = not plan.empty and not args.dry_run
    changes = {"create": [r["Name"] for r in plan.create],
               "update": {r["Name"]: plan.changes.get(r["Name"], []) for r in plan.update}, "delete": list(plan.delete)}
    if applied:
        try:
            apply_sync(client, plan, args.group)
        except Exception as exc:  # some of the plan may be applied: the record says which plan was tried
            _audit(args, "schedules.sync_failed", group=args.group, error=str(exc), **changes)
            raise
        _audit(args, "schedules.synced", group=args.group, **changes)
    if args.json:  # one document: what the plan was, whether it was applied, and the audit record if it was
        print(json_text({"group": args.group, "inSync": plan.empty, "dryRun": bool(args.dry_run), "applied": applied,
                         **changes, "unchanged": list(plan.unchanged), "audit": args.audit}))
        return 0
    for line in plan.describe():
        print(shown(line))
    print("schedules are in sync" if plan.empty else "dry run: nothing changed" if args.dry_run else "applied")
    return 0


def _check(args: argparse.Namespace) -> int:
    """Validate a config: warnings (values repaired with a default) and errors, each naming its field,
    both at once. Text on stdout (a ``warning: ...`` / ``error: ...`` line each, then a verdict), or
    with ``--json`` one JSON document (``ok``, ``warnings``, ``errors``, and the ids when valid).
    Exit 1 on any error. The file is the positional argument, ``--config``, or PIXIVFLOW_CONFIG."""
    from ..config import load_config
    from ..domain.errors import ConfigError

    if args.file and args.config and args.file != args.config:
        raise UsageError("give the config once: as the argument or as --config")
    try:
        config = load_config(args.file or args.config)
    except ConfigError as exc:
        return _check_answer(args, {"ok": False, "warnings": list(exc.warnings), "errors": list(exc.errors)})
    from ..adapters.pixiv.secrets import SECRETS_PATH_ENV
    from ..config.pixiv import credential_check_warnings

    # What only this environment can say (a ${VAR} unset here may still be in SSM): check-time only.
    warnings = list(config.warnings) + credential_check_warnings(config.pixiv, os.environ,
                                                                  os.environ.get(SECRETS_PATH_ENV))
    return _check_answer(args, {"ok": True, "warnings": warnings, "errors": [],
                                "schedules": [s.id for s in config.schedules], "targets": [t.id for t in config.targets],
                                "labels": {t.id: t.label for t in config.targets},
                                "routes": sorted(config.delivery.targets)})


def _check_answer(args: argparse.Namespace, summary: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        for line in summary["warnings"]:
            print(shown(f"warning: {line}"))
        for line in summary["errors"]:
            print(shown(f"error: {line}"))
        if summary["ok"]:
            print(f"config OK: {len(summary['schedules'])} schedule(s), {len(summary['targets'])} target(s), "
                  f"{len(summary['routes'])} route(s), {len(summary['warnings'])} warning(s)")
        else:
            print(f"config invalid: {len(summary['errors'])} error(s), {len(summary['warnings'])} warning(s)")
    return 0 if summary["ok"] else 1


# -- the operator's commands ---------------------------------------------------------------------------


class UsageError(Exception):
    """Exit 2: the command cannot know where to look (no table, no config)."""


_now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000  # noqa: E731  (tests pass their own clock)


def _stack_outputs(args: argparse.Namespace) -> dict[str, str]:
    if not args.stack:
        return {}
    from .. import aws

    stacks = aws.client("cloudformation", **_client_kwargs(args)).describe_stacks(StackName=args.stack)["Stacks"]
    return {o["OutputKey"]: o["OutputValue"] for o in (stacks[0].get("Outputs") or [])} if stacks else {}


def _client_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"endpoint_url": args.endpoint_url} if getattr(args, "endpoint_url", None) else {}


def _reads(args: argparse.Namespace, *, need_config: bool = False):
    from .. import aws
    from ..adapters.dynamo_ledger import DynamoLedger
    from ..adapters.job_store import DynamoJobStore
    from ..adapters.outbox_rows import DynamoOutboxRows
    from ..services.inspection import Reads

    outputs = _stack_outputs(args)
    table = args.table or os.environ.get("LEDGER_TABLE") or outputs.get("LedgerTableName")
    if not table:
        raise UsageError("the ledger table is unknown: pass --table or --stack, or set LEDGER_TABLE")
    dynamodb = aws.client("dynamodb", **_client_kwargs(args))
    from ..adapters.sweep_state import DynamoSweepState

    reads = Reads(ledger=DynamoLedger(dynamodb, table), now_ms=_now_ms, jobs=DynamoJobStore(dynamodb, table),
                  outbox_rows=DynamoOutboxRows(dynamodb, table), sweep_state=DynamoSweepState(dynamodb, table))
    outbox = getattr(args, "outbox_queue", None) or os.environ.get("OUTBOX_QUEUE_URL") or outputs.get("OutboxQueueUrl")
    if outbox:
        from ..adapters.sqs_queues import SqsQueues

        execution = os.environ.get("EXECUTION_QUEUE_URL") or outputs.get("ExecutionQueueUrl") or ""
        reads.queues = SqsQueues(aws.client("sqs", **_client_kwargs(args)), execution, outbox, now_ms=_now_ms)
    if need_config or args.config or os.environ.get("PIXIVFLOW_CONFIG"):
        reads.config = _config(args, required=need_config)
    return reads


def _config(args: argparse.Namespace, *, required: bool):
    from ..config import load_config

    location = args.config or os.environ.get("PIXIVFLOW_CONFIG")
    if not location:
        if required:
            raise UsageError("the config is unknown: pass --config, or set PIXIVFLOW_CONFIG (a path or ssm:<name>)")
        return None

    def ssm(name: str) -> str:
        from .. import aws

        return aws.client("ssm", **_client_kwargs(args)).get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]

    try:
        return load_config(location, ssm_reader=ssm)
    except Exception as exc:
        if required:
            raise UsageError(f"cannot load the config: {exc}") from None
        print(shown(f"warning: config not loaded ({exc}); notification keys of second routes are not looked up"), file=sys.stderr)
        return None


_DURATION = re.compile(r"^(\d+)\s*([smhd])$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_instant(text: str, now_ms: int) -> int:
    """``2026-12-01``, ``2026-12-01T08:00:00Z`` (any ISO 8601; naive means UTC), or an age: ``30m``, ``24h``, ``7d``."""
    value = text.strip()
    match = _DURATION.match(value)
    if match:
        return now_ms - int(match.group(1)) * _UNIT_MS[match.group(2)]
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not a time: {text!r} (use an ISO 8601 time like 2026-12-01T08:00:00Z, or an age like 24h)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def _run(name: str, body: Callable[[], int], args: argparse.Namespace | None = None) -> int:
    from ..services.inspection import InspectionError

    try:
        return body()
    except InspectionError as exc:
        _failed(args, [exc.message])
        print(shown(f"pixivflow {name}: {exc.message}"), file=sys.stderr)
        return 1
    except UsageError as exc:
        _failed(args, [str(exc)])
        print(shown(f"pixivflow {name}: {exc}"), file=sys.stderr)
        return 2
    except _StillOpen as exc:
        print(f"pixivflow {name}: {exc}", file=sys.stderr)
        return 1


_OPEN_SLOT = ("pending", "running")
_OPEN_JOB = ("queued", "running")
_sleep: Callable[[float], None] = time.sleep  # tests pass their own


def _waiting(args: argparse.Namespace, read: Callable[[], Any], still_open: Callable[[Any], bool]) -> Any:
    """``--wait N``: read again every half second until nothing is open or N seconds passed (exit 1
    then, with the last view printed: the operator sees what is still open)."""
    view = read()
    deadline = time.monotonic() + max(0.0, float(getattr(args, "wait", 0) or 0))
    while still_open(view) and time.monotonic() < deadline:
        _sleep(0.5)
        view = read()
    if getattr(args, "wait", 0) and still_open(view):
        emit(args, view, args.render)
        raise _StillOpen(f"still open after {args.wait:g} s")
    return view


class _StillOpen(Exception):
    pass


def _job_still_open(view: dict[str, Any]) -> bool:
    """Open until its status is terminal AND its terminal event is in the stream: ``--wait``
    returns only once a consumer reading the events would see the end too."""
    status = view["job"]["status"]
    return status in _OPEN_JOB or not any(ev.get("type") == f"job.{status}" for ev in view["events"])


def _slots_list(args: argparse.Namespace) -> int:
    from ..services.inspection import list_slots

    def body() -> int:
        if args.limit < 1:
            raise UsageError("--limit must be a whole number of at least 1")
        reads = _reads(args)
        since = parse_instant(args.since, _now_ms()) if args.since else None
        rows = _waiting(args, lambda: list_slots(reads, schedule_id=args.schedule, status=args.status, since_ms=since,
                                                 limit=args.limit),
                        lambda rows: not rows or any(r["status"] in _OPEN_SLOT for r in rows))
        return emit(args, rows, render_slot_list)

    args.render = render_slot_list
    return _run("slots list", body)


def _slots_show(args: argparse.Namespace) -> int:
    from ..services.inspection import show_slot

    return _run("slots show", lambda: emit(args, show_slot(_reads(args), args.slot_id), render_slot))


def _jobs_show(args: argparse.Namespace) -> int:
    from ..services.inspection import show_job

    def body() -> int:
        reads = _reads(args)
        view = _waiting(args, lambda: show_job(reads, args.job_id), _job_still_open)
        return emit(args, view, render_job)

    args.render = render_job
    return _run("jobs show", body)


def _schedules_next(args: argparse.Namespace) -> int:
    from ..services.schedule_views import next_fires

    def body() -> int:
        config = _config(args, required=True)
        at = parse_instant(args.at, _now_ms()) if args.at else _now_ms()
        if args.count < 1 or args.count > 100:
            raise UsageError("--count must be between 1 and 100")
        return emit(args, next_fires(config, at, args.count), render_fires)

    return _run("schedules next", body)


def _schedules_pause(args: argparse.Namespace) -> int:
    """``schedules pause|resume <id>``: flip the schedule's pause item (``domain.pause.SchedulePause``),
    conditionally; the operator's audit line either way. Needs the config: only a schedule it
    names can be paused (a typo never leaves an item behind)."""
    from ..services.inspection import InspectionError
    from ..services.schedule_views import set_paused

    pause = args.action == "pause"
    verb = "paused" if pause else "resumed"

    def body() -> int:
        reads = _reads(args, need_config=True)
        try:
            view = set_paused(reads, args.schedule_id, pause, by=args.by)
        except InspectionError as exc:
            _audit(args, f"schedule.{args.action}_refused", schedule_id=args.schedule_id, reason=exc.message)
            raise
        _audit(args, f"schedule.{verb}", schedule_id=view["scheduleId"], paused_at=view["pausedAt"],
               resumed_at=view["resumedAt"])
        return emit(args, view, render_pause)

    return _run(f"schedules {args.action}", body, args)


def _outbox_list(args: argparse.Namespace) -> int:
    """``outbox list``: every row by status; ``--dead`` the dead ones (the table the alarms'
    runbook names); ``--status X`` one status."""
    from ..services.inspection import dead_letters, outbox_list

    if args.dead:
        return _run("outbox list", lambda: emit(args, dead_letters(_reads(args)), render_dead))
    return _run("outbox list", lambda: emit(args, outbox_list(_reads(args), args.status), render_outbox))


def _outbox_redrive(args: argparse.Namespace) -> int:
    from ..services.inspection import InspectionError, redrive

    def body() -> int:
        try:
            result = redrive(_reads(args), args.key, args.kind)
        except InspectionError as exc:
            _audit(args, "outbox.redrive_refused", kind=args.kind, key=args.key, reason=exc.message)
            raise
        _audit(args, "outbox.redriven", kind=result["kind"], key=result["key"], previous_attempts=result["previousAttempts"],
               previous_error=result["previousError"], sent=result["sent"])
        return emit(args, result, render_redrive)

    return _run("outbox redrive", body, args)


_DONE_EVENTS = frozenset({"outbox.redriven", "schedule.paused", "schedule.resumed", "jobs.reindexed", "schedules.synced",
                          "slots.reindexed", "failures.reindexed", "failure.retry_requested"})


def _operator() -> str | None:
    return os.environ.get("USER") or os.environ.get("USERNAME") or None


def _audit(args: argparse.Namespace, event: str, **fields: Any) -> None:
    """Record one operator action (or its refusal): who, when, what. The record joins ``args.audit``,
    which ``--json`` prints as the document's ``audit`` list; in human mode ``--verbose`` prints it
    at once as one JSON line on stderr, and without ``--verbose`` it is not printed (the ledger's own
    traces, listed in README.md "The operator commands", remain)."""
    record = {"level": "INFO" if event in _DONE_EVENTS else "WARNING", "event": event, "timestamp": iso_text(_now_ms()),
              "operator": _operator(), **{k: v for k, v in fields.items() if v is not None}}
    args.audit.append(record)
    if args.verbose and not args.json:
        print(json_text(record, indent=None), file=sys.stderr)


def _failed(args: argparse.Namespace | None, errors: list[str]) -> None:
    """A command that recorded an action and then failed (a refused redrive, a sync that stopped half
    way): with ``--json`` its records still reach stdout, as one document with the error beside them.
    The error itself goes to stderr as in every mode."""
    if args is not None and getattr(args, "json", False) and getattr(args, "audit", None):
        print(json_text({"audit": args.audit, "error": "; ".join(errors)}))


def _ledger_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", default=None, help="the ledger table (default: LEDGER_TABLE, else the --stack output)")
    parser.add_argument("--stack", default=None, help="a deployed stack whose outputs name the table and queues")
    parser.add_argument("--endpoint-url", default=None, help="an AWS endpoint, e.g. the dev server's moto (or AWS_ENDPOINT_URL)")
    parser.add_argument("--config", default=None, help="the config (default: PIXIVFLOW_CONFIG)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def main(argv: list[str] | None = None, *, now_ms: Callable[[], int] | None = None) -> int:
    global _now_ms
    previous = _now_ms
    if now_ms is not None:
        _now_ms = now_ms
    try:
        return _main(argv)
    finally:
        _now_ms = previous


def _schedules_history(args: argparse.Namespace) -> int:
    """``schedules history <id>``: the same fires and statuses as the page's history strip."""
    from ..services.schedule_views import schedule_history

    def body() -> int:
        if args.count < 1 or args.count > 100:
            raise UsageError("--count must be between 1 and 100")
        reads = _reads(args, need_config=True)
        schedule = reads.config.schedule(args.schedule_id) if reads.config is not None else None
        if schedule is None:
            raise UsageError(f"no schedule {args.schedule_id!r} in the config")
        return emit(args, schedule_history(reads, schedule, args.count), render_history)

    return _run("schedules history", body)


def _jobs_reindex(args: argparse.Namespace) -> int:
    def body() -> int:
        indexed = _reads(args).ledger.index_jobs()
        _audit(args, "jobs.reindexed", indexed=indexed)
        return emit(args, {"indexed": indexed}, lambda v: [f"{v['indexed']} job(s) added to the jobs index"])

    return _run("jobs reindex", body, args)


def _slots_reindex(args: argparse.Namespace) -> int:
    def body() -> int:
        indexed = _reads(args).ledger.index_slots()
        _audit(args, "slots.reindexed", indexed=indexed)
        return emit(args, {"indexed": indexed}, lambda v: [f"{v['indexed']} slot(s) added to the occurrence index"])

    return _run("slots reindex", body, args)


def _main(argv: list[str] | None) -> int:
    from .parser import build_parser

    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "audits", False):
        args.audit = []  # the command's audit records (_audit)
    name = " ".join(str(v) for v in (args.command, getattr(args, "action", None)) if v)
    try:
        return args.func(args)
    except BrokenPipeError:  # `pixivflow slots show X | head`: the reader left; not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # an ordinary mistake is one line, never a traceback (EXIT CODES below)
        failure = user_failure(exc, args)
        if failure is None:
            raise
        code, lines = failure
        _failed(args, lines)
        for line in lines:
            print(f"pixivflow {name}: {line}", file=sys.stderr)
        return code


def user_failure(exc: BaseException, args: argparse.Namespace) -> tuple[int, list[str]] | None:
    """The exit code and the lines for a mistake of the operator's or of their environment, or None
    for a bug of ours (which keeps its traceback). botocore is imported lazily: ``config check``
    and ``--help`` never load it."""
    from ..domain.errors import ConfigError

    cause = exc.__cause__
    while cause is not None:  # the adapters wrap AWS's answer (LedgerUnavailable from ClientError): use the answer
        exc, cause = cause, cause.__cause__
    if isinstance(exc, ConfigError):
        return 1, [f"error: {line}" for line in exc.errors]
    if isinstance(exc, UsageError):
        return 2, [str(exc)]
    try:
        from botocore import exceptions as boto
    except ImportError:  # pragma: no cover - botocore is a dependency
        return None
    endpoint = getattr(args, "endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL")
    if isinstance(exc, boto.EndpointConnectionError):
        where = getattr(exc, "kwargs", {}).get("endpoint_url") or endpoint or "AWS"
        hint = ("is the dev server running? start it with `make dev` and use the export line its banner prints"
                if endpoint else "check the network, AWS_REGION and AWS_ENDPOINT_URL")
        return 1, [f"cannot connect to {where}: {hint}"]
    if isinstance(exc, boto.NoRegionError):
        return 2, ["no AWS region: set AWS_DEFAULT_REGION (the variable boto3 reads), or use the dev server's export line"]
    if isinstance(exc, (boto.NoCredentialsError, boto.PartialCredentialsError)):
        return 2, ["no AWS credentials: configure a profile, or use the dev server's export line (test credentials)"]
    if isinstance(exc, boto.ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "?"), error.get("Message", "")
        if code == "ResourceNotFoundException":
            return 1, [f"not found: {message or code} (is --table / LEDGER_TABLE right for this endpoint?)"]
        return 1, [f"AWS answered {code}: {message}".rstrip(": ")]
    return None
