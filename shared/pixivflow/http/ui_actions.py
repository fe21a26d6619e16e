"""The operator page's actions: run a schedule now, refetch one target, redrive a dead
row, pause or resume a schedule, retry a failed cell (``http/ui_failures.py``). Each is a form
POST to ``/ui/act/{action}`` behind the session AND a per-session CSRF token.

The token is an HMAC, keyed by the trigger token, of the session cookie's value: a page that
knows the session renders it into its forms, a forged cross-site POST cannot compute it (the
cookie is HttpOnly and the key is the server's), and it needs no storage, so it holds however
sessions are kept (``http/ui.py``). SameSite=Strict already keeps the cookie off cross-site
POSTs; the token is the second, independent guard.

Each action logs the operator's audit line: a redrive the same event and fields as
``pixivflow outbox redrive`` (``cli._audit``: ``outbox.redriven`` / ``outbox.redrive_refused``),
pause and resume the CLI's ``schedule.paused`` / ``schedule.resumed`` (``*_refused``), run and
refetch their own ``ui.run_requested`` / ``ui.refetch_requested``, a retry the
``failure.retry_requested`` / ``failure.retry_refused`` the CLI's ``failures retry`` writes, with
``operator="ui"``. Each action sits beside the row it acts on, and its answer links back."""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from typing import Any, Mapping

from ..domain.errors import StatusError
from ..services import inspection, manual, schedule_views
from ..services.inspection import InspectionError, Reads
from ..services.trigger import run_now
from .ui import Html, e, page, slot_link

_CSRF_CONTEXT = b"pixivflow-ui-csrf:v1:"
ACTIONS = ("run", "refetch", "redrive", "pause", "resume", "retry")
OPERATOR = "ui"
BACK = '<p><a href="/ui">Overview</a></p>'


