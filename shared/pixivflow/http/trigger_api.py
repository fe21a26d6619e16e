"""The trigger function's HTTP surface, on the shared shell (``shell.py``).

Routes: ``GET /health`` (open); with the trigger token ``GET /internal/schedules``,
``POST /internal/schedules/{scheduleId}/run``, ``POST /internal/outbox/drain``; with the
manual-work token (JOBS_TOKEN) ``POST /internal/targets/{targetId}/refetch`` and
``GET /internal/targets/{targetId}/refetch/{requestId}``.

Every body here has the legacy shape: refusals ``{"status":"error","error":…}`` with fixed
messages, each route's 500 with its own message. The shell supplies the order (route, the
``schedule.trigger_received`` line of the run route, auth, body), the one outcome line per
request and the mapping of exceptions: a domain ``StatusError`` (``OccurrenceError``,
``ManualRequestError``) answers its status and message, anything else the route's 500.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel, ConfigDict, Field

from .. import __version__, runtime
from ..domain.occurrence import OccurrenceError, check_window, resolve_occurrence
from ..services import manual
from ..services.admission import ACCEPTED, ALREADY_COMPLETED, ALREADY_RUNNING, REJECTED, Admission
from ..services.delivery import queue_due
from ..services.trigger import run_now
from .auth import JOBS, TRIGGER
from .text import ID, TextRule
from .schemas import SCHEDULE_ID_PATTERN, TARGET_ID_PATTERN, UUID_PATTERN, ref
from . import ui
from .shell import LEGACY, BodySpec, Failure, HttpShell, Rejection, Request, describe_validation_error

SERVICE_NAME = "pixivflow-scheduler-trigger"
MAX_LABEL = 80

# disposition -> (HTTP status, body.status, body.note, log event): one table
DISPOSITIONS: dict[str, tuple[int, str, str, str]] = {
    ACCEPTED: (202, "accepted", "queued", "schedule.trigger_accepted"),
    ALREADY_RUNNING: (202, "running", "already_running", "schedule.trigger_already_running"),
    ALREADY_COMPLETED: (200, "completed", "already_completed", "schedule.trigger_already_completed"),
    REJECTED: (503, "rejected", "rejected", "schedule.trigger_rejected"),
}

shell = HttpShell(
    "trigger", LEGACY,
    title="PixivFlow scheduler HTTP API",
    version=__version__,
    description="The trigger function's operator routes and the job_events function's Workflow "
                "Protocol v1 routes, behind one HTTP API.",
    bearer_schemes={
        "triggerToken": "TRIGGER_TOKEN (or the SSM parameter TRIGGER_TOKEN_PARAMETER names)",
        "manualWorkToken": "JOBS_TOKEN, the manual-work token (or JOBS_TOKEN_PARAMETER)",
    },
)
app = shell.app


class RunBody(BaseModel):
    """Optional body of the run route. ``label`` becomes the slot name (first 80 chars)."""

    model_config = ConfigDict(extra="allow")
    label: str | None = Field(default=None, description="Human label for the slot (trimmed, first 80 chars); "
                                                       "no control characters")


@dataclass(frozen=True)
class RefetchBody:
    request_id: str
    correlation_id: str | None


def refetch_body(data: dict[str, Any]) -> RefetchBody:
    """The refetch body's rules, in their fixed order, each with its fixed message."""
    request_id = data.get("requestId")
    if not manual.is_request_id(request_id):
        raise Rejection(400, "requestId must be a UUID")
    correlation_id = data.get("correlationId")
    if correlation_id is not None and (not isinstance(correlation_id, str) or len(correlation_id) > manual.MAX_CORRELATION_ID):
        raise Rejection(400, "correlationId must be a string of at most 200 chars", request_id=request_id)
    return RefetchBody(request_id, correlation_id)


# -- health --------------------------------------------------------------------------


@shell.route("GET", "/health", summary="Liveness", ok={200: ("service, version and commit", "Health")})
def health(req: Request) -> Response:
    return req.finish(200, {"status": "ok", "service": SERVICE_NAME, "version": __version__,
                            "commit": os.environ.get("PIXIVFLOW_COMMIT") or None}, "http.health")


