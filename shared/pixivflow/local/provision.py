"""Create template.yaml's table, queues and bucket on whatever endpoint boto3 currently targets.

One source of truth: the DynamoDB table, the SQS queues (DLQs first, redrive policies resolved to the
created DLQ ARNs) and the S3 bucket are built from the template's own resource properties, so the
embedded runtime, the dev server and the tests run against exactly the deployed shapes. Properties a
local endpoint does not support (point-in-time recovery, SSE, KMS keys, tags …) are skipped.

Clients are created inside :func:`provision` with boto3's default session, so a running ``mock_aws``,
``AWS_ENDPOINT_URL`` or a profile all apply. Every step is idempotent: a second call with the same
prefix finds and reuses the resources (converging queue attributes and adding missing GSIs).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from pixivflow.local.template import read_template

__all__ = ["ENV_BY_LOGICAL_ID", "provision"]

TABLE = "AWS::DynamoDB::Table"
QUEUE = "AWS::SQS::Queue"
BUCKET = "AWS::S3::Bucket"

#: logical id -> environment variable carrying its table name, queue URL or bucket name
ENV_BY_LOGICAL_ID: dict[str, str] = {
    "LedgerTable": "LEDGER_TABLE",
    "ExecutionQueue": "EXECUTION_QUEUE_URL",
    "OutboxQueue": "OUTBOX_QUEUE_URL",
    "ExecutionDLQ": "EXECUTION_DLQ_URL",
    "OutboxDLQ": "OUTBOX_DLQ_URL",
    "SchedulerDLQ": "SCHEDULER_DLQ_URL",
    "ArtifactBucket": "ARTIFACT_BUCKET",
}
#: the dead-letter queues whose depth the sweep's Health metric counts (template: the sweep's env)
DEAD_LETTER_QUEUES = ("ExecutionDLQ", "OutboxDLQ", "SchedulerDLQ")

_PREFIX_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")

# CloudFormation AWS::SQS::Queue property -> SQS queue attribute (values are sent as strings)
_QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "SqsManagedSseEnabled",
)
_IMMUTABLE_QUEUE_ATTRIBUTES = {"FifoQueue"}
_TABLE_PROPERTIES = (
    "KeySchema",
    "AttributeDefinitions",
    "BillingMode",
    "ProvisionedThroughput",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "StreamSpecification",
    "TimeToLiveSpecification",
)

_NO_VALUE = object()


class TemplateResolutionError(ValueError):
    """An intrinsic function in a provisioned property could not be resolved locally."""


class _Resolver:
    """Resolves the intrinsics that provisioned properties may use, against what was created so far."""

    def __init__(self, template: Mapping[str, Any], region: str, account_id: Callable[[], str]) -> None:
        self._parameters = template.get("Parameters") or {}
        self._region = region
        self._account_id = account_id
        self.refs: dict[str, str] = {}  # logical id -> physical id (table name, queue URL, bucket name)
        self.attrs: dict[str, dict[str, str]] = {}  # logical id -> {attribute: value}

    def ref(self, name: str) -> Any:
        if name in self.refs:
            return self.refs[name]
        if name in self._parameters:
            param = self._parameters[name] or {}
            if "Default" not in param:
                raise TemplateResolutionError(f"parameter {name!r} has no Default to provision with")
            return param["Default"]
        pseudo = {
            "AWS::Region": lambda: self._region,
            "AWS::Partition": lambda: "aws",
            "AWS::URLSuffix": lambda: "amazonaws.com",
            "AWS::AccountId": self._account_id,
            "AWS::StackName": lambda: "pixivflow-local",
            "AWS::NoValue": lambda: _NO_VALUE,
        }
        if name in pseudo:
            return pseudo[name]()
        raise TemplateResolutionError(f"!Ref {name}: not a parameter or a resource created so far")

    def get_att(self, resource: str, attribute: str) -> str:
        try:
            return self.attrs[resource][attribute]
        except KeyError:
            raise TemplateResolutionError(
                f"!GetAtt {resource}.{attribute}: not available locally (resource not created yet?)"
            ) from None

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                resource, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
                return self.get_att(resource, attribute)
            if key == "Fn::Sub":
                return self._sub(arg)
            if key == "Fn::Join":
                sep, parts = arg
                return str(sep).join(str(p) for p in self.resolve(parts))
            if key.startswith("Fn::") or key == "Condition":
                raise TemplateResolutionError(f"{key} is not supported by local provisioning")
        out = {}
        for k, v in value.items():
            resolved = self.resolve(v)
            if resolved is not _NO_VALUE:
                out[k] = resolved
        return out

    def properties(self, resource: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        """The resolved subset of a resource's Properties that local provisioning uses."""
        raw = resource.get("Properties") or {}
        out = {}
        for key in keys:
            if key in raw:
                value = self.resolve(raw[key])
                if value is not _NO_VALUE:
                    out[key] = value
        return out

    def _sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            text, variables = arg[0], self.resolve(arg[1])
        else:
            text, variables = arg, {}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return str(self.get_att(*name.split(".", 1)))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", replace, text)


