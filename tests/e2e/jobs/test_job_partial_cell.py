"""A cell item the ledger cannot read never makes the jobs API answer 500 (issue 21 item 3).

Under load ``GET /jobs/{id}`` once answered 500: ``cell_from_item`` met a cell item with no
``slotId`` / ``status`` (an unconditioned UpdateItem racing the cell's first write). Now such an
item reads as the pending cell it stood for (``SlotState.malformed``), the job answers 200 in the
protocol's shape, one error line names the item (no value), and the cell's first claim completes
the item, so the job then runs to its end."""

from __future__ import annotations

from support.jobs import PLAN, TARGET, get_job, jobs_runtime, post_job, task
from support.protocol_schema import validate

from pixivflow.adapters.dynamo_ledger import cell_sk, slot_pk

SLOT = f"{PLAN}@manual-job-key-1"


def test_a_partial_cell_item_answers_the_job_and_is_completed_by_its_first_claim(make_runtime, downstream, logs):
    rt = jobs_runtime(make_runtime)
    assert post_job(rt, task())[0] == 202
    client, table = rt.wiring.ledger._client, rt.env["LEDGER_TABLE"]  # noqa: SLF001 - plant the bad item
    client.put_item(TableName=table, Item={"pk": {"S": slot_pk(SLOT)}, "sk": {"S": cell_sk(TARGET)},
                                           "heartbeatAt": {"N": str(rt.clock.now_ms())}})
    status, job = get_job(rt, SLOT)
    assert status == 200 and job["status"] == "queued", job
    validate("Job", job)
    [line] = [entry for entry in logs.events("ledger.malformed_item") if entry.get("sk") == cell_sk(TARGET)][:1]
    assert line["level"] == "ERROR" and line["attributes"] == ["heartbeatAt", "pk", "sk"]
    rt.pump()
    status, job = get_job(rt, SLOT)
    assert (status, job["status"], job["result"]["candidates"][0]["work_id"]) == (200, "succeeded", "501")
    assert rt.wiring.ledger.load(SLOT).malformed == {}
