"""The read-only operator page ``/ui``, on the trigger function's shell.

A browser cannot send a bearer header when it navigates, so the page takes the trigger token once,
through a login form POST, and answers a session cookie, HttpOnly, Secure, SameSite=Strict:
``v2.<epoch>.<expiry>.<signature>``, an HMAC over the session epoch and an expiry (8 h). The cookie
never holds the token: its signing key is an HMAC of the token, so rotating the token ends every
session. The epoch is server-side (one ledger item): a cookie works only while
the epoch it names is current, and logout advances it (conditionally), so a logged-out -- or
stolen -- cookie gets the login page from then on, on every browser of the operator. Pages are
rendered on the server from the operator read model (``services.inspection``) with no script and
no external asset (one inline stylesheet allowed by its hash in the Content-Security-Policy).

Pages: ``/ui`` (schedules with their next fires, the latest occurrences with status colours and
reasons, a dead-letter count), ``/ui/slots`` (every occurrence of the ledger by trigger, filtered
and paged), ``/ui/slots/{slotId}`` (cells, deliveries with their outbox rows and ACKs,
notifications, events, all on one timeline), ``/ui/jobs`` and ``/ui/jobs/{jobId}`` (protocol jobs,
their events and callbacks), ``/ui/failures`` (``http/ui_failures.py``), ``/ui/dead`` (the dead
rows) and ``/ui/search``. The lists are rendered by ``http/ui_pages.py`` from the CLI's read model,
each one page of an index at a time; no page scans the table (the trigger function has no Scan grant).

Routes go through the shared shell (``http/shell.py``), so its guarantees hold here too: route
match, 404/405 in the legacy JSON shape, one outcome line per request, no internal text in a 500.
The pages answer HTML for everything they decide themselves.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from typing import Any, Iterable, Sequence
from urllib.parse import parse_qs, quote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.shared.cookies import Cookie

from .. import runtime
from ..domain.reasons import reason_words
from ..domain.text import escape_invisible
from ..services import inspection, schedule_views
from ..services.inspection import InspectionError, Reads, iso, local
from .auth import TRIGGER, check_bearer
from .bodies import BodyProblem, decode_text
from .common import header
from .shell import HttpShell, Request
from .ui_session import COOKIE, SESSION_MS, cookie_values, issue_session, live_session, session_cookie, session_epoch

MAX_FORM_BYTES = 4096
LATEST_PER_SCHEDULE = 5
_SCHEDULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#22303c;color:#fff;padding:.6em 1.2em;display:flex;gap:1.2em;align-items:center}
header a{color:#fff;text-decoration:none}header form.search{margin-left:auto}
header form.search input{width:16em;margin:0 .3em 0 0;padding:.2em}
main{padding:1em 1.2em;max-width:1300px}h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;background:#fff;margin:.4em 0;width:100%}
th,td{border:1px solid #d8dde3;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}code{font-size:.92em;word-break:break-all}td ul{margin:0;padding-left:1.1em}
.st{display:inline-block;padding:0 .45em;border-radius:.6em;font-weight:600;color:#fff;background:#6b7785}
.st-success,.st-submitted,.st-delivered,.st-done{background:#1f8a4c}
.st-partial,.st-no_candidate,.st-duplicate,.st-retry_wait,.st-cancelled{background:#b7791f}
.st-failed,.st-dead{background:#c0392b}.st-running,.st-processing,.st-selected,.st-delivery_pending,
.st-artifact_ready{background:#2b6cb0}.st-pending{background:#6b7785}.st-missed{background:#d8dde3;color:#1d232a}.st-no_data{background:#fff;color:#1d232a;border:1px dashed #b8c0c8}
.st-paused{background:#fff;color:#1d232a;border:1px solid #6b7785}
.st-expired{background:#7b341e}dl dt{font-weight:600;margin-top:.4em}dl dd{margin:.2em 0 0}
.note{color:#6b7785}.err{color:#c0392b}ol.timeline{background:#fff;border:1px solid #d8dde3;padding:.6em 2.6em}
ol.timeline li{margin:.15em 0}form.login{background:#fff;border:1px solid #d8dde3;padding:1em;max-width:28em}
input[type=password],input[type=text]{width:100%;padding:.4em;margin:.3em 0 .8em;box-sizing:border-box}
button{padding:.35em .9em}figure.thumb{display:inline-block;margin:.3em .6em .3em 0;background:#fff;
border:1px solid #d8dde3;padding:.3em}figure.thumb img{display:block;max-width:160px;max-height:160px}
figure.thumb figcaption{font-size:.85em;color:#6b7785}
form.act{display:inline-block;margin:.1em .2em .1em 0}.acts{max-width:22em}
""".strip()
_CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode("utf-8")).digest()).decode("ascii")
_CSP = (f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; img-src data:{{images}}; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": _CSP.format(images=""),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_STATUSES = {"missed", "no_data", "paused", "expired", "success", "partial", "failed", "running", "pending", "submitted", "no_candidate", "duplicate", "selected",
             "delivery_pending", "artifact_ready", "delivered", "done", "dead", "retry_wait", "processing", "cancelled"}


