"""The job_events function's HTTP surface (Workflow Protocol v1, spec §11.3, §12), on the shared shell.

Every refusal here is a protocol ``{"error": Error}`` body (spec §11.3 "generic-surface
rules"), except auth failures, which keep the legacy 503/401 bodies of spec §11.1; an
unexpected error is 500 ``internal_error`` "internal error" and never leaks internal text.
The handlers themselves are in ``jobs_routes``: each answers a :class:`RouteResult` or raises
the domain's :class:`ProtocolError`, which this module hands to the shell as a ``Rejection``.
"""

from __future__ import annotations

from typing import Any, Callable

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

from .. import __version__, runtime
from ..domain.protocol import ProtocolError
from . import jobs_routes
from .auth import JOBS
from .shell import PROTOCOL, BodySpec, HttpShell, Rejection, Request

HEARTBEAT_INTERVAL_MS = jobs_routes.HEARTBEAT_INTERVAL_MS
JOB_ID = {"jobId": "^\\S+$"}  # a slot id (spec §12.4), percent-encoded where it carries URL characters

shell = HttpShell(
    "job_events", PROTOCOL,
    title="PixivFlow Workflow Protocol v1",
    version=__version__,
    description="Workflow Protocol v1 (spec §12).",
    security_schemes={"manualWorkToken": HTTPBearer(description="JOBS_TOKEN, the manual-work token (or JOBS_TOKEN_PARAMETER)")},
)
app = shell.app


def _answer(req: Request, handler: Callable[..., jobs_routes.RouteResult], *args: Any) -> Response:
    try:
        result = handler(runtime.get().engine, *args)
    except ProtocolError as exc:
        raise Rejection(exc.status, exc.message, code=exc.code, detail=exc.detail, retryable=exc.retryable,
                        stage=exc.stage) from None
    return req.finish(result.status, result.body, result.event, **result.fields)


def _query() -> dict[str, Any]:
    return dict(app.current_event.query_string_parameters or {})


JOB = {"type": "object", "required": ["job"], "properties": {"job": {"$ref": "#/components/schemas/Job"}}}


@shell.route("GET", "/capabilities", token=JOBS, stage="capabilities", summary="What this producer serves (spec §12.2)",
             ok={200: ("Capabilities, derived from live config", "Capabilities")})
def capabilities(req: Request) -> Response:
    return _answer(req, jobs_routes.capabilities)


@shell.route("POST", "/jobs", token=JOBS, body=BodySpec(optional=False, schema="Task"), stage="admission",
             summary="Submit a Task (spec §12.3)",
             ok={202: ("admitted: {\"job\": Job}", JOB), 200: ("replayed: {\"job\": Job}", JOB)},
             errors={400: "invalid_params / unsupported_protocol_version", 409: "idempotency_conflict / ambiguous_target"})
def create_job(req: Request) -> Response:
    return _answer(req, jobs_routes.create_job, req.body)


@shell.route("GET", "/jobs", token=JOBS, stage="lookup", summary="Find a job by idempotency key",
             ok={200: ("0 or 1 job for idempotency_key", "JobPage")}, errors={400: "idempotency_key is required"})
def list_jobs(req: Request) -> Response:
    return _answer(req, jobs_routes.list_jobs, _query())


@shell.route("GET", "/jobs/<jobId>", token=JOBS, stage="lookup", params=JOB_ID, summary="One job",
             ok={200: ("the Job projection (spec §12.4)", "Job")}, errors={404: "unknown job"})
def get_job(req: Request, jobId: str) -> Response:
    return _answer(req, jobs_routes.get_job, jobId)


@shell.route("POST", "/jobs/<jobId>/cancel", token=JOBS, stage="cancel", params=JOB_ID, summary="Cancel a job (spec §12.7)",
             ok={200: ("the cancelled Job (idempotent)", "Job")},
             errors={404: "unknown job"})
def cancel_job(req: Request, jobId: str) -> Response:
    return _answer(req, jobs_routes.cancel_job, jobId)


@shell.route("GET", "/jobs/<jobId>/events", token=JOBS, stage="events", params=JOB_ID, summary="Page a job's events",
             ok={200: ("events after the cursor (spec §12.5)", "EventPage")},
             errors={400: "a bad after or unacked", 404: "unknown job"})
def job_events(req: Request, jobId: str) -> Response:
    return _answer(req, jobs_routes.job_events_page, jobId, _query())


@shell.route("POST", "/jobs/<jobId>/events/ack", token=JOBS, body=BodySpec(optional=False, schema="AckRequest"),
             stage="ack", params=JOB_ID, summary="Acknowledge events through an id",
             ok={200: ("the durable cursor", "AckResult")}, errors={400: "ack_through is required", 404: "unknown job"})
def ack_events(req: Request, jobId: str) -> Response:
    return _answer(req, jobs_routes.ack_job_events, jobId, req.body)


def handle_http(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return shell.resolve(event, context)


__all__ = ["app", "handle_http", "shell"]
