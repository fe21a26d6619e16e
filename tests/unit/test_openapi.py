"""The HTTP API's OpenAPI document is generated from both shells and states every answer (DESIGN §8, issue 17)."""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from pixivflow.http.openapi import openapi_document

ROOT = Path(__file__).resolve().parents[2]
TRIGGER_ROUTES = [
    ("/health", "get"),
    ("/internal/outbox/drain", "post"),
    ("/internal/schedules", "get"),
    ("/internal/schedules/{scheduleId}/run", "post"),
    ("/internal/targets/{targetId}/refetch", "post"),
    ("/internal/targets/{targetId}/refetch/{requestId}", "get"),
]
JOB_ROUTES = [
    ("/capabilities", "get"),
    ("/jobs", "get"),
    ("/jobs", "post"),
    ("/jobs/{jobId}", "get"),
    ("/jobs/{jobId}/cancel", "post"),
    ("/jobs/{jobId}/events", "get"),
    ("/jobs/{jobId}/events/ack", "post"),
]
BODY_ROUTES = [("/internal/schedules/{scheduleId}/run", "post"), ("/internal/targets/{targetId}/refetch", "post"),
               ("/jobs", "post"), ("/jobs/{jobId}/events/ack", "post")]


def operations(doc):
    return {(path, method): op for path, item in doc["paths"].items() for method, op in item.items()}


def resolve(doc, schema):
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_the_document_lists_every_route_of_both_functions():
    doc = openapi_document()
    assert doc["openapi"].startswith("3.")
    ops = operations(doc)
    assert sorted(ops) == sorted(TRIGGER_ROUTES + JOB_ROUTES)
    assert {route: op["x-pixivflow-function"] for route, op in ops.items()} == {
        **{r: "trigger" for r in TRIGGER_ROUTES}, **{r: "job_events" for r in JOB_ROUTES}}


