"""The Workflow Protocol v1 routes, independent of the resolver around them.

Each handler takes the composition's wiring and the request's pieces (the parsed JSON body, the query, the
path parameter) and returns a :class:`RouteResult`: the status, the body and the one outcome log
line (event name + fields). Refusals raise the domain's :class:`ProtocolError`; the shell
(``jobs_api`` on ``http.shell``) turns it into the ``{"error": Error}`` answer and the
``schedule.job_rejected`` line, and answers anything unexpected as 500 ``internal_error``.
"""

from __future__ import annotations

# Path parameters arrive percent-decoded and text-checked (http/shell.py, http/text.py): a job id
# carries a consumer key, which the URL holds percent-encoded (see protocol.events_url).

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..services import job_events, jobs
from ..wiring import Wiring

HEARTBEAT_INTERVAL_MS = 30_000
FEATURES = ["events", "progress", "cancel", "idempotency", "exclude", "tag_expansion", "target_selector"]


@dataclass
class RouteResult:
    status: int
    body: Any
    event: str
    fields: dict[str, Any] = field(default_factory=dict)


# -- routes -----------------------------------------------------------------------------------


def capabilities(wiring: Wiring) -> RouteResult:
    """Derived from the live config on every call."""
    config = wiring.config
    enabled = [s for s in config.schedules if s.enabled]
    deadline = max((s.timeout_ms for s in enabled), default=1_800_000)
    body = {
        "protocol_versions": ["1"],
        "job_types": [{
            "name": "candidate_search",
            "params_schema": "#/$defs/CandidateSearchParams",
            "result_schema": "#/$defs/Result_CandidateSearch",
            "features": list(FEATURES),
            "queued_timeout_ms": config.schedulerRuntime.queued_timeout_ms,
            "stall_timeout_ms": config.schedulerRuntime.stall_timeout_ms,
            "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
            "default_deadline_ms": deadline,
        }],
        "server_time": wiring.now(),
    }
    return RouteResult(200, body, "schedule.capabilities")


def create_job(wiring: Wiring, body: Any) -> RouteResult:
    submission = jobs.submit(wiring.job_control, body)
    job = submission.job
    status = 202 if submission.created else 200
    return RouteResult(status, {"job": job}, "schedule.job_admitted", {
        "disposition": "accepted" if submission.created else "replayed", "job_id": job["job_id"],
        "job_status": job["status"], "admission": submission.disposition})


def list_jobs(wiring: Wiring, query: Mapping[str, Any] | None) -> RouteResult:
    found = jobs.jobs_by_key(wiring.job_control, (query or {}).get("idempotency_key"))
    return RouteResult(200, {"jobs": found, "server_time": wiring.now()}, "schedule.job_listed", {"count": len(found)})


def get_job(wiring: Wiring, job_id: str) -> RouteResult:
    job = jobs.get_job(wiring.job_control, job_id)
    return RouteResult(200, job, "schedule.job_status", {"job_id": job["job_id"], "job_status": job["status"]})


def cancel_job(wiring: Wiring, job_id: str) -> RouteResult:
    done = jobs.cancel(wiring.job_control, job_id)
    return RouteResult(200, done.job, "schedule.job_cancelled", {
        "job_id": done.job["job_id"], "job_status": done.job["status"], "cells_cancelled": done.cells_cancelled,
        "rows_cancelled": done.rows_cancelled})


def job_events_page(wiring: Wiring, job_id: str, query: Mapping[str, Any] | None) -> RouteResult:
    page = job_events.events_page(wiring.job_events, job_id, query)
    return RouteResult(200, page, "schedule.job_events", {"job_id": page["job_id"], "count": len(page["events"]),
                                                          "unacked": page["unacked"]})


def ack_job_events(wiring: Wiring, job_id: str, body: Any) -> RouteResult:
    result = job_events.ack(wiring.job_events, job_id, body)
    return RouteResult(200, result, "schedule.job_events_acked", {"job_id": result["job_id"], "acked": result["acked"],
                                                                  "unacked": result["unacked"]})


__all__ = ["FEATURES", "RouteResult", "ack_job_events", "cancel_job", "capabilities", "create_job", "get_job",
           "job_events_page", "list_jobs"]
