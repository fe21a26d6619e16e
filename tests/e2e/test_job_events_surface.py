"""The job_events function is wired: auth fails closed, /capabilities validates against the
published Workflow Protocol v1 schema, and job routes refuse plainly until the facade lands."""

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from conftest import JOBS_TOKEN, TRIGGER_TOKEN

# The project's copy of the published schema (see tests/contract/README.md), never ../shared.
SCHEMA = Path(__file__).resolve().parents[1] / "contract" / "protocol.schema.json"


def _validator(defn: str) -> Draft202012Validator:
    schema = json.loads(SCHEMA.read_text())
    resource = Resource.from_contents(schema)
    registry = Registry().with_resource("urn:pixivflow:protocol:v1", resource)
    return Draft202012Validator({"$ref": f"urn:pixivflow:protocol:v1#/$defs/{defn}"}, registry=registry)


def test_capabilities_match_the_protocol_schema_and_the_config(make_runtime):
    rt = make_runtime(mutate=lambda cfg: cfg["schedulerRuntime"].update(queuedTimeoutMs=59_000, stallTimeoutMs=1_200_000))
    status, body = rt.http("GET", "/capabilities", token=JOBS_TOKEN, function="job_events")
    assert status == 200
    _validator("Capabilities").validate(body)
    job_type = body["job_types"][0]
    assert body["protocol_versions"] == ["1"] and job_type["name"] == "candidate_search"
    assert job_type["queued_timeout_ms"] == 1_800_000  # 59 s is below the floor: the default applies
    assert job_type["stall_timeout_ms"] == 1_200_000
    assert job_type["heartbeat_interval_ms"] == 30_000
    assert job_type["default_deadline_ms"] == 1_800_000  # the largest timeout of the enabled plans
    assert body["server_time"] == rt.clock.now_ms()


def test_jobs_token_is_required_and_the_trigger_token_does_not_open_it(make_runtime):
    rt = make_runtime()
    assert rt.http("GET", "/capabilities", function="job_events") == (401, {"status": "error", "error": "unauthorized"})
    assert rt.http("GET", "/capabilities", token=TRIGGER_TOKEN, function="job_events")[0] == 401


def test_no_jobs_token_configured_fails_closed(make_runtime):
    rt = make_runtime(tokens={"trigger": TRIGGER_TOKEN})
    assert rt.http("GET", "/capabilities", token="anything", function="job_events") == (
        503, {"status": "error", "error": "endpoint disabled: token not configured"})


@pytest.mark.parametrize("method,path", [("POST", "/jobs"), ("GET", "/jobs"), ("GET", "/jobs/x"), ("POST", "/jobs/x/cancel"),
                                         ("GET", "/jobs/x/events"), ("POST", "/jobs/x/events/ack")])
def test_job_routes_refuse_with_the_protocol_error_until_the_facade_exists(make_runtime, method, path):
    rt = make_runtime()
    status, body = rt.http(method, path, body={} if method == "POST" else None, token=JOBS_TOKEN, function="job_events")
    assert status == 503
    assert body == {"error": {"code": "internal_error", "message": "job API is unavailable", "retryable": False,
                              "detail": {"reason": "job_api_disabled"}}}
    _validator("Error").validate(body["error"])
