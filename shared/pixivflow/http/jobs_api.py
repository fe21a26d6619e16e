"""The job_events function's HTTP surface (Workflow Protocol v1), on the shared shell.

Every refusal here is a protocol ``{"error": Error}`` body, except auth failures, which keep the
legacy 503/401 bodies every route answers; an unexpected error is 500 ``internal_error`` "internal error" and never leaks internal text.
The handlers themselves are in ``jobs_routes``: each answers a :class:`RouteResult` or raises
the domain's :class:`ProtocolError`, which this module hands to the shell as a ``Rejection``.
"""

from __future__ import annotations

from typing import Any, Callable

from aws_lambda_powertools.event_handler import Response

from .. import __version__, runtime
from ..domain.protocol import ProtocolError
from . import jobs_routes
from .auth import JOBS
from .shell import PROTOCOL, BodySpec, HttpShell, Rejection, Request
from .text import ID, KEYED_TEXT, TEXT

HEARTBEAT_INTERVAL_MS = jobs_routes.HEARTBEAT_INTERVAL_MS

shell = HttpShell(
    "job_events", PROTOCOL,
    title="PixivFlow Workflow Protocol v1",
    version=__version__,
    description="Workflow Protocol v1: submit candidate-search jobs, read their projection, page and acknowledge their events.",
    bearer_schemes={"manualWorkToken": "JOBS_TOKEN, the manual-work token (or JOBS_TOKEN_PARAMETER)"},
)
app = shell.app


def _answer(req: Request, handler: Callable[..., jobs_routes.RouteResult], *args: Any) -> Response:
    try:
        result = handler(runtime.get().wiring, *args)
    except ProtocolError as exc:
        raise Rejection(exc.status, exc.message, code=exc.code, detail=exc.detail, retryable=exc.retryable,
                        stage=exc.stage) from None
    return req.finish(result.status, result.body, result.event, **result.fields)


# The text rule's per-field choices (http/text.py): values that become (part of) a ledger key, or
# are compared with one, are IDs (1,024 bytes); the rest of a Task is TEXT. The Task's own
# length caps (200 chars for a key, 100 for a tag) are the Task parser's, after this.
TASK_TEXT = {"idempotency_key": ID, "correlation_id": ID, "callback_url": TEXT, "params.target_id": ID,
             "params.source.account": ID, "params.query.tags[]": KEYED_TEXT, "params.constraints.exclude[].id": ID}
# ``after`` / ``ack_through`` never reach a key: TEXT, so an over-long id that is still text is the
# grammar's to judge (not ours: an unknown id is a no-op) rather than a length refusal.
EVENTS_QUERY = {"after": (TEXT, "an event id: page events strictly after it (unknown ids read the whole stream)"),
                "unacked": (ID, "1/true: start after the durable ack cursor (ignores after); 0/false/empty: off")}

# What the event query's grammar (domain/protocol.py parse_event_query) adds to the text rule.
EVENTS_QUERY_SCHEMAS: dict[str, dict[str, Any]] = {"after": {"minLength": 1}, "unacked": {"enum": ["", "0", "false", "1", "true"]}}


JOB = {"type": "object", "required": ["job"], "properties": {"job": {"$ref": "#/components/schemas/Job"}}}


@shell.route("GET", "/capabilities", token=JOBS, stage="capabilities", summary="What this producer serves",
             ok={200: ("Capabilities, derived from live config", "Capabilities")})
def capabilities(req: Request) -> Response:
    return _answer(req, jobs_routes.capabilities)


@shell.route("POST", "/jobs", token=JOBS, body=BodySpec(optional=False, schema="CandidateSearchTask"), stage="admission", text=TASK_TEXT,
             summary="Submit a Task",
             ok={202: ("admitted: {\"job\": Job}", JOB), 200: ("replayed: {\"job\": Job}", JOB)},
             errors={400: "invalid_params / unsupported_protocol_version", 409: "idempotency_conflict / ambiguous_target"})
def create_job(req: Request) -> Response:
    return _answer(req, jobs_routes.create_job, req.body)


@shell.route("GET", "/jobs", token=JOBS, stage="lookup", summary="Find a job by idempotency key",
             query={"idempotency_key": (ID, "the Task's idempotency key, trimmed as POST /jobs trims it (required)")},
             param_schemas={"idempotency_key": {"required": True, "pattern": "\\S"}},
             ok={200: ("0 or 1 job for idempotency_key", "JobPage")}, errors={400: "idempotency_key is required"})
def list_jobs(req: Request) -> Response:
    return _answer(req, jobs_routes.list_jobs, req.query)


@shell.route("GET", "/jobs/<jobId>", token=JOBS, stage="lookup", summary="One job",
             ok={200: ("the Job projection", "Job")}, errors={404: "unknown job"})
def get_job(req: Request, jobId: str) -> Response:
    return _answer(req, jobs_routes.get_job, jobId)


@shell.route("POST", "/jobs/<jobId>/cancel", token=JOBS, stage="cancel", summary="Cancel a job",
             ok={200: ("the cancelled Job (idempotent)", "Job")},
             errors={404: "unknown job"})
def cancel_job(req: Request, jobId: str) -> Response:
    return _answer(req, jobs_routes.cancel_job, jobId)


@shell.route("GET", "/jobs/<jobId>/events", token=JOBS, stage="events", summary="Page a job's events",
             query=EVENTS_QUERY, param_schemas=EVENTS_QUERY_SCHEMAS,
             ok={200: ("events after the cursor", "EventPage")},
             errors={400: "a bad after or unacked", 404: "unknown job"})
def job_events(req: Request, jobId: str) -> Response:
    return _answer(req, jobs_routes.job_events_page, jobId, req.query)


@shell.route("POST", "/jobs/<jobId>/events/ack", token=JOBS, body=BodySpec(optional=False, schema="AckBody"),
             stage="ack", summary="Acknowledge events through an id", text={"ack_through": TEXT},
             ok={200: ("the durable cursor", "AckResult")}, errors={400: "ack_through is required", 404: "unknown job"})
def ack_events(req: Request, jobId: str) -> Response:
    return _answer(req, jobs_routes.ack_job_events, jobId, req.body)


def handle_http(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return shell.resolve(event, context)


__all__ = ["app", "handle_http", "shell"]