# -- HTML ------------------------------------------------------------------------------------------------


class Html(str):
    """Markup built here (already escaped)."""


def e(value: Any) -> Html:
    if isinstance(value, Html):
        return value
    # Bidi controls and invisible spaces shown as their code points (domain/text.py): an RLO in a
    # tag never reverses how an id reads on the page.
    return Html(html.escape(escape_invisible("-" if value in (None, "") else str(value)), quote=True))


def badge(status: Any) -> Html:
    name = str(status) if status in _STATUSES else "other"
    return Html(f'<span class="st st-{name}">{e(status)}</span>')


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, empty: str = "none") -> Html:
    body = "".join("<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return Html(f'<p class="note">{e(empty)}</p>')
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    return Html(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def slot_link(slot_id: str) -> Html:
    return Html(f'<a href="/ui/slots/{e(quote(slot_id, safe="@:"))}">{e(slot_id)}</a>')


def search_form(value: str = "") -> str:
    """The search box (``http/ui_search.py``): in every page's header, and above a search's answer."""
    return ('<form class="search" method="get" action="/ui/search"><input type="text" name="q" maxlength="300" '
            f'placeholder="slot, job, request or work id" aria-label="search" value="{e(value) if value else ""}">'
            '<button type="submit">Find</button></form>')


def page(title: str, body: str, *, nav: bool = True, refresh: int | None = None) -> str:
    """One page; ``refresh`` (seconds) asks the browser to reload it while something shown is live."""
    header_html = ""
    if nav:
        header_html = ('<header><strong>PixivFlow</strong><a href="/ui">Overview</a><a href="/ui/slots">Occurrences</a>'
                       '<a href="/ui/jobs">Jobs</a><a href="/ui/failures">Failures</a><a href="/ui/dead">Dead letters</a>'
                       + search_form() + '<form method="post" action="/ui/logout">'
                       '<button type="submit">Log out</button></form></header>')
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(title)} · PixivFlow</title>'
            '<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,">'
            + (f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else "") +
            f"<style>{CSS}</style></head><body>{header_html}<main><h1>{e(title)}</h1>{body}</main></body></html>")


def html_response(status: int, body: str, *, cookies: list[Cookie] | None = None,
                  headers: dict[str, str] | None = None, img_origins: Iterable[str] = ()) -> Response:
    """``img_origins``: the origins of the images the page shows (its thumbnails' bucket, or the dev
    server's local S3 endpoint), the only ones its CSP ``img-src`` allows besides ``data:``."""
    policy = {"Content-Security-Policy": _CSP.format(images="".join(f" {o}" for o in sorted(set(img_origins))))}
    return Response(status_code=status, content_type="text/html; charset=utf-8", body=body,
                    headers={**HEADERS, **policy, **(headers or {})}, cookies=cookies)


def redirect(location: str, *, cookies: list[Cookie] | None = None) -> Response:
    body = page("Redirect", f'<p><a href="{e(location)}">Continue</a></p>', nav=False)
    return html_response(303, body, cookies=cookies, headers={"Location": location})


# -- the views -----------------------------------------------------------------------------------------


def _reads() -> Reads:
    return runtime.get().wiring.reads


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in counts.items()) or "-"


def duration(start: int | None, end: int | None) -> str:
    """How long from ``start`` to ``end`` (epoch ms) as a person reads it; "-" when either is unknown."""
    if not start or not end or end < start:
        return "-"
    seconds = (end - start) // 1000
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def took(row: dict[str, Any]) -> str:
    """An occurrence's run: from its start (else its admission) to its end, or "running" while open."""
    if row.get("open") and not row.get("completedAt"):
        return "running"
    return duration(row.get("startedAt") or row.get("createdAt"), row.get("completedAt"))


