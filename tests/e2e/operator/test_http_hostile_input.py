"""Issue 17's reproductions, each through the real handlers with API Gateway v2 events.

Order at the edge for every route: route match -> auth (the run route's
``schedule.trigger_received`` line first) -> body. A request that fails auth has no body byte
parsed; a refused body is 415/400 in the surface's own shape, naming the problem, and leaves
nothing in the ledger and nothing on a queue. Spec §11.1, §11.3, §12.1; DESIGN §8.
"""

from __future__ import annotations

import pytest
from conftest import JOBS_TOKEN, TRIGGER_TOKEN
from support.raw_http import ABSENT, AwsTally, is_protocol_error, protocol_validator, send, stored_slots

SLOT = "morning-tokyo@2026-12-01T0800"
RUN = "/internal/schedules/morning-tokyo/run"
REFETCH = "/internal/targets/cats/refetch"
RID = "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab"
UNAUTHORIZED = (401, {"status": "error", "error": "unauthorized"})
NOT_JSON_MEDIA = {"status": "error", "error": "Content-Type must be application/json"}
TOO_DEEP = {"status": "error", "error": "body: nested deeper than 64 levels"}
BIG_INT = "9" * 4301
NOT_AN_OBJECT = {"status": "error", "error": "body: Input should be a valid dictionary or object to extract fields from"}
BAD_CONTENT_TYPES = ["text/plain", "application/octet-stream", "application/xml", "multipart/form-data",
                     "application/vnd.api+json", "application/x-www-form-urlencoded", "json", "application/jsonp"]


@pytest.fixture
def tally(monkeypatch):
    return AwsTally().install(monkeypatch)


def slots(rt):
    return stored_slots(rt)


def run(rt, body=ABSENT, token=TRIGGER_TOKEN, **kw):
    return send(rt, "POST", RUN, body, token=token, **kw)


def refetch(rt, body=ABSENT, token=JOBS_TOKEN, **kw):
    return send(rt, "POST", REFETCH, body, token=token, **kw)


def request_lines(logs):
    return [line for line in logs()[0] if "path" in line]


# -- 1. a Content-Type that is not JSON -------------------------------------------------------------


@pytest.mark.parametrize("content_type", BAD_CONTENT_TYPES)
def test_a_non_json_content_type_is_415_after_auth_on_the_run_route(make_runtime, tally, logs, content_type):
    rt = make_runtime()
    logs()
    assert run(rt, {"label": "x"}, token=None, content_type=content_type).pair == UNAUTHORIZED
    assert run(rt, {"label": "x"}, content_type=content_type).pair == (415, NOT_JSON_MEDIA)
    lines = request_lines(logs)
    assert [line["event"] for line in lines] == ["schedule.trigger_received", "schedule.trigger_unauthorized",
                                                 "schedule.trigger_received", "schedule.trigger_rejected"]
    assert (lines[3]["http_status"], lines[3]["reason"]) == (415, "Content-Type must be application/json")
    assert slots(rt) == [] and tally.snapshot() == (0, 0)


@pytest.mark.parametrize("content_type", ["APPLICATION/JSON", "application/json; charset=utf-8",
                                          "Application/Json ; charset=UTF-8", None])
def test_json_media_types_compare_case_insensitively_with_parameters(make_runtime, content_type):
    rt = make_runtime()
    answer = run(rt, {"label": "ops"}, content_type=content_type)
    assert (answer.status, answer.body["schedule"]["slotId"]) == (202, SLOT)
    assert rt.wiring.ledger.get_slot(SLOT).slot_name == "ops"


def test_an_empty_body_needs_no_content_type(make_runtime):
    """HTTP clocks often POST nothing with a form content type: that is not a body to refuse."""
    rt = make_runtime()
    answer = send(rt, "POST", RUN, "", raw=True, token=TRIGGER_TOKEN, content_type="application/x-www-form-urlencoded")
    assert answer.status == 202


