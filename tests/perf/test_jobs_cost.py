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

import boto3

from cost_model import CostMeter
from jobs_support import Receiver, events, jobs_runtime, post_job, task

SLOT = "morning-tokyo@manual-job-key-1"


def meter_for(rt):
    meter = CostMeter(boto3.client("dynamodb"), rt.env["LEDGER_TABLE"])
    meter.attach(rt.engine.ledger._client)
    meter.attach(rt.engine.queues._client)
    return meter


def report(label, meter):
    print(f"\n{label}: {dict(sorted(meter.requests.items()))}, {meter.write_units:.0f} modelled write units, "
          f"{meter.sqs_messages} SQS messages")


def test_what_one_admission_and_one_events_page_cost(make_runtime, downstream):
    rt = jobs_runtime(make_runtime, backend="moto")
    assert rt.engine.jobs._client is rt.engine.ledger._client  # one client: every request is counted

    meter = meter_for(rt)
    assert post_job(rt, task())[0] == 202
    report("POST /jobs (first admission)", meter)
    assert dict(meter.requests) == {("dynamodb", "PutItem"): 2, ("dynamodb", "TransactWriteItems"): 1,
                                    ("sqs", "SendMessageBatch"): 1}

    rt.settle()
    meter = meter_for(rt)
    assert len(events(rt, SLOT)[1]["events"]) == 3
    report("GET /jobs/{id}/events (3 events, nothing new)", meter)
    assert dict(meter.requests) == {("dynamodb", "Query"): 2}

    meter = meter_for(rt)
    assert post_job(rt, task())[0] == 200
    report("POST /jobs (replay of a finished job)", meter)
    assert meter.count("dynamodb", {"PutItem", "UpdateItem", "TransactWriteItems"}) == 2  # two refused inserts
    assert meter.count("sqs") == 0


def test_what_an_admission_with_a_callback_costs(make_runtime, downstream):
    with Receiver() as receiver:
        rt = jobs_runtime(make_runtime, backend="moto")
        meter = meter_for(rt)
        assert post_job(rt, task(callback_url=receiver.url))[0] == 202
        report("POST /jobs (first admission, callback declared)", meter)
        assert dict(meter.requests) == {("dynamodb", "PutItem"): 2, ("dynamodb", "TransactWriteItems"): 1,
                                        ("sqs", "SendMessageBatch"): 2}
        assert meter.sqs_messages == 2