def _slot_table(rows: list[dict[str, Any]]) -> Html:
    return table(["Occurrence", "Status", "Trigger", "Local time", "UTC", "Took", "Cells", "Reasons", "Last error"],
                 [[slot_link(r["slotId"]), badge(r["status"]), r["triggerSource"], local(r["occurrenceAt"], r["timezone"]),
                   iso(r["occurrenceAt"]), took(r), _counts(r["cells"]), ", ".join(r["reasons"]),
                   Html(f'<span class="err">{e(r["lastError"])}</span>') if r["lastError"] else "-"] for r in rows],
                 empty="no occurrences yet")


def _schedules_table(reads: Reads, csrf: str | None = None) -> Html:
    from .ui_actions import schedule_actions  # the forms beside each schedule (they use this module's helpers)

    config = reads.config
    fires = schedule_views.next_fires(config, reads.now_ms(), 3) if config is not None else []
    rows = []
    for schedule in config.schedules if config is not None else []:
        mine = [f for f in fires if f["scheduleId"] == schedule.id]
        pause = reads.ledger.schedule_pause(schedule.id) if schedule.enabled else None
        if pause is not None and pause.paused:
            mine = []  # a paused schedule has no next fire: its state says since when and by whom
        items = []
        for f in mine:
            if f["at"] is None:
                items.append(f'<li class="note">{e(f["local"])}: skipped (DST gap: no such local time, no fire)</li>')
            else:
                note = ' <span class="note">(DST repeat: fires once, at the first)</span>' if f["note"] == "dst_repeat" else ""
                items.append(f"<li>{e(local(f['at'], f['timezone']))} = {e(iso(f['at']))}{note}</li>")
        rows.append([schedule.id, schedule.timezone, Html(f"<code>{e(schedule.cron)}</code>"),
                     _schedule_state(reads, schedule), len(schedule.targetIds or []),
                     Html(f"<ul>{''.join(items)}</ul>") if items else "-",
                     *([schedule_actions(reads, schedule, pause, csrf)] if csrf else [])])
    headers = ["Schedule", "Zone", "Cron", "State", "Targets", "Next fires (local = UTC)"] + (["Actions"] if csrf else [])
    return table(headers, rows, empty="no schedules")


def _schedule_state(reads: Reads, schedule: Any) -> Html | str:
    """``disabled`` (the config), ``paused since ...`` (the operator's pause item), or ``enabled``."""
    if not schedule.enabled:
        return "disabled"
    pause = reads.ledger.schedule_pause(schedule.id)
    if pause is not None and pause.paused:
        return Html(f"{badge('paused')} since {e(iso(pause.paused_at))}" + (f" by {e(pause.by)}" if pause.by else ""))
    return "enabled"


def _reason(code: str | None) -> Html | str:
    """A terminal reason in the page's language with its code beside it (the Chinese business
    message, PixivFlow's copy, stays in the notifications and the ledger)."""
    if not code:
        return "-"
    return Html(f"{e(reason_words(code) or code)} <code>{e(code)}</code>")


def _dead_table(rows: list[dict[str, Any]], csrf: str | None = None) -> Html:
    """The dead rows, each with its Redrive form beside it when the page has a session's CSRF token."""
    from .ui_actions import redrive_form

    return table(["Kind", "Key", "Target", "Occurrence", "Attempts", "Died at", "Error"] + (["Redrive"] if csrf else []),
                 [[r["kind"], Html(f"<code>{e(r['key'])}</code>"), r["target"],
                   slot_link(r["slotId"]) if r.get("slotId") else "-", f"{r['attempts']}/{r['maxAttempts']}",
                   iso(r["updatedAt"]), r["lastError"], *([redrive_form(r["kind"], r["key"], csrf)] if csrf else [])]
                  for r in rows], empty="no dead letters")


def overview(reads: Reads, csrf: str | None = None) -> str:
    states = inspection.recent_states(reads, per_schedule=LATEST_PER_SCHEDULE)
    dead = inspection.dead_among(reads, states)
    dead_note = (f'<p><a href="/ui/dead">{len(dead)} dead letter(s)</a> among these occurrences.</p>' if dead
                 else '<p class="note">No dead letters among these occurrences.</p>')
    from . import ui_actions, ui_pages  # the history strips, the chart, the action forms (they use this module's helpers)

    live = any(st.slot.open for st in states)
    return page("Overview", f"<h2>Schedules</h2>{_schedules_table(reads, csrf)}{ui_actions.ACTIONS_NOTE if csrf else ''}"
                            f"<h2>Latest occurrences</h2>{_slot_table(inspection.slot_rows(states))}{dead_note}"
                            f"{ui_pages.history(reads)}",
                refresh=ui_pages.REFRESH_S if live else None)


