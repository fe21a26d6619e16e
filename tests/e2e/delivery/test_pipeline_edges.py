"""Edges of the pipeline a user would notice: download-only targets, poison messages, metrics."""


from pixivflow import aws

from conftest import ms
from support.builders import emf_blobs


def _one_target(target_id, **target_changes):
    def mutate(cfg):
        for t in cfg["targets"]:
            if t["id"] == target_id:
                t.update(target_changes)
        cfg["schedules"][0]["targetIds"] = [target_id]

    return mutate


def test_download_only_target_is_submitted_without_any_delivery_and_its_files_are_stored(make_runtime, downstream):
    rt = make_runtime(mutate=_one_target("cats", storageMode="persistent", delivery=None))
    slot_id = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")["slot_id"]
    rt.settle()
    state = rt.wiring.ledger.load(slot_id)
    [cell] = state.snapshot_cells()
    assert (state.slot.status, cell.status, cell.terminal_reason_code) == ("success", "submitted", None)
    assert state.intents == [] and downstream.requests == []
    pages = rt.wiring.source.get_work("illustration", cell.work_id).page_count
    objects = aws.client("s3").list_objects_v2(Bucket=rt.env["ARTIFACT_BUCKET"]).get("Contents", [])
    prefix = f"{slot_id}/cats/{cell.work_id}"
    # One object per page and nothing else (issue 25: no manifest; a route-less work has no intent
    # to record its files, and nobody reads them but the bucket's retention).
    assert sorted(o["Key"] for o in objects) == sorted(f"{prefix}/{cell.work_id}_p{n}.png" for n in range(pages))


def test_a_poison_execution_message_ends_in_the_dlq_after_five_receives_and_spares_its_batch(make_runtime, downstream):
    rt = make_runtime(mutate=_one_target("cats"))
    sqs = aws.client("sqs")
    sqs.send_message(QueueUrl=rt.env["EXECUTION_QUEUE_URL"], MessageBody="{not json")
    slot_id = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")["slot_id"]
    for _ in range(10):  # the ESM redelivers the failed record until the redrive policy moves it
        rt.pump()
    dlq = sqs.receive_message(QueueUrl=rt.env["EXECUTION_DLQ_URL"], MaxNumberOfMessages=10,
                              AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert [m["Body"] for m in dlq] == ["{not json"]
    assert int(dlq[0]["Attributes"]["ApproximateReceiveCount"]) >= 5
    assert rt.pumps["execute"].stats.failed == 5  # exactly maxReceiveCount handler failures
    rt.settle()
    assert rt.wiring.ledger.load(slot_id).slot.status == "success"  # the good record was processed
    assert len(downstream.requests) == 1




def _metric(blobs, name, **dims):
    return sum(sum(b[name]) if isinstance(b[name], list) else b[name]
               for b in blobs if name in b and all(b.get(k) == v for k, v in dims.items()))


def test_metrics_count_admissions_outcomes_acks_and_stalls(make_runtime, downstream, logs):
    rt = make_runtime()
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    rt.settle()
    # An occurrence that is never executed: the consumer is down, the sweep ends it queued_too_long.
    fire = ms("2026-12-01T18:30:00Z")
    rt.clock.set(fire)
    rt.outages.append(("execute", fire, fire + 40 * 60_000))
    rt.fire("evening-berlin", iso="2026-12-01T18:30:00Z")
    rt.settle()
    _, raw = logs()
    blobs = emf_blobs(raw)
    assert all(b["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "PixivFlowLocal" for b in blobs)
    assert _metric(blobs, "SlotsAdmitted", trigger_source="cron") == 2
    assert _metric(blobs, "SlotsFinished", status="success") == 1
    assert _metric(blobs, "SlotsFinished", status="failed") == 1
    assert _metric(blobs, "CellOutcomes", category="submitted") == 3
    assert _metric(blobs, "CellOutcomes", category="executor_failed") == 3
    assert _metric(blobs, "DeliveryAcks", kind="accepted") == 3
    assert _metric(blobs, "Stalls", rule="queued_too_long") == 1


class _RefusingQueues:
    """The real queues, except that the chosen queue takes no message (SQS down for one send)."""

    def __init__(self, inner, refuse: str):
        self._inner, self._refuse, self.refused = inner, refuse, 0

    def send_execution(self, messages):
        return self._refused(messages) if self._refuse == "execution" else self._inner.send_execution(messages)

    def send_outbox(self, messages):
        return self._refused(messages) if self._refuse == "outbox" else self._inner.send_outbox(messages)

    def _refused(self, messages):
        self.refused += len(messages)
        return list(range(len(messages)))


def test_a_retry_message_sqs_did_not_take_is_logged_and_the_cell_stays_open(make_runtime, logs):
    rt = make_runtime(mutate=_one_target("flaky"))
    slot_id = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")["slot_id"]
    queues = _RefusingQueues(rt.wiring.queues, "execution")
    rt.wiring.queues = queues
    rt.pumps["execute"].poll()  # the only work fails transiently: a retry is due, and its message is refused
    [warning] = logs.events("cell.retry_send_failed")
    assert (warning["slot_id"], warning["target_id"], warning["failed"]) == (slot_id, "flaky", 1)
    [cell] = rt.wiring.ledger.load(slot_id).snapshot_cells()
    assert cell.status in ("pending", "selected") and cell.last_error  # open, with the error, for the sweep to re-drive


def test_an_outbox_retry_message_sqs_did_not_take_is_logged_with_its_key(make_runtime, downstream, logs):
    rt = make_runtime(mutate=_one_target("cats"))
    slot_id = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")["slot_id"]
    rt.pumps["execute"].poll()
    [intent] = rt.wiring.ledger.load(slot_id).intents
    downstream.state.script.append((500, {"error": "down"}))
    rt.wiring.queues = _RefusingQueues(rt.wiring.queues, "outbox")
    rt.pumps["deliver"].poll()
    [warning] = [w for w in logs.events("outbox.send_failed") if w.get("key") == intent.idempotency_key]
    assert (warning["slot_id"], warning["failed"]) == (slot_id, 1)
    [row] = rt.wiring.ledger.load(slot_id).intents
    assert row.outbox_status == "retry_wait" and len(downstream.requests) == 1
