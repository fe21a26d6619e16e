"""The `pixivflow` command: the demo, schedule sync, config check."""

from __future__ import annotations

import argparse
import json
import os
import sys


def _demo(args: argparse.Namespace) -> int:
    if not args.verbose:
        # The demo prints its own progress; keep handler logs and EMF blobs out of the way.
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    from .local.demo import run_demo

    return run_demo(days=args.days, start=args.start, seed=args.seed, outage=not args.no_faults, source=args.source)


def _sync(args: argparse.Namespace) -> int:
    import boto3

    from .adapters.scheduler_sync import DesiredSchedule, SyncTarget, apply_sync, plan_sync, read_existing
    from .config import load_config

    config = load_config(args.config)
    desired = [DesiredSchedule(s.id, s.cron or "", s.timezone, s.enabled) for s in config.schedules if s.cron]
    missing = [n for n, v in (("--function-arn", args.function_arn), ("--role-arn", args.role_arn)) if not v]
    if missing:
        print(f"pixivflow schedules sync: {', '.join(missing)} required (or SCHEDULER_TARGET_ARN / SCHEDULER_ROLE_ARN)", file=sys.stderr)
        return 2
    target = SyncTarget(function_arn=args.function_arn, role_arn=args.role_arn, dead_letter_arn=args.dlq_arn or None, group=args.group)
    client = boto3.client("scheduler")
    plan = plan_sync(desired, read_existing(client, args.group), target)
    for line in plan.describe():
        print(line)
    if plan.empty:
        print("schedules are in sync")
        return 0
    if args.dry_run:
        print("dry run: nothing changed")
        return 0
    apply_sync(client, plan, args.group)
    print("applied")
    return 0


def _check(args: argparse.Namespace) -> int:
    """Validate a config: warnings (values repaired with a default) and errors, each naming its field.

    stdout gets one JSON summary (``ok``, ``warnings``, ``errors``, and the ids when valid);
    stderr gets one ``warning: ...`` / ``error: ...`` line each. Exit 1 on any error."""
    from .config import load_config
    from .domain.errors import ConfigError

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        warnings = list(exc.warnings)
        errors = list(exc.errors)
        for line in warnings:
            print(f"warning: {line}", file=sys.stderr)
        for line in errors:
            print(f"error: {line}", file=sys.stderr)
        print(json.dumps({"ok": False, "warnings": warnings, "errors": errors}))
        return 1
    for line in config.warnings:
        print(f"warning: {line}", file=sys.stderr)
    print(json.dumps({"ok": True, "warnings": list(config.warnings), "errors": [],
                      "schedules": [s.id for s in config.schedules], "targets": [t.id for t in config.targets],
                      "routes": sorted(config.delivery.targets)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pixivflow")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="simulate several days of the demo schedules on the embedded runtime")
    demo.add_argument("--days", type=int, default=3)
    demo.add_argument("--start", default="2026-12-01T00:00:00Z")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--no-faults", action="store_true", help="skip the injected executor outage")
    demo.add_argument("--verbose", action="store_true", help="show handler logs and metrics")
    demo.add_argument("--source", choices=("catalog", "fake-pixiv"), default="catalog",
                      help="the offline catalogue, or the real Pixiv client against a loopback fake Pixiv")
    demo.set_defaults(func=_demo)

    schedules = sub.add_parser("schedules", help="EventBridge Scheduler")
    ssub = schedules.add_subparsers(dest="action", required=True)
    sync = ssub.add_parser("sync", help="make the scheduler group match the config")
    sync.add_argument("--dry-run", action="store_true")
    sync.add_argument("--config", default=None, help="defaults to PIXIVFLOW_CONFIG")
    sync.add_argument("--group", default=os.environ.get("SCHEDULER_GROUP", "pixivflow"))
    sync.add_argument("--function-arn", default=os.environ.get("SCHEDULER_TARGET_ARN"))
    sync.add_argument("--role-arn", default=os.environ.get("SCHEDULER_ROLE_ARN"))
    sync.add_argument("--dlq-arn", default=os.environ.get("SCHEDULER_DLQ_ARN"))
    sync.set_defaults(func=_sync)

    config = sub.add_parser("config", help="configuration")
    csub = config.add_subparsers(dest="action", required=True)
    check = csub.add_parser("check", help="validate a config file")
    check.add_argument("--config", default=None)
    check.set_defaults(func=_check)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