def test_the_other_body_routes_answer_415_in_their_own_shape(make_runtime, tally):
    rt = make_runtime()
    assert refetch(rt, {"requestId": RID}, content_type="text/plain").pair == (415, NOT_JSON_MEDIA)
    answer = send(rt, "POST", "/jobs", {"protocol_version": "1"}, token=JOBS_TOKEN, function="job_events",
                  content_type="application/xml")
    assert answer.pair == (415, {"error": {"code": "invalid_params", "message": "Content-Type must be application/json",
                                           "retryable": False,
                                           "detail": {"reason": "unsupported_media_type", "field": "body"}}})
    assert is_protocol_error(answer.body)
    assert slots(rt) == [] and tally.snapshot() == (0, 0)


# -- 2. deeply nested JSON ----------------------------------------------------------------------------


def test_deep_nesting_is_400_on_the_run_and_refetch_routes(make_runtime, tally):
    rt = make_runtime()
    deep = "[" * 1000
    assert run(rt, deep, raw=True, token=None).pair == UNAUTHORIZED
    assert run(rt, deep, raw=True).pair == (400, TOO_DEEP)
    assert refetch(rt, deep, raw=True).pair == (400, TOO_DEEP)
    nested_65 = '{"label":"x","extra":' + "[" * 64 + "]" * 64 + "}"
    assert run(rt, nested_65, raw=True).pair == (400, TOO_DEEP)
    assert slots(rt) == [] and tally.snapshot() == (0, 0)
    nested_64 = '{"label":"x","extra":' + "[" * 63 + "]" * 63 + "}"
    assert run(rt, nested_64, raw=True).status == 202  # the limit itself is fine


# -- 3. an integer beyond the parser limit ------------------------------------------------------------


def test_an_integer_of_4301_digits_is_400_on_both_routes(make_runtime, tally):
    rt = make_runtime()
    big = {"status": "error", "error": "body: integer longer than 4300 digits"}
    assert run(rt, '{"label": ' + BIG_INT + "}", raw=True, token=None).pair == UNAUTHORIZED
    assert run(rt, '{"label": ' + BIG_INT + "}", raw=True).pair == (400, big)
    assert refetch(rt, '{"requestId": "' + RID + '", "correlationId": ' + BIG_INT + "}", raw=True).pair == (400, big)
    assert run(rt, '{"label": ' + BIG_INT[:-1] + "}", raw=True).pair == (
        400, {"status": "error", "error": "label: Input should be a valid string"})
    assert slots(rt) == [] and tally.snapshot() == (0, 0)


def test_numbers_json_cannot_carry_are_400(make_runtime):
    rt = make_runtime()
    assert run(rt, '{"label": "x", "n": 1e999}', raw=True).pair == (400, {"status": "error", "error": "body: number out of range"})
    assert run(rt, '{"label": NaN}', raw=True).pair == (400, {"status": "error", "error": "body: JSON decode error"})


# -- 4. lone surrogates and control characters ---------------------------------------------------------


@pytest.mark.parametrize("bad", ["\ud800", "ok\udfffok", "a\u0000b", "bell\u0007", "line\nbreak", "\u009b"])
def test_a_label_with_a_lone_surrogate_or_control_character_is_400_and_stores_nothing(make_runtime, tally, bad):
    rt = make_runtime()
    assert run(rt, {"label": bad}).pair == (
        400, {"status": "error", "error": "label must not contain control characters or unpaired surrogates"})
    assert slots(rt) == [] and tally.snapshot() == (0, 0)
    assert run(rt, {"label": "clean"}).status == 202  # a retry with a clean value works
    assert rt.wiring.ledger.get_slot(SLOT).slot_name == "clean"
    assert tally.writes > 0 and tally.sends == 1  # the tally sees what an admission writes and sends


