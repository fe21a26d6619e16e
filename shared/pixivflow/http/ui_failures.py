"""The operator page's Failure Center, ``/ui/failures``: every failed cell, newest first, one page
at a time (``services.failures``), filtered by schedule, target, reason and UTC day, each row with
its reason in words, its candidate report, its delivery rows and the retry of that one target
(``normal`` or ``relaxed``, docs/explanation/failure-center.md) beside it.

A retry is a form POST to ``/ui/act/retry`` behind the session and its CSRF token, like every
action (``http/ui_actions.py``); its answer links to the retry's occurrence and back here."""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import urlencode

from ..domain.failures import NORMAL, RELAXED, RETRY_MODES, failure_position
from ..domain.cells import TERMINAL_CELL_STATES
from ..domain.errors import StatusError
from ..services import failures
from ..services.failures import FailureFilters
from ..services.inspection import Reads, iso
from .ui import Html, badge, duration, e, page, slot_link, table
from .ui_pages import REFRESH_S, QueryProblem, candidate_report

_CURSOR_MAX = 500


def filters_from(reads: Reads, query: Mapping[str, str]) -> FailureFilters:
    """The page's filters from its query string; each value is one the page offers (else 400 naming it)."""
    choices = failures.filter_choices(reads)
    picked: dict[str, str | None] = {}
    for name in ("schedule", "target", "reason"):
        value = (query.get(name) or "").strip() or None
        if value is not None and value not in choices[name]:
            raise QueryProblem(name, f"{name}: not one of the {name}s this page lists")
        picked[name] = value
    try:
        day = failures.parse_day((query.get("day") or "").strip() or None)
    except StatusError as exc:
        raise QueryProblem("day", exc.message) from None
    before = query.get("before") or None
    if before is not None and (len(before) > _CURSOR_MAX or not _is_cursor(before)):
        raise QueryProblem("before", "before: the cursor an 'older failures' link carries")
    filters = FailureFilters(schedule_id=picked["schedule"], target_id=picked["target"], reason=picked["reason"], day=day,
                             before=before)
    between = filters.between()
    if before is not None and between is not None and not between[0] <= int(before[:13]) < between[1]:
        raise QueryProblem("before", "before: a cursor of another day than the one chosen")
    return filters


def _is_cursor(text: str) -> bool:
    return failure_position(text) is not None and text.isprintable()


def _select(name: str, options: list[str], chosen: str | None) -> str:
    opts = '<option value="">any</option>' + "".join(
        f'<option value="{e(o)}"{" selected" if o == chosen else ""}>{e(o)}</option>' for o in options)
    return f'<label>{e(name)} <select name="{e(name)}">{opts}</select></label> '


def _filter_form(reads: Reads, filters: FailureFilters) -> Html:
    choices = failures.filter_choices(reads)
    day = filters.day.isoformat() if filters.day else ""
    return Html('<form method="get" action="/ui/failures">'
                + _select("schedule", choices["schedule"], filters.schedule_id)
                + _select("target", choices["target"], filters.target_id)
                + _select("reason", choices["reason"], filters.reason)
                + f'<label>day (UTC) <input type="date" name="day" value="{e(day)}"></label> '
                + '<button type="submit">Filter</button></form>')


def _deliveries(rows: list[dict[str, Any]]) -> Html | str:
    if not rows:
        return "-"
    items = "".join(f"<li>{e(d['route'])}: {badge(d['ledgerStatus'])} {badge(d['outboxStatus'])} "
                    f"{e(d['attempts'])}/{e(d['maxAttempts'])}"
                    + (f' <span class="err">{e(d["lastError"])}</span>' if d["lastError"] else "") + "</li>" for d in rows)
    return Html(f"<ul>{items}</ul>")


def retry_form(slot_id: str, target_id: str, mode: str, csrf: str) -> str:
    from .ui_actions import action_form

    label = "Retry" if mode == NORMAL else "Retry relaxed"
    return action_form("retry", csrf, {"slot": slot_id, "target": target_id, "mode": mode}, label)


def retry_forms(reads: Reads, slot: Mapping[str, Any], cell: Mapping[str, Any], csrf: str) -> Html | str:
    """An occurrence page's retry forms beside a failed cell, or why it cannot be retried (the
    Failure Center's rule, ``services.failures.retry_refusal``); nothing beside any other cell."""
    if cell["status"] != "failed":
        return "-"
    why_not = failures.retry_refusal(reads, slot["scheduleId"], slot["job"], cell["targetId"])
    if why_not is not None:
        return Html(f'<span class="note">{e(why_not)}</span>')
    return Html("".join(retry_form(slot["slotId"], cell["targetId"], mode, csrf) for mode in RETRY_MODES))


def _retry_cell(row: dict[str, Any], csrf: str | None) -> Html | str:
    if not row["retryable"]:
        return Html(f'<span class="note">{e(row["notRetryable"])}</span>')
    parts = []
    for mode in RETRY_MODES:
        done = row["retries"].get(mode)
        if done is not None:
            parts.append(f"{e(mode)} retry: {slot_link(done['slotId'])} {badge(done['status'])}")
        elif csrf:
            parts.append(retry_form(row["slotId"], row["targetId"], mode, csrf))
    return Html("<br>".join(parts)) if parts else "-"