# -- schedules ---------------------------------------------------------------------------


@shell.route("GET", "/internal/schedules", token=TRIGGER, summary="Enabled schedules and the occurrence a trigger would run now",
             ok={200: ("enabled schedules", "ScheduleList")})
def list_schedules(req: Request) -> Response:
    wiring = runtime.get().wiring
    config = wiring.config
    now = wiring.now()
    grace = config.schedulerRuntime.trigger.graceMinutes
    rows = []
    for schedule in config.schedules:
        if not schedule.enabled:
            continue
        try:
            occ = resolve_occurrence(schedule.id, schedule.cron, schedule.timezone, now)
            check_window(occ, now, grace)
            occurrence: str | None = occ.slot_id
        except OccurrenceError:
            occurrence = None
        rows.append({"scheduleId": schedule.id, "mode": config.schedulerRuntime.mode, "occurrence": occurrence})
    return req.finish(200, {"schedules": rows}, "schedule.listed", count=len(rows))


def _known_schedule(req: Request, scheduleId: str) -> Response | None:
    """Unknown or disabled ids are 404 before any body rule."""
    schedule = runtime.get().wiring.config.schedule(scheduleId)
    if schedule is None or not schedule.enabled:
        return req.refuse(404, f"unknown schedule: {scheduleId}", event="schedule.trigger_not_found")
    return None


@shell.route("POST", "/internal/schedules/<scheduleId>/run", token=TRIGGER, body=BodySpec(model=RunBody),
             received="scheduleId", source="http", precheck=_known_schedule, rejected_event="schedule.trigger_rejected",
             refusal_fields={"disposition": "rejected"}, params={"scheduleId": SCHEDULE_ID_PATTERN},
             failure=Failure("schedule run failed; the occurrence will resume on the next trigger", "schedule.trigger_error",
                             "schedule.trigger_error_detail"),
             summary="Run the occurrence due now (window-checked)",
             ok={200: ("already completed", "RunResult"), 202: ("accepted or already running", "RunResult"),
                 503: ("rejected (dispatch failed; the sweep retries), or token not configured",
                       {"oneOf": [ref("RunResult"), ref("ErrorBody")]})},
             errors={400: "invalid body (\"<field>: <message>\") or a schedule that never fires",
                     404: "unknown schedule", 409: "the schedule is paused (resume it first)",
                     410: "occurrence expired (past the grace window)",
                     425: "occurrence not due yet"})
def run_schedule(req: Request, scheduleId: str) -> Response:
    body: RunBody | None = req.body
    label = body.label.strip()[:MAX_LABEL] if body is not None and body.label else None
    occ, admission = run_now(runtime.get().wiring.triggers, scheduleId, label or None)
    return _disposition_response(req, admission, occ.occurrence_iso)


def _disposition_response(req: Request, admission: Admission, occurrence_iso: str) -> Response:
    status_code, body_status, note, event = DISPOSITIONS.get(admission.disposition, DISPOSITIONS[REJECTED])
    slot = admission.slot
    result: dict[str, Any] = {
        "scheduleId": slot.schedule_id,
        "slotId": slot.slot_id,
        "disposition": admission.disposition,
        "status": slot.status,
    }
    if admission.disposition == ALREADY_COMPLETED:
        result["alreadyCompleted"] = True
        result["cells"] = [
            {"targetId": c.target_id, "status": c.status, "workId": c.work_id, **({"error": c.last_error} if c.last_error else {})}
            for c in admission.cells
        ]
    first_error = next((c.last_error for c in admission.cells if c.last_error), None) or admission.reason
    return req.finish(status_code, {"status": body_status, "schedule": result, "note": note}, event,
                      level="info" if status_code < 500 else "warning", schedule_id=slot.schedule_id,
                      slot_id=slot.slot_id, occurrence_at=occurrence_iso, disposition=admission.disposition,
                      reason=first_error)