@pytest.mark.parametrize("bad", ["\ud800", "tab\there", "\u001b[31m"])
def test_a_correlation_id_with_a_lone_surrogate_or_control_character_is_400(make_runtime, tally, bad):
    rt = make_runtime()
    assert refetch(rt, {"requestId": RID, "correlationId": bad}).pair == (
        400, {"status": "error", "error": "correlationId must not contain control characters or unpaired surrogates"})
    assert slots(rt) == [] and tally.snapshot() == (0, 0)
    answer = refetch(rt, {"requestId": RID, "correlationId": "review-42 ✓"})
    assert answer.pair == (202, {"status": "accepted", "slotId": f"morning-tokyo@manual-{RID}", "disposition": "accepted"})
    assert rt.wiring.ledger.get_slot(f"morning-tokyo@manual-{RID}").correlation_id == "review-42 ✓"


def test_a_surrogate_escaped_in_a_base64_body_is_refused_too(make_runtime):
    rt = make_runtime()
    answer = run(rt, '{"label": "\\ud800"}', raw=True, b64=True)
    assert answer.pair == (400, {"status": "error", "error": "label must not contain control characters or unpaired surrogates"})
    assert run(rt, "not base64!!", raw=True, b64_flag_only=True).pair == (400, {"status": "error", "error": "body: not valid base64"})
    assert run(rt, {"label": "from-b64"}, b64=True).status == 202
    assert rt.wiring.ledger.get_slot(SLOT).slot_name == "from-b64"


# -- 5. a JSON array is not an object --------------------------------------------------------------------


@pytest.mark.parametrize("body", [[{"label": "x"}, 7], [{"label": "x"}], [], "x", 7, True])
def test_the_run_route_refuses_a_body_that_is_not_an_object(make_runtime, tally, body):
    rt = make_runtime()
    assert run(rt, body).pair == (400, NOT_AN_OBJECT)
    assert slots(rt) == [] and tally.snapshot() == (0, 0)


def test_a_json_null_body_is_no_body(make_runtime):
    rt = make_runtime()
    assert run(rt, None).status == 202
    assert rt.wiring.ledger.get_slot(SLOT).slot_name == "08:00"


def test_a_body_over_64_kb_is_400(make_runtime, tally):
    rt = make_runtime()
    too_large = (400, {"status": "error", "error": "body: larger than 65536 bytes"})
    assert run(rt, {"label": "x" * 70_000}).pair == too_large
    assert run(rt, {"label": "é" * 33_000}).pair == too_large  # counted in UTF-8 bytes
    assert refetch(rt, {"requestId": RID, "pad": "x" * 70_000}).pair == too_large
    assert slots(rt) == [] and tally.snapshot() == (0, 0)


# -- no body byte is parsed before auth ---------------------------------------------------------------------


def test_no_body_is_parsed_for_a_request_that_fails_auth(make_runtime, monkeypatch):
    from pixivflow.http import bodies

    parsed = []
    real = bodies.parse_json
    monkeypatch.setattr("pixivflow.http.shell.parse_json", lambda text: parsed.append(text) or real(text))
    rt = make_runtime()
    hostile = ["[" * 1000, '{"label": ' + BIG_INT + "}", "not json", '{"label": 7}']
    for body in hostile:
        for token in (None, "wrong", JOBS_TOKEN):
            assert run(rt, body, raw=True, token=token, content_type="text/plain").pair == UNAUTHORIZED
            assert run(rt, body, raw=True, token=token).pair == UNAUTHORIZED
        assert refetch(rt, body, raw=True, token=TRIGGER_TOKEN).pair == UNAUTHORIZED
        assert send(rt, "POST", "/jobs", body, raw=True, token="x", function="job_events").pair == UNAUTHORIZED
    assert parsed == []
    assert run(rt, '{"label": 7}', raw=True).status == 400
    assert parsed == ['{"label": 7}']


