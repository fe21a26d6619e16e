"""The job_events function's HTTP surface (Workflow Protocol v1, spec §11.3, §12).

Routes: ``GET /capabilities``, ``POST /jobs``, ``GET /jobs?idempotency_key=``, ``GET /jobs/{jobId}``,
``POST /jobs/{jobId}/cancel``, ``GET /jobs/{jobId}/events``, ``POST /jobs/{jobId}/events/ack``, all
with the manual-work token (JOBS_TOKEN). The handlers live in ``jobs_routes``; this module is
the thin shell around them: bearer auth (the legacy 503/401 bodies of spec §11.1), the one
outcome log line per request with a real ``elapsed_ms``, and the mapping of refusals to
``{"error": Error}`` bodies (an unexpected error is 500 ``internal_error`` "internal error").
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from .. import runtime
from ..domain.protocol import ProtocolError
from ..observability import logger
from . import jobs_routes
from .auth import JOBS, check_bearer
from .common import RequestClock, attempt_id, json_response, provider

app = APIGatewayHttpResolver(enable_validation=True)

_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def _log(level: str, event: str, fields: dict[str, Any]) -> None:
    extra = {(f"{k}_" if k in _RESERVED else k): v for k, v in {**fields, "event": event}.items() if v is not None}
    try:
        getattr(logger, level)(event, extra=extra)
    except Exception:  # logging never changes a response (spec §13.26)
        pass


def _serve(handler: Callable[..., jobs_routes.RouteResult], *args: Any) -> Response:
    clock = RequestClock()
    event = app.current_event
    headers = dict(event.headers or {})
    base = {"path": event.path, "method": event.http_method, "attempt_id": attempt_id(headers), "provider": provider(headers)}
    try:
        current = runtime.get()
        failure = check_bearer(headers, current.secrets.token(JOBS))
        if failure is not None:
            _log("warning", "schedule.trigger_unauthorized", {**base, "http_status": failure.status,
                                                              "reason": failure.reason, "elapsed_ms": clock.elapsed_ms()})
            return json_response(failure.status, {"status": "error", "error": failure.error})
        result = handler(current.engine, *args)
    except ProtocolError as exc:
        result = jobs_routes.refusal(exc)
    except Exception as exc:
        try:
            logger.exception("job request failed", extra={"event": "schedule.job_error_detail", "path": event.path})
        except Exception:
            pass
        result = jobs_routes.unexpected(exc)
    level = "error" if result.status >= 500 else "warning" if result.status >= 400 else "info"
    _log(level, result.event, {**base, **result.fields, "http_status": result.status, "elapsed_ms": clock.elapsed_ms()})
    return json_response(result.status, result.body)


def _body() -> Any:
    event = app.current_event
    try:
        return event.decoded_body
    except Exception:
        return event.body


def _query() -> dict[str, Any]:
    return dict(app.current_event.query_string_parameters or {})


@app.get("/capabilities")
def capabilities():
    return _serve(jobs_routes.capabilities)


@app.post("/jobs")
def create_job():
    return _serve(jobs_routes.create_job, _body())


@app.get("/jobs")
def list_jobs():
    return _serve(jobs_routes.list_jobs, _query())


@app.get("/jobs/<jobId>")
def get_job(jobId: str):
    return _serve(jobs_routes.get_job, jobId)


@app.post("/jobs/<jobId>/cancel")
def cancel_job(jobId: str):
    return _serve(jobs_routes.cancel_job, jobId)


@app.get("/jobs/<jobId>/events")
def job_events(jobId: str):
    return _serve(jobs_routes.job_events_page, jobId, _query())


@app.post("/jobs/<jobId>/events/ack")
def ack_events(jobId: str):
    return _serve(jobs_routes.ack_job_events, jobId, _body())


def handle_http(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