def test_validation_failures_are_documented_as_400_never_422():
    doc = openapi_document()
    text = json.dumps(doc)
    assert '"422"' not in text and "HTTPValidationError" not in text
    run = doc["paths"]["/internal/schedules/{scheduleId}/run"]["post"]
    assert run["responses"]["400"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["status", "error"]


def test_each_surface_documents_its_own_error_shape_and_auth_stays_legacy():
    doc = openapi_document()
    for route, op in operations(doc).items():
        legacy = route in TRIGGER_ROUTES
        own = "#/components/schemas/" + ("ErrorBody" if legacy else "ProtocolErrorBody")
        for code in ("404", "405", "500"):
            if code in op["responses"]:
                assert op["responses"][code]["content"]["application/json"]["schema"] == {"$ref": own}, (route, code)
        if route != ("/health", "get"):
            assert op["responses"]["401"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    error = resolve(doc, {"$ref": "#/components/schemas/ProtocolErrorBody"})
    assert resolve(doc, error["properties"]["error"])["required"] == ["code"]


def test_routes_name_their_token():
    doc = openapi_document()
    security = {route: op.get("security") for route, op in operations(doc).items()}
    assert security[("/health", "get")] is None
    for route in TRIGGER_ROUTES[1:4]:
        assert security[route] == [{"triggerToken": []}], route
    for route in TRIGGER_ROUTES[4:] + JOB_ROUTES:
        assert security[route] == [{"manualWorkToken": []}], route
    schemes = doc["components"]["securitySchemes"]
    assert {name: (s["type"], s["scheme"]) for name, s in schemes.items()} == {
        "triggerToken": ("http", "bearer"), "manualWorkToken": ("http", "bearer")}
    for route in TRIGGER_ROUTES[1:] + JOB_ROUTES:
        assert {"401", "503"} <= set(operations(doc)[route]["responses"]), route


def test_every_route_documents_a_2xx_schema_405_and_500():
    doc = openapi_document()
    for route, op in operations(doc).items():
        ok = {code: r for code, r in op["responses"].items() if code.startswith("2")}
        assert ok, route
        for response in ok.values():
            schema = resolve(doc, response["content"]["application/json"]["schema"])
            assert schema.get("type") == "object" or "oneOf" in schema, route
        assert "Allow" in op["responses"]["405"]["headers"], route
        assert "500" in op["responses"], route


def test_routes_with_a_body_document_400_and_415():
    doc = openapi_document()
    for route, op in operations(doc).items():
        assert ("415" in op["responses"]) == (route in BODY_ROUTES), route
    for route in BODY_ROUTES:
        assert "400" in operations(doc)[route]["responses"], route


def test_the_job_routes_answer_the_protocol_defs():
    doc = openapi_document()
    ops = operations(doc)

    def ok_schema(route, code="200"):
        return ops[route]["responses"][code]["content"]["application/json"]["schema"]

    assert ok_schema(("/capabilities", "get")) == {"$ref": "#/components/schemas/Capabilities"}
    assert ok_schema(("/jobs", "get")) == {"$ref": "#/components/schemas/JobPage"}
    assert ok_schema(("/jobs/{jobId}", "get")) == {"$ref": "#/components/schemas/Job"}
    assert ok_schema(("/jobs/{jobId}/events", "get")) == {"$ref": "#/components/schemas/EventPage"}
    assert ok_schema(("/jobs/{jobId}/events/ack", "post")) == {"$ref": "#/components/schemas/AckResult"}
    assert ok_schema(("/jobs", "post"), "202")["properties"]["job"] == {"$ref": "#/components/schemas/Job"}
    # the embedded $defs point at components, so the document is self-contained
    assert "#/$defs/" not in json.dumps(doc)
    Draft202012Validator.check_schema(doc["components"]["schemas"]["Job"])


def test_path_parameters_carry_their_patterns():
    doc = openapi_document()
    patterns = {}
    for (path, _), op in operations(doc).items():
        for param in op.get("parameters", []):
            if param["in"] == "path":
                patterns.setdefault(param["name"], set()).add(param["schema"].get("pattern"))
    assert patterns["scheduleId"] == {"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"}
    assert patterns["targetId"] == {"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"}
    (uuid,) = patterns["requestId"]
    from pixivflow.services.manual import REQUEST_ID_RE
    import re

    for sample in ("3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab", "9A1B2C3D-4E5F-4A6B-9C7D-8E9F0A1B2C3D",
                   "3f2b8c1e-4d5a-0b7c-8e9f-0123456789ab", "bad"):
        assert bool(re.match(uuid, sample)) == bool(REQUEST_ID_RE.match(sample)), sample
    # a job id is any id the text rule admits (an idempotency key may hold spaces): no pattern,
    # the rule's length cap and barred characters instead
    assert patterns["jobId"] == {None}
    job = doc["paths"]["/jobs/{jobId}"]["get"]["parameters"][0]["schema"]
    assert (job["minLength"], job["maxLength"]) == (1, 1024) and "\u202e" in job["not"]["pattern"]


def test_request_bodies_are_described():
    doc = openapi_document()
    refetch_body = doc["paths"]["/internal/targets/{targetId}/refetch"]["post"]["requestBody"]
    refetch = resolve(doc, refetch_body["content"]["application/json"]["schema"])
    assert refetch["required"] == ["requestId"]
    assert refetch["properties"]["correlationId"]["anyOf"][0]["maxLength"] == 200
    run = doc["paths"]["/internal/schedules/{scheduleId}/run"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"$ref": "#/components/schemas/RunBody"} in run["anyOf"]
    assert "label" in doc["components"]["schemas"]["RunBody"]["properties"]
    assert refetch_body["required"] is True
    task = doc["paths"]["/jobs"]["post"]["requestBody"]
    assert task["required"] is True
    assert resolve(doc, task["content"]["application/json"]["schema"])["required"] == [
        "protocol_version", "job_type", "idempotency_key", "params"]


def test_the_packaged_protocol_schema_is_the_tested_copy():
    packaged = ROOT / "shared" / "pixivflow" / "http" / "protocol_v1.schema.json"
    assert packaged.read_bytes() == (ROOT / "tests" / "contract" / "protocol.schema.json").read_bytes()


def test_the_legacy_schemas_are_valid_json_schema():
    doc = openapi_document()
    registry = Registry().with_resource("urn:openapi", Resource(contents=doc, specification=DRAFT202012))
    for name in ("Health", "ScheduleList", "RunResult", "DrainResult", "RefetchAccepted", "JobStatusProjection"):
        Draft202012Validator.check_schema(doc["components"]["schemas"][name])
        Draft202012Validator({"$ref": f"urn:openapi#/components/schemas/{name}"}, registry=registry)
