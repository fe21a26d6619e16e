"""Job event callbacks (spec §10.9, §12.5, §13.23; DESIGN §11): signed, retried through the outbox,
never silently dropped, never able to change the job, and never sent to an address inside.

The receiver is a loopback server listed in ``jobs.callbackAllowHosts``; every other URL goes through
an injected resolver and an injected transport, so no real DNS lookup and no packet to a
non-loopback address ever happens."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest

from support.jobs import (
    CALLBACK_SECRET, PLAN, Receiver, events, get_job, jobs_runtime, post_job, single_target, task,
)
from support.protocol_schema import error_body, validate

from pixivflow.domain.callbacks import verify

SLOT = f"{PLAN}@manual-job-key-1"


class Wire:
    """An httpx transport that records every request it is asked to send and answers 200."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[httpx.Request] = []
        self.status = status

    def transport(self) -> httpx.BaseTransport:
        def handle(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return httpx.Response(self.status, json={"ok": True})

        return httpx.MockTransport(handle)


class Dns:
    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        if host not in self.answers:
            raise OSError("NXDOMAIN")
        return self.answers[host]


def runtime(make_runtime, *, wire=None, dns=None, tokens=None, mutate=None):
    overrides = {}
    if wire is not None:
        overrides["callback_transport"] = wire.transport
    if dns is not None:
        overrides["resolver"] = dns
    return jobs_runtime(make_runtime, overrides=overrides or None, tokens=tokens, mutate=mutate)


def rows(rt, job_id=SLOT):
    keys = [f"job-event:{job_id}:{e['event_id']}" for e in events(rt, job_id)[1]["events"]]
    return {key: rt.wiring.outbox_rows.get("event_callback", key) for key in keys}


def test_each_event_is_posted_once_signed_and_identical_to_the_page(make_runtime, downstream, logs):
    with Receiver() as receiver:
        rt = runtime(make_runtime)
        start_s = rt.clock.now_ms() // 1000
        assert post_job(rt, task(callback_url=receiver.url))[0] == 202
        assert post_job(rt, task(callback_url=receiver.url))[0] == 200  # a replay queues nothing new
        rt.settle()
        page = events(rt, SLOT)[1]
        assert sorted(receiver.event_types()) == sorted(["job.accepted", "job.started", "job.succeeded"])
        by_id = {e["event_id"]: e for e in page["events"]}
        for got in receiver.received:
            body = got.body
            validate("Event", body)
            assert body == by_id[body["event_id"]]
            key = f"job-event:{SLOT}:{body['event_id']}"
            headers = got.headers
            assert got.path == "/hooks/jobs"
            assert headers["content-type"] == "application/json"
            assert headers["x-pixivflow-delivery"] == "job-event"
            assert headers["x-idempotency-key"] == headers["webhook-id"] == key
            assert start_s <= int(headers["webhook-timestamp"]) <= rt.clock.now_ms() // 1000  # seconds, at send time
            assert verify(CALLBACK_SECRET, headers["webhook-id"], headers["webhook-timestamp"], got.raw,
                          headers["webhook-signature"])
            assert not verify("whsec_" + "A" * 44, headers["webhook-id"], headers["webhook-timestamp"], got.raw,
                              headers["webhook-signature"])
        assert all(r.status == "done" and r.attempts == 1 for r in rows(rt).values())
        rt.settle()
        events(rt, SLOT)
        assert len(receiver.received) == 3  # reading the stream again sends nothing
    assert len(logs.events("callback.delivered")) == 3
    assert all(receiver.url not in str(line) for line in logs.all())  # the consumer's URL is never logged


def test_a_job_without_a_callback_queues_nothing(make_runtime, downstream):
    rt = runtime(make_runtime)
    post_job(rt, task())
    rt.settle()
    assert all(row is None for row in rows(rt).values())
    assert len(events(rt, SLOT)[1]["events"]) == 3  # the pull channel works regardless


def test_server_errors_are_retried_until_one_success_per_event(make_runtime, downstream):
    with Receiver(statuses=[500, 503, 429]) as receiver:
        rt = runtime(make_runtime)
        post_job(rt, task(callback_url=receiver.url))
        rt.settle()
        assert len(receiver.received) == 6  # three events, three failed tries among them
        assert set(Counter(receiver.event_types())) == {"job.accepted", "job.started", "job.succeeded"}
        assert all(r.status == "done" for r in rows(rt).values())
        assert sum(r.attempts for r in rows(rt).values()) == 6


def test_a_conflict_answer_counts_as_delivered(make_runtime, downstream):
    with Receiver(default=409) as receiver:
        rt = runtime(make_runtime)
        post_job(rt, task(callback_url=receiver.url))
        rt.settle()
        assert len(receiver.received) == 3 and all(r.status == "done" for r in rows(rt).values())


def test_a_client_error_dead_letters_the_callback_and_leaves_the_job_alone(make_runtime, downstream, logs):
    with Receiver(default=404) as receiver:
        rt = runtime(make_runtime)
        post_job(rt, task(callback_url=receiver.url))
        rt.settle()
        job = get_job(rt, SLOT)[1]
        assert job["status"] == "succeeded" and len(downstream.requests) == 1
        assert all((r.status, r.attempts, r.last_error) == ("dead", 1, "remote_4xx: HTTP 404") for r in rows(rt).values())
        assert len(receiver.received) == 3
        assert [e["type"] for e in events(rt, SLOT)[1]["events"]] == ["job.accepted", "job.started", "job.succeeded"]
        assert get_job(rt, SLOT)[1] == job
    assert len(logs.events("callback.dead")) == 3


def test_a_callback_that_always_fails_stops_after_eight_attempts(make_runtime, downstream):
    with Receiver(default=500) as receiver:
        rt = runtime(make_runtime)
        post_job(rt, task(callback_url=receiver.url, params={"query": {"tags": ["unicorns"]}}))
        rt.settle(max_ms=12 * 3_600_000)
        assert all((r.status, r.attempts) == ("dead", 8) for r in rows(rt).values())
        assert len(receiver.received) == 8 * 3  # accepted, started and failed: eight tries each
        assert get_job(rt, SLOT)[1]["status"] == "failed"


def test_a_crash_before_the_terminal_event_is_repaired_by_the_sweep(make_runtime, downstream, monkeypatch):
    """The process dies between the rollup and the terminal event (and its callback): nobody reads
    the stream, yet the sweep's repair pass writes the event and the callback goes out."""
    from pixivflow.services import job_events

    with Receiver() as receiver:
        rt = runtime(make_runtime)
        post_job(rt, task(callback_url=receiver.url))
        real = job_events.on_slot_terminal
        monkeypatch.setattr(job_events, "on_slot_terminal", lambda ctx, state: None)
        rt.pump()
        assert [e.kind for e in rt.wiring.jobs.stream(SLOT).events] == ["job.requested"]
        monkeypatch.setattr(job_events, "on_slot_terminal", real)
        result = rt.sweep()
        assert result["jobsRepaired"] == 1
        rt.pump()
        assert sorted(receiver.event_types()) == ["job.accepted", "job.started", "job.succeeded"]
        assert rt.wiring.jobs.open_callbacks(50) == []  # out of the repair index once terminal
        assert rt.sweep()["jobsRepaired"] == 0


def _job_whose_callback_messages_were_lost(make_runtime, monkeypatch, receiver):
    """The event rows and their callback rows commit together; every SQS message after them is lost."""
    rt = runtime(make_runtime)
    queues = rt.wiring.queues
    real_send = queues.send_outbox
    monkeypatch.setattr(queues, "send_outbox", lambda messages: [
        i for i, m in enumerate(messages) if m.body["kind"] == "event_callback"] or real_send(messages))
    post_job(rt, task(callback_url=receiver.url))
    rt.pump()
    assert receiver.received == []
    monkeypatch.setattr(queues, "send_outbox", real_send)
    return rt


def test_a_lost_callback_message_is_re_driven_by_the_sweep(make_runtime, downstream, monkeypatch):
    with Receiver() as receiver:
        rt = _job_whose_callback_messages_were_lost(make_runtime, monkeypatch, receiver)
        rt.clock.advance(3 * 60_000)  # past the 120 s re-drive grace
        rt.sweep()
        rt.pump()
        assert sorted(receiver.event_types()) == ["job.accepted", "job.started", "job.succeeded"]


def test_the_drain_route_queues_due_callbacks_for_the_deliver_function(make_runtime, downstream, monkeypatch):
    """POST /internal/outbox/drain sends no callback itself (issue 21: trigger holds no signing
    secret): it queues the due callback rows at once, no re-drive grace, and deliver posts them."""
    from conftest import TRIGGER_TOKEN

    with Receiver() as receiver:
        rt = _job_whose_callback_messages_were_lost(make_runtime, monkeypatch, receiver)
        status, body = rt.http("POST", "/internal/outbox/drain", token=TRIGGER_TOKEN)
        assert (status, body["result"]["kinds"]["event_callback"], body["result"]["queued"]) == (200, 3, 3)
        assert receiver.received == []  # queued, not sent, by the trigger function
        rt.pump()
        assert sorted(receiver.event_types()) == ["job.accepted", "job.started", "job.succeeded"]
        assert {r.status for r in rows(rt).values()} == {"done"}


def test_no_signing_secret_dead_letters_instead_of_sending_unsigned(make_runtime, downstream):
    from conftest import JOBS_TOKEN, TRIGGER_TOKEN

    with Receiver() as receiver:
        rt = runtime(make_runtime, tokens={"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN})
        post_job(rt, task(callback_url=receiver.url))
        rt.settle()
        assert receiver.received == []
        assert all(r.status == "dead" and r.last_error.startswith("configuration_error") for r in rows(rt).values())
        assert get_job(rt, SLOT)[1]["status"] == "succeeded"


# -- untrusted URLs ------------------------------------------------------------------------------

PUBLIC = "93.184.216.34"


def NO_ALLOWLIST(cfg):
    single_target(cfg, allow_hosts=())


@pytest.mark.parametrize("url,reason", [
    ("http://consumer.example/cb", "https_required"),
    ("https://127.0.0.1/cb", "loopback_address"),
    ("https://10.0.0.1/cb", "private_address"),
    ("https://169.254.169.254/latest/meta-data/", "metadata_address"),
    ("https://[::1]/cb", "loopback_address"),
    ("https://internal.example/cb", "private_address"),
    ("https://user:secret@consumer.example/cb", "userinfo_not_allowed"),
])
def test_a_callback_url_that_could_reach_inside_is_refused_at_admission(make_runtime, url, reason):
    wire, dns = Wire(), Dns({"consumer.example": [PUBLIC], "internal.example": ["10.9.8.7"]})
    rt = runtime(make_runtime, wire=wire, dns=dns, mutate=NO_ALLOWLIST)
    status, body = post_job(rt, task(callback_url=url))
    assert status == 400
    error_body(body)
    assert (body["error"]["code"], body["error"]["detail"]) == ("invalid_params", {"field": "callback_url", "reason": reason})
    assert rt.wiring.ledger.slot_ids() == [] and rt.wiring.ledger.get_request_key("job-key-1") is None
    assert wire.requests == []  # refused before any connection


def test_an_unresolvable_callback_host_is_refused_at_admission(make_runtime):
    rt = runtime(make_runtime, dns=Dns({}), mutate=NO_ALLOWLIST)
    status, body = post_job(rt, task(callback_url="https://nowhere.example/cb"))
    assert (status, body["error"]["detail"]) == (400, {"field": "callback_url", "reason": "unresolvable_host"})


def test_a_public_callback_is_sent_to_the_vetted_address_with_host_and_sni(make_runtime, downstream):
    wire, dns = Wire(), Dns({"consumer.example": [PUBLIC]})
    rt = runtime(make_runtime, wire=wire, dns=dns, mutate=NO_ALLOWLIST)
    assert post_job(rt, task(callback_url="https://consumer.example/api/v1/events?tenant=bot1"))[0] == 202
    rt.settle()
    assert len(wire.requests) == 3
    for request in wire.requests:
        assert str(request.url) == f"https://{PUBLIC}/api/v1/events?tenant=bot1"
        assert request.headers["host"] == "consumer.example"
        assert request.extensions["sni_hostname"] == "consumer.example"
        assert verify(CALLBACK_SECRET, request.headers["webhook-id"], request.headers["webhook-timestamp"],
                      request.content, request.headers["webhook-signature"])
    assert all(r.status == "done" for r in rows(rt).values())


def test_a_name_that_re_resolves_inside_is_refused_at_send_time(make_runtime, downstream):
    """DNS rebinding: public at admission, private when the callback is sent."""
    wire, dns = Wire(), Dns({"consumer.example": [PUBLIC]})
    rt = runtime(make_runtime, wire=wire, dns=dns, mutate=NO_ALLOWLIST)
    post_job(rt, task(callback_url="https://consumer.example/cb"))
    dns.answers["consumer.example"] = ["10.0.0.5"]
    rt.settle()
    assert wire.requests == []
    assert all(r.status == "dead" and r.last_error == "refused: callback_url refused at send time: private_address"
               for r in rows(rt).values())
    assert get_job(rt, SLOT)[1]["status"] == "succeeded"


def test_an_allowlisted_host_is_only_exempt_when_listed(make_runtime):
    with Receiver() as receiver:
        rt = runtime(make_runtime, mutate=NO_ALLOWLIST)
        status, body = post_job(rt, task(callback_url=receiver.url))
        assert (status, body["error"]["detail"]) == (400, {"field": "callback_url", "reason": "https_required"})
        assert receiver.received == []


def test_a_replay_never_adds_a_callback_to_a_job_that_declared_none(make_runtime, downstream):
    with Receiver() as receiver:
        rt = runtime(make_runtime)
        post_job(rt, task())
        assert post_job(rt, task(callback_url=receiver.url))[0] == 200
        rt.settle()
        assert receiver.received == []
        assert rt.wiring.jobs.stream(SLOT).find("job.requested").callback_url is None
