"""The bench's meter sees every AWS request (issue 25): for the same run, the writes it counts per
service and operation equal the twins' own counters, callbacks included (a client the meter does not
wrap would make the reported cost too low)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import scenarios  # noqa: E402

OPS = {"dynamodb": "dynamodb", "sqs": "sqs", "s3": "s3"}
# Every request that changes something: those are the engine's alone (the harness's settle and the
# meter's own item-size reads only read), so the meter's count must equal the twins' exactly.
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem", "SendMessage",
          "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "PutObject",
          "DeleteObject", "DeleteObjects", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}


def _twin_calls(cloud) -> Counter:
    out: Counter = Counter()
    for service in OPS:
        for op, n in getattr(cloud, service).calls.items():
            out[(service, op)] += n
    return out


def test_every_request_of_a_job_with_a_callback_and_a_scheduled_slot_is_metered():
    body = dict(scenarios.JOB_BODY, idempotency_key="meter-1", callback_url="http://127.0.0.1:9/cb")

    def allow_loopback_callbacks(cfg):
        scenarios._one_job_plan(cfg)
        cfg["jobs"] = {"callbackAllowHosts": ["127.0.0.1"]}

    with scenarios.bench_runtime(backend="twin", mutate=allow_loopback_callbacks) as bench:
        cloud = bench.rt.cloud
        bench.fire("morning-tokyo", scenarios.WARM_UP)
        bench.settle()
        before = _twin_calls(cloud)
        with bench.measure() as window:
            status, answer = bench.job_call("POST", "/jobs", body)
            assert status == 202, answer
            bench.settle()  # the callbacks fail (nothing listens on :9): retried, then re-driven
            bench.fire("morning-tokyo", scenarios.MEASURED)
            bench.settle()
        after = _twin_calls(cloud)
    metered = Counter((c.service, c.op) for c in window.calls if c.service in OPS and c.op in WRITES)
    twins = Counter({k: v for k, v in (after - before).items() if k[1] in WRITES})
    assert metered == twins
    assert any(op == "TransactWriteItems" for _, op in metered)  # the job's event + callback row
