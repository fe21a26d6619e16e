"""Issue 21 items 1-3 as regressions through the real handlers: the one text rule of the edge.

Each reproduction of the issue, with the exact status and body, and the ledger untouched
(no request item, no slot) whenever the answer is a refusal.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from conftest import JOBS_TOKEN, TRIGGER_TOKEN
from support.raw_http import send
from support.jobs import PLAN, ack, call, events, job_path, jobs_runtime, post_job, task

from pixivflow.domain.protocol import parse_event_id

BAD = ["\ud800", "a\x00b", "esc\x1b[31m", "bell\x07", "line\nbreak", "nel\x85"]
RID = "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab"
SLOT = f"{PLAN}@manual-job-key-1"


def protocol_refusal(message: str, field: str, reason: str = "invalid_text") -> dict:
    return {"error": {"code": "invalid_params", "message": message, "retryable": False,
                      "detail": {"reason": reason, "field": field}}}


def bad_text(field: str) -> dict:
    return protocol_refusal(f"{field} must not contain control characters or unpaired surrogates", field)


def nothing_written(rt) -> None:
    assert rt.wiring.ledger.slot_ids() == []
    assert rt.wiring.ledger.get_request_key("job-key-1") is None


def _with(path: str, value: str) -> dict:
    body = task(params={"query": {"tags": ["cats"]}, "constraints": {"exclude": [{"kind": "work", "id": "1"}]}})
    if path == "idempotency_key":
        body["idempotency_key"] = value
    elif path == "correlation_id":
        body["correlation_id"] = value
    elif path == "params.query.tags[0]":
        body["params"]["query"]["tags"] = [value]
    elif path == "params.constraints.exclude[0].id":
        body["params"]["constraints"]["exclude"][0]["id"] = value
    elif path == "callback_url":
        body["callback_url"] = f"http://127.0.0.1:9/cb/{value}"
    return body


# -- item 1: POST /jobs and hostile text ------------------------------------------------------------

@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("field", ["idempotency_key", "correlation_id", "params.query.tags[0]",
                                   "params.constraints.exclude[0].id", "callback_url"])
def test_post_jobs_refuses_surrogates_and_controls_in_every_field_and_stores_nothing(make_runtime, field, bad):
    rt = jobs_runtime(make_runtime)
    assert post_job(rt, _with(field, bad)) == (400, bad_text(field))
    nothing_written(rt)


def test_the_same_value_clean_is_admitted_and_stored_as_sent(make_runtime):
    rt = jobs_runtime(make_runtime)
    status, answer = post_job(rt, _with("correlation_id", "review ✓ 早上好"))
    assert status == 202 and answer["job"]["correlation_id"] == "review ✓ 早上好"


def test_an_object_key_is_text_the_edge_accepts_too(make_runtime):
    rt = jobs_runtime(make_runtime)
    body = task(labels={"bad\x1bkey": "x"})
    assert post_job(rt, body) == (400, protocol_refusal(
        "labels (an object key) must not contain control characters or unpaired surrogates", "labels"))
    nothing_written(rt)


@pytest.mark.parametrize("bad", BAD)
def test_the_refetch_route_refuses_the_same_characters_in_its_shape(make_runtime, bad):
    rt = jobs_runtime(make_runtime)
    answer = send(rt, "POST", "/internal/targets/cats/refetch", {"requestId": RID, "correlationId": bad},
                  token=JOBS_TOKEN)
    assert answer.pair == (400, {"status": "error",
                                 "error": "correlationId must not contain control characters or unpaired surrogates"})
    assert rt.wiring.ledger.slot_ids() == []


def test_a_refetch_request_id_that_breaks_the_text_rule_gets_the_spec_message(make_runtime):
    rt = jobs_runtime(make_runtime)
    answer = send(rt, "POST", "/internal/targets/cats/refetch", {"requestId": "\ud800"}, token=JOBS_TOKEN)
    assert answer.pair == (400, {"status": "error", "error": "requestId must be a UUID"})


# -- item 2: event ids ------------------------------------------------------------------------------

def _admitted_with_events(make_runtime):
    rt = jobs_runtime(make_runtime)
    assert post_job(rt, task())[0] == 202
    rt.settle()
    status, page = events(rt, SLOT)
    assert status == 200 and len(page["events"]) >= 2
    return rt, page


def test_an_event_id_of_4301_digits_is_the_specs_no_op_not_a_500(make_runtime):
    rt, page = _admitted_with_events(make_runtime)
    huge = "evt-" + "9" * 4301 + "-1"
    status, again = events(rt, SLOT, after=huge)
    assert status == 200 and [e["event_id"] for e in again["events"]] == [e["event_id"] for e in page["events"]]
    status, acked = ack(rt, SLOT, {"ack_through": "evt-1-" + "7" * 4301})
    assert (status, acked["acked"], acked["unacked"]) == (200, 0, len(page["events"]))


def test_an_event_id_with_a_trailing_newline_moves_nothing(make_runtime):
    rt, page = _admitted_with_events(make_runtime)
    first = page["events"][0]["event_id"]
    assert parse_event_id(first) is not None and parse_event_id(first + "\n") is None
    assert ack(rt, SLOT, {"ack_through": first + "\n"}) == (400, bad_text("ack_through"))
    status, after = events(rt, SLOT, after=first + "\n")
    assert (status, after) == (400, bad_text("after"))
    status, acked = ack(rt, SLOT, {"ack_through": first + "x"})  # clean but not ours: the no-op
    assert (status, acked["acked"]) == (200, 0)
    status, acked = ack(rt, SLOT, {"ack_through": first})
    assert (status, acked["acked"]) == (200, 1)


@pytest.mark.parametrize("value,parsed", [
    ("evt-1764543540000-1", (1764543540000, 1)), ("evt-1-999999999999", (1, 999999999999)),
    ("evt-17645435400001-1", None), ("evt-1-9999999999999", None), ("evt-1-1\n", None), ("evt-1-1 ", None),
    (" evt-1-1", None), ("evt-١٢-1", None), ("evt--1", None), ("evt-1-", None), (1, None),
])
def test_the_event_id_grammar_is_bounded(value, parsed):
    assert parse_event_id(value) == parsed


# -- item 3: ids DynamoDB cannot key --------------------------------------------------------------------

LONG = "k" * 1025
LONG_WIDE = "é" * 600  # 600 characters, 1,200 bytes


@pytest.mark.parametrize("value", [LONG, LONG_WIDE])
def test_job_routes_refuse_ids_over_1024_bytes_before_the_ledger(make_runtime, value):
    rt = jobs_runtime(make_runtime)
    too_long = protocol_refusal("jobId is longer than 1024 bytes", "jobId", "text_too_long")
    for method, suffix in (("GET", ""), ("POST", "/cancel"), ("GET", "/events")):
        assert call(rt, method, job_path(value, suffix)) == (400, too_long)
    assert ack(rt, value, {"ack_through": "evt-1-1"}) == (400, too_long)
    assert call(rt, "GET", "/jobs", query={"idempotency_key": value}) == (
        400, protocol_refusal("idempotency_key is longer than 1024 bytes", "idempotency_key", "text_too_long"))
    nothing_written(rt)


def test_an_id_of_exactly_1024_bytes_reaches_the_ledger_and_is_unknown(make_runtime):
    rt = jobs_runtime(make_runtime)
    status, answer = call(rt, "GET", job_path("k" * 1024))
    assert status == 404 and answer["error"]["message"] == "unknown job"
    assert call(rt, "GET", "/jobs", query={"idempotency_key": "k" * 1024})[0] == 200


def test_trigger_routes_refuse_ids_over_1024_bytes(make_runtime):
    rt = jobs_runtime(make_runtime)
    assert send(rt, "POST", f"/internal/schedules/{quote(LONG)}/run", token=TRIGGER_TOKEN).pair == (
        400, {"status": "error", "error": "scheduleId is longer than 1024 bytes"})
    assert send(rt, "GET", f"/internal/targets/{LONG}/refetch/{RID}", token=JOBS_TOKEN).pair == (
        400, {"status": "error", "error": "targetId is longer than 1024 bytes"})
    assert send(rt, "POST", f"/internal/targets/{LONG}/refetch", {"requestId": RID}, token=JOBS_TOKEN).pair == (
        400, {"status": "error", "error": "targetId is longer than 1024 bytes"})
    assert rt.wiring.ledger.slot_ids() == []


def test_the_twin_refuses_an_oversized_key_on_a_read_as_dynamodb_does(make_runtime):
    from pixivflow.domain.errors import LedgerUnavailable

    rt = jobs_runtime(make_runtime)
    with pytest.raises(LedgerUnavailable) as refused:
        rt.wiring.ledger.get_slot("s" * 2100)
    assert str(refused.value) == "DynamoDB get_item failed: ValidationException"
    assert rt.wiring.ledger.get_slot("s" * 2000) is None  # SLOT#<2,000 bytes> is still a key


# -- item 8: SSRF by rule, through the admission route (injected resolver and transport: no traffic) -----

@pytest.mark.parametrize("url,reason", [
    ("https://[2002:7f00:1::]/cb", "loopback_address"),  # 6to4 around 127.0.0.1: passed on 3.11
    ("https://[2002:a9fe:a9fe::]/latest/meta-data/", "metadata_address"),
    ("https://[2002:a00:1::]/cb", "private_address"),
    ("https://[64:ff9b::a9fe:a9fe]/cb", "metadata_address"),  # NAT64
    ("https://[64:ff9b::7f00:1]/cb", "loopback_address"),
    ("https://[2001:0:808:808::80ff:fffe]/cb", "loopback_address"),  # Teredo, client 127.0.0.1
    ("https://[fec0::1]/cb", "private_address"),  # site-local
    ("https://[::ffff:10.0.0.1]/cb", "private_address"),
    ("https://six-to-four.example/cb", "loopback_address"),  # a name that resolves to a wrapping
])
def test_wrapped_inside_addresses_are_refused_at_admission_by_rule(make_runtime, url, reason):
    from test_job_callbacks import NO_ALLOWLIST, Dns, Wire, runtime

    wire, dns = Wire(), Dns({"six-to-four.example": ["2002:7f00:1::1"]})
    rt = runtime(make_runtime, wire=wire, dns=dns, mutate=NO_ALLOWLIST)
    assert post_job(rt, task(callback_url=url)) == (400, {"error": {
        "code": "invalid_params", "message": "callback_url resolves to an address that may not be called",
        "retryable": False, "detail": {"field": "callback_url", "reason": reason}}})
    nothing_written(rt)
    assert wire.requests == []
