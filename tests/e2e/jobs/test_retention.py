"""Nothing lives forever (issue 25): every item a slot's whole life writes (the slot, its cells,
its delivery rows, its events and the outcome record, a job's request identity, stream and
callback rows, a dead row) carries ``expiresAt`` (the table's TTL attribute), no earlier than the
retention and no later than the retention plus the retry horizon. The only items without one
are bounded by the configuration, not by traffic, or exist for a purpose that outlives a slot;
each is named here with why."""

from __future__ import annotations

from support.jobs import Receiver, ack, events, jobs_runtime, post_job, task

from pixivflow import aws
from pixivflow.adapters.dynamo_ledger.items import INTENT_RETRY_HORIZON_S

DAY_S = 86_400
# Kept by purpose, and bounded: one watch per schedule, one sweep lease, one item per Pixiv
# account; and the route-work confirmation, the cross-slot "delivered once per route" record
# (spec §10.1), which must outlive every slot that could select the work again (~100 B a work).
WITHOUT_EXPIRY = ("SCHEDULE#", "SWEEP#", "PIXIV#", "WORK#")


def test_every_item_of_a_slots_life_and_of_a_jobs_expires(make_runtime):
    with Receiver(statuses=[200, 200, 200, 200]) as receiver:
        rt = jobs_runtime(make_runtime)
        status, job = post_job(rt, task(callback_url=receiver.url))
        assert status == 202, job
        job_id = job["job"]["job_id"]
        rt.fire("morning-tokyo")
        rt.settle()
        # the consumer acks its stream: the ack cursor is an item of the job's life too
        status, page = events(rt, job_id)
        assert status == 200 and page["events"], page
        assert ack(rt, job_id, {"ack_through": page["events"][-1]["event_id"]})[0] == 200
        for _ in range(5):
            rt.clock.advance(60_000)
            rt.sweep()
        ddb = aws.client("dynamodb")
        items, start = [], None
        while True:
            page = ddb.scan(TableName=rt.env["LEDGER_TABLE"], **({"ExclusiveStartKey": start} if start else {}))
            items += page["Items"]
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        now_s = rt.clock.now_ms() // 1000

    kinds = {(i["pk"]["S"].split("#")[0], i["sk"]["S"].split("#")[0]) for i in items}
    assert ("SLOT", "DLV") in kinds and ("SLOT", "EVT") in kinds and ("REQUEST", "META") in kinds, kinds
    assert any(i["sk"]["S"] == "EVT#CURSOR" for i in items), "the ack cursor was written"
    lacking = sorted({(i["pk"]["S"], i["sk"]["S"]) for i in items if "expiresAt" not in i
                      and not i["pk"]["S"].startswith(WITHOUT_EXPIRY)})
    assert lacking == []
    retention_s = 30 * DAY_S
    for i in items:
        if "expiresAt" in i:
            expires = int(i["expiresAt"]["N"])
            assert now_s + retention_s - DAY_S <= expires <= now_s + retention_s + INTENT_RETRY_HORIZON_S, (i["pk"], i["sk"])
