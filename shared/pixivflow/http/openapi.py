"""The HTTP API's OpenAPI 3.1 document, generated from both shells' routes.

One HTTP API fronts both functions (template.yaml ``HttpApi``), so one document covers both
surfaces; each operation names its function in ``x-pixivflow-function``. Powertools builds the
paths, path parameters (with their patterns) and model bodies from the routes; the shell adds
every status a route can answer (2xx schemas, 400/415 for bodies, 401/503 for auth, 405, 500).
Added here: the component schemas those responses name (the legacy bodies of ``schemas.py``
and the published protocol ``$defs``) and the hand-checked request bodies.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .schemas import LEGACY_SCHEMAS, protocol_defs
from .text import ID

_PARAMETER_400 = "a path or query parameter that fails its rule (control characters, an id over 1,024 bytes, ...)"

_POWERTOOLS_ONLY = ("HTTPValidationError", "ValidationError", "ResponseValidationError")


def _openapi_path(rule: str) -> str:
    return re.sub(r"<(\w+)>", r"{\1}", rule)


def openapi_document() -> dict[str, Any]:
    """Both functions' routes as one OpenAPI 3.1 document (a plain dict, ready for ``json.dumps``)."""
    from . import jobs_api, trigger_api

    doc: dict[str, Any] = {}
    for shell in (trigger_api.shell, jobs_api.shell):
        part = json.loads(shell.openapi_json())
        if not doc:
            doc = part
        else:
            doc["paths"].update(part.get("paths", {}))
            for key, values in part.get("components", {}).items():
                doc.setdefault("components", {}).setdefault(key, {}).update(values)
        for spec in shell.routes:
            if not spec.in_schema:  # the operator page's HTML routes are not API operations
                continue
            operation = doc["paths"][_openapi_path(spec.rule)][spec.method.lower()]
            operation["x-pixivflow-function"] = shell.function
            _parameters(operation, spec)
            if spec.body is not None and spec.body.schema:
                operation["requestBody"] = {"required": not spec.body.optional, "content": {
                    "application/json": {"schema": {"$ref": f"#/components/schemas/{spec.body.schema}"}}}}
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in _POWERTOOLS_ONLY:
        schemas.pop(name, None)
    schemas.update(protocol_defs())
    schemas.update(LEGACY_SCHEMAS)
    for item in doc.get("paths", {}).values():
        for operation in item.values():
            operation.get("responses", {}).pop("422", None)  # the shell answers validation failures 400, never 422
    return doc


def _parameters(operation: dict[str, Any], spec: Any) -> None:
    """Each parameter's schema states the text rule the shell enforces on it (http/text.py) and what
    the route's own check adds; a route that checks parameters documents the 400 they can answer."""
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        name, where = parameter["name"], parameter["in"]
        rule = spec.path_rules.get(name, ID) if where == "path" else spec.query.get(name)
        if rule is None:
            continue
        extra = dict(spec.param_schemas.get(name, {}))
        if extra.pop("required", False):
            parameter["required"] = True
        pattern = parameter["schema"].get("pattern")
        schema = {**rule.schema(), **({"minLength": 1} if where == "path" else {}),
                  **({"pattern": pattern} if pattern else {}), **extra}
        parameter["schema"] = {"title": parameter["schema"].get("title", name), **schema}
    if parameters:
        responses = operation["responses"]
        responses.setdefault("400", {"description": _PARAMETER_400, "content": responses["500"]["content"]})


__all__ = ["openapi_document"]
