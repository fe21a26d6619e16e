"""JSON Schemas of the trigger function's bodies, as OpenAPI components.

The job routes answer the published protocol ``$defs`` (``protocol_v1.schema.json`` beside this
file, a copy of Workflow Protocol v1); the legacy routes have no published schema, so theirs are
stated here, and the e2e tests validate real responses against them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config import ID_PATTERN
from ..domain import task as task_rules
from .text import ID, KEYED_TEXT, TEXT, TextRule

# UUID v1-8, case-insensitive (JSON Schema patterns have no flags: both cases spelled out).
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$"
SCHEDULE_ID_PATTERN = ID_PATTERN
TARGET_ID_PATTERN = ID_PATTERN

_NULLABLE_STRING = {"type": ["string", "null"]}
_BLANK_REFUSED = {"pattern": "\\S"}  # the server trims strings and refuses what is left empty


def _text(rule: TextRule, **extra: Any) -> dict[str, Any]:
    return {**rule.schema(), **extra}


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


# Every body is read by the one text rule (http/text.py) at every depth, object keys included,
# before its route's own check: keys the route ignores are accepted only when they and everything
# under them follow it.
_OPEN = {"propertyNames": TEXT.schema(), "additionalProperties": {"$ref": "#/components/schemas/TextValue"}}
_NULLABLE_MS = {"type": ["integer", "null"], "minimum": 0}
_MS = {"type": "integer", "minimum": 0}

LEGACY_SCHEMAS: dict[str, dict[str, Any]] = {
    "TextValue": {
        "title": "TextValue",
        "description": "Any JSON value whose strings and object keys follow the text rule (numbers finite, "
                       "integers of at most 4300 digits; the whole body at most 64 KB and 64 levels deep)",
        "anyOf": [{"type": ["null", "boolean", "number"]}, TEXT.schema(),
                  {"type": "array", "items": {"$ref": "#/components/schemas/TextValue"}}, {"type": "object", **_OPEN}],
    },
    "RunBody": {
        "type": "object",
        "title": "RunBody",
        "description": "Optional body of the run route. ``label`` becomes the slot name (trimmed, first 80 chars); "
                       "other keys are ignored",
        "properties": {"label": _or_null(_text(TEXT))},
        **_OPEN,
    },
    "ErrorBody": {
        "type": "object",
        "title": "ErrorBody",
        "description": "Every legacy failure, and the 401/503 auth failures of every route",
        "required": ["status", "error"],
        "properties": {"status": {"const": "error"}, "error": {"type": "string"}},
    },
    "ProtocolErrorBody": {
        "type": "object",
        "title": "ProtocolErrorBody",
        "description": "Every failure of /jobs* and /capabilities other than auth",
        "required": ["error"],
        "properties": {"error": {"$ref": "#/components/schemas/Error"}},
    },
    "Health": {
        "type": "object",
        "required": ["status", "service", "version", "commit"],
        "properties": {"status": {"const": "ok"}, "service": {"const": "pixivflow-scheduler-trigger"},
                       "version": {"type": "string"}, "commit": _NULLABLE_STRING},
    },
    "ScheduleList": {
        "type": "object",
        "required": ["schedules"],
        "properties": {"schedules": {"type": "array", "items": {
            "type": "object",
            "required": ["scheduleId", "mode", "occurrence"],
            "properties": {"scheduleId": {"type": "string", "pattern": SCHEDULE_ID_PATTERN},
                           "mode": {"enum": ["external", "internal"]},
                           "occurrence": {**_NULLABLE_STRING, "description": "slot id a trigger would run now"}},
        }}},
    },
    "RunResult": {
        "type": "object",
        "description": "Disposition of a run trigger: 202 accepted/running, 200 completed, 503 rejected",
        "required": ["status", "schedule", "note"],
        "properties": {
            "status": {"enum": ["accepted", "running", "completed", "rejected"]},
            "note": {"enum": ["queued", "already_running", "already_completed", "rejected"]},
            "schedule": {
                "type": "object",
                "required": ["scheduleId", "slotId", "disposition", "status"],
                "properties": {
                    "scheduleId": {"type": "string"},
                    "slotId": {"type": "string"},
                    "disposition": {"enum": ["accepted", "already_running", "already_completed", "rejected"]},
                    "status": {"type": "string"},
                    "alreadyCompleted": {"const": True},
                    "cells": {"type": "array", "items": {
                        "type": "object",
                        "required": ["targetId", "status", "workId"],
                        "properties": {"targetId": {"type": "string"}, "status": {"type": "string"},
                                       "workId": _NULLABLE_STRING, "error": {"type": "string"}},
                    }},
                },
            },
        },
    },
    # POST /internal/outbox/drain queues the due rows for the deliver function (the trigger
    # function holds no route or signing secret), so it answers what it queued, by kind.
    "DrainResult": {
        "type": "object",
        "required": ["status", "result"],
        "properties": {"status": {"const": "ok"}, "result": {
            "type": "object",
            "required": ["queued", "kinds", "unsent"],
            "properties": {
                "queued": {"type": "integer", "minimum": 0},
                "kinds": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
                          "description": "messages queued per row kind (delivery, event_callback, notification)"},
                "unsent": {"type": "integer", "minimum": 0,
                           "description": "due rows whose message SQS did not take; the sweep re-drives them"},
            },
        }},
    },
    # POST /jobs as this producer admits it: the published Task, narrowed to its one job type,
    # with the required fields and caps, so an outside fuzzer can draw valid requests. Strings
    # carry no control characters or lone surrogates (http/text.py).
    "CandidateSearchTask": {
        "title": "CandidateSearchTask",
        "description": "The published Task (Task, CandidateSearchParams) as this producer admits it "
                       "(domain/task.py): an optional field may be null, lengths count the trimmed value, unknown "
                       "keys are ignored; params needs a query or a target_id. A target_id this deployment does "
                       "not configure is 400, as is a callback_url that is not https or whose host does not "
                       "resolve to public addresses (unless allowed by jobs.callbackAllowHosts)",
        "type": "object",
        "required": ["protocol_version", "job_type", "idempotency_key", "params"],
        "properties": {
            "protocol_version": {"const": "1"},
            "job_type": {"const": "candidate_search"},
            "idempotency_key": _text(ID, minLength=1, maxLength=task_rules.MAX_KEY, **_BLANK_REFUSED),
            "correlation_id": _or_null(_text(ID, maxLength=task_rules.MAX_CORRELATION)),
            # empty is no callback; else an absolute http(s) URL (domain/callbacks.py decides the rest)
            "callback_url": _or_null(_text(TEXT, maxLength=task_rules.MAX_CALLBACK_URL, pattern="^$|^[Hh][Tt][Tt][Pp][Ss]?://")),
            "deadline_ms": {"type": ["integer", "null"], "minimum": task_rules.MIN_DEADLINE_MS},
            "labels": _or_null({"type": "object", "propertyNames": TEXT.schema(), "additionalProperties": TEXT.schema()}),
            "params": {
                "type": "object",
                "anyOf": [{"required": ["query"], "properties": {"query": {"type": "object"}}},
                          {"required": ["target_id"], "properties": {"target_id": {"type": "string"}}}],
                "properties": {
                    "target_id": _or_null(_text(ID, **_BLANK_REFUSED)),
                    "source": _or_null({"type": "object", "properties": {
                        "platform": {"enum": ["pixiv", None]},
                        "account": _or_null(_text(ID, maxLength=task_rules.MAX_ACCOUNT, **_BLANK_REFUSED))}, **_OPEN}),
                    "query": _or_null({"type": "object", "required": ["tags"], "properties": {
                        "tags": {"type": "array", "minItems": 1, "maxItems": task_rules.MAX_TAGS,
                                 "items": _text(KEYED_TEXT, minLength=1, maxLength=task_rules.MAX_TAG, **_BLANK_REFUSED)},
                        "expand": {"type": ["boolean", "null"]}}, **_OPEN}),
                    "constraints": _or_null({"type": "object", "properties": {
                        "exclude": _or_null({"type": "array", "maxItems": task_rules.MAX_EXCLUDE, "items": {
                            "type": "object", "required": ["kind", "id"], "properties": {
                                "kind": {"enum": list(task_rules.EXCLUDE_KINDS)},
                                "id": _text(ID, minLength=1, maxLength=task_rules.MAX_EXCLUDE_ID, **_BLANK_REFUSED)},
                            **_OPEN}}),
                        "limit": {"type": ["integer", "null"], "minimum": 1},
                        "scan_limit": {"type": ["integer", "null"], "minimum": 1},
                        "work_types": _or_null({"type": "array", "items": _text(TEXT, **_BLANK_REFUSED)})}, **_OPEN}),
                },
                **_OPEN,
            },
        },
        **_OPEN,
    },
    "RefetchRequest": {
        "type": "object",
        "title": "RefetchRequest",
        "required": ["requestId"],
        "properties": {
            "requestId": {"type": "string", "pattern": UUID_PATTERN,
                          "description": "UUID (versions 1-8); one request id names one manual slot forever"},
            "correlationId": _or_null(_text(ID, maxLength=200, description="Opaque caller correlation, forwarded to "
                                            "the delivery; at most 200 chars, no control or invisible characters")),
        },
        **_OPEN,
    },
    # POST /jobs/{jobId}/events/ack as this producer reads it: the published AckRequest, with the text rule.
    "AckBody": {
        "title": "AckBody",
        "allOf": [{"$ref": "#/components/schemas/AckRequest"}],
        "type": "object",
        "required": ["ack_through"],
        "properties": {"ack_through": _text(TEXT, minLength=1, **_BLANK_REFUSED)},
        **_OPEN,
    },
    "RefetchAccepted": {
        "type": "object",
        "required": ["status", "slotId", "disposition"],
        "properties": {"status": {"const": "accepted"}, "slotId": {"type": "string"},
                       "disposition": {"enum": ["accepted", "queued", "already_completed"]}},
    },
    "JobStatusProjection": {
        "type": "object",
        "description": "A manual refetch's status; timestamps epoch ms or null",
        "required": ["requestId", "slotId", "state", "slotStatus", "createdAt", "startedAt", "updatedAt", "heartbeatAt",
                     "leaseExpiresAt", "leaseActive", "claimed", "attemptCount", "terminalReasonCode",
                     "terminalReasonMessage", "manualRequestId", "idempotencyKey", "correlationId"],
        "properties": {
            "requestId": {"type": "string"}, "slotId": {"type": "string"}, "state": {"type": "string"},
            "slotStatus": {"type": "string"}, "createdAt": _MS, "startedAt": _NULLABLE_MS, "updatedAt": _MS,
            "heartbeatAt": _NULLABLE_MS, "leaseExpiresAt": _NULLABLE_MS, "leaseActive": {"type": "boolean"},
            "claimed": {"type": "boolean"}, "attemptCount": {"type": "integer", "minimum": 0},
            "terminalReasonCode": _NULLABLE_STRING, "terminalReasonMessage": _NULLABLE_STRING,
            "manualRequestId": {"type": "string"}, "idempotencyKey": {"type": "string"}, "correlationId": _NULLABLE_STRING,
        },
    },
}

PROTOCOL_SCHEMA_FILE = Path(__file__).with_name("protocol_v1.schema.json")


@lru_cache(maxsize=1)
def protocol_defs() -> dict[str, Any]:
    """The published protocol ``$defs``, with their refs pointed at ``#/components/schemas``."""
    text = PROTOCOL_SCHEMA_FILE.read_text(encoding="utf-8").replace('"#/$defs/', '"#/components/schemas/')
    return json.loads(text)["$defs"]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


__all__ = ["LEGACY_SCHEMAS", "SCHEDULE_ID_PATTERN", "TARGET_ID_PATTERN", "UUID_PATTERN", "protocol_defs", "ref"]
