"""The job_events function: auth fails closed on every route, /capabilities validates against the
project's copy of the Workflow Protocol v1 schema and follows the live config."""

import pytest

from conftest import JOBS_TOKEN, TRIGGER_TOKEN
from support.protocol_schema import validate


def test_capabilities_match_the_protocol_schema_and_the_config(make_runtime):
    rt = make_runtime(mutate=lambda cfg: cfg["schedulerRuntime"].update(queuedTimeoutMs=59_000, stallTimeoutMs=1_200_000))
    status, body = rt.http("GET", "/capabilities", token=JOBS_TOKEN, function="job_events")
    assert status == 200
    validate("Capabilities", body)
    job_type = body["job_types"][0]
    assert body["protocol_versions"] == ["1"] and job_type["name"] == "candidate_search"
    assert job_type["queued_timeout_ms"] == 1_800_000  # 59 s is below the floor: the default applies
    assert job_type["stall_timeout_ms"] == 1_200_000
    assert job_type["heartbeat_interval_ms"] == 30_000
    assert job_type["default_deadline_ms"] == 1_800_000  # the largest timeout of the enabled plans
    assert job_type["features"] == ["events", "progress", "cancel", "idempotency", "exclude", "tag_expansion",
                                    "target_selector"]
    assert body["server_time"] == rt.clock.now_ms()


def test_jobs_token_is_required_and_the_trigger_token_does_not_open_it(make_runtime):
    rt = make_runtime()
    assert rt.http("GET", "/capabilities", function="job_events") == (401, {"status": "error", "error": "unauthorized"})
    assert rt.http("GET", "/capabilities", token=TRIGGER_TOKEN, function="job_events")[0] == 401


def test_no_jobs_token_configured_fails_closed(make_runtime):
    rt = make_runtime(tokens={"trigger": TRIGGER_TOKEN})
    assert rt.http("GET", "/capabilities", token="anything", function="job_events") == (
        503, {"status": "error", "error": "endpoint disabled: token not configured"})


ROUTES = [("GET", "/capabilities"), ("POST", "/jobs"), ("GET", "/jobs"), ("GET", "/jobs/x"), ("POST", "/jobs/x/cancel"),
          ("GET", "/jobs/x/events"), ("POST", "/jobs/x/events/ack")]


@pytest.mark.parametrize("method,path", ROUTES)
def test_every_job_route_needs_the_jobs_token(make_runtime, method, path):
    rt = make_runtime()
    body = {} if method == "POST" else None
    assert rt.http(method, path, body=body, function="job_events") == (401, {"status": "error", "error": "unauthorized"})
    assert rt.http(method, path, body=body, token=TRIGGER_TOKEN, function="job_events")[0] == 401
    assert rt.wiring.ledger.slot_ids() == []


@pytest.mark.parametrize("method,path", ROUTES)
def test_every_job_route_fails_closed_without_a_token(make_runtime, method, path):
    rt = make_runtime(tokens={"trigger": TRIGGER_TOKEN})
    assert rt.http(method, path, body={} if method == "POST" else None, token="anything", function="job_events") == (
        503, {"status": "error", "error": "endpoint disabled: token not configured"})
