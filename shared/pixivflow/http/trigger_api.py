"""The trigger function's HTTP surface (spec §11.3; DESIGN §8).

Every response goes through ``_finish``: one table (``DISPOSITIONS``) drives the status code,
the body and the outcome log event, so a log line's ``http_status`` always equals the status
the caller saw. ``schedule.trigger_received`` is logged before auth; no token material is
ever logged.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from .. import __version__, runtime
from ..domain.occurrence import OccurrenceError
from ..observability import logger
from ..services.admission import ACCEPTED, ALREADY_COMPLETED, ALREADY_RUNNING, REJECTED, Admission
from ..services.delivery import drain
from ..services.trigger import run_now
from .auth import JOBS, TRIGGER, check_bearer
from .common import RequestClock, attempt_id, json_response, provider

SERVICE_NAME = "pixivflow-scheduler-trigger"
MAX_LABEL = 80

# disposition -> (HTTP status, body.status, body.note, log event)
DISPOSITIONS: dict[str, tuple[int, str, str, str]] = {
    ACCEPTED: (202, "accepted", "queued", "schedule.trigger_accepted"),
    ALREADY_RUNNING: (202, "running", "already_running", "schedule.trigger_already_running"),
    ALREADY_COMPLETED: (200, "completed", "already_completed", "schedule.trigger_already_completed"),
    REJECTED: (503, "rejected", "rejected", "schedule.trigger_rejected"),
}

app = APIGatewayHttpResolver(enable_validation=True)


class _Request:
    """Per-request correlation and timing; renders the outcome log line."""

    def __init__(self, source: str = "http") -> None:
        event = app.current_event
        headers = event.headers or {}
        self.clock = RequestClock()
        self.path = event.path
        self.method = event.http_method
        self.fields: dict[str, Any] = {"path": self.path, "method": self.method, "trigger_source": source}
        for key, value in (("attempt_id", attempt_id(headers)), ("provider", provider(headers))):
            if value:
                self.fields[key] = value
        self.headers = headers

    def log(self, level: str, event: str, **fields: Any) -> None:
        extra = {**self.fields, **{k: v for k, v in fields.items() if v is not None}, "event": event}
        try:
            getattr(logger, level)(event, extra=extra)
        except Exception:  # logging never changes a response (spec §13.26)
            pass

    def finish(self, status: int, body: Any, event: str, level: str = "info", **fields: Any) -> Response:
        self.log(level, event, http_status=status, elapsed_ms=self.clock.elapsed_ms(), **fields)
        return json_response(status, body)

    def auth(self, kind: str) -> Response | None:
        failure = check_bearer(self.headers, runtime.get().secrets.token(kind))
        if failure is None:
            return None
        return self.finish(failure.status, {"status": "error", "error": failure.error},
                           "schedule.trigger_unauthorized", level="warning", reason=failure.reason)


def _body() -> dict[str, Any] | None:
    raw = app.current_event.body
    if raw in (None, ""):
        return {}
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@app.get("/health")
def health():
    import os

    return json_response(200, {"status": "ok", "service": SERVICE_NAME, "version": __version__,
                               "commit": os.environ.get("PIXIVFLOW_COMMIT") or None})


@app.post("/internal/schedules/<scheduleId>/run")
def run_schedule(scheduleId: str):
    req = _Request()
    req.log("info", "schedule.trigger_received", schedule_id=scheduleId)
    denied = req.auth(TRIGGER)
    if denied is not None:
        return denied
    engine = runtime.get().engine
    schedule = engine.config.schedule(scheduleId)
    if schedule is None or not schedule.enabled:
        return req.finish(404, {"status": "error", "error": f"unknown schedule: {scheduleId}"},
                          "schedule.trigger_not_found", level="warning", schedule_id=scheduleId)
    body = _body()
    if body is None:
        return req.finish(400, {"status": "error", "error": "request body must be a JSON object"},
                          "schedule.trigger_rejected", level="warning", schedule_id=scheduleId)
    label = body.get("label")
    if label is not None and not isinstance(label, str):
        return req.finish(400, {"status": "error", "error": "label must be a string"},
                          "schedule.trigger_rejected", level="warning", schedule_id=scheduleId)
    label = label.strip()[:MAX_LABEL] if isinstance(label, str) else None
    try:
        occ, admission = run_now(engine, scheduleId, label)
    except OccurrenceError as exc:
        return req.finish(exc.status, {"status": "error", "error": str(exc)}, "schedule.trigger_rejected",
                          level="warning", schedule_id=scheduleId, reason=str(exc))
    except Exception as exc:
        logger.exception("schedule run failed", extra={"event": "schedule.trigger_error_detail", "schedule_id": scheduleId})
        return req.finish(500, {"status": "error", "error": "schedule run failed; the occurrence will resume on the next trigger"},
                          "schedule.trigger_error", level="error", schedule_id=scheduleId, reason=type(exc).__name__)
    return _disposition_response(req, admission, occ.occurrence_iso)


def _disposition_response(req: _Request, admission: Admission, occurrence_iso: str):
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


@app.post("/internal/outbox/drain")
def drain_outbox():
    req = _Request()
    denied = req.auth(TRIGGER)
    if denied is not None:
        return denied
    try:
        result = drain(runtime.get().engine, max_rounds=50)
    except Exception:
        logger.exception("outbox drain failed", extra={"event": "outbox.drain_error"})
        return req.finish(500, {"status": "error", "error": "outbox drain failed; rows remain durable and retry"},
                          "outbox.drain_failed", level="error")
    return req.finish(200, {"status": "ok", "result": result.as_dict()}, "outbox.drained", **result.as_dict())


def handle_http(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)


__all__ = ["app", "handle_http", "DISPOSITIONS", "JOBS"]
