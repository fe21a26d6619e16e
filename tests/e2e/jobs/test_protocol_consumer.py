"""A consumer written against the published Workflow Protocol v1, through the real job_events
handler on the embedded runtime: discover, submit a candidate_search job, watch it run, receive
its signed callbacks, page and acknowledge its events, and cancel another job. Every response it
reads is validated against the schema before it is used."""

from __future__ import annotations

from dataclasses import dataclass, field

from support.jobs import CALLBACK_SECRET, Receiver, call, job_path, jobs_runtime
from support.protocol_schema import validate

from pixivflow.domain.callbacks import verify


@dataclass
class Consumer:
    rt: object
    seen: dict[str, dict] = field(default_factory=dict)  # event id -> event, the consumer's own store
    cursor: dict[str, str] = field(default_factory=dict)  # job id -> last event id recorded

    def get(self, path, definition, query=None, status=200):
        code, body = call(self.rt, "GET", path, query=query)
        assert code == status, body
        validate(definition, body)
        return body

    def post(self, path, body, definition, status):
        code, answer = call(self.rt, "POST", path, body)
        assert code == status, answer
        validate(definition, answer["job"] if definition == "Job" and "job" in answer else answer)
        return answer

    def sync(self, job_id):
        """Pull everything after the last recorded event, store it, then acknowledge it."""
        while True:
            query = {"after": self.cursor[job_id]} if job_id in self.cursor else None
            page = self.get(job_path(job_id, "/events"), "EventPage", query=query)
            for event in page["events"]:
                self.seen[event["event_id"]] = event
                self.cursor[job_id] = event["event_id"]
            if "next_after" not in page:
                break
        if job_id in self.cursor:
            result = self.post(job_path(job_id, "/events/ack"), {"ack_through": self.cursor[job_id]}, "AckResult", 200)
            assert result["unacked"] == 0
        return page


def test_a_consumer_runs_the_whole_protocol(make_runtime, downstream):
    with Receiver() as receiver:
        rt = jobs_runtime(make_runtime)
        consumer = Consumer(rt)

        capabilities = consumer.get("/capabilities", "Capabilities")
        job_type = capabilities["job_types"][0]
        assert job_type["name"] == "candidate_search" and "target_selector" in job_type["features"]

        submitted = consumer.post("/jobs", {
            "protocol_version": "1", "job_type": "candidate_search", "idempotency_key": "consumer-req-1",
            "correlation_id": "chain:1", "callback_url": receiver.url, "labels": {"tenant": "t1"},
            "params": {"query": {"tags": ["cats"]}, "constraints": {"exclude": [{"kind": "work", "id": "501"}]}},
        }, "Job", 202)
        job_id = submitted["job"]["job_id"]
        assert consumer.post("/jobs", {"protocol_version": "1", "job_type": "candidate_search",
                                       "idempotency_key": "consumer-req-1", "correlation_id": "chain:1",
                                       "params": {"query": {"tags": ["cats"]},
                                                  "constraints": {"exclude": [{"kind": "work", "id": "501"}]}}},
                             "Job", 200)["job"]["job_id"] == job_id

        # watch it run: poll the job while the engine works, one virtual minute at a time
        statuses = []
        for _ in range(30):
            job = consumer.get(job_path(job_id), "Job")
            statuses.append(job["status"])
            if job["status"] in ("succeeded", "failed", "cancelled", "expired"):
                break
            rt.pump()
            rt.clock.advance(60_000)
            rt.sweep()
        assert statuses[0] == "queued" and statuses[-1] == "succeeded"
        assert job["result"]["candidates"][0]["work_id"] == "502"
        found = consumer.get("/jobs", "JobPage", query={"idempotency_key": "consumer-req-1"})
        assert [j["job_id"] for j in found["jobs"]] == [job_id]

        # the callbacks it received are signed and are the same events the stream serves
        rt.settle()
        for got in receiver.received:
            assert verify(CALLBACK_SECRET, got.headers["webhook-id"], got.headers["webhook-timestamp"], got.raw,
                          got.headers["webhook-signature"])
            validate("Event", got.body)
        consumer.sync(job_id)
        assert sorted(e["event_id"] for e in (r.body for r in receiver.received)) == sorted(consumer.seen)
        assert [consumer.seen[i]["type"] for i in sorted(consumer.seen, key=lambda i: tuple(map(int, i.split("-")[1:])))] == [
            "job.accepted", "job.started", "job.succeeded"]
        assert consumer.get(job_path(job_id, "/events"), "EventPage", query={"unacked": "true"})["events"] == []

        # a second job, cancelled before it runs
        other = consumer.post("/jobs", {"protocol_version": "1", "job_type": "candidate_search",
                                        "idempotency_key": "consumer-req-2", "params": {"target_id": "cats"}},
                              "Job", 202)["job"]["job_id"]
        code, cancelled = call(rt, "POST", job_path(other, "/cancel"))
        assert code == 200
        validate("Job", cancelled)
        assert cancelled["status"] == "cancelled" and cancelled["error"]["code"] == "cancelled_by_consumer"
        assert call(rt, "POST", job_path(other, "/cancel")) == (200, cancelled)
        rt.settle()
        page = consumer.sync(other)
        assert [consumer.seen[e]["type"] for e in consumer.seen if consumer.seen[e]["job_id"] == other] == [
            "job.accepted", "job.cancelled"]
        assert page is not None
        assert len(downstream.requests) == 1  # only the first job delivered anything