@shell.route("POST", "/internal/outbox/drain", token=TRIGGER, summary="Queue every due outbox row for delivery now",
             failure=Failure("outbox drain failed; rows remain durable and retry", "outbox.drain_failed", "outbox.drain_error"),
             ok={200: ("the due rows queued for the deliver function, by kind", "DrainResult")})
def drain_outbox(req: Request) -> Response:
    # The rows go to the deliver function's queue, never out of this function: the
    # trigger function reads only its config and its two bearer tokens.
    result = queue_due(runtime.get().wiring.deliveries).as_dict()
    return req.finish(200, {"status": "ok", "result": result}, "outbox.drained",
                      level="info" if not result["unsent"] else "warning", queued=result["queued"], unsent=result["unsent"])


# -- manual refetch ----------------------------------------------------------------------

_REFETCH: dict[str, Any] = {"token": JOBS, "source": manual.MANUAL_SOURCE, "rejected_event": "schedule.refetch_rejected"}
# The text rule (http/text.py): a requestId that breaks it is answered with the route's fixed message.
REQUEST_ID = TextRule(max_bytes=ID.max_bytes, message="requestId must be a UUID")


@shell.route("POST", "/internal/targets/<targetId>/refetch", **_REFETCH,
             body=BodySpec(check=refetch_body, optional=False, lenient=True, schema="RefetchRequest"),
             text={"requestId": REQUEST_ID, "correlationId": ID},
             params={"targetId": TARGET_ID_PATTERN},
             failure=Failure("refetch admission failed", "schedule.refetch_error", "schedule.refetch_error_detail"),
             summary="Refetch one target into its own manual slot",
             ok={202: ("accepted, queued or already completed", "RefetchAccepted")},
             errors={400: "requestId must be a UUID / correlationId must be a string of at most 200 chars",
                     404: "unknown target", 409: "ambiguous target"})
def refetch(req: Request, targetId: str) -> Response:
    body: RefetchBody = req.body
    req.annotate(request_id=body.request_id)
    result = manual.refetch(runtime.get().wiring.refetches, targetId, body.request_id, body.correlation_id)
    slot = result.slot
    occurrence_iso = manual.iso_utc(slot.occurrence_at) if slot.occurrence_at is not None else None
    return req.finish(202, {"status": "accepted", "slotId": slot.slot_id, "disposition": result.disposition},
                      "schedule.refetch_accepted", level="info", schedule_id=slot.schedule_id, slot_id=slot.slot_id,
                      occurrence_at=occurrence_iso, disposition=result.disposition, reused=result.reused,
                      reason=result.reason)


@shell.route("GET", "/internal/targets/<targetId>/refetch/<requestId>", **_REFETCH,
             params={"targetId": TARGET_ID_PATTERN, "requestId": UUID_PATTERN}, path_rules={"requestId": REQUEST_ID},
             failure=Failure("refetch status failed", "schedule.refetch_error", "schedule.refetch_error_detail"),
             summary="Status of a manual refetch (JobStatusProjection)",
             ok={200: ("JobStatusProjection", "JobStatusProjection")},
             errors={400: "requestId must be a UUID", 404: "manual refetch not found"})
def refetch_status(req: Request, targetId: str, requestId: str) -> Response:
    if not manual.is_request_id(requestId):
        raise Rejection(400, "requestId must be a UUID")
    wiring = runtime.get().wiring
    found = manual.find_refetch(wiring.refetches, targetId, requestId)
    if found is None:
        return req.refuse(404, "manual refetch not found", event="schedule.refetch_not_found")
    slot, cell = found
    projection = manual.status_projection(slot, cell, wiring.now())
    return req.finish(200, projection, "schedule.refetch_status", slot_id=slot.slot_id, state=projection["state"])


# The read-only operator page: HTML routes on this shell, left out of the OpenAPI document.
ui.register(shell)


def handle_http(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return shell.resolve(event, context)


__all__ = ["app", "handle_http", "shell", "DISPOSITIONS", "RunBody", "describe_validation_error"]
