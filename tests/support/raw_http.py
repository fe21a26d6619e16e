"""Raw API Gateway v2 requests against the real handlers, and a tally of the AWS writes they cause.

``EmbeddedRuntime.http`` always sends ``Content-Type: application/json`` and a JSON-encoded
body; the hostile-input tests need every byte of the event under their control.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from pixivflow import aws
from botocore.exceptions import ClientError
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from pixivflow.local.harness import http_event
from pixivflow.local.lambda_context import context_for
from support.protocol_schema import validator as protocol_validator  # one validator of the project's schema copy

DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
SQS_SENDS = frozenset({"SendMessage", "SendMessageBatch"})
ABSENT = object()


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]
    raw: str | None

    @property
    def pair(self) -> tuple[int, Any]:
        return self.status, self.body


def send(rt, method: str, path: str, body: Any = ABSENT, *, token: str | None = None, scheme: str = "Bearer",
         function: str = "trigger", content_type: str | None = "application/json",
         headers: Mapping[str, str] | None = None, b64: bool = False, raw: bool = False,
         b64_flag_only: bool = False, query: Mapping[str, str] | None = None) -> Answer:
    """One request. ``body``: ABSENT (none), a str sent as is when ``raw``, else JSON-encoded.

    ``b64`` base64-encodes the body and flags it as API Gateway does; ``b64_flag_only`` sets the
    flag on a body that is not base64."""
    event = http_event(method, path, query=query)
    hdrs = {k.lower(): v for k, v in (headers or {}).items()}
    if token is not None:
        hdrs["authorization"] = f"{scheme} {token}" if scheme else token
    if content_type is not None:
        hdrs["content-type"] = content_type
    event["headers"] = hdrs
    if body is ABSENT:
        event["body"] = None
    else:
        text = body if raw else json.dumps(body)
        if b64:
            text = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")
        event["body"] = text
        event["isBase64Encoded"] = b64 or b64_flag_only
    resp = rt.handlers[function](event, context_for(function))
    text = resp.get("body")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text
    return Answer(resp["statusCode"], parsed, {k.lower(): v for k, v in (resp.get("headers") or {}).items()}, text)


@dataclass
class AwsTally:
    """Successful DynamoDB writes and SQS sends of every boto3 client, and injected outages.

    Wraps botocore's one request path (``BaseClient._make_api_call``), so it sees the runtime's
    clients whenever they were created; a refused conditional write raises and is not counted.
    """

    writes: int = 0
    sends: int = 0
    down: set[str] = field(default_factory=set)  # "dynamodb" / "sqs": every call fails

    def install(self, monkeypatch) -> "AwsTally":
        from botocore.client import BaseClient

        real = BaseClient._make_api_call
        tally = self

        def make_api_call(client, operation_name, api_params):
            service = client.meta.service_model.endpoint_prefix
            if service in tally.down:
                raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "injected outage"}}, operation_name)
            result = real(client, operation_name, api_params)
            if operation_name in DYNAMODB_WRITES:
                tally.writes += 1
            elif operation_name in SQS_SENDS:
                tally.sends += 1
            return result

        monkeypatch.setattr(BaseClient, "_make_api_call", make_api_call)
        # The in-memory twins make no botocore call: their one entry point per operation is _count.
        # A write that its condition then refuses is counted there too, so twin writes are counted
        # only when the operation returns (see _twin_op below).
        from pixivflow.local.twins.dynamodb import TwinDynamoDB
        from pixivflow.local.twins.sqs import TwinSQS

        for cls, service in ((TwinDynamoDB, "dynamodb"), (TwinSQS, "sqs")):
            for op in ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item",
                       "send_message", "send_message_batch", "query", "get_item", "batch_get_item", "scan",
                       "receive_message", "delete_message", "delete_message_batch", "change_message_visibility",
                       "change_message_visibility_batch", "get_queue_attributes"):
                if hasattr(cls, op):
                    monkeypatch.setattr(cls, op, _twin_op(tally, service, getattr(cls, op)))
        return self

    def snapshot(self) -> tuple[int, int]:
        return self.writes, self.sends


_TWIN_WRITES = {"put_item": "PutItem", "update_item": "UpdateItem", "delete_item": "DeleteItem",
                "transact_write_items": "TransactWriteItems", "batch_write_item": "BatchWriteItem",
                "send_message": "SendMessage", "send_message_batch": "SendMessageBatch"}


def _twin_op(tally: "AwsTally", service: str, real):
    def op(self, **kwargs):
        name = _TWIN_WRITES.get(real.__name__, real.__name__)
        if service in tally.down:
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "injected outage"}}, name)
        result = real(self, **kwargs)
        if name in DYNAMODB_WRITES:
            tally.writes += 1
        elif name in SQS_SENDS:
            tally.sends += 1
        return result
    return op


def openapi_validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """Validate against a schema of the generated OpenAPI document (its refs resolved in it)."""
    from pixivflow.http.openapi import openapi_document

    doc = openapi_document()
    registry = Registry().with_resource("urn:openapi", Resource(contents=doc, specification=DRAFT202012))
    wrapped = json.loads(json.dumps(schema).replace('"#/components/', '"urn:openapi#/components/'))
    return Draft202012Validator(wrapped, registry=registry)


def stored_slots(rt) -> list[str]:
    """Every slot item in the table (a scan: the table also holds REQUEST# identity items)."""
    pages = aws.client("dynamodb").get_paginator("scan").paginate(
        TableName=rt.env["LEDGER_TABLE"], FilterExpression="sk = :m AND begins_with(pk, :p)",
        ExpressionAttributeValues={":m": {"S": "META"}, ":p": {"S": "SLOT#"}})
    return sorted(item["slotId"]["S"] for page in pages for item in page["Items"])


LEGACY_ERROR_KEYS = {"status", "error"}


def is_legacy_error(body: Any) -> bool:
    return isinstance(body, dict) and set(body) == LEGACY_ERROR_KEYS and body["status"] == "error" \
        and isinstance(body["error"], str)


def is_protocol_error(body: Any) -> bool:
    if not (isinstance(body, dict) and set(body) == {"error"}):
        return False
    error = body["error"]
    return not list(protocol_validator("Error").iter_errors(error)) and set(error) == {"code", "message", "retryable", "detail"}