def _reason(row: dict[str, Any]) -> Html:
    words = row["reason"] or row["reasonCode"] or "-"
    return Html(f"{e(words)} <code>{e(row['reasonCode'])}</code>"
                + (f'<br><span class="note">{e(row["lastError"])}</span>' if row["lastError"] else ""))


def failures_page(reads: Reads, filters: FailureFilters, csrf: str | None) -> str:
    rows, cursor = failures.failure_page(reads, filters)
    body = table(["Failed at (UTC)", "Occurrence", "Target", "Work", "Ran for", "Reason", "Candidate report", "Deliveries",
                  "Retry this target"],
                 [[iso(r["failedAt"]), Html(f"{slot_link(r['slotId'])}<br>{e(r['trigger'])}"
                                            + (f" ({e(r['retryMode'])}) of {slot_link(r['retryOf'])}" if r["retryOf"] else "")),
                   r["targetId"], f"{r['workType']} {r['workId']}" if r["workId"] else "-",
                   duration(r["startedAt"], r["failedAt"]), _reason(r),
                   candidate_report(r["candidateReport"]) if r["candidateReport"] else "-", _deliveries(r["deliveries"]),
                   _retry_cell(r, csrf)] for r in rows],
                 empty="no failures match" if any(filters.params().values()) or filters.before else "no failures")
    params = {k: v for k, v in filters.params().items() if v}
    nav = []
    if filters.before:
        nav.append(f'<a href="{e(_href(params))}">newest</a>')
    if cursor is not None:
        nav.append(f'<a href="{e(_href({**params, "before": cursor}))}">older failures</a>')
    note = (f'<p class="note">Every failed cell of every occurrence and job, newest first, {failures.PAGE_SIZE} read a page '
            "(a filtered page may show fewer and still have older ones). A retry runs that one target again in a "
            f"manual occurrence of its schedule: <strong>{NORMAL}</strong> as configured, <strong>{RELAXED}</strong> with "
            "its scan bound, language window and look-back widened (never its rules). "
            "CLI: <code>pixivflow failures list</code>.</p>")
    live = any(r["status"] not in TERMINAL_CELL_STATES for row in rows for r in row["retries"].values())  # a retry running
    return page("Failure Center", note + _filter_form(reads, filters) + body
                + (f'<p class="note">{" · ".join(nav)}</p>' if nav else ""), refresh=REFRESH_S if live else None)


def _href(params: Mapping[str, str | None]) -> str:
    query = urlencode({k: v for k, v in params.items() if v})
    return "/ui/failures" + (f"?{query}" if query else "")


def perform_retry(wiring: Any, reads: Reads, form: Mapping[str, list[str]]) -> Any:
    """The ``retry`` action: one failed cell's target run again (``services.failures.retry``)."""
    from .ui_actions import OPERATOR, ActionResult, _field, _refused

    slot_id, target_id, mode = _field(form, "slot"), _field(form, "target"), _field(form, "mode") or NORMAL
    try:
        result = failures.retry(wiring.refetches, reads, slot_id, target_id, mode)
    except StatusError as exc:
        return _refused("Retry", exc.status, exc.message, "failure.retry_refused", operator=OPERATOR,
                        slot_id=slot_id[:300], target_id=target_id[:100], mode=mode[:20], reason=exc.message)
    body = (f"<p>{e(mode.capitalize())} retry of {e(target_id)} (failed in {slot_link(slot_id)}): "
            f"{e(result.disposition)}{' (already requested)' if result.reused else ''}, occurrence "
            f"{slot_link(result.slot_id)}.</p><p><a href=\"/ui/failures\">Back to the Failure Center</a></p>")
    return ActionResult(202, page("Retry", body), "failure.retry_requested", level="info", operator=OPERATOR,
                        slot_id=slot_id, target_id=target_id, mode=mode, retry_slot_id=result.slot_id,
                        disposition=result.disposition, reused=result.reused)


def register(shell: Any, route: Any) -> None:
    """``GET /ui/failures`` on the trigger function's shell (``http/ui.py`` registers the rest)."""
    from .. import runtime
    from .ui import _csrf, _guard, html_response
    from .ui_pages import problem_page

    @route("GET", "/ui/failures")
    def ui_failures(req: Any) -> Any:
        event = shell.app.current_event
        denied = _guard(req, event)
        if denied is not None:
            return denied
        reads = runtime.get().wiring.reads
        try:
            filters = filters_from(reads, event.query_string_parameters or {})
        except QueryProblem as problem:
            return req.respond(html_response(400, problem_page("Failure Center", problem)), "ui.bad_query",
                               field=problem.field)
        return req.respond(html_response(200, failures_page(reads, filters, _csrf(event))), "ui.page", page="failures")


__all__ = ["failures_page", "filters_from", "perform_retry", "register", "retry_form", "retry_forms"]