def test_the_schedule_check_still_answers_before_the_body(make_runtime):
    rt = make_runtime()
    assert send(rt, "POST", "/internal/schedules/nope/run", "[" * 1000, raw=True, token=TRIGGER_TOKEN,
                content_type="text/plain").pair == (404, {"status": "error", "error": "unknown schedule: nope"})


# -- 6. 405 with Allow, 404 in each surface's own shape ------------------------------------------------------


@pytest.mark.parametrize("method,path,allow", [
    ("GET", RUN, "POST"),
    ("DELETE", "/health", "GET"),
    ("POST", "/health", "GET"),
    ("POST", "/internal/schedules", "GET"),
    ("GET", "/internal/outbox/drain", "POST"),
    ("PUT", REFETCH, "POST"),
    ("POST", f"{REFETCH}/{RID}", "GET"),
])
def test_a_known_trigger_path_with_another_method_is_405_with_allow(make_runtime, tally, method, path, allow):
    rt = make_runtime()
    answer = send(rt, method, path, {"requestId": RID}, token=TRIGGER_TOKEN)
    assert answer.pair == (405, {"status": "error", "error": "method not allowed"})
    assert answer.headers["allow"] == allow
    assert slots(rt) == [] and tally.snapshot() == (0, 0)


@pytest.mark.parametrize("method,path,allow", [
    ("DELETE", "/jobs", "GET, POST"),
    ("PUT", "/capabilities", "GET"),
    ("POST", "/jobs/job-1", "GET"),
    ("GET", "/jobs/job-1/cancel", "POST"),
    ("DELETE", "/jobs/job-1/events", "GET"),
    ("GET", "/jobs/job-1/events/ack", "POST"),
])
def test_a_known_job_path_with_another_method_is_405_in_the_protocol_shape(make_runtime, method, path, allow):
    rt = make_runtime()
    answer = send(rt, method, path, token=JOBS_TOKEN, function="job_events")
    assert answer.pair == (405, {"error": {"code": "invalid_params", "message": "method not allowed", "retryable": False,
                                           "detail": {"reason": "method_not_allowed", "allow": allow.split(", ")}}})
    assert answer.headers["allow"] == allow
    assert is_protocol_error(answer.body)


def test_unknown_paths_answer_404_in_each_functions_own_shape(make_runtime, logs):
    rt = make_runtime()
    for path in ("/nowhere", "/internal/schedules/morning-tokyo/run/extra", "/jobs/a/b/c/d", "/"):
        assert send(rt, "GET", path).pair == (404, {"status": "error", "error": "not found"}), path
        answer = send(rt, "GET", path, function="job_events")
        assert answer.pair == (404, {"error": {"code": "invalid_params", "message": "not found", "retryable": False,
                                               "detail": {"reason": "unknown_route"}}}), path
    rejected = [line for line in logs.all() if line.get("event") == "schedule.job_rejected"]
    assert len(rejected) == 4 and {(line["code"], line["stage"], line["http_status"]) for line in rejected} == {
        ("invalid_params", "route", 404)}


# -- 7. the auth scheme is case-insensitive, the token exact ---------------------------------------------------


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_is_case_insensitive(make_runtime, scheme):
    rt = make_runtime()
    assert run(rt, {"label": "x"}, scheme=scheme).status == 202
    assert send(rt, "GET", "/capabilities", token=JOBS_TOKEN, scheme=scheme, function="job_events").status == 200
    assert run(rt, token=TRIGGER_TOKEN.upper(), scheme=scheme).pair == UNAUTHORIZED
    assert run(rt, token=TRIGGER_TOKEN + " ", scheme=scheme).status == 202  # the value is trimmed (spec §11.1)


# -- the protocol surface: bodies, failures, elapsed_ms ---------------------------------------------------------