def csrf_token(session: str, trigger_token: str) -> str:
    mac = hmac.new(trigger_token.encode("utf-8", "surrogatepass"), _CSRF_CONTEXT + session.encode("ascii", "replace"),
                   hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode("ascii").rstrip("=")


def csrf_valid(presented: str | None, session: str, trigger_token: str) -> bool:
    if not isinstance(presented, str) or len(presented) > 100:
        return False
    return hmac.compare_digest(presented.encode("ascii", "replace"), csrf_token(session, trigger_token).encode("ascii"))


def _form(action: str, csrf: str, fields: Mapping[str, str], label: str) -> str:
    hidden = "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in {"csrf": csrf, **fields}.items())
    return f'<form class="act" method="post" action="/ui/act/{e(action)}">{hidden}<button type="submit">{e(label)}</button></form>'


action_form = _form  # the one form every action posts (http/ui_failures.py renders the retry's)


def run_form(schedule_id: str, csrf: str) -> Html:
    return Html(_form("run", csrf, {"schedule": schedule_id}, f"Run {schedule_id} now"))


def refetch_form(target_id: str, csrf: str) -> Html:
    # The request id is fixed when the form is rendered: submitting the same form twice is one refetch.
    return Html(_form("refetch", csrf, {"target": target_id, "requestId": str(uuid.uuid4())}, f"Refetch {target_id}"))


def redrive_form(kind: str, key: str, csrf: str) -> Html:
    return Html(_form("redrive", csrf, {"kind": kind, "key": key}, "Redrive"))


def pause_form(schedule_id: str, paused: bool, csrf: str) -> Html:
    action = "resume" if paused else "pause"
    return Html(_form(action, csrf, {"schedule": schedule_id}, f"{action.capitalize()} {schedule_id}"))


ACTIONS_NOTE = Html('<p class="note">Run now runs the occurrence due now (within the grace window); a refetch runs '
                    "one target in its own manual occurrence. A paused schedule's fires are refused and not counted "
                    "as missed; resuming runs it again from its next fire.</p>")


def schedule_actions(reads: Reads, schedule: Any, pause: Any, csrf: str) -> Html:
    """The forms beside one schedule's row: run it now, pause or resume it, refetch each of its targets."""
    if not schedule.enabled or not schedule.cron:
        return Html("-")
    paused = bool(pause is not None and pause.paused)
    forms = ([] if paused else [run_form(schedule.id, csrf)]) + [pause_form(schedule.id, paused, csrf)]
    forms += [refetch_form(t.id, csrf) for t in reads.config.targets_for(schedule)] if reads.config is not None else []
    return Html(f'<div class="acts">{"".join(forms)}</div>')


class ActionResult:
    def __init__(self, status: int, html: str, event: str, **fields: Any) -> None:
        self.status, self.html, self.event, self.fields = status, html, event, fields


def _field(form: Mapping[str, list[str]], name: str) -> str:
    return ((form.get(name) or [""])[0]).strip()


def perform(wiring: Any, reads: Reads, action: str, form: Mapping[str, list[str]]) -> ActionResult:
    """Do one action; the answer's page says what happened (or why not, naming the field)."""
    if action == "run":
        schedule_id = _field(form, "schedule")
        schedule = wiring.config.schedule(schedule_id) if schedule_id else None
        if schedule is None or not schedule.enabled:
            return _refused("Run now", 404, f"schedule: no enabled schedule {schedule_id!r}", "ui.run_refused",
                            schedule_id=schedule_id[:100])
        try:
            _occ, admission = run_now(wiring.triggers, schedule.id, None)
        except StatusError as exc:
            return _refused("Run now", exc.status, f"schedule {schedule.id}: {exc.message}", "ui.run_refused",
                            schedule_id=schedule.id, reason=exc.message)
        slot_id = admission.slot.slot_id
        return ActionResult(202, page("Run now", f"<p>{e(schedule.id)}: {e(admission.disposition)}, "
                                                 f"occurrence {slot_link(slot_id)}.</p>{BACK}"),
                            "ui.run_requested", operator=OPERATOR, schedule_id=schedule.id, slot_id=slot_id,
                            disposition=admission.disposition)
    if action == "refetch":
        target_id, request_id = _field(form, "target"), _field(form, "requestId")
        try:
            result = manual.refetch(wiring.refetches, target_id, request_id)
        except StatusError as exc:
            field = "requestId" if exc.status == 400 else "target"
            return _refused("Refetch", exc.status, f"{field}: {exc.message}", "ui.refetch_refused",
                            target_id=target_id[:100], reason=exc.message)
        slot_id = result.slot.slot_id
        return ActionResult(202, page("Refetch", f"<p>{e(target_id)}: {e(result.disposition)}, occurrence "
                                                 f"{slot_link(slot_id)}.</p>{BACK}"),
                            "ui.refetch_requested", operator=OPERATOR, target_id=target_id, request_id=request_id,
                            slot_id=slot_id, disposition=result.disposition)
    if action in ("pause", "resume"):
        return _flip_pause(reads, action, _field(form, "schedule"))
    if action == "retry":
        from .ui_failures import perform_retry

        return perform_retry(wiring, reads, form)
    # redrive: the CLI's own service call and audit fields (``pixivflow outbox redrive``, cli/__init__.py)
    kind, key = _field(form, "kind") or None, _field(form, "key")
    if not key:
        return _refused("Redrive", 400, "key: the dead row's key is required", "outbox.redrive_refused",
                        operator=OPERATOR, reason="key missing")
    try:
        done = inspection.redrive(reads, key, kind)
    except InspectionError as exc:
        return _refused("Redrive", 404 if exc.code == "not_found" else 409, exc.message, "outbox.redrive_refused",
                        operator=OPERATOR, kind=kind, key=key[:300], reason=exc.message)
    return ActionResult(200, page("Redrive", f"<p>Re-armed {e(done['kind'])} row <code>{e(key)}</code> (was "
                                             f"{e(done['previousAttempts'])} attempt(s), last error: "
                                             f"{e(done['previousError'])}); "
                                             f"{'sent to the outbox queue now' if done['sent'] else 'the sweep re-drives it'}"
                                             ".</p><p>" + (f"Occurrence {slot_link(done['slotId'])} · " if done["slotId"] else "")
                                             + '<a href="/ui/dead">Dead letters</a></p>'),
                        "outbox.redriven", level="info", operator=OPERATOR, kind=done["kind"], key=key,
                        previous_attempts=done["previousAttempts"], previous_error=done["previousError"], sent=done["sent"])


def _flip_pause(reads: Reads, action: str, schedule_id: str) -> ActionResult:
    """The CLI's ``schedules pause|resume`` (same service call, same audit events and fields)."""
    title = action.capitalize()
    try:
        view = schedule_views.set_paused(reads, schedule_id, action == "pause", by=OPERATOR)
    except InspectionError as exc:
        field = "schedule: " if exc.code == "not_found" else ""
        return _refused(title, 404 if exc.code == "not_found" else 409, f"{field}{exc.message}",
                        f"schedule.{action}_refused", operator=OPERATOR, schedule_id=schedule_id[:100], reason=exc.message)
    done = "paused: its fires are refused and not counted as missed" if view["paused"] else \
        "resumed: it runs again from its next fire"
    return ActionResult(200, page(title, f"<p>Schedule {e(view['scheduleId'])} {e(done)}.</p>"
                                         '<p><a href="/ui">Overview</a></p>'),
                        f"schedule.{'paused' if view['paused'] else 'resumed'}", level="info", operator=OPERATOR,
                        schedule_id=view["scheduleId"], paused_at=view["pausedAt"], resumed_at=view["resumedAt"])


def _refused(title: str, status: int, message: str, event: str, **fields: Any) -> ActionResult:
    return ActionResult(status, page(title, f'<p class="err">{e(message)}</p>'), event, **fields)


__all__ = ["ACTIONS", "ACTIONS_NOTE", "schedule_actions", "csrf_token", "csrf_valid", "pause_form", "perform", "redrive_form"]
