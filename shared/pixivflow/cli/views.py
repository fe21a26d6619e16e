"""What the operator commands print: terminal-safe text, tables and the renderers of each view
(each renderer takes the JSON view, so ``--json`` output and the table show the same thing)."""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Sequence


# Characters a terminal may act on, never printed raw: C0 and C1 controls (ESC,
# BEL, CSI U+009B, NEL U+0085, ...), DEL, lone surrogates (which would also crash the print), the
# line and paragraph separators, and the bidirectional overrides that reorder what is shown. Ids,
# keys, URLs and error texts come from consumers and remote servers: they are shown escaped.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF or ch in "\u2028\u2029" or ch in _BIDI


def shown(value: Any) -> str:
    """``value`` as text a terminal shows literally: every unsafe character as ``\\xNN`` / ``\\uNNNN``."""
    text = str(value)
    if not any(_unsafe(ch) for ch in text):
        return text
    return "".join((f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}") if _unsafe(ch) else ch
                   for ch in text)


def json_text(view: Any, indent: int | None = 2) -> str:
    """JSON output: readable UTF-8, with every unsafe character as a JSON ``\\uNNNN`` escape."""
    text = json.dumps(view, indent=indent, ensure_ascii=False, sort_keys=True)
    return "".join(f"\\u{ord(ch):04x}" if _unsafe(ch) and ch != "\n" else ch for ch in text)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> list[str]:
    """Left-aligned columns, two spaces apart, no trailing blanks; every cell :func:`shown`."""
    cells = [[shown(h) for h in headers]] + [["-" if v in (None, "") else shown(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return [(indent + "  ".join(v.ljust(w) for v, w in zip(r, widths))).rstrip() for r in cells]


def emit(args: argparse.Namespace, view: Any, render: Callable[[Any], list[str]]) -> int:
    """The view on stdout: rendered for a human, or with ``--json`` as one JSON document; a command that
    audits (``args.audit``, a list) carries its audit records in that document as ``audit``."""
    if args.json:
        audit = getattr(args, "audit", None)
        print(json_text({**view, "audit": audit} if audit is not None else view))
    else:
        for line in render(view):
            print(shown(line))  # table cells are shown already; this catches the free-text lines
    return 0


# -- renderers (each takes the JSON view, so --json output renders to the same text) ------------------


def iso_text(ms: Any) -> str:
    from ..services.inspection import iso

    return iso(ms)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in counts.items()) or "-"


def render_slot_list(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no slots match"]
    return table(["SLOT", "STATUS", "TRIGGER", "OCCURRENCE (UTC)", "CELLS", "REASONS", "LAST ERROR"],
                 [[r["slotId"], r["status"], r["triggerSource"], iso_text(r["occurrenceAt"]), _counts(r["cells"]),
                   ", ".join(r["reasons"]), _short(r["lastError"])] for r in rows])


def _short(text: Any, limit: int = 80) -> str | None:
    if not text:
        return None
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _lease_text(lease: dict[str, Any] | None) -> str | None:
    if not lease:
        return None
    state = "live" if lease["live"] else "expired"
    return f"{lease['owner'] or '?'} until {iso_text(lease['until'])} ({state})"


def _report_text(report: dict[str, Any]) -> str:
    parts = []
    if "bound" in report or "attempted" in report:
        parts.append(f"bound {report.get('bound', '-')}, attempted {report.get('attempted', '-')}")
    supply = report.get("supply")
    if isinstance(supply, dict):
        reasons = supply.get("reasons") or []
        parts.append("supply " + ", ".join(f"{k} {supply[k]}" for k in ("fetched", "selected", "rejected") if k in supply)
                     + (f" ({', '.join(json.dumps(r, ensure_ascii=False) if not isinstance(r, str) else r for r in reasons)})"
                        if reasons else ""))
    for name in ("skipped", "outages"):
        entries = report.get(name) or []
        if entries:
            parts.append(f"{name} " + "; ".join(
                " ".join(str(e.get(k)) for k in ("code", "workId") if e.get(k)) + (f" ({e['reason']})" if e.get("reason") else "")
                if isinstance(e, dict) else str(e) for e in entries))
    rest = {k: v for k, v in report.items() if k not in ("bound", "attempted", "supply", "skipped", "outages")}
    if rest:
        parts.append(json.dumps(rest, ensure_ascii=False, sort_keys=True))
    return "; ".join(parts) or "-"


def _work(kind: Any, work_id: Any) -> str | None:
    return f"{kind} {work_id}" if work_id else None


def render_slot(view: dict[str, Any]) -> list[str]:
    slot = view["slot"]
    from ..services.inspection import local

    lines = [f"slot {slot['slotId']}"]
    occurrence = f"{local(slot['occurrenceAt'], slot['timezone'])} = {iso_text(slot['occurrenceAt'])}" if slot["occurrenceAt"] else "-"
    facts = [("status", slot["status"] + ("" if not slot["open"] else " (open)")),
             ("schedule", f"{slot['scheduleId']} ({slot['triggerSource']})"),
             ("occurrence", occurrence), ("name", slot["name"]), ("created", iso_text(slot["createdAt"])),
             ("started", iso_text(slot["startedAt"])), ("completed", iso_text(slot["completedAt"])),
             ("last error", slot["lastError"])]
    outcome = view.get("outcome")
    if outcome:
        facts.append(("outcome", f"{outcome.get('status')} (business status {outcome.get('business_status')}"
                                 + (", alertable)" if outcome.get("alertable") else ")")))
    if slot["manualRequestId"]:
        facts.append(("request", slot["manualRequestId"]))
    if slot["correlationId"]:
        facts.append(("correlation", slot["correlationId"]))
    lines += [f"  {k:<11} {v if v not in (None, '') else '-'}" for k, v in facts]
    lines += ["", "cells"]
    lines += table(["TARGET", "STATUS", "WORK", "ATTEMPTS", "LEASE", "REASON"],
                   [[c["targetId"], c["status"], _work(c["workType"], c["workId"]), c["attempts"], _lease_text(c["lease"]),
                     (f"{c['terminalReasonCode']}: {c['terminalReasonMessage']}" if c["terminalReasonMessage"]
                      else c["terminalReasonCode"])] for c in view["cells"]], indent="  ")
    errors = [c for c in view["cells"] if c["lastError"] and c["lastError"] != c["terminalReasonMessage"]]
    for c in errors:
        lines.append(f"  last error of {c['targetId']}: {c['lastError']}")
    reports = [c for c in view["cells"] if c["candidateReport"]]
    if reports:
        lines.append("  candidate reports")
        lines += [f"    {c['targetId']}: {_report_text(c['candidateReport'])}" for c in reports]
    lines += ["", "deliveries"]
    if view["deliveries"]:
        lines += table(["TARGET", "ROUTE", "WORK", "LEDGER", "OUTBOX", "ATTEMPTS", "ACK", "REMOTE", "NEXT ATTEMPT", "ERROR"],
                       [[d["targetId"], d["route"], d["workId"], d["ledgerStatus"], d["outboxStatus"],
                         f"{d['attempts']}/{d['maxAttempts']}", d["ack"],
                         " ".join(x for x in (d["remoteId"], d["remoteStatus"]) if x) or None,
                         iso_text(d["nextAttemptAt"]) if d["nextAttemptAt"] is not None else None, _short(d["lastError"], 60)]
                        for d in view["deliveries"]], indent="  ")
        lines.append("  idempotency keys")
        lines += [f"    {d['targetId']} -> {d['route']}: {d['key']}" for d in view["deliveries"]]
    else:
        lines.append("  (none)")
    if view["notifications"]:
        lines += ["", "notifications"]
        lines += table(["KEY", "ROUTE", "STATUS", "ATTEMPTS", "ERROR"],
                       [[n["key"], n["target"], n["status"], f"{n['attempts']}/{n['maxAttempts']}", _short(n["lastError"], 60)]
                        for n in view["notifications"]], indent="  ")
    lines += ["", "events"]
    if view["events"]:
        lines += table(["AT", "KIND", "TYPE", "EVENT ID", "CALLBACK"],
                       [[iso_text(e["at"]), e["kind"], e["type"], e.get("eventId"),
                         (f"{e['callback']['status']} {e['callback']['attempts']}/{e['callback']['maxAttempts']}"
                          if e.get("callback") else None)] for e in view["events"]], indent="  ")
    else:
        lines.append("  (none)")
    lines += ["", "timeline"]
    lines += table(["AT", "WHAT", ""], [[iso_text(t["at"]), t["subject"], t["what"]] for t in view["timeline"]],
                   indent="  ")[1:]
    return lines


def render_job(view: dict[str, Any]) -> list[str]:
    job = view["job"]
    lines = [f"job {job['job_id']}"]
    facts = [("status", job["status"]), ("type", job["job_type"]), ("key", job.get("idempotency_key")),
             ("correlation", job.get("correlation_id")), ("created", iso_text(job["created_at"])),
             ("started", iso_text(job["started_at"])), ("updated", iso_text(job["updated_at"])),
             ("heartbeat", iso_text(job["heartbeat_at"])), ("deadline", iso_text(job["deadline_at"])),
             ("attempt", job["attempt"]), ("lease", f"{'live' if job['lease_active'] else 'none'}"
                                           + (f" until {iso_text(job['lease_expires_at'])}" if job["lease_expires_at"] else "")),
             ("progress", (job.get("progress") or {}).get("stage"))]
    lines += [f"  {k:<11} {v if v not in (None, '') else '-'}" for k, v in facts]
    result, error = job.get("result"), job.get("error")
    if result:
        candidates = result.get("candidates") or []
        lines.append(f"  {'result':<11} {len(candidates)} candidate(s): "
                     + (", ".join(f"{c.get('work_type')} {c.get('work_id')}" for c in candidates) or "-")
                     + (f"; scanned {result['scanned']}" if "scanned" in result else ""))
    if error:
        detail = error.get("detail") or {}
        lines.append(f"  {'error':<11} {error.get('code')}: {error.get('message')}"
                     + (f" ({detail['internal_code']})" if detail.get("internal_code") else ""))
    lines += ["", "events"]
    projected = [e for e in view["events"] if e.get("eventId")]
    if projected:
        lines += table(["AT", "TYPE", "EVENT ID", "CALLBACK"],
                       [[iso_text(e["at"]), e["type"], e["eventId"],
                         (f"{e['callback']['status']} {e['callback']['attempts']}/{e['callback']['maxAttempts']}"
                          + (f" {e['callback']['lastError']}" if e["callback"]["lastError"] else "") if e.get("callback") else None)]
                        for e in projected], indent="  ")
    else:
        lines.append("  (none)")
    lines += ["", "timeline"]
    lines += table(["AT", "WHAT", ""], [[iso_text(t["at"]), t["subject"], t["what"]] for t in view["timeline"]],
                   indent="  ")[1:]
    return lines


_NOTES = {"dst_gap": "DST gap: this local time does not exist that day; no fire, no slot",
          "dst_repeat": "DST repeat: this local time happens twice; it fires once, at the first"}


def render_fires(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no enabled schedule with a cron"]
    from ..services.inspection import local

    def local_text(r: dict[str, Any]) -> str:
        return local(r["at"], r["timezone"]) if r["at"] is not None else f"{r['local']} (skipped)"

    return table(["SCHEDULE", "ZONE", "LOCAL", "UTC", "SLOT", "NOTE"],
                 [[r["scheduleId"], r["timezone"], local_text(r), iso_text(r["at"]) if r["at"] is not None else None,
                   r["slotId"], _NOTES.get(r["note"])] for r in rows])


def render_history(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["the schedule has no cron: it never fires"]
    from ..services.inspection import local

    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return table(["LOCAL", "UTC", "SLOT", "STATUS"], [[local(r["at"], r["timezone"]), iso_text(r["at"]), r["slotId"],
                                                       r["status"]] for r in rows]) + ["", f"{len(rows)} fire(s): {_counts(counts)}"]


def render_dead(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no dead outbox rows"]
    return table(["KIND", "KEY", "TARGET", "ATTEMPTS", "DIED AT", "ERROR"],
                 [[r["kind"], r["key"], r["target"], f"{r['attempts']}/{r['maxAttempts']}", iso_text(r["updatedAt"]),
                   _short(r["lastError"], 70)] for r in rows])


# Rows that need the operator first, then those still moving, then the finished ones.
_OUTBOX_ORDER = ("dead", "retry_wait", "processing", "pending", "cancelled", "done")


def render_outbox(rows: list[dict[str, Any]]) -> list[str]:
    """``outbox list``: every row grouped by status (dead first), each with its last error, and a count line."""
    if not rows:
        return ["no outbox rows"]
    rank = {s: n for n, s in enumerate(_OUTBOX_ORDER)}
    ordered = sorted(rows, key=lambda r: rank.get(r["status"], len(rank)))  # stable: newest first within a status
    counts: dict[str, int] = {}
    for r in ordered:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    lines = table(["STATUS", "KIND", "KEY", "TARGET", "ATTEMPTS", "UPDATED AT", "NEXT ATTEMPT", "ERROR"],
                  [[r["status"], r["kind"], r["key"], r["target"], f"{r['attempts']}/{r['maxAttempts']}", iso_text(r["updatedAt"]),
                    iso_text(r["nextAttemptAt"]) if r["nextAttemptAt"] is not None else None, _short(r["lastError"], 70)]
                   for r in ordered])
    return lines + ["", f"{len(rows)} row(s): {_counts(counts)}"]


def render_redrive(result: dict[str, Any]) -> list[str]:
    row = result["row"]
    was = f"was {result['previousAttempts']} attempt(s)" + (f", last error: {result['previousError']}" if result["previousError"] else "")
    then = "sent to the outbox queue now" if result["sent"] else \
        "the sweep re-drives it within 2 minutes plus one sweep interval (3 minutes with SweepIntervalMinutes=1)"
    return [f"re-armed {result['kind']} row {result['key']}: {row['outboxStatus'] if 'outboxStatus' in row else row['status']}, "
            f"attempts {row['attempts']}/{row['maxAttempts']} ({was}); {then}"]


# -- command bodies ----------------------------------------------------------------------------------------


def render_pause(view: dict[str, Any]) -> list[str]:
    if view["paused"]:
        return [f"schedule {view['scheduleId']} paused at {iso_text(view['pausedAt'])}: its fires are refused and not "
                "counted as missed until it is resumed"]
    return [f"schedule {view['scheduleId']} resumed at {iso_text(view['resumedAt'])}: it runs again from its next fire"]
