"""The operator page's whole-ledger views: every occurrence by trigger, the jobs, every dead row,
each one page of an index at a time. They render the CLI's own read model
(``services.inspection``: ``occurrence_page``, ``list_jobs``, ``show_job``, ``dead_page``), so a row
reads the same on ``/ui`` as in ``pixivflow slots list`` / ``outbox list --dead``. The login and
session code stays in ``http/ui.py``; this module only renders.

A page showing anything live (a slot still open, a job not yet terminal) asks the browser to
reload it with ``<meta http-equiv="refresh">``: no script, so the strict CSP stays as it is.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Mapping
from urllib.parse import quote, urlencode

from ..domain.cells import SlotStatus
from ..domain.protocol import QUEUED, RUNNING
from ..domain.text import ascii_digits
from ..services import inspection, schedule_views
from ..services.inspection import TRIGGER_KINDS, Reads, iso, local
from .ui import Html, _counts, _dead_table, badge, e, page, slot_link, table, took

PAGE_SIZE = 50
REFRESH_S = 5
SLOT_STATUSES = tuple(s.value for s in SlotStatus)
LIVE_JOB_STATUSES = {QUEUED, RUNNING}
HISTORY_FIRES = 30
CHART_DAYS = 14


class QueryProblem(ValueError):
    """A filter value the page refuses: ``field`` names it (answered 400, nothing read)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def slot_filters(query: Mapping[str, str]) -> dict[str, Any]:
    """The list's filters from the query string, each checked against its closed set."""
    status = query.get("status") or None
    if status is not None and status not in SLOT_STATUSES:
        raise QueryProblem("status", f"status: one of {', '.join(SLOT_STATUSES)}")
    trigger = query.get("trigger") or None
    if trigger is not None and trigger not in TRIGGER_KINDS:
        raise QueryProblem("trigger", f"trigger: one of {', '.join(TRIGGER_KINDS)}")
    page_text = query.get("page") or "1"
    if not ascii_digits(page_text) or int(page_text) != 1:
        # The list pages with its "older occurrences" link (a cursor): a page number past the first
        # would have to read every page before it.
        raise QueryProblem("page", "page: only 1; older occurrences are reached by the list's 'older' link")
    before = query.get("before") or None
    if before is not None and not _CREATED_CURSOR.fullmatch(before):
        raise QueryProblem("before", "before: the cursor an 'older occurrences' link carries (<13 digits>#<slot id>)")
    return {"status": status, "trigger": trigger, "before": before}


def problem_page(title: str, problem: QueryProblem) -> str:
    return page(title, f'<p class="err">{e(problem.message)}</p>')


def _link(base: str, params: Mapping[str, Any], label: str) -> Html:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return Html(f'<a href="{e(base + ("?" + query if query else ""))}">{e(label)}</a>')


def _filter_form(reads: Reads, schedule_id: str | None, status: str | None, trigger: str | None) -> Html:
    def select(name: str, options: list[str], chosen: str | None) -> str:
        opts = '<option value="">any</option>' + "".join(
            f'<option value="{e(o)}"{" selected" if o == chosen else ""}>{e(o)}</option>' for o in options)
        return f'<label>{e(name)} <select name="{e(name)}">{opts}</select></label> '

    schedules = [s.id for s in (reads.config.schedules if reads.config is not None else [])]
    return Html('<form method="get" action="/ui/slots">' + select("schedule", schedules, schedule_id)
                + select("status", list(SLOT_STATUSES), status) + select("trigger", list(TRIGGER_KINDS), trigger)
                + '<button type="submit">Filter</button></form>')


def occurrence_table(rows: list[dict[str, Any]]) -> Html:
    return table(["Occurrence", "Status", "Trigger", "Schedule", "Local time", "UTC", "Took", "Cells", "Reasons", "Last error"],
                 [[slot_link(r["slotId"]), badge(r["status"]), r["trigger"], r["scheduleId"],
                   local(r["occurrenceAt"], r["timezone"]), iso(r["occurrenceAt"]), took(r), _counts(r["cells"]),
                   ", ".join(r["reasons"]),
                   Html(f'<span class="err">{e(r["lastError"])}</span>') if r["lastError"] else "-"] for r in rows],
                 empty="no occurrences match")


