"""``pixivflow failures list|retry|reindex``: the Failure Center in the terminal
(docs/explanation/failure-center.md). ``list`` prints one page of failed cells, newest first, with
the filters and the cursor the page at ``/ui/failures`` takes; ``retry`` runs one failed cell's
target again in a manual occurrence of its schedule (``--relaxed`` widens its soft limits for that
occurrence); ``reindex`` lists the failures written before the index existed."""

from __future__ import annotations

import argparse
from typing import Any

from . import UsageError, _audit, _ledger_options, _now_ms, _reads, _run
from .parser import _audit_options
from .views import emit, iso_text, table


def add_failures(sub: Any) -> None:
    failures = sub.add_parser("failures", help="the Failure Center: failed cells and the retry of one")
    fsub = failures.add_subparsers(dest="action", required=True)
    listing = fsub.add_parser("list", help="one page of failed cells, newest first")
    _ledger_options(listing)
    listing.add_argument("--schedule", default=None, help="only this schedule's occurrences")
    listing.add_argument("--target", default=None, help="only this target's cells")
    listing.add_argument("--reason", default=None, help="only cells that ended with this reason code")
    listing.add_argument("--day", default=None, help="only failures of this UTC day (YYYY-MM-DD)")
    listing.add_argument("--before", default=None, help="the cursor the previous page printed (older failures)")
    listing.add_argument("--limit", type=int, default=25, help="index entries read for this page (1-100, default 25)")
    listing.set_defaults(func=_failures_list)
    retry = fsub.add_parser("retry", help="run one failed cell's target again, in a manual occurrence of its schedule")
    _ledger_options(retry)
    _audit_options(retry)
    retry.add_argument("slot_id")
    retry.add_argument("target_id")
    retry.add_argument("--relaxed", action="store_true",
                       help="widen the target's scan bound, language window and look-back for this occurrence")
    retry.set_defaults(func=_failures_retry)
    reindex = fsub.add_parser("reindex", help="list in the Failure Center the failures written before its index "
                                              "existed (a scan; safe to run again)")
    _ledger_options(reindex)
    _audit_options(reindex)
    reindex.set_defaults(func=_failures_reindex)


def _failures_list(args: argparse.Namespace) -> int:
    from ..domain.errors import StatusError
    from ..domain.failures import failure_position
    from ..services.failures import FailureFilters, failure_page, parse_day

    def body() -> int:
        if not 1 <= args.limit <= 100:
            raise UsageError("--limit must be a whole number from 1 to 100")
        if args.before is not None and failure_position(args.before) is None:
            raise UsageError("--before: the cursor a previous page printed (<13 digits>#<slot id>#<target id>)")
        try:
            day = parse_day(args.day)
        except StatusError as exc:
            raise UsageError(f"--{exc.message}") from None
        reads = _reads(args)
        rows, cursor = failure_page(reads, FailureFilters(schedule_id=args.schedule, target_id=args.target,
                                                          reason=args.reason, day=day, before=args.before), args.limit)
        return emit(args, {"failures": rows, "next": cursor}, render_failures)

    return _run("failures list", body)


def render_failures(view: dict[str, Any]) -> list[str]:
    rows = view["failures"]
    if not rows:
        lines = ["no failures on this page"]
    else:
        lines = table(["FAILED AT", "OCCURRENCE", "TARGET", "TRIGGER", "WORK", "REASON", "RETRY"],
                      [[iso_text(r["failedAt"]), r["slotId"], r["targetId"], r["trigger"],
                        f"{r['workType']} {r['workId']}" if r["workId"] else None, r["reasonCode"], _retry_text(r)]
                       for r in rows])
    if view["next"]:
        lines.append(f"older failures: --before '{view['next']}'")
    return lines


def _retry_text(row: dict[str, Any]) -> str:
    if not row["retryable"]:
        return "no: " + str(row["notRetryable"])
    done = [f"{mode} {r['slotId']} {r['status']}" for mode, r in sorted(row["retries"].items())]
    return "; ".join(done) if done else "yes"


def _failures_retry(args: argparse.Namespace) -> int:
    from ..domain.errors import StatusError
    from ..domain.failures import NORMAL, RELAXED
    from ..services.failures import retry
    from ..services.inspection import InspectionError

    def body() -> int:
        reads = _reads(args, need_config=True)
        mode = RELAXED if args.relaxed else NORMAL
        try:
            result = retry(_refetches(reads), reads, args.slot_id, args.target_id, mode)
        except StatusError as exc:  # the refusal names what is wrong: exit 1, nothing was admitted
            _audit(args, "failure.retry_refused", slot_id=args.slot_id, target_id=args.target_id, mode=mode,
                   reason=exc.message)
            raise InspectionError("refused", exc.message) from None
        _audit(args, "failure.retry_requested", slot_id=args.slot_id, target_id=args.target_id, mode=mode,
               retry_slot_id=result.slot_id, disposition=result.disposition, reused=result.reused)
        view = {"slotId": args.slot_id, "targetId": args.target_id, "mode": mode, "retrySlotId": result.slot_id,
                "disposition": result.disposition, "reused": result.reused, "sent": result.sent}
        return emit(args, view, render_retry)

    return _run("failures retry", body, args)


def render_retry(view: dict[str, Any]) -> list[str]:
    again = " (already requested: the same retry)" if view["reused"] else ""
    sent = "" if view["sent"] else "; no execution message went out now: the stall sweep dispatches it"
    return [f"{view['mode']} retry of {view['targetId']} in {view['slotId']}: {view['disposition']}{again}",
            f"occurrence {view['retrySlotId']}{sent}"]


def _failures_reindex(args: argparse.Namespace) -> int:
    def body() -> int:
        indexed = _reads(args).ledger.index_failures()
        _audit(args, "failures.reindexed", indexed=indexed)
        return emit(args, {"indexed": indexed}, lambda v: [f"{v['indexed']} failure(s) added to the Failure Center's index"])

    return _run("failures reindex", body, args)


def _refetches(reads: Any) -> Any:
    """What a retry admits with, on the CLI's own clients: the ledger the reads use, the execution
    queue when one is known (else the retry's slot waits for the stall sweep, which dispatches it),
    a log that stays quiet (the CLI's audit line is the operator's record)."""
    from ..clock import Entropy
    from ..wiring import Wiring

    class Clock:
        def now_ms(self) -> int:
            return _now_ms()

    def quiet(level: str, message: str, **fields: Any) -> None:
        return None

    unused: Any = None  # the Pixiv source, the store, the routes and callbacks: a retry's admission reaches none
    wiring = Wiring(reads.config, reads.ledger, reads.queues or _NoQueues(), unused, unused, unused, Clock(), Entropy(),
                    quiet, None, sweep_state=reads.sweep_state, outbox_rows=reads.outbox_rows, jobs=reads.jobs,
                    callbacks=unused, resolver=unused, callback_secret=lambda: None)
    return wiring.refetches


class _NoQueues:
    """No queue URL is known: nothing is sent (the admission reports it; the sweep dispatches the slot)."""

    def send_execution(self, messages: Any) -> list[int]:
        return list(range(len(messages)))

    def send_outbox(self, messages: Any) -> list[int]:
        return list(range(len(messages)))

    def dead_letter_depth(self) -> int:
        return 0


__all__ = ["add_failures"]
