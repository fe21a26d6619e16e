"""Real answers of both functions validate against the generated OpenAPI document (issue 17 item 8).

Each response below is checked against the schema the document states for that route and
status, so a 2xx or error body that drifts from its documented shape fails here.
"""

from __future__ import annotations

from conftest import JOBS_TOKEN, TRIGGER_TOKEN
from support.raw_http import ABSENT, openapi_validator, send

from pixivflow.http.openapi import openapi_document

RID = "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab"
DOC = openapi_document()


def check(answer, rule: str, method: str) -> None:
    item = DOC["paths"][rule]
    # a 405 answers a method the path does not serve: its shape is documented on the served ones
    operation = item.get(method.lower()) or next(iter(item.values()))
    responses = operation["responses"]
    assert str(answer.status) in responses, (rule, method, answer.status)
    schema = responses[str(answer.status)]["content"]["application/json"]["schema"]
    errors = [e.message for e in openapi_validator(schema).iter_errors(answer.body)]
    assert errors == [], (rule, method, answer.status, answer.body, errors)


def call(rt, method, path, rule, body=ABSENT, **kw):
    answer = send(rt, method, path, body, **kw)
    check(answer, rule, method)
    return answer.status


def test_every_trigger_route_answers_its_documented_bodies(make_runtime, monkeypatch):
    rt = make_runtime()
    run_rule = "/internal/schedules/{scheduleId}/run"
    refetch_rule = "/internal/targets/{targetId}/refetch"
    status_rule = "/internal/targets/{targetId}/refetch/{requestId}"
    seen = [
        call(rt, "GET", "/health", "/health"),
        call(rt, "GET", "/internal/schedules", "/internal/schedules", token=TRIGGER_TOKEN),
        call(rt, "POST", "/internal/schedules/morning-tokyo/run", run_rule, {"label": "ops"}, token=TRIGGER_TOKEN),
        call(rt, "POST", "/internal/targets/cats/refetch", refetch_rule, {"requestId": RID}, token=JOBS_TOKEN),
        call(rt, "GET", f"/internal/targets/cats/refetch/{RID}", status_rule, token=JOBS_TOKEN),
        call(rt, "POST", "/internal/outbox/drain", "/internal/outbox/drain", token=TRIGGER_TOKEN),
    ]
    assert seen == [200, 200, 202, 202, 200, 200]
    rt.settle()
    assert call(rt, "POST", "/internal/schedules/morning-tokyo/run", run_rule, token=TRIGGER_TOKEN) == 200  # completed
    assert call(rt, "GET", f"/internal/targets/cats/refetch/{RID}", status_rule, token=JOBS_TOKEN) == 200  # submitted

    refusals = [
        call(rt, "POST", "/internal/schedules/morning-tokyo/run", run_rule, {"label": 1}, token=TRIGGER_TOKEN),
        call(rt, "POST", "/internal/schedules/morning-tokyo/run", run_rule, {"label": 1}, token="wrong"),
        call(rt, "POST", "/internal/schedules/nope/run", run_rule, token=TRIGGER_TOKEN),
        call(rt, "GET", "/internal/schedules/morning-tokyo/run", run_rule, token=TRIGGER_TOKEN),
        call(rt, "POST", "/internal/schedules/morning-tokyo/run", run_rule, "x", raw=True, token=TRIGGER_TOKEN,
             content_type="text/plain"),
        call(rt, "POST", "/internal/targets/nope/refetch", refetch_rule, {"requestId": RID}, token=JOBS_TOKEN),
        call(rt, "GET", "/internal/targets/cats/refetch/bad", status_rule, token=JOBS_TOKEN),
    ]
    assert refusals == [400, 401, 404, 405, 415, 404, 400]

    # evening-berlin fired at 18:30Z: hours past its grace window
    assert call(rt, "POST", "/internal/schedules/evening-berlin/run", run_rule, token=TRIGGER_TOKEN) == 410

    from pixivflow.services import manual

    monkeypatch.setattr(manual, "admit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("down")))
    other = "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ac"
    assert call(rt, "POST", "/internal/targets/cats/refetch", refetch_rule, {"requestId": other}, token=JOBS_TOKEN) == 500


def test_a_dispatch_failure_answers_the_documented_503(make_runtime, monkeypatch):
    rt = make_runtime()
    monkeypatch.setattr(rt.wiring.queues, "send_execution", lambda messages: list(range(len(messages))))
    assert call(rt, "POST", "/internal/schedules/morning-tokyo/run", "/internal/schedules/{scheduleId}/run",
                token=TRIGGER_TOKEN) == 503


def test_the_job_events_function_answers_its_documented_bodies(make_runtime):
    rt = make_runtime()
    kw = {"function": "job_events"}
    job = "morning-tokyo@manual-k-1"
    task = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": "k-1",
            "params": {"target_id": "cats"}}
    assert call(rt, "GET", "/capabilities", "/capabilities", token=JOBS_TOKEN, **kw) == 200
    assert call(rt, "GET", "/capabilities", "/capabilities", token="wrong", **kw) == 401
    assert call(rt, "POST", "/jobs", "/jobs", {"protocol_version": "1"}, token=JOBS_TOKEN, **kw) == 400
    assert call(rt, "POST", "/jobs", "/jobs", "[1]", raw=True, token=JOBS_TOKEN, **kw) == 400
    assert call(rt, "POST", "/jobs", "/jobs", "x", raw=True, token=JOBS_TOKEN, content_type="text/csv", **kw) == 415
    assert call(rt, "POST", "/jobs", "/jobs", {**task, "params": {"query": {"tags": ["cats"]}}}, token=JOBS_TOKEN,
                **kw) == 409  # several eligible targets
    assert call(rt, "POST", "/jobs", "/jobs", task, token=JOBS_TOKEN, **kw) == 202
    assert call(rt, "POST", "/jobs", "/jobs", task, token=JOBS_TOKEN, **kw) == 200
    assert call(rt, "GET", "/jobs", "/jobs", token=JOBS_TOKEN, query={"idempotency_key": "k-1"}, **kw) == 200
    assert call(rt, "GET", "/jobs", "/jobs", token=JOBS_TOKEN, **kw) == 400
    assert call(rt, "DELETE", "/jobs/job-1", "/jobs/{jobId}", token=JOBS_TOKEN, **kw) == 405
    assert call(rt, "GET", "/jobs/job-1", "/jobs/{jobId}", token=JOBS_TOKEN, **kw) == 404
    assert call(rt, "GET", f"/jobs/{job}", "/jobs/{jobId}", token=JOBS_TOKEN, **kw) == 200
    assert call(rt, "GET", "/jobs/job-1/events", "/jobs/{jobId}/events", token=JOBS_TOKEN, **kw) == 404
    assert call(rt, "GET", f"/jobs/{job}/events", "/jobs/{jobId}/events", token=JOBS_TOKEN, **kw) == 200
    assert call(rt, "GET", f"/jobs/{job}/events", "/jobs/{jobId}/events", token=JOBS_TOKEN, query={"unacked": "x"},
                **kw) == 400
    assert call(rt, "POST", f"/jobs/{job}/events/ack", "/jobs/{jobId}/events/ack", {"ack_through": "evt-1-1"},
                token=JOBS_TOKEN, **kw) == 200
    assert call(rt, "POST", "/jobs/job-1/events/ack", "/jobs/{jobId}/events/ack", {"ack_through": "evt-1-1"},
                token=JOBS_TOKEN, **kw) == 404
    assert call(rt, "POST", f"/jobs/{job}/cancel", "/jobs/{jobId}/cancel", token=JOBS_TOKEN, **kw) == 200
    assert call(rt, "POST", "/jobs/job-1/cancel", "/jobs/{jobId}/cancel", token=JOBS_TOKEN, **kw) == 404