def test_protocol_body_refusals_name_the_problem(make_runtime):
    rt = make_runtime()
    cases = [
        ("not json", {"reason": "invalid_json", "field": "body"}, "body is not valid JSON"),
        ("[1, 2]", {"reason": "not_an_object", "field": "body"}, "body must be a JSON object"),
        ("[" * 100 + "]" * 100, {"reason": "body_too_deep", "field": "body"}, "body: nested deeper than 64 levels"),
        ("[" * 5000, {"reason": "body_too_deep", "field": "body"}, "body: nested deeper than 64 levels"),
        ('{"n": ' + BIG_INT + "}", {"reason": "integer_too_large", "field": "body"}, "body: integer longer than 4300 digits"),
    ]
    for path in ("/jobs", "/jobs/job-1/events/ack"):
        for body, detail, message in cases:
            answer = send(rt, "POST", path, body, raw=True, token=JOBS_TOKEN, function="job_events")
            assert answer.pair == (400, {"error": {"code": "invalid_params", "message": message, "retryable": False,
                                                   "detail": detail}}), (path, body[:20])
        assert send(rt, "POST", path, token=JOBS_TOKEN, function="job_events").pair == (
            400, {"error": {"code": "invalid_params", "message": "body must be a JSON object", "retryable": False,
                            "detail": {"reason": "not_an_object", "field": "body"}}})


def test_an_unexpected_error_on_the_protocol_surface_is_500_internal_error_without_internal_text(make_runtime, logs,
                                                                                                 monkeypatch):
    rt = make_runtime()
    wiring = rt.wiring

    def explode():
        raise RuntimeError("ledger table pixivflow-secret-name in /var/task exploded")

    monkeypatch.setattr(wiring, "now", explode)
    logs()
    answer = send(rt, "GET", "/capabilities", token=JOBS_TOKEN, function="job_events")
    assert answer.pair == (500, {"error": {"code": "internal_error", "message": "internal error", "retryable": False,
                                           "detail": {}}})
    protocol_validator("Error").validate(answer.body["error"])
    assert "exploded" not in answer.raw and "RuntimeError" not in answer.raw
    lines = request_lines(logs)
    outcome = [line for line in lines if "http_status" in line]
    assert len(outcome) == 1
    assert (outcome[0]["event"], outcome[0]["code"], outcome[0]["stage"], outcome[0]["level"]) == (
        "schedule.job_rejected", "internal_error", "capabilities", "ERROR")
    assert [line["event"] for line in lines if "http_status" not in line] == ["schedule.job_error_detail"]


def test_job_rejected_carries_the_real_elapsed_time(make_runtime, logs, monkeypatch):
    """The request clock starts when the request does: a slow token read shows in elapsed_ms."""
    from pixivflow import runtime
    from pixivflow.http import common

    now = [1000.0]
    monkeypatch.setattr(common, "_timer", lambda: now[0])
    rt = make_runtime()
    secrets = runtime.get().secrets
    real = secrets.token

    def slow_token(kind):
        now[0] += 0.25  # a 250 ms SSM read
        return real(kind)

    monkeypatch.setattr(secrets, "token", slow_token)
    logs()
    answer = send(rt, "GET", "/jobs/job-1", token=JOBS_TOKEN, function="job_events")
    assert answer.status == 404
    (line,) = [line for line in request_lines(logs) if "http_status" in line]
    assert (line["event"], line["code"], line["stage"], line["elapsed_ms"]) == (
        "schedule.job_rejected", "invalid_params", "lookup", 250)


def test_auth_failures_on_the_protocol_surface_keep_the_legacy_bodies(make_runtime):
    rt = make_runtime(tokens={"trigger": TRIGGER_TOKEN, "jobs": ""})
    for method, path in [("GET", "/capabilities"), ("POST", "/jobs"), ("GET", "/jobs/x/events")]:
        assert send(rt, method, path, "[" * 1000, raw=True, token="x", function="job_events").pair == (
            503, {"status": "error", "error": "endpoint disabled: token not configured"})
