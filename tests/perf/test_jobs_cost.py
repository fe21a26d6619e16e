"""What the Workflow Protocol v1 surface costs in AWS requests (counted with a botocore hook on
the engine's own clients, on moto), and modelled DynamoDB write units.

Measured:
  POST /jobs, first admission, no callback   3 DynamoDB requests (PutItem request item, PutItem slot,
                                             TransactWriteItems job.requested + stream head; the cell's
                                             item is written by its first claim) + 1 SQS
                                             SendMessageBatch (the cell's execution)
  POST /jobs, first admission, with callback  the same 3 DynamoDB requests (the transaction also puts
                                             the event_callback row) + 2 SQS sends (execution, callback)
  POST /jobs, replay of a finished job        2 refused PutItem + 3 Query, no SQS
  GET /jobs/{id}/events, nothing new to write 2 DynamoDB Query (the slot partition for the job
                                             projection, the stream range EVT#) and nothing else
The figures are printed (`make bench`); the asserts hold the line against regressions.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's meter and scenarios

from collections import Counter

from support.jobs import Receiver, events, jobs_runtime, post_job, task
from meter import Meter

SLOT = "morning-tokyo@manual-job-key-1"


def meter_for(rt):
    return Meter().attach(rt)


def requests(meter: Meter) -> dict:
    """{(service, operation): count}, the listening queues' empty polls aside."""
    return dict(Counter((c.service, c.op) for c in meter.calls if c.step != "idle"))


def test_what_one_admission_and_one_events_page_cost(make_runtime, downstream):
    rt = jobs_runtime(make_runtime, backend="moto")
    assert rt.wiring.jobs._client is rt.wiring.ledger._client  # one client: every request is counted

    meter = meter_for(rt)
    assert post_job(rt, task())[0] == 202
    assert requests(meter) == {("dynamodb", "PutItem"): 2, ("dynamodb", "TransactWriteItems"): 1,
                               ("sqs", "SendMessageBatch"): 1}

    rt.settle()
    meter.reset()
    assert len(events(rt, SLOT)[1]["events"]) == 3
    assert requests(meter) == {("dynamodb", "Query"): 2}

    meter.reset()
    assert post_job(rt, task())[0] == 200
    writes = [c for c in meter.calls if c.service == "dynamodb" and c.op in ("PutItem", "UpdateItem", "TransactWriteItems")]
    assert len(writes) == 2 and all(c.error == "ConditionalCheckFailedException" for c in writes)  # two refused inserts
    assert not [c for c in meter.calls if c.service == "sqs" and c.step != "idle"]


def test_what_an_admission_with_a_callback_costs(make_runtime, downstream):
    with Receiver() as receiver:
        rt = jobs_runtime(make_runtime, backend="moto")
        meter = meter_for(rt)
        assert post_job(rt, task(callback_url=receiver.url))[0] == 202
        assert requests(meter) == {("dynamodb", "PutItem"): 2, ("dynamodb", "TransactWriteItems"): 1,
                                   ("sqs", "SendMessageBatch"): 2}
        assert sum(c.messages for c in meter.calls if c.service == "sqs") == 2
