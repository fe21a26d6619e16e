"""``make layer-check``: the built layer runs a slot end to end on the runtime we deploy.

The layer ``make layer`` builds (requirements and ``pixivflow``, bytecode compiled by Python 3.13,
for this machine's platform) is the only thing on ``sys.path`` of a subprocess run by that
interpreter with ``-S``: it imports each function's ``app.py`` and drives one scheduled fire through
the trigger, its cell through the execute function and its delivery through the deliver function,
passing the SQS messages on as Lambda's event source mapping would. This process holds the AWS side
(moto, as a loopback server, with the template's resources) and the downstream (a loopback
receiver), and checks what a user would see: the downstream got the work once, the slot succeeded.

No network beyond loopback: the layer was built before (the only step that fetches packages).
Usage: python tests/layer/check_layer.py <layer dir> <python3.13>"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
FIRE = "2026-11-30T23:00:00Z"  # the demo's morning-tokyo fire (08:00 Asia/Tokyo)
SLOT = "morning-tokyo@2026-12-01T0800"

DRIVE = r"""
import importlib.util, json, os, sys
import boto3

def handler(name):
    spec = importlib.util.spec_from_file_location(name + "_app", os.path.join(sys.argv[1], name, "app.py"))
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    return app.handler

class Context:
    def __init__(self, name):
        self.function_name = "pixivflow-" + name
        self.function_version, self.memory_limit_in_mb = "$LATEST", 512
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:pixivflow-" + name
        self.aws_request_id = "layer-check-" + name
    def get_remaining_time_in_millis(self):
        return 60_000

sqs = boto3.client("sqs")

def drain(url, arn, fn, name):
    handled = 0
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, AttributeNames=["All"])
        messages = got.get("Messages", [])
        if not messages:
            return handled
        records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                    "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "0", "SenderId": "layer-check",
                                   "ApproximateFirstReceiveTimestamp": "0"},
                    "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": arn,
                    "awsRegion": "us-east-1"} for m in messages]
        answer = fn({"Records": records}, Context(name))
        failed = {f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])}
        for m in messages:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        handled += len(messages) - len(failed)
        if failed:
            raise SystemExit(f"{name} failed {len(failed)} record(s)")

def arn(url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

fired = handler("trigger")({"scheduleId": "morning-tokyo", "scheduledTime": sys.argv[2]}, Context("trigger"))
executed = drain(os.environ["EXECUTION_QUEUE_URL"], arn(os.environ["EXECUTION_QUEUE_URL"]), handler("execute"), "execute")
delivered = drain(os.environ["OUTBOX_QUEUE_URL"], arn(os.environ["OUTBOX_QUEUE_URL"]), handler("deliver"), "deliver")
import pixivflow
print(json.dumps({"fired": fired, "executed": executed, "delivered": delivered, "origin": pixivflow.__file__,
                  "python": "%d.%d" % sys.version_info[:2]}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(layer: Path, python: str) -> int:
    if not (layer / "pixivflow" / "handlers").is_dir():
        print(f"layer-check FAILED: no built layer at {layer} (make layer builds it)", file=sys.stderr)
        return 1
    from pixivflow.local.devserver import _moto_server
    from pixivflow.local.downstream import Downstream
    from pixivflow.local.provision import provision

    port = _free_port()
    aws_env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}
    os.environ.update(aws_env)
    server = _moto_server(port)
    server.start()
    try:
        with Downstream() as downstream:
            resources = provision(prefix="layer-check")
            cfg = yaml.safe_load((ROOT / "events" / "demo" / "config.yaml").read_text())
            cfg["delivery"]["targets"]["review"]["url"] = downstream.url
            cfg["source"]["path"] = str(ROOT / "events" / "demo" / "catalog.json")
            cfg["schedules"] = [s for s in cfg["schedules"] if s["id"] == "morning-tokyo"]
            cfg["schedules"][0]["targetIds"] = cfg["schedules"][0].get("targetIds", [])[:1] or None
            config = Path(os.environ.get("TMPDIR", "/tmp")) / f"layer-check-{port}.yaml"
            config.write_text(yaml.safe_dump(cfg))
            env = {**aws_env, **resources, "PIXIVFLOW_CONFIG": str(config), "PATH": "/usr/bin:/bin",
                   "PYTHONPATH": str(layer), "PYTHONDONTWRITEBYTECODE": "1", "POWERTOOLS_METRICS_NAMESPACE": "LayerCheck",
                   "TRIGGER_TOKEN": "layer-check-trigger-token", "JOBS_TOKEN": "layer-check-jobs-token",
                   "CALLBACK_SIGNING_SECRET": "layer-check-callback-secret"}
            run = subprocess.run([python, "-S", "-c", DRIVE, str(ROOT / "functions"), FIRE], env=env,
                                 capture_output=True, text=True, timeout=300)
            if run.returncode != 0:
                print(run.stdout[-3000:], run.stderr[-3000:], sep="\n", file=sys.stderr)
                print("layer-check FAILED: the functions did not run from the built layer", file=sys.stderr)
                return 1
            seen = json.loads(run.stdout.strip().splitlines()[-1])
            import boto3

            ledger = boto3.client("dynamodb")
            slot = ledger.get_item(TableName=resources["LEDGER_TABLE"], Key={"pk": {"S": f"SLOT#{SLOT}"}, "sk": {"S": "META"}},
                                   ConsistentRead=True).get("Item", {})
            status = slot.get("status", {}).get("S")
            posts = [r for r in downstream.requests]
            problems = []
            if not seen["origin"].startswith(str(layer)):
                problems.append(f"pixivflow came from {seen['origin']}, not the layer")
            if seen["fired"].get("slot_id") != SLOT or seen["executed"] < 1 or seen["delivered"] < 1:
                problems.append(f"the run did not go through every function: {seen}")
            if len(posts) != 1 or status != "success":
                problems.append(f"downstream got {len(posts)} post(s), slot status {status!r}")
            if problems:
                print("layer-check FAILED: " + "; ".join(problems), file=sys.stderr)
                return 1
            print(f"layer-check: OK on Python {seen['python']} from {layer}: fire -> execute -> deliver, one post "
                  f"of work {posts[0].body.get('work_id')}, slot {SLOT} success")
            return 0
    finally:
        server.stop()


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]).resolve(), sys.argv[2]))
