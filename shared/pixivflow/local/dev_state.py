"""``pixivflow dev --state-dir DIR``: the local table, queues and bucket outlive a restart.

moto keeps everything in memory, so on stop the dev server writes what the stack holds to
``DIR/state.json`` (the table's items in DynamoDB's own JSON, each queue's waiting messages with
their attributes, the bucket's objects base64-encoded) and on start puts it back into the freshly
provisioned resources. The moto port is remembered too, so the export line of a second shell stays
valid across restarts when the port is still free. Written atomically (temp file, then rename), so
a dev server killed while writing leaves the previous state, never half of one."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

FILE = "state.json"
VERSION = 1


def remembered_moto_port(state_dir: str | os.PathLike[str]) -> int:
    try:
        return int(json.loads((Path(state_dir) / FILE).read_text(encoding="utf-8")).get("motoPort") or 0)
    except (OSError, ValueError, AttributeError):
        return 0


def save(state_dir: str | os.PathLike[str], env: dict[str, str], moto_port: int) -> dict[str, int]:
    """Write the stack's contents; returns what was written, counted."""
    from .. import aws

    ddb, sqs = aws.client("dynamodb"), aws.client("sqs")
    items: list[dict[str, Any]] = []
    start = None
    while True:
        page = ddb.scan(TableName=env["LEDGER_TABLE"], **({"ExclusiveStartKey": start} if start else {}))
        items += page["Items"]
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    queues: dict[str, list[dict[str, Any]]] = {}
    for var in ("EXECUTION_QUEUE_URL", "OUTBOX_QUEUE_URL"):
        messages: list[dict[str, Any]] = []
        while True:
            got = sqs.receive_message(QueueUrl=env[var], MaxNumberOfMessages=10, VisibilityTimeout=600,
                                      MessageAttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            messages += [{"body": m["Body"], "attributes": m.get("MessageAttributes") or {}} for m in got]
        queues[var] = messages
    objects: dict[str, str] = {}
    bucket = env.get("ARTIFACT_BUCKET")
    if bucket:
        s3, token = aws.client("s3"), None
        while True:
            page = s3.list_objects_v2(Bucket=bucket, **({"ContinuationToken": token} if token else {}))
            for obj in page.get("Contents", []):
                objects[obj["Key"]] = base64.b64encode(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()).decode()
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
    path = Path(state_dir)
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / (FILE + ".tmp")
    tmp.write_text(json.dumps({"version": VERSION, "motoPort": moto_port, "items": items, "queues": queues,
                               "objects": objects}), encoding="utf-8")
    os.replace(tmp, path / FILE)
    return {"items": len(items), "messages": sum(len(m) for m in queues.values()), "objects": len(objects)}


def restore(state_dir: str | os.PathLike[str], env: dict[str, str]) -> dict[str, int]:
    """Put a saved state back; nothing when there is none. Returns what was restored, counted."""
    from .. import aws

    try:
        state = json.loads((Path(state_dir) / FILE).read_text(encoding="utf-8"))
    except OSError:
        return {"items": 0, "messages": 0, "objects": 0}
    if state.get("version") != VERSION:
        raise ValueError(f"{Path(state_dir) / FILE}: not a state this version of pixivflow dev wrote")
    ddb, sqs = aws.client("dynamodb"), aws.client("sqs")
    items = state.get("items") or []
    for i in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[i:i + 25]]
        pending = {env["LEDGER_TABLE"]: batch}
        while pending:
            pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
    sent = 0
    for var, messages in (state.get("queues") or {}).items():
        for m in messages:
            sqs.send_message(QueueUrl=env[var], MessageBody=m["body"],
                             **({"MessageAttributes": m["attributes"]} if m["attributes"] else {}))
            sent += 1
    objects = state.get("objects") or {}
    if objects and env.get("ARTIFACT_BUCKET"):
        s3 = aws.client("s3")
        for key, data in objects.items():
            s3.put_object(Bucket=env["ARTIFACT_BUCKET"], Key=key, Body=base64.b64decode(data))
    return {"items": len(items), "messages": sent, "objects": len(objects)}