def _resources_of(template: Mapping[str, Any], type_name: str) -> list[tuple[str, dict[str, Any]]]:
    resources = template.get("Resources") or {}
    return [(lid, res) for lid, res in resources.items() if (res or {}).get("Type") == type_name]


def _references(value: Any) -> set[str]:
    """Logical ids mentioned by Ref / GetAtt / Sub anywhere inside ``value``."""
    found: set[str] = set()
    if isinstance(value, list):
        for v in value:
            found |= _references(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k == "Ref" and isinstance(v, str):
                found.add(v)
            elif k == "Fn::GetAtt":
                found.add(v.split(".", 1)[0] if isinstance(v, str) else v[0])
            elif k == "Fn::Sub":
                text = v[0] if isinstance(v, list) else v
                found |= {m.split(".", 1)[0] for m in re.findall(r"\$\{([^}!]+)\}", str(text))}
                if isinstance(v, list) and len(v) > 1:
                    found |= _references(v[1])
            else:
                found |= _references(v)
    return found


def _queue_order(queues: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Queues sorted so every queue comes after the queues it references (DLQs first)."""
    by_id = dict(queues)
    deps = {
        lid: _references({k: v for k, v in (res.get("Properties") or {}).items() if k in _QUEUE_ATTRIBUTES})
        & (set(by_id) - {lid})
        for lid, res in queues
    }
    ordered: list[str] = []
    visiting: set[str] = set()

    def visit(lid: str) -> None:
        if lid in ordered:
            return
        if lid in visiting:
            raise TemplateResolutionError(f"queue {lid} is part of a reference cycle")
        visiting.add(lid)
        for dep in sorted(deps[lid]):
            visit(dep)
        visiting.discard(lid)
        ordered.append(lid)

    for lid, _ in queues:
        visit(lid)
    return [(lid, by_id[lid]) for lid in ordered]


def _attr_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _error_code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


# ------------------------------------------------------------------ DynamoDB


def _table_request(name: str, props: Mapping[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    if request["BillingMode"] == "PROVISIONED":
        request["ProvisionedThroughput"] = props.get(
            "ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
        )
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if props.get(key):
            request[key] = [_index_request(ix, request["BillingMode"]) for ix in props[key]]
    stream = props.get("StreamSpecification")
    if stream and stream.get("StreamViewType"):
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    return request


def _index_request(index: Mapping[str, Any], billing_mode: str) -> dict[str, Any]:
    out = {k: index[k] for k in ("IndexName", "KeySchema", "Projection") if k in index}
    if billing_mode == "PROVISIONED" and "ProvisionedThroughput" in index:
        out["ProvisionedThroughput"] = index["ProvisionedThroughput"]
    return out


def _ensure_table(ddb: Any, name: str, props: Mapping[str, Any]) -> dict[str, Any]:
    request = _table_request(name, props)
    try:
        description = ddb.describe_table(TableName=name)["Table"]
    except ddb.exceptions.ResourceNotFoundException:
        try:
            ddb.create_table(**request)
        except ddb.exceptions.ResourceInUseException:
            pass  # created concurrently: reuse it
        ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        description = ddb.describe_table(TableName=name)["Table"]
    else:
        existing = {ix["IndexName"] for ix in description.get("GlobalSecondaryIndexes") or []}
        for index in request.get("GlobalSecondaryIndexes", []):
            if index["IndexName"] not in existing:
                ddb.update_table(
                    TableName=name,
                    AttributeDefinitions=request["AttributeDefinitions"],
                    GlobalSecondaryIndexUpdates=[{"Create": index}],
                )
        if existing != {ix["IndexName"] for ix in request.get("GlobalSecondaryIndexes", [])}:
            ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
            description = ddb.describe_table(TableName=name)["Table"]

    ttl = props.get("TimeToLiveSpecification") or {}
    if ttl.get("Enabled") and ttl.get("AttributeName"):
        _ensure_ttl(ddb, name, ttl["AttributeName"])
    return description


def _ensure_ttl(ddb: Any, name: str, attribute: str) -> None:
    from botocore.exceptions import ClientError

    try:
        current = ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        if current.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") and current.get("AttributeName") == attribute:
            return
        ddb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute}
        )
    except ClientError as exc:  # a local endpoint without TTL support: the setting is advisory there
        if _error_code(exc) not in ("ValidationException", "UnknownOperationException", "NotImplemented"):
            raise


# ------------------------------------------------------------------ SQS


def _ensure_queue(sqs: Any, name: str, props: Mapping[str, Any]) -> tuple[str, str]:
    attributes = {key: _attr_string(props[key]) for key in _QUEUE_ATTRIBUTES if key in props}
    try:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    except sqs.exceptions.QueueDoesNotExist:
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    else:
        mutable = {k: v for k, v in attributes.items() if k not in _IMMUTABLE_QUEUE_ATTRIBUTES}
        if mutable:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=mutable)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


# ------------------------------------------------------------------ S3


def _ensure_bucket(s3: Any, name: str, region: str) -> None:
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=name)
        return
    except ClientError as exc:
        if _error_code(exc) not in ("404", "NoSuchBucket", "NotFound"):
            raise
    kwargs: dict[str, Any] = {"Bucket": name}
    if region and region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(**kwargs)
    except ClientError as exc:
        if _error_code(exc) != "BucketAlreadyOwnedByYou":
            raise


# ------------------------------------------------------------------ entry point


def provision(
    template_path: str | os.PathLike[str] | None = None, *, prefix: str = "pixivflow-local"
) -> dict[str, str]:
    """Create (or reuse) every table, queue and bucket of the template; return the handlers' env.

    Resources are named ``<prefix>-<logical id lower-cased>`` (``.fifo`` appended for FIFO queues).
    The result maps ``LEDGER_TABLE``, ``EXECUTION_QUEUE_URL``, ``OUTBOX_QUEUE_URL``,
    ``EXECUTION_DLQ_URL``, ``OUTBOX_DLQ_URL``, ``SCHEDULER_DLQ_URL`` and ``ARTIFACT_BUCKET`` (for the
    logical ids the template declares) to the created names and URLs, and ``DEAD_LETTER_QUEUE_URLS``
    to the dead-letter queues the sweep's Health metric reads (comma-separated).
    """
    if not _PREFIX_RE.match(prefix):
        raise ValueError(
            f"prefix {prefix!r} must be 1-40 lower-case letters, digits or hyphens "
            "(it names tables, queues and buckets)"
        )
    from .. import aws  # clients are made here, never at import time

    template = read_template(template_path)  # read, never changed: the shared parse
    tables = _resources_of(template, TABLE)
    queues = _resources_of(template, QUEUE)
    buckets = _resources_of(template, BUCKET)

    ddb = aws.client("dynamodb") if tables else None
    sqs = aws.client("sqs") if queues else None
    s3 = aws.client("s3") if buckets else None
    region = next(
        (c.meta.region_name for c in (ddb, sqs, s3) if c is not None and c.meta.region_name), "us-east-1"
    )
    account: dict[str, str] = {}

    def account_id() -> str:
        if "id" not in account:
            account["id"] = aws.client("sts").get_caller_identity()["Account"]
        return account["id"]

    resolver = _Resolver(template, region, account_id)

    def physical(logical_id: str) -> str:
        return f"{prefix}-{logical_id.lower()}"

    for logical_id, resource in tables:
        props = resolver.properties(resource, _TABLE_PROPERTIES)
        name = physical(logical_id)
        description = _ensure_table(ddb, name, props)
        resolver.refs[logical_id] = name
        resolver.attrs[logical_id] = {"Arn": description["TableArn"]}
        if description.get("LatestStreamArn"):
            resolver.attrs[logical_id]["StreamArn"] = description["LatestStreamArn"]

    for logical_id, resource in _queue_order(queues):
        props = resolver.properties(resource, _QUEUE_ATTRIBUTES)
        name = physical(logical_id)
        if str(props.get("FifoQueue", "")).lower() == "true":
            name += ".fifo"
        url, arn = _ensure_queue(sqs, name, props)
        resolver.refs[logical_id] = url
        resolver.attrs[logical_id] = {"Arn": arn, "QueueUrl": url, "QueueName": name}

    for logical_id, _resource in buckets:
        name = physical(logical_id)
        _ensure_bucket(s3, name, region)
        resolver.refs[logical_id] = name
        resolver.attrs[logical_id] = {"Arn": f"arn:aws:s3:::{name}", "DomainName": f"{name}.s3.amazonaws.com"}

    env = {env: resolver.refs[lid] for lid, env in ENV_BY_LOGICAL_ID.items() if lid in resolver.refs}
    dead_letters = [resolver.refs[lid] for lid in DEAD_LETTER_QUEUES if lid in resolver.refs]
    if dead_letters:
        env["DEAD_LETTER_QUEUE_URLS"] = ",".join(dead_letters)
    return env
