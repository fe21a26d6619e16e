"""Validate documents against the project's copy of the Workflow Protocol v1 schema.

The copy lives in tests/contract/protocol.schema.json (see tests/contract/README.md for where it
came from); nothing outside the checkout is read.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "contract" / "protocol.schema.json"
URN = "urn:pixivflow:protocol:v1"


@lru_cache(maxsize=None)
def validator(definition: str) -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert definition in schema["$defs"], definition
    registry = Registry().with_resource(URN, Resource.from_contents(schema))
    return Draft202012Validator({"$ref": f"{URN}#/$defs/{definition}"}, registry=registry)


def validate(definition: str, document) -> None:
    """Raise jsonschema.ValidationError when ``document`` is not a valid ``$defs/<definition>``."""
    validator(definition).validate(document)


def error_body(status_body) -> None:
    """A documented refusal: ``{"error": Error}`` and nothing else at the top level."""
    assert set(status_body) == {"error"}, status_body
    validate("Error", status_body["error"])
