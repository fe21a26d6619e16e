"""The job_events function's HTTP surface (Workflow Protocol v1, spec §12), on the shared shell.

Every refusal here is a protocol ``{"error": Error}`` body (spec §11.3 "generic-surface
rules"), except auth failures, which keep the legacy 503/401 bodies of spec §11.1; an
unexpected error is 500 ``internal_error`` "internal error" and never leaks internal text.

``GET /capabilities`` is live. The job routes answer the spec's "job API is unavailable" 503
until the job facade lands; they already pass the whole shell (route, auth, body), so the
facade only replaces each handler: raise ``Rejection(status, message, code=..., detail=...,
stage=...)`` to refuse, return ``req.finish(status, body, event, **fields)`` to answer.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

from .. import __version__, runtime
from .auth import JOBS
from .shell import PROTOCOL, BodySpec, HttpShell, Rejection, Request

HEARTBEAT_INTERVAL_MS = 30_000
JOB_ID = {"jobId": "^\\S+$"}  # a slot id (spec §12.4); the facade may narrow it

shell = HttpShell(
    "job_events", PROTOCOL,
    title="PixivFlow Workflow Protocol v1",
    version=__version__,
    description="Workflow Protocol v1 (spec §12).",
    security_schemes={"manualWorkToken": HTTPBearer(description="JOBS_TOKEN, the manual-work token (or JOBS_TOKEN_PARAMETER)")},
)
app = shell.app


@shell.route("GET", "/capabilities", token=JOBS, stage="capabilities", summary="What this producer serves (spec §12.2)",
             ok={200: ("Capabilities, derived from live config", "Capabilities")})
def capabilities(req: Request) -> Response:
    engine = runtime.get().engine
    config = engine.config
    enabled = [s for s in config.schedules if s.enabled]
    deadline = max((s.timeout_ms for s in enabled), default=1_800_000)
    return req.finish(200, {
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
    }, "schedule.capabilities")


def _disabled(req: Request, **params: Any) -> Response:
    raise Rejection(503, "job API is unavailable", code="internal_error", retryable=False,
                    detail={"reason": "job_api_disabled"}, stage="job_api_disabled", level="warning")


_UNAVAILABLE = {503: ("job API is unavailable (job_api_disabled), or token not configured",
                      {"oneOf": [{"$ref": "#/components/schemas/ProtocolErrorBody"}, {"$ref": "#/components/schemas/ErrorBody"}]})}

# (method, rule, body, 2xx, summary): the routes of spec §11.3 / §12, served by the facade later.
JOB_ROUTES: list[tuple[str, str, BodySpec | None, dict[int, tuple[str, Any]], str]] = [
    ("POST", "/jobs", BodySpec(optional=False, schema="Task"),
     {202: ("admitted: {\"job\": Job}", {"type": "object", "required": ["job"],
                                        "properties": {"job": {"$ref": "#/components/schemas/Job"}}}),
      200: ("replayed: {\"job\": Job}", {"type": "object", "required": ["job"],
                                        "properties": {"job": {"$ref": "#/components/schemas/Job"}}})},
     "Submit a Task (spec §12.3)"),
    ("GET", "/jobs", None, {200: ("0 or 1 job for idempotency_key", "JobPage")}, "Find a job by idempotency key"),
    ("GET", "/jobs/<jobId>", None, {200: ("the Job projection (spec §12.4)", "Job")}, "One job"),
    ("POST", "/jobs/<jobId>/cancel", None, {200: ("the cancelled Job (idempotent)", "Job")}, "Cancel a job (spec §12.7)"),
    ("GET", "/jobs/<jobId>/events", None, {200: ("events after the cursor (spec §12.5)", "EventPage")}, "Page a job's events"),
    ("POST", "/jobs/<jobId>/events/ack", BodySpec(optional=False, schema="AckRequest"),
     {200: ("the durable cursor", "AckResult")}, "Acknowledge events through an id"),
]

for _method, _rule, _body, _ok, _summary in JOB_ROUTES:
    shell.route(_method, _rule, token=JOBS, body=_body, stage="job_api_disabled", summary=_summary,
                params=JOB_ID if "<jobId>" in _rule else None, ok={**_ok, **_UNAVAILABLE},
                errors={400: "invalid_params / unsupported_protocol_version", 404: "unknown job",
                        409: "idempotency_conflict / ambiguous_target"})(_disabled)


def handle_http(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return shell.resolve(event, context)


__all__ = ["app", "handle_http", "shell", "JOB_ROUTES"]
