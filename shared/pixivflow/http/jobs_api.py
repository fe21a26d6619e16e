"""The job_events function's HTTP surface (Workflow Protocol v1, spec §12).

Wired and authenticated now; `GET /capabilities` is live. The job routes answer the spec's
"job API is unavailable" 503 until the job facade lands (a later issue), so a consumer gets a
plain, documented refusal rather than a half-working job.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from .. import runtime
from ..observability import logger
from .auth import JOBS, check_bearer
from .common import RequestClock, json_response

HEARTBEAT_INTERVAL_MS = 30_000

app = APIGatewayHttpResolver(enable_validation=True)

JOB_API_DISABLED = {
    "error": {
        "code": "internal_error",
        "message": "job API is unavailable",
        "retryable": False,
        "detail": {"reason": "job_api_disabled"},
    }
}


def _authorised() -> Response | None:
    failure = check_bearer(app.current_event.headers or {}, runtime.get().secrets.token(JOBS))
    if failure is None:
        return None
    logger.warning("schedule.trigger_unauthorized", extra={"event": "schedule.trigger_unauthorized",
                   "http_status": failure.status, "reason": failure.reason, "path": app.current_event.path})
    return json_response(failure.status, {"status": "error", "error": failure.error})


@app.get("/capabilities")
def capabilities():
    denied = _authorised()
    if denied is not None:
        return denied
    engine = runtime.get().engine
    config = engine.config
    enabled = [s for s in config.schedules if s.enabled]
    deadline = max((s.timeout_ms for s in enabled), default=1_800_000)
    return json_response(200, {
        "protocol_versions": ["1"],
        "job_types": [{
            "name": "candidate_search",
            "params_schema": "#/$defs/CandidateSearchParams",
            "result_schema": "#/$defs/Result_CandidateSearch",
            "features": ["events", "progress", "cancel", "idempotency", "exclude", "tag_expansion"],
            "queued_timeout_ms": config.schedulerRuntime.queued_timeout_ms,
            "stall_timeout_ms": config.schedulerRuntime.stall_timeout_ms,
            "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
            "default_deadline_ms": deadline,
        }],
        "server_time": engine.now(),
    })


def _disabled():
    denied = _authorised()
    if denied is not None:
        return denied
    clock = RequestClock()
    logger.warning("schedule.job_rejected", extra={"event": "schedule.job_rejected", "code": "internal_error",
                   "stage": "job_api_disabled", "http_status": 503, "elapsed_ms": clock.elapsed_ms()})
    return json_response(503, JOB_API_DISABLED)


@app.post("/jobs")
def create_job():
    return _disabled()


@app.get("/jobs")
def list_jobs():
    return _disabled()


@app.get("/jobs/<jobId>")
def get_job(jobId: str):
    return _disabled()


@app.post("/jobs/<jobId>/cancel")
def cancel_job(jobId: str):
    return _disabled()


@app.get("/jobs/<jobId>/events")
def job_events(jobId: str):
    return _disabled()


@app.post("/jobs/<jobId>/events/ack")
def ack_events(jobId: str):
    return _disabled()


def handle_http(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
