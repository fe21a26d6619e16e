"""AWS requests and modelled DynamoDB write units per delivered cell on the happy path.

Budget (issue: engine foundation): about 12 write units and 2 SQS sends per delivered cell, all in.
Measured: 11 units per cell (cell put, lease claim, bind, route reservation, intent + its index
entry, move to delivery_pending, outbox claim, settle + index exit, move to submitted) plus 8 per
slot (slot put + index entry, running, finish + index exit, the ~3 KB outcome record): 13.7 per
cell for a 3-target slot, 11.8 for 10 targets. The figures are printed (`make bench`); the
asserts hold the line against regressions.
"""

import boto3

from cost_model import CostMeter


def _measure(rt, schedule_id, iso):
    meter = CostMeter(boto3.client("dynamodb"), rt.env["LEDGER_TABLE"])
    meter.attach(rt.engine.ledger._client)
    meter.attach(rt.engine.queues._client)
    result = rt.fire(schedule_id, iso=iso)
    rt.settle()
    return meter, result


def test_write_units_and_sends_per_delivered_cell(make_runtime, downstream):
    rt = make_runtime("2026-11-30T22:59:00Z", backend="moto")  # counts requests with a botocore hook
    meter, result = _measure(rt, "morning-tokyo", "2026-11-30T23:00:00Z")
    state = rt.engine.ledger.load(result["slot_id"])
    delivered = sum(1 for c in state.snapshot_cells() if c.status == "submitted")
    assert delivered == 3 and len(downstream.requests) == 3

    wcu = meter.write_units / delivered
    sends = meter.sqs_messages / delivered
    ddb_requests = meter.count("dynamodb") / delivered
    print(f"\nper delivered cell: {wcu:.2f} write units, {sends:.2f} SQS messages, "
          f"{ddb_requests:.1f} DynamoDB requests, {meter.count('sqs') / delivered:.2f} SQS requests")
    print("write units by operation:", dict(meter.write_units_by_op))
    print("requests:", dict(sorted(meter.requests.items())))
    assert sends == 2  # one execution message and one outbox message per cell, nothing else
    assert wcu <= 14, f"{wcu:.2f} write units per delivered cell"
    assert ddb_requests <= 17, f"{ddb_requests:.1f} DynamoDB requests per delivered cell"
