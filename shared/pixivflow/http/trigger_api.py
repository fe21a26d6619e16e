"""The trigger function's HTTP surface (spec §11; DESIGN §8).

Routes: ``GET /health`` (open); with the trigger token ``GET /internal/schedules``,
``POST /internal/schedules/{scheduleId}/run``, ``POST /internal/outbox/drain``; with the
manual-work token (JOBS_TOKEN) ``POST /internal/targets/{targetId}/refetch`` and
``GET /internal/targets/{targetId}/refetch/{requestId}``.

Logging contract (spec §11.2, §11.4): every request ends in exactly ONE outcome line, written
by ``_Request.finish`` together with the response, so its ``http_status`` is the status the
caller saw. The run route also logs ``schedule.trigger_received`` before auth. Nothing here
ever logs a header value other than the sanitised attempt id and provider; token material
never reaches a log line.

Validation: the resolver validates declared bodies (``RunBody``) before a handler runs. A
``RequestValidationError`` is answered 400 ``{"status":"error","error":"<field>: <message>"}``
by ``_invalid_request``, which still checks the bearer token first (an unauthenticated caller
learns nothing about the body rules). The refetch body is checked by hand because the spec
fixes its exact error texts.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, ConfigDict, Field

from .. import __version__, runtime
from ..domain.occurrence import OccurrenceError, check_window, resolve_occurrence
from ..observability import logger
from ..services import manual
from ..services.admission import ACCEPTED, ALREADY_COMPLETED, ALREADY_RUNNING, REJECTED, Admission
from ..services.delivery import drain
from ..services.trigger import run_now
from .auth import JOBS, TRIGGER, check_bearer
from .common import RequestClock, attempt_id, json_response, provider

SERVICE_NAME = "pixivflow-scheduler-trigger"
MAX_LABEL = 80

# disposition -> (HTTP status, body.status, body.note, log event)   (spec §4.4: one table)
DISPOSITIONS: dict[str, tuple[int, str, str, str]] = {
    ACCEPTED: (202, "accepted", "queued", "schedule.trigger_accepted"),
    ALREADY_RUNNING: (202, "running", "already_running", "schedule.trigger_already_running"),
    ALREADY_COMPLETED: (200, "completed", "already_completed", "schedule.trigger_already_completed"),
    REJECTED: (503, "rejected", "rejected", "schedule.trigger_rejected"),
}

TRIGGER_SECURITY = [{"triggerToken": []}]
JOBS_SECURITY = [{"manualWorkToken": []}]

app = APIGatewayHttpResolver(enable_validation=True)
app.configure_openapi(
    title="PixivFlow scheduler trigger API",
    version=__version__,
    description="Operator routes of the trigger function (spec §11).",
    security_schemes={
        "triggerToken": HTTPBearer(description="TRIGGER_TOKEN (or the SSM parameter TRIGGER_TOKEN_PARAMETER names)"),
        "manualWorkToken": HTTPBearer(description="JOBS_TOKEN, the manual-work token (or JOBS_TOKEN_PARAMETER)"),
    },
)

_RUN_PATH = re.compile(r"^/internal/schedules/([^/]+)/run/?$")
_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class RunBody(BaseModel):
    """Optional body of the run route. ``label`` becomes the slot name (first 80 chars)."""

    model_config = ConfigDict(extra="allow")
    label: str | None = Field(default=None, description="Human label for the slot (trimmed, first 80 chars)")


def _error(message: str) -> dict[str, str]:
    return {"status": "error", "error": message}


class _Request:
    """Per-request correlation and timing; writes the one outcome line."""

    def __init__(self, source: str | None = None) -> None:
        event = app.current_event
        self.headers: dict[str, str] = dict(event.headers or {})
        self.clock = RequestClock()
        self.path = event.path
        self.method = event.http_method
        self.fields: dict[str, Any] = {"path": self.path, "method": self.method}
        if source:
            self.fields["trigger_source"] = source
        for key, value in (("attempt_id", attempt_id(self.headers)), ("provider", provider(self.headers))):
            if value:  # omitted when absent, never synthesised (spec §11.2)
                self.fields[key] = value
        self.done = False

    def log(self, level: str, event: str, **fields: Any) -> None:
        merged = {**self.fields, **{k: v for k, v in fields.items() if v is not None}, "event": event}
        extra = {(f"{k}_" if k in _RESERVED else k): v for k, v in merged.items()}
        try:
            getattr(logger, level)(event, extra=extra)
        except Exception:  # logging never changes a response (spec §13.26)
            pass

    def finish(self, status: int, body: Any, event: str, level: str | None = None, **fields: Any) -> Response:
        if level is None:
            level = "error" if status >= 500 else "warning" if status >= 400 else "info"
        self.done = True
        self.log(level, event, http_status=status, elapsed_ms=self.clock.elapsed_ms(), **fields)
        return json_response(status, body)

    def auth(self, kind: str) -> Response | None:
        failure = check_bearer(self.headers, runtime.get().secrets.token(kind))
        if failure is None:
            return None
        return self.finish(failure.status, _error(failure.error), "schedule.trigger_unauthorized",
                           level="warning", reason=failure.reason)


def _token_kind(path: str) -> str | None:
    if path.startswith("/internal/targets/"):
        return JOBS
    if path.startswith("/internal/"):
        return TRIGGER
    return None


def _json_object() -> dict[str, Any] | None:
    """The body as a JSON object, or None when it is absent, not JSON, or not an object."""
    raw = app.current_event.body
    if raw in (None, ""):
        return None
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# -- health --------------------------------------------------------------------------


@app.get("/health", summary="Liveness", responses={200: {"description": "service, version and commit"}})
def health():
    req = _Request()
    return req.finish(200, {"status": "ok", "service": SERVICE_NAME, "version": __version__,
                            "commit": os.environ.get("PIXIVFLOW_COMMIT") or None}, "http.health")


# -- schedules ---------------------------------------------------------------------------


@app.get("/internal/schedules", summary="Enabled schedules and the occurrence a trigger would run now",
         security=TRIGGER_SECURITY, responses={200: {"description": '{"schedules":[{scheduleId, mode, occurrence}]}'}})
def list_schedules():
    req = _Request()
    denied = req.auth(TRIGGER)
    if denied is not None:
        return denied
    engine = runtime.get().engine
    config = engine.config
    now = engine.now()
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


def _run_preflight(req: _Request, schedule_id: str) -> Response | None:
    """What every run request goes through before its body matters: received, auth, 404."""
    req.log("info", "schedule.trigger_received", schedule_id=schedule_id)
    denied = req.auth(TRIGGER)
    if denied is not None:
        return denied
    schedule = runtime.get().engine.config.schedule(schedule_id)
    if schedule is None or not schedule.enabled:
        return req.finish(404, _error(f"unknown schedule: {schedule_id}"), "schedule.trigger_not_found",
                          schedule_id=schedule_id)
    return None


@app.post("/internal/schedules/<scheduleId>/run", summary="Run the occurrence due now (window-checked)",
          security=TRIGGER_SECURITY, responses={
              200: {"description": "already completed"},
              202: {"description": "accepted or already running"},
              404: {"description": "unknown schedule"},
              410: {"description": "occurrence expired (past the grace window)"},
              425: {"description": "occurrence not due yet"},
              500: {"description": "run failed; the occurrence resumes on the next trigger"},
              503: {"description": "rejected (dispatch failed; the sweep retries) or token not configured"},
          })
def run_schedule(scheduleId: str, body: Annotated[RunBody | None, Body()] = None):
    req = _Request(source="http")
    refused = _run_preflight(req, scheduleId)
    if refused is not None:
        return refused
    label = body.label.strip()[:MAX_LABEL] if body is not None and body.label else None
    engine = runtime.get().engine
    try:
        occ, admission = run_now(engine, scheduleId, label or None)
    except OccurrenceError as exc:
        return req.finish(exc.status, _error(str(exc)), "schedule.trigger_rejected", level="warning",
                          schedule_id=scheduleId, disposition="rejected", reason=str(exc))
    except Exception as exc:
        _log_detail("schedule run failed", "schedule.trigger_error_detail", schedule_id=scheduleId)
        return req.finish(500, _error("schedule run failed; the occurrence will resume on the next trigger"),
                          "schedule.trigger_error", schedule_id=scheduleId, reason=type(exc).__name__)
    return _disposition_response(req, admission, occ.occurrence_iso)


def _disposition_response(req: _Request, admission: Admission, occurrence_iso: str) -> Response:
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


@app.post("/internal/outbox/drain", summary="Deliver due outbox rows now", security=TRIGGER_SECURITY,
          responses={200: {"description": '{"status":"ok","result":{processed,done,retried,dead}}'}})
def drain_outbox():
    req = _Request()
    denied = req.auth(TRIGGER)
    if denied is not None:
        return denied
    try:
        result = drain(runtime.get().engine, max_rounds=50)
    except Exception:
        _log_detail("outbox drain failed", "outbox.drain_error")
        return req.finish(500, _error("outbox drain failed; rows remain durable and retry"), "outbox.drain_failed")
    return req.finish(200, {"status": "ok", "result": result.as_dict()}, "outbox.drained", **result.as_dict())


# -- manual refetch ----------------------------------------------------------------------


@app.post("/internal/targets/<targetId>/refetch", summary="Refetch one target into its own manual slot",
          security=JOBS_SECURITY, responses={
              202: {"description": '{"status":"accepted","slotId","disposition":"accepted"|"queued"|"already_completed"}'},
              400: {"description": "requestId must be a UUID / correlationId must be a string of at most 200 chars"},
              404: {"description": "unknown target"},
              409: {"description": "ambiguous target"},
              500: {"description": "refetch admission failed"},
          })
def refetch(targetId: str):
    req = _Request(source=manual.MANUAL_SOURCE)
    denied = req.auth(JOBS)
    if denied is not None:
        return denied
    body = _json_object() or {}
    request_id = body.get("requestId")
    if not manual.is_request_id(request_id):
        return req.finish(400, _error("requestId must be a UUID"), "schedule.refetch_rejected", target_id=targetId)
    correlation_id = body.get("correlationId")
    if correlation_id is not None and (not isinstance(correlation_id, str) or len(correlation_id) > manual.MAX_CORRELATION_ID):
        return req.finish(400, _error("correlationId must be a string of at most 200 chars"), "schedule.refetch_rejected",
                          target_id=targetId, request_id=request_id)
    try:
        result = manual.refetch(runtime.get().engine, targetId, request_id, correlation_id)
    except manual.ManualRequestError as exc:
        return req.finish(exc.status, _error(exc.message), "schedule.refetch_rejected", target_id=targetId,
                          request_id=request_id, reason=exc.message)
    except Exception as exc:
        _log_detail("refetch admission failed", "schedule.refetch_error_detail", target_id=targetId)
        return req.finish(500, _error("refetch admission failed"), "schedule.refetch_error", target_id=targetId,
                          request_id=request_id, reason=type(exc).__name__)
    slot = result.slot
    occurrence_iso = manual.iso_utc(slot.occurrence_at) if slot.occurrence_at is not None else None
    return req.finish(202, {"status": "accepted", "slotId": slot.slot_id, "disposition": result.disposition},
                      "schedule.refetch_accepted", level="info", schedule_id=slot.schedule_id, slot_id=slot.slot_id,
                      occurrence_at=occurrence_iso, target_id=targetId, request_id=request_id,
                      disposition=result.disposition, reused=result.reused, reason=result.reason)


@app.get("/internal/targets/<targetId>/refetch/<requestId>", summary="Status of a manual refetch (JobStatusProjection)",
         security=JOBS_SECURITY, responses={
             200: {"description": "JobStatusProjection (spec §12.6)"},
             400: {"description": "requestId must be a UUID"},
             404: {"description": "manual refetch not found"},
         })
def refetch_status(targetId: str, requestId: str):
    req = _Request(source=manual.MANUAL_SOURCE)
    denied = req.auth(JOBS)
    if denied is not None:
        return denied
    if not manual.is_request_id(requestId):
        return req.finish(400, _error("requestId must be a UUID"), "schedule.refetch_rejected", target_id=targetId)
    engine = runtime.get().engine
    try:
        found = manual.find_refetch(engine, targetId, requestId)
    except Exception as exc:
        _log_detail("refetch status failed", "schedule.refetch_error_detail", target_id=targetId)
        return req.finish(500, _error("refetch status failed"), "schedule.refetch_error", target_id=targetId,
                          request_id=requestId, reason=type(exc).__name__)
    if found is None:
        return req.finish(404, _error("manual refetch not found"), "schedule.refetch_not_found", target_id=targetId,
                          request_id=requestId)
    slot, cell = found
    projection = manual.status_projection(slot, cell, engine.now())
    return req.finish(200, projection, "schedule.refetch_status", slot_id=slot.slot_id, target_id=targetId,
                      request_id=requestId, state=projection["state"])


# -- errors the resolver raises -------------------------------------------------------------


def _log_detail(message: str, event: str, **fields: Any) -> None:
    """The stack trace of a 500, on its own line (no http_status: it is not an outcome line)."""
    try:
        logger.exception(message, extra={"event": event, **fields})
    except Exception:
        pass


def describe_validation_error(exc: RequestValidationError) -> str:
    """``<field>: <message>`` for the first error, e.g. ``label: Input should be a valid string``."""
    errors = exc.errors() or [{}]
    first = errors[0]
    loc = [p for p in first.get("loc", ()) if isinstance(p, str)]
    field = ".".join(loc[1:]) or (loc[0] if loc else "request")
    return f"{field}: {first.get('msg') or 'invalid value'}"


@app.exception_handler(RequestValidationError)
def _invalid_request(exc: RequestValidationError):
    path = app.current_event.path
    run = _RUN_PATH.match(path)
    req = _Request(source="http" if run else None)
    if run:
        refused = _run_preflight(req, run.group(1))
        if refused is not None:
            return refused
    else:
        kind = _token_kind(path)
        denied = req.auth(kind) if kind else None
        if denied is not None:
            return denied
    message = describe_validation_error(exc)
    event = "schedule.trigger_rejected" if run else "http.request_invalid"
    return req.finish(400, _error(message), event, schedule_id=run.group(1) if run else None, reason=message)


@app.not_found
def _not_found(exc: NotFoundError):
    req = _Request()
    return req.finish(404, _error("not found"), "http.not_found")


@app.exception_handler(Exception)
def _unexpected(exc: Exception):
    """Anything a route did not catch itself (e.g. the runtime could not be built): still one answer, one line."""
    _log_detail("unhandled error", "http.error_detail")
    path = app.current_event.path
    if _RUN_PATH.match(path):
        req = _Request(source="http")
        return req.finish(500, _error("schedule run failed; the occurrence will resume on the next trigger"),
                          "schedule.trigger_error", reason=type(exc).__name__)
    if path.startswith("/internal/targets/") and app.current_event.http_method == "POST":
        req = _Request(source=manual.MANUAL_SOURCE)
        return req.finish(500, _error("refetch admission failed"), "schedule.refetch_error", reason=type(exc).__name__)
    req = _Request()
    return req.finish(500, _error("internal error"), "http.error", reason=type(exc).__name__)


def handle_http(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)


__all__ = ["app", "handle_http", "DISPOSITIONS", "RunBody", "describe_validation_error"]