def _lease(lease: dict[str, Any] | None) -> str:
    if not lease:
        return "-"
    return f"{lease['owner']} until {iso(lease['until'])} ({'live' if lease['live'] else 'expired'})"


def occurrence(view: dict[str, Any], thumbs: dict[str, str] | None = None, csrf: str | None = None) -> str:
    from . import ui_pages  # the report's renderer (it imports this module's helpers)
    from .ui_thumbs import thumbnail_section

    slot = view["slot"]
    outcome = view.get("outcome") or {}
    facts = table(["Field", "Value"], [
        ["status", badge(slot["status"])], ["schedule", slot["scheduleId"]], ["trigger", slot["triggerSource"]],
        ["occurrence", f"{local(slot['occurrenceAt'], slot['timezone'])} = {iso(slot['occurrenceAt'])}"],
        ["name", slot["name"]], ["created", iso(slot["createdAt"])], ["started", iso(slot["startedAt"])],
        ["completed", iso(slot["completedAt"])], ["last error", slot["lastError"]],
        ["outcome", f"{outcome.get('status')} (business status {outcome.get('business_status')}"
         + (", alertable)" if outcome.get("alertable") else ")") if outcome else "-"],
        *([["request", slot["manualRequestId"]]] if slot["manualRequestId"] else []),
        *([["retry of", Html(f"{slot_link(slot['retryOf'])} ({e(slot['retryMode'])})")]] if slot.get("retryOf") else []),
        ["took", took(slot)],
        *([["correlation", slot["correlationId"]]] if slot["correlationId"] else []),
    ])
    from .ui_failures import retry_forms

    cells = table(["Target", "Status", "Work", "Attempts", "Took", "Lease", "Reason", "Last error", "Candidate report",
                   *(["Retry"] if csrf else [])],
                  [[c["targetId"], badge(c["status"]), f"{c['workType']} {c['workId']}" if c["workId"] else "-",
                    c["attempts"], duration(c["startedAt"] or c["createdAt"], c["completedAt"]), _lease(c["lease"]),
                    _reason(c["terminalReasonCode"]),
                    c["lastError"], ui_pages.candidate_report(c["candidateReport"]) if c["candidateReport"] else "-",
                    *([retry_forms(_reads(), slot, c, csrf)] if csrf else [])]
                   for c in view["cells"]])
    deliveries = table(["Target", "Route", "Work", "Ledger", "Outbox", "Attempts", "ACK", "Remote", "Next attempt", "Error",
                        "Idempotency key"],
                       [[d["targetId"], d["route"], d["workId"], badge(d["ledgerStatus"]), badge(d["outboxStatus"]),
                         f"{d['attempts']}/{d['maxAttempts']}", d["ack"],
                         " ".join(x for x in (d["remoteId"], d["remoteStatus"]) if x) or "-",
                         iso(d["nextAttemptAt"]) if d["nextAttemptAt"] is not None else "-", d["lastError"],
                         Html(f"<code>{e(d['key'])}</code>")] for d in view["deliveries"]], empty="no delivery intents")
    notes = table(["Key", "Route", "Status", "Attempts", "Error"],
                  [[Html(f"<code>{e(n['key'])}</code>"), n["target"], badge(n["status"]), f"{n['attempts']}/{n['maxAttempts']}",
                    n["lastError"]] for n in view["notifications"]], empty="no notifications")
    events = table(["At", "Kind", "Type", "Event id", "Callback"],
                   [[iso(ev["at"]), ev["kind"], ev["type"], ev.get("eventId"),
                     Html(f"{badge(ev['callback']['status'])} {e(ev['callback']['attempts'])}/{e(ev['callback']['maxAttempts'])} "
                          f"{e(ev['callback']['lastError']) if ev['callback']['lastError'] else ''}") if ev.get("callback") else "-"]
                    for ev in view["events"]], empty="no events")
    timeline = "".join(f"<li><time>{e(iso(t['at']))}</time> <strong>{e(t['subject'])}</strong> {e(t['what'])}</li>"
                       for t in view["timeline"])
    return page(f"Occurrence {slot['slotId']}",
                f"{facts}{thumbnail_section(view, thumbs or {})}<h2>Cells</h2>{cells}<h2>Deliveries</h2>{deliveries}"
                f"<h2>Notifications</h2>{notes}"
                f"<h2>Events</h2>{events}<h2>Timeline</h2><ol class=\"timeline\">{timeline}</ol>")