def occurrences(reads: Reads, schedule_id: str | None, filters: Mapping[str, Any]) -> str:
    """One page of the ledger's slots (scheduled, refetch, job), newest first, filtered: one Query of
    the occurrence index and batched reads of that page (``inspection.occurrence_page``)."""
    rows, cursor = inspection.occurrence_page(reads, schedule_id=schedule_id, status=filters["status"],
                                              trigger=filters["trigger"], before=filters["before"], limit=PAGE_SIZE)
    params = {"schedule": schedule_id, "status": filters["status"], "trigger": filters["trigger"]}
    nav = [e(f"{len(rows)} occurrence(s) on this page of {PAGE_SIZE} read"
             + (" (the filters leave the others out)" if filters["status"] or filters["trigger"] else ""))]
    if filters["before"]:
        nav.append(_link("/ui/slots", params, "newest"))
    if cursor is not None:
        nav.append(_link("/ui/slots", {**params, "before": cursor}, "older occurrences"))
    jump = ('<form method="get" action="/ui/slots"><label>Slot id <input type="text" name="id" maxlength="300"></label>'
            '<button type="submit">Open</button></form>')
    live = any(r["open"] for r in rows)
    return page("Occurrences", f"{jump}{_filter_form(reads, schedule_id, filters['status'], filters['trigger'])}"
                               f'<p class="note">{" · ".join(nav)}</p>{occurrence_table(rows)}',
                refresh=REFRESH_S if live else None)


def _job_link(job_id: str) -> Html:
    return Html(f'<a href="/ui/jobs/{e(quote(job_id, safe="@:"))}">{e(job_id)}</a>')


_CREATED_CURSOR = re.compile(r"[0-9]{13}#[^\x00-\x1f\x7f]{1,400}")


def jobs_cursor(query: Mapping[str, str]) -> str | None:
    """``before``: where the previous page ended (``<createdAt>#<jobId>``, as the page's own link
    writes it), or None for the first page."""
    before = query.get("before") or None
    if before is not None and not _CREATED_CURSOR.fullmatch(before):
        raise QueryProblem("before", "before: the cursor a jobs page links to (<13 digits>#<job id>)")
    return before


def jobs(reads: Reads, before: str | None = None) -> str:
    """One page of the protocol jobs, newest first (``inspection.list_jobs``: its reads are one page's)."""
    rows, cursor = inspection.list_jobs(reads, before)
    body = table(["Job", "Status", "Idempotency key", "Created", "Updated", "Attempt", "Cancelled", "Error"],
                 [[_job_link(r["jobId"]), badge(r["status"]), r["key"], iso(r["createdAt"]), iso(r["updatedAt"]),
                   r["attempt"], "yes" if r["cancelled"] else "no", r["error"]] for r in rows],
                 empty="no jobs yet" if before is None else "no older jobs")
    nav = [_link("/ui/jobs", {}, "newest")] if before is not None else []
    if cursor is not None:
        nav.append(_link("/ui/jobs", {"before": cursor}, "older jobs"))
    live = any(r["status"] in LIVE_JOB_STATUSES for r in rows)
    return page("Jobs", f'<p class="note">The protocol jobs (<code>POST /jobs</code>), newest first, '
                        f"{inspection.JOBS_PAGE} a page; a job's events and callbacks are on its own page "
                        f"(<code>pixivflow jobs show &lt;jobId&gt;</code>).</p>{body}"
                        + (f'<p class="note">{" · ".join(nav)}</p>' if nav else ""),
                refresh=REFRESH_S if live and before is None else None)


def job(view: Mapping[str, Any]) -> str:
    projection = view["job"]
    row = inspection.job_row(view)
    facts = table(["Field", "Value"], [
        ["status", badge(projection["status"])], ["idempotency key", projection.get("idempotency_key")],
        ["correlation", projection.get("correlation_id")], ["created", iso(projection["created_at"])],
        ["started", iso(projection["started_at"])], ["updated", iso(projection["updated_at"])],
        ["deadline", iso(projection["deadline_at"])], ["attempt", projection["attempt"]],
        ["lease", "live" if projection["lease_active"] else "none"], ["progress", projection["progress"]["stage"]],
        ["cancelled", "yes" if row["cancelled"] else "no"], ["error", row["error"]],
        ["occurrence", slot_link(projection["job_id"])],
    ])
    events = table(["At", "Type", "Event id", "Callback", "Attempts", "Callback error"],
                   [[iso(ev["at"]), ev["type"] or ev["kind"], ev.get("eventId"),
                     badge(ev["callback"]["status"]) if ev.get("callback") else "-",
                     f"{ev['callback']['attempts']}/{ev['callback']['maxAttempts']}" if ev.get("callback") else "-",
                     (ev.get("callback") or {}).get("lastError")] for ev in view["events"]], empty="no events")
    timeline = "".join(f"<li><time>{e(iso(t['at']))}</time> <strong>{e(t['subject'])}</strong> {e(t['what'])}</li>"
                       for t in view["timeline"])
    return page(f"Job {projection['job_id']}", f"{facts}<h2>Events and callbacks</h2>{events}"
                                               f'<h2>Timeline</h2><ol class="timeline">{timeline}</ol>',
                refresh=REFRESH_S if projection["status"] in LIVE_JOB_STATUSES else None)


