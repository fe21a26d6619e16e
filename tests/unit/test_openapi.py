"""The trigger API's OpenAPI document is generated from the resolver and lists every route."""

from __future__ import annotations

import json

from pixivflow.http.openapi import openapi_document

ROUTES = [
    ("/health", "get"),
    ("/internal/outbox/drain", "post"),
    ("/internal/schedules", "get"),
    ("/internal/schedules/{scheduleId}/run", "post"),
    ("/internal/targets/{targetId}/refetch", "post"),
    ("/internal/targets/{targetId}/refetch/{requestId}", "get"),
]


def test_the_document_lists_every_route():
    doc = openapi_document()
    assert doc["openapi"].startswith("3.")
    assert sorted((path, method) for path, item in doc["paths"].items() for method in item) == ROUTES


def test_validation_failures_are_documented_as_400_never_422():
    doc = openapi_document()
    text = json.dumps(doc)
    assert '"422"' not in text and "HTTPValidationError" not in text
    run = doc["paths"]["/internal/schedules/{scheduleId}/run"]["post"]
    assert run["responses"]["400"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["status", "error"]


def test_routes_name_their_token():
    doc = openapi_document()
    security = {(p, m): op.get("security") for p, item in doc["paths"].items() for m, op in item.items()}
    assert security[("/health", "get")] is None
    for route in ROUTES[1:4]:
        assert security[route] == [{"triggerToken": []}], route
    for route in ROUTES[4:]:
        assert security[route] == [{"manualWorkToken": []}], route
    schemes = doc["components"]["securitySchemes"]
    assert {name: (s["type"], s["scheme"]) for name, s in schemes.items()} == {
        "triggerToken": ("http", "bearer"), "manualWorkToken": ("http", "bearer")}
    for route in ROUTES[1:]:
        responses = doc["paths"][route[0]][route[1]]["responses"]
        assert {"401", "503"} <= set(responses), route


def test_request_bodies_are_described():
    doc = openapi_document()
    refetch = doc["paths"]["/internal/targets/{targetId}/refetch"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert refetch["required"] == ["requestId"]
    assert refetch["properties"]["correlationId"]["maxLength"] == 200
    run = doc["paths"]["/internal/schedules/{scheduleId}/run"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"$ref": "#/components/schemas/RunBody"} in run["anyOf"]
    assert "label" in doc["components"]["schemas"]["RunBody"]["properties"]