LOGIN_TRIES_PER_MINUTE = 10


def _client_address(event: Any) -> str:
    """The caller's address as API Gateway saw it (``requestContext.http.sourceIp``)."""
    context = (getattr(event, "raw_event", None) or {}).get("requestContext") or {}
    address = str((context.get("http") or {}).get("sourceIp") or "unknown")
    return address[:64]


def _throttled(req: Any, now_ms: int) -> Response:
    wait_s = 60 - (now_ms // 1000) % 60
    body = login_page(f"Too many wrong tokens from this address: try again in {wait_s} s.")
    return req.respond(html_response(429, body, headers={"Retry-After": str(wait_s)}), "ui.login_refused",
                       reason="throttled", retry_after_s=wait_s)


def login_page(message: str | None = None) -> str:
    error = f'<p class="err">{e(message)}</p>' if message else ""
    form = ('<form class="login" method="post" action="/ui/login"><label for="token">Trigger token</label>'
            '<input id="token" type="password" name="token" autocomplete="off" required>'
            '<button type="submit">Log in</button></form>')
    return page("Log in", f"{error}{form}<p class=\"note\">The session lasts 8 hours; the token itself is never stored "
                          "in the browser.</p>", nav=False)


# -- the routes ----------------------------------------------------------------------------------------------


def _token() -> str | None:
    return runtime.get().secrets.token(TRIGGER)


DISABLED = "the operator page is disabled: no trigger token is configured"


def _guard(req: Request, event: Any) -> Response | None:
    """None when the request carries a live session; else the answer (login redirect, or 503)."""
    token = _token()
    if not token:
        return req.respond(html_response(503, page("Unavailable", f"<p>{e(DISABLED)}</p>", nav=False)),
                           "ui.disabled", reason="token_not_configured")
    if live_session(event, token, runtime.get().wiring.now()) is not None:
        return None
    return req.respond(redirect("/ui/login"), "ui.login_required", level="info")


def _form(event: Any) -> dict[str, list[str]]:
    """The login form: ``application/x-www-form-urlencoded``, at most 4 KB (the token is one field)."""
    content_type = header(event.get("headers") or {}, "content-type", first_value=False) or ""
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise BodyProblem(415, "unsupported_media_type", "Content-Type must be application/x-www-form-urlencoded")
    raw = event.get("body")
    if raw in (None, ""):
        return {}
    if len(raw) > MAX_FORM_BYTES * 2:
        raise BodyProblem(413, "too_large", "the form is larger than 4 KB")
    text = decode_text(raw, bool(event.get("isBase64Encoded")))
    if text is None or len(text.encode("utf-8", "surrogatepass")) > MAX_FORM_BYTES:
        raise BodyProblem(413, "too_large", "the form is larger than 4 KB")
    try:
        return parse_qs(text, keep_blank_values=True, max_num_fields=10)
    except ValueError:
        raise BodyProblem(400, "invalid_form", "the form cannot be read") from None


def register(shell: HttpShell) -> None:
    """Add the /ui routes to the trigger function's shell (left out of the OpenAPI document)."""

    def route(method: str, rule: str) -> Any:
        return shell.route(method, rule, summary="operator page", in_schema=False, stage="ui")

    from . import ui_failures, ui_search

    _session_routes(shell, route)
    _page_routes(shell, route)
    ui_failures.register(shell, route)
    ui_search.register(shell, route)
    _action_routes(shell, route)


def _session_routes(shell: HttpShell, route: Any) -> None:
    """Logging in and out: the session cookie, its epoch, and the overview a session opens on."""
    @route("GET", "/ui")
    def ui_overview(req: Request) -> Response:
        event = shell.app.current_event
        denied = _guard(req, event)
        if denied is not None:
            return denied
        return req.respond(html_response(200, overview(_reads(), _csrf(event))), "ui.page", page="overview")

    @route("GET", "/ui/login")
    def ui_login_form(req: Request) -> Response:
        return req.respond(html_response(200, login_page()), "ui.page", page="login")

    @route("POST", "/ui/login")
    def ui_login(req: Request) -> Response:
        event = shell.app.current_event
        token = _token()
        if not token:
            return req.respond(html_response(503, page("Unavailable", f"<p>{e(DISABLED)}</p>", nav=False)),
                               "ui.disabled", reason="token_not_configured")
        try:
            form = _form(event)
        except BodyProblem as problem:
            return req.respond(html_response(problem.status, login_page(problem.message)), "ui.login_refused",
                               reason=problem.reason)
        wiring = runtime.get().wiring
        # At most LOGIN_TRIES_PER_MINUTE wrong tokens a minute from one address, counted in the
        # ledger (every container sees the same count); past it even the right token waits, so the
        # page is no oracle for guessing.
        client, now = _client_address(event), wiring.now()
        minute = now // 60_000
        if wiring.sessions.login_failures(client, minute) >= LOGIN_TRIES_PER_MINUTE:
            return _throttled(req, now)
        presented = (form.get("token") or [""])[0]
        if check_bearer({"authorization": f"Bearer {presented}"}, token) is not None:
            if not wiring.sessions.count_login_failure(client, minute, LOGIN_TRIES_PER_MINUTE, now):
                return _throttled(req, now)
            return req.respond(html_response(401, login_page("That is not the trigger token.")), "ui.login_refused",
                               reason="bad_token")
        session = issue_session(token, wiring.sessions.ui_session_epoch(), wiring.now())
        return req.respond(redirect("/ui", cookies=[session_cookie(session, SESSION_MS // 1000)]), "ui.login")

    @route("POST", "/ui/logout")
    def ui_logout(req: Request) -> Response:
        """Ends the session server-side: the epoch its cookie named is over for every cookie."""
        token = _token()
        wiring = runtime.get().wiring
        epoch = live_session(shell.app.current_event, token, wiring.now()) if token else None
        ended = wiring.sessions.end_ui_sessions(epoch, wiring.now()) if epoch is not None else None
        return req.respond(redirect("/ui/login", cookies=[session_cookie("", 0)]), "ui.logout", ended=ended is not None)


def _page_routes(shell: HttpShell, route: Any) -> None:
    """The pages that read: occurrences, jobs, one slot, one job, the dead letters."""
    from . import ui_pages  # renders with this module's helpers: imported once both exist
    from .ui_thumbs import thumbnails

    @route("GET", "/ui/slots")
    def ui_slots(req: Request) -> Response:
        event = shell.app.current_event
        denied = _guard(req, event)
        if denied is not None:
            return denied
        query = event.query_string_parameters or {}
        jump = (query.get("id") or "").strip()
        if jump:
            if len(jump) > 300:
                return req.respond(html_response(400, page("Occurrences", "<p class=\"err\">A slot id has at most 300 "
                                                                          "characters.</p>")), "ui.bad_query")
            return req.respond(redirect(f"/ui/slots/{quote(jump, safe='@:')}"), "ui.page", page="jump")
        schedule_id = query.get("schedule") or None
        if schedule_id is not None and not _SCHEDULE_ID.match(schedule_id):
            return req.respond(html_response(400, page("Occurrences", "<p class=\"err\">schedule: not a schedule id</p>")),
                               "ui.bad_query")
        try:
            filters = ui_pages.slot_filters(query)
        except ui_pages.QueryProblem as problem:
            return req.respond(html_response(400, ui_pages.problem_page("Occurrences", problem)), "ui.bad_query",
                               field=problem.field)
        return req.respond(html_response(200, ui_pages.occurrences(_reads(), schedule_id, filters)), "ui.page",
                           page="occurrences")

    @route("GET", "/ui/jobs")
    def ui_jobs(req: Request) -> Response:
        denied = _guard(req, shell.app.current_event)
        if denied is not None:
            return denied
        try:
            before = ui_pages.jobs_cursor(shell.app.current_event.query_string_parameters or {})
        except ui_pages.QueryProblem as problem:
            return req.respond(html_response(400, ui_pages.problem_page("Jobs", problem)), "ui.bad_query",
                               field=problem.field)
        return req.respond(html_response(200, ui_pages.jobs(_reads(), before)), "ui.page", page="jobs")

    @route("GET", "/ui/jobs/<jobId>")
    def ui_job(req: Request, jobId: str) -> Response:
        return _one(shell, req, "job", jobId,  # percent-decoded and text-checked by the shell
                    inspection.show_job, ui_pages.job)

    @route("GET", "/ui/slots/<slotId>")
    def ui_slot(req: Request, slotId: str) -> Response:
        csrf = _csrf(shell.app.current_event)
        return _one(shell, req, "slot", slotId,  # percent-decoded and text-checked by the shell
                    inspection.show_slot, lambda view, thumbs: occurrence(view, thumbs, csrf), images=thumbnails)

    @route("GET", "/ui/dead")
    def ui_dead(req: Request) -> Response:
        event = shell.app.current_event
        denied = _guard(req, event)
        if denied is not None:
            return denied
        try:
            before = ui_pages.dead_cursor(event.query_string_parameters or {})
        except ui_pages.QueryProblem as problem:
            return req.respond(html_response(400, ui_pages.problem_page("Dead letters", problem)), "ui.bad_query",
                               field=problem.field)
        return req.respond(html_response(200, ui_pages.dead_letters(_reads(), _csrf(event), before)), "ui.page",
                           page="dead")


def _action_routes(shell: HttpShell, route: Any) -> None:
    """The operator's actions (``http/ui_actions.py``)."""
    from . import ui_actions  # renders with this module's helpers: imported once both exist

    @route("POST", "/ui/act/<action>")
    def ui_act(req: Request, action: str) -> Response:
        """An operator's action (``http/ui_actions.py``): a live session AND its CSRF token, else nothing happens."""
        event = shell.app.current_event
        denied = _guard(req, event)
        if denied is not None:
            return denied
        if action not in ui_actions.ACTIONS:
            return req.respond(html_response(404, page("Not found", f"<p>No action <code>{e(action)}</code>.</p>")),
                               "ui.not_found", action=action[:50])
        try:
            form = _form(event)
        except BodyProblem as problem:
            return req.respond(html_response(problem.status, page("Refused", f'<p class="err">{e(problem.message)}</p>')),
                               "ui.action_refused", action=action, reason=problem.reason)
        session = _session_value(event)
        if session is None or not ui_actions.csrf_valid((form.get("csrf") or [""])[0], session, _token() or ""):
            body = page("Refused", '<p class="err">csrf: the form\'s token is missing or not this session\'s; '
                                   "reload the page and try again.</p>")
            return req.respond(html_response(403, body), "ui.csrf_refused", action=action)
        result = ui_actions.perform(runtime.get().wiring, _reads(), action, form)
        level = result.fields.pop("level", None)
        return req.respond(html_response(result.status, result.html), result.event, level=level, **result.fields)


def _session_value(event: Any) -> str | None:
    """The cookie value of the request's live session (what its CSRF token is derived from)."""
    token, now = _token(), runtime.get().wiring.now()
    current = live_session(event, token, now) if token else None
    if current is None or not token:
        return None
    return next((v for v in cookie_values(event) if session_epoch(v, token, now) == current), None)


def _csrf(event: Any) -> str | None:
    from . import ui_actions

    session, token = _session_value(event), _token()
    return ui_actions.csrf_token(session, token) if session and token else None


def _one(shell: HttpShell, req: Request, noun: str, item_id: str, show, render, images=None) -> Response:
    """One slot's or one job's page: 404 naming the (escaped) id when the ledger has none."""
    denied = _guard(req, shell.app.current_event)
    if denied is not None:
        return denied
    try:
        view = show(_reads(), item_id)
    except InspectionError:
        body = page("Not found", f"<p>There is no {noun} <code>{e(item_id)}</code> in the ledger.</p>")
        return req.respond(html_response(404, body), "ui.not_found", **{f"{noun}_id": item_id[:300]})
    page_name = "occurrence" if noun == "slot" else noun
    if images is None:
        return req.respond(html_response(200, render(view)), "ui.page", page=page_name, **{f"{noun}_id": item_id})
    from .ui_thumbs import origin_of

    thumbs = images(view)
    return req.respond(html_response(200, render(view, thumbs), img_origins=[o for o in map(origin_of, thumbs.values()) if o]),
                       "ui.page", page=page_name, thumbnails=len(thumbs), **{f"{noun}_id": item_id})



__all__ = ["COOKIE", "CSS", "HEADERS", "SESSION_MS", "issue_session", "live_session", "register", "session_epoch"]