def candidate_report(report: Mapping[str, Any]) -> Html:
    """A cell's candidate report (``domain.scan.bounded_report``) as a person reads it:
    how far the scan went, the source's funnel, each rule's count, each work passed over and why."""
    supply = report.get("supply")
    items = [f"scanned {e(report.get('attempted'))} of at most {e(report.get('bound'))}"]
    if supply:
        items.append(f"source returned {e(supply.get('fetched'))}, selected {e(supply.get('selected'))}, "
                     f"rejected {e(supply.get('rejected'))}")
        reasons = ", ".join(f"{e(r.get('code'))} × {e(r.get('count'))}" for r in supply.get("reasons") or [])
        if reasons:
            items.append(f"rejected by rule: {reasons}")
    for skip in report.get("skipped") or []:
        again = " (retryable)" if skip.get("retryable") else ""
        items.append(f"passed over work {e(skip.get('workId'))}: <strong>{e(skip.get('code'))}</strong>{again} "
                     f"{e(skip.get('reason'))}")
    if report.get("truncated"):
        items.append(f"{e(report['truncated'])} more work(s) passed over, not kept")
    if report.get("outages"):
        items.append(f"outages: {e(', '.join(map(str, report['outages'])))}")
    return Html('<ul class="report">' + "".join(f"<li>{item}</li>" for item in items) + "</ul>")


def history(reads: Reads) -> Html:
    """Each enabled schedule's last ``HISTORY_FIRES`` fires as a strip, and the slots of the last
    ``CHART_DAYS`` days by outcome (UTC days: one chart across the schedules' zones)."""
    from .ui_svg import COLOURS, daily_chart, history_strip

    strips = "".join(
        f"<dt>{e(s.id)}</dt><dd>{history_strip(s.id, schedule_views.schedule_history(reads, s, HISTORY_FIRES))}</dd>"
        for s in (reads.config.schedules if reads.config is not None else []) if s.enabled and s.cron)
    legend = " ".join(f'<span class="st st-{e(status)}">{e(status)}</span>' for status in COLOURS)
    chart = daily_chart(schedule_views.daily_outcomes(reads, CHART_DAYS))
    return Html(f"<h2>History: the last {HISTORY_FIRES} fires</h2><p>{legend}</p><dl>{strips}</dl>"
                f"<h2>Outcomes by day (UTC, last {CHART_DAYS} days)</h2>{chart}")


def dead_cursor(query: Mapping[str, str]) -> tuple[str, str, str] | None:
    """``before``: where the previous dead-letter page ended, as its own link writes it (a
    url-safe base64 JSON of the row's keys and index position), or None for the first page."""
    text = query.get("before") or None
    if text is None:
        return None
    try:
        if len(text) > 2000:
            raise ValueError
        value = json.loads(base64.urlsafe_b64decode(text.encode("ascii") + b"=" * (-len(text) % 4)))
        if (not isinstance(value, list) or len(value) != 3 or not all(isinstance(v, str) and 0 < len(v) <= 800 for v in value)
                or not _DEAD_POSITION.fullmatch(value[2])):
            raise ValueError
    except (ValueError, UnicodeError):
        raise QueryProblem("before", "before: the cursor an 'older dead letters' link carries") from None
    return value[0], value[1], value[2]


_DEAD_POSITION = re.compile(r"[0-9]{13}#[^\x00-\x1f\x7f]+")


def _dead_link(cursor: tuple[str, str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(cursor)).encode("utf-8")).decode("ascii").rstrip("=")


def dead_letters(reads: Reads, csrf: str | None = None, before: tuple[str, str, str] | None = None) -> str:
    """One page of the dead outbox rows (deliveries, notifications and job callbacks), newest death
    first, each with its last error and its Redrive: one Query of the DeadRows index and one batched
    read, whatever the ledger holds (``pixivflow outbox list --dead`` prints them all)."""
    rows, cursor = inspection.dead_page(reads, before)
    nav = [_link("/ui/dead", {}, "newest")] if before is not None else []
    if cursor is not None:
        nav.append(_link("/ui/dead", {"before": _dead_link(cursor)}, "older dead letters"))
    return page("Dead letters", '<p class="note">Every dead outbox row of the ledger: deliveries, notifications and '
                                f"job callbacks, newest first, {inspection.DEAD_PAGE} a page. Re-arm one with its "
                                "Redrive, or <code>pixivflow outbox redrive &lt;key&gt;</code>.</p>"
                + _dead_table(rows, csrf) + (f'<p class="note">{" · ".join(nav)}</p>' if nav else ""))


__all__ = ["PAGE_SIZE", "QueryProblem", "candidate_report", "dead_letters", "history", "job", "jobs", "occurrences", "problem_page", "slot_filters"]
