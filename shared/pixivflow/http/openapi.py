"""The trigger API's OpenAPI document, generated from the resolver (DESIGN §8).

Powertools builds the document from the routes; two things are then stated the way this API
behaves: validation failures are 400 with the ``{"status":"error","error":...}`` body (never
Powertools' default 422), and the refetch body, which is checked by hand so the spec's exact
error texts are kept, is described here.
"""

from __future__ import annotations

import json
from typing import Any

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "ErrorBody",
    "required": ["status", "error"],
    "properties": {"status": {"const": "error"}, "error": {"type": "string"}},
}

REFETCH_BODY: dict[str, Any] = {
    "required": True,
    "content": {"application/json": {"schema": {
        "type": "object",
        "title": "RefetchRequest",
        "required": ["requestId"],
        "properties": {
            "requestId": {
                "type": "string",
                "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$",
                "description": "UUID (versions 1-8); one request id names one manual slot forever",
            },
            "correlationId": {"type": ["string", "null"], "maxLength": 200,
                              "description": "Opaque caller correlation, forwarded to the delivery"},
        },
    }}},
}

_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


def openapi_document() -> dict[str, Any]:
    """The trigger API as an OpenAPI 3.1 document (a plain dict, ready for ``json.dumps``)."""
    from .trigger_api import app

    doc = json.loads(app.get_openapi_json_schema())
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    schemas["ErrorBody"] = ERROR_SCHEMA
    for item in doc.get("paths", {}).values():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            for code, response in responses.items():
                if code.startswith(("4", "5")):
                    response["content"] = {"application/json": {"schema": _ERROR_REF}}
            if operation.get("security"):
                responses.setdefault("401", {"description": "missing or wrong bearer token"})
                responses.setdefault("503", {"description": "endpoint disabled: token not configured"})
                for code in ("401", "503"):
                    responses[code].setdefault("content", {"application/json": {"schema": _ERROR_REF}})
    refetch = doc.get("paths", {}).get("/internal/targets/{targetId}/refetch", {}).get("post")
    if refetch is not None:
        refetch["requestBody"] = REFETCH_BODY
    run = doc.get("paths", {}).get("/internal/schedules/{scheduleId}/run", {}).get("post")
    if run is not None:
        run["responses"].setdefault("400", {"description": "invalid body (\"<field>: <message>\")",
                                            "content": {"application/json": {"schema": _ERROR_REF}}})
    return doc


__all__ = ["openapi_document"]