def admits_body(rule: str, method: str, body) -> bool:
    """Whether the document's request body schema of the route calls ``body`` valid."""
    schema = DOC["paths"][rule][method.lower()]["requestBody"]["content"]["application/json"]["schema"]
    return openapi_validator(schema).is_valid(body)


def admits_parameter(rule: str, method: str, name: str, value) -> bool:
    """Whether the document admits ``value`` (None: absent) for the named parameter of the route."""
    (param,) = [p for p in DOC["paths"][rule][method.lower()].get("parameters", []) if p["name"] == name]
    if value is None:
        return not param.get("required", False)
    return openapi_validator(param["schema"]).is_valid(value)


def test_a_request_the_document_calls_invalid_is_refused_with_its_documented_400(make_runtime):
    """The text rule of every parameter and body string (keys included) and the job routes' own
    parameter rules are stated in the document, so a request it calls invalid is the 400 it
    documents, and one it calls valid is not refused (schemathesis found each of these as a
    schema-valid request rejected or an undocumented 400)."""
    rt = make_runtime()
    kw = {"function": "job_events", "token": JOBS_TOKEN}
    job = "morning-tokyo@manual-k-1"
    task = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": "k-1",
            "params": {"target_id": "cats"}}
    assert call(rt, "POST", "/jobs", "/jobs", task, **kw) == 202

    # job id and query parameters: a control character, a missing key, an empty cursor
    for method, path, rule in (("GET", "/jobs/%0Cx", "/jobs/{jobId}"), ("POST", "/jobs/%19/cancel", "/jobs/{jobId}/cancel")):
        assert not admits_parameter(rule, method, "jobId", "\x0cx" if method == "GET" else "\x19")
        answer = send(rt, method, path, **kw)
        check(answer, rule, method)
        assert (answer.status, answer.body["error"]["detail"]) == (400, {"reason": "invalid_text", "field": "jobId"})
    assert admits_parameter("/jobs/{jobId}", "GET", "jobId", "a key with spaces@manual-k 1")
    assert not admits_parameter("/jobs", "GET", "idempotency_key", None)
    assert call(rt, "GET", "/jobs", "/jobs", **kw) == 400
    assert not admits_parameter("/jobs/{jobId}/events", "GET", "after", "")
    assert call(rt, "GET", f"/jobs/{job}/events", "/jobs/{jobId}/events", query={"after": ""}, **kw) == 400
    assert not admits_parameter("/jobs/{jobId}/events", "GET", "unacked", "yes")

    # bodies: a key or a value breaking the text rule is refused; unknown keys that follow it are ignored
    refused = {**task, "idempotency_key": "k-2", "\x7f\x86": {"": {}}}
    assert not admits_body("/jobs", "POST", refused)
    assert call(rt, "POST", "/jobs", "/jobs", refused, **kw) == 400
    ignored = {**task, "idempotency_key": "k-2", "x-note": {"seen": ["by", 1, None]}}
    assert admits_body("/jobs", "POST", ignored)
    assert call(rt, "POST", "/jobs", "/jobs", ignored, **kw) == 202
    assert not admits_body("/jobs/{jobId}/events/ack", "POST", {"ack_through": "w\x8e"})
    assert call(rt, "POST", f"/jobs/{job}/events/ack", "/jobs/{jobId}/events/ack", {"ack_through": "w\x8e"}, **kw) == 400
    assert not admits_body("/jobs/{jobId}/events/ack", "POST", {"ack_through": " "})

    refetch_rule = "/internal/targets/{targetId}/refetch"
    assert not admits_body(refetch_rule, "POST", {"requestId": RID, "\x05": 1})
    assert call(rt, "POST", "/internal/targets/cats/refetch", refetch_rule, {"requestId": RID, "\x05": 1},
                token=JOBS_TOKEN) == 400
    assert admits_body(refetch_rule, "POST", {"requestId": RID, "note": ["x"]})
    assert call(rt, "POST", "/internal/targets/cats/refetch", refetch_rule, {"requestId": RID, "note": ["x"]},
                token=JOBS_TOKEN) == 202

    run_rule = "/internal/schedules/{scheduleId}/run"
    assert not admits_body(run_rule, "POST", {"label": "ops", "\x17": []})
    assert call(rt, "POST", "/internal/schedules/morning-tokyo/run", run_rule, {"label": "ops", "\x17": []},
                token=TRIGGER_TOKEN) == 400
    assert not admits_body(run_rule, "POST", {"label": "o\x85ps"})
    assert admits_body(run_rule, "POST", {"label": "ops", "extra": {"k": ["v", 2.5, True]}})
    assert call(rt, "POST", "/internal/schedules/morning-tokyo/run", run_rule,
                {"label": "ops", "extra": {"k": ["v", 2.5, True]}}, token=TRIGGER_TOKEN) == 202
