"""POST /jobs, GET /jobs, GET /jobs/{id} through the real job_events handler (spec §12.3, §12.4).

Every 2xx body and every refusal is validated against the project's copy of the published
schema; a refusal writes nothing (no request item, no slot)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from conftest import claim, JOBS_TOKEN
from support.builders import both
from support.jobs import (
    PLAN, TARGET, call, get_job, job_path, jobs_runtime, manual_slots, post_job, single_target, task,
)
from support.protocol_schema import error_body, validate

from pixivflow.services import jobs as jobs_service
from pixivflow.services import manual

SLOT = f"{PLAN}@manual-job-key-1"


def admitted(rt, body, status=202):
    code, answer = post_job(rt, body)
    assert code == status, answer
    assert set(answer) == {"job"}
    validate("Job", answer["job"])
    return answer["job"]


def refused(rt, body, status=400):
    code, answer = post_job(rt, body)
    assert code == status, answer
    error_body(answer)
    return answer["error"]


def nothing_written(rt, key="job-key-1"):
    assert rt.wiring.ledger.slot_ids() == []
    assert rt.wiring.ledger.get_request_key(key) is None


def test_first_admission_is_202_and_a_replay_is_200_with_the_same_job(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    now = rt.clock.now_ms()
    job = admitted(rt, task())
    assert job == {
        "protocol_version": "1", "job_id": SLOT, "job_type": "candidate_search", "status": "queued",
        "idempotency_key": "job-key-1", "correlation_id": "review-chain:1", "created_at": now, "started_at": None,
        "updated_at": now, "heartbeat_at": None, "deadline_at": now + 1_800_000, "lease_active": False,
        "lease_expires_at": None, "attempt": 0, "progress": {"stage": "queued", "at": now},
        "events_url": "/jobs/morning-tokyo%40manual-job-key-1/events",
    }
    again = admitted(rt, task(), status=200)
    assert again["job_id"] == SLOT
    rt.settle()
    replay = admitted(rt, task(), status=200)
    assert replay["job_id"] == SLOT and replay["status"] == "succeeded"
    assert replay["result"]["candidates"][0]["work_id"] == "501"
    assert manual_slots(rt) == [SLOT]
    assert len(downstream.requests) == 1
    sent = downstream.requests[0].body
    assert (sent["slot_id"], sent["refetch_request_id"], sent["correlation_id"]) == (SLOT, "job-key-1", "review-chain:1")
    slot = rt.wiring.ledger.get_slot(SLOT)
    assert (slot.trigger_source, slot.slot_name, slot.target_ids, slot.params) == (
        "manual", "审核群重抓", [TARGET], {"query": {"tags": ["cats"]}})


def test_a_replay_after_a_restart_still_names_the_same_job(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    admitted(rt, task())
    rt.settle()
    from pixivflow import runtime

    rt.clock.advance(3 * 86_400_000)
    runtime.override(clock=rt.clock)  # a cold start days later
    assert admitted(rt, task(), status=200)["job_id"] == SLOT
    assert len(downstream.requests) == 1 and manual_slots(rt) == [SLOT]


VALIDATION_CASES = [
    ("not json", {"reason": "invalid_json", "field": "body"}, "invalid_params"),  # the shell reads the body
    ("[1, 2]", {"reason": "not_an_object", "field": "body"}, "invalid_params"),
    ({**task(), "protocol_version": None}, {"field": "protocol_version"}, "invalid_params"),
    ({**task(), "protocol_version": "2"}, {"received": "2", "supported": ["1"]}, "unsupported_protocol_version"),
    ({**task(), "job_type": "ranking"}, {"reason": "unsupported_job_type", "job_type": "ranking",
                                         "supported": ["candidate_search"]}, "invalid_params"),
    ({**task(), "idempotency_key": "  "}, {"field": "idempotency_key"}, "invalid_params"),
    ({**task(), "correlation_id": 7}, {"field": "correlation_id"}, "invalid_params"),
    ({**task(), "callback_url": 7}, {"field": "callback_url"}, "invalid_params"),
    ({**task(), "deadline_ms": 10}, {"field": "deadline_ms"}, "invalid_params"),
    ({**task(), "labels": {"a": 1}}, {"field": "labels"}, "invalid_params"),
    ({**task(), "params": None}, {"field": "params"}, "invalid_params"),
    ({**task(), "params": {"query": {"tags": []}}}, {"field": "params.query.tags"}, "invalid_params"),
    ({**task(), "params": {"target_id": 5}}, {"field": "params.target_id"}, "invalid_params"),
    ({**task(), "params": {"query": {"tags": ["cats"]}, "constraints": {"limit": 0}}},
     {"field": "params.constraints.limit"}, "invalid_params"),
]


@pytest.mark.parametrize("body,detail,code", VALIDATION_CASES)
def test_each_validation_rule_refuses_with_its_body_and_writes_nothing(make_runtime, body, detail, code):
    rt = jobs_runtime(make_runtime)
    error = refused(rt, body)
    assert (error["code"], error["retryable"], error["detail"]) == (code, False, detail)
    nothing_written(rt)


def test_exact_bodies_of_the_version_and_job_type_refusals(make_runtime):
    rt = jobs_runtime(make_runtime)
    assert post_job(rt, {**task(), "protocol_version": "2"}) == (400, {"error": {
        "code": "unsupported_protocol_version", "message": "protocol_version is not supported", "retryable": False,
        "detail": {"received": "2", "supported": ["1"]}}})
    assert post_job(rt, {**task(), "protocol_version": None}) == (400, {"error": {
        "code": "invalid_params", "message": "protocol_version is required", "retryable": False,
        "detail": {"field": "protocol_version"}}})


def test_unknown_keys_are_ignored(make_runtime):
    rt = jobs_runtime(make_runtime)
    job = admitted(rt, {**task(), "priority": "high", "params": {"query": {"tags": ["cats"], "boost": 2}, "hint": 1}})
    assert rt.wiring.ledger.get_slot(job["job_id"]).params == {"query": {"tags": ["cats"]}}


# -- target resolution ----------------------------------------------------------------------------


def test_no_selector_and_several_eligible_targets_is_409_ambiguous(make_runtime):
    rt = jobs_runtime(make_runtime, mutate=lambda cfg: None)  # the demo config: seven webhook targets
    error = refused(rt, task(), 409)
    assert error["code"] == "invalid_params" and error["detail"] == {
        "reason": "ambiguous_target",
        "targets": ["cats", "dogs", "fantasy-novels", "flaky", "landscape", "ranking-daily", "sky-topic"]}
    nothing_written(rt)


def test_no_eligible_target_is_400(make_runtime):
    def download_only(cfg):
        single_target(cfg)
        cfg["targets"][0]["storageMode"] = "persistent"  # cats: no delivery route

    rt = jobs_runtime(make_runtime, mutate=download_only)
    assert post_job(rt, task()) == (400, {"error": {
        "code": "invalid_params", "message": "no candidate search target is configured", "retryable": False,
        "detail": {"reason": "no_eligible_target"}}})
    nothing_written(rt)


def test_the_target_selector_picks_one_of_several_and_query_may_be_omitted(make_runtime, downstream):
    rt = jobs_runtime(make_runtime, mutate=lambda cfg: None, catalog=None)  # the demo catalogue has landscapes
    job = admitted(rt, task(params={"target_id": "landscape"}))
    assert job["job_id"] == "morning-tokyo@manual-job-key-1"
    slot = rt.wiring.ledger.get_slot(job["job_id"])
    assert (slot.target_ids, slot.params) == (["landscape"], {})
    rt.settle()
    assert downstream.requests[0].body["target_id"] == "landscape"


def test_an_unknown_or_unselected_target_is_400_unknown_target(make_runtime):
    def flaky_off(cfg):
        cfg["schedules"][2]["enabled"] = False

    rt = jobs_runtime(make_runtime, mutate=flaky_off)
    for target_id in ("nope", "flaky"):
        assert post_job(rt, task(params={"target_id": target_id})) == (400, {"error": {
            "code": "invalid_params", "message": "unknown target", "retryable": False,
            "detail": {"reason": "unknown_target", "target_id": target_id}}})
    nothing_written(rt)


def test_a_selected_target_in_two_plans_is_409(make_runtime):
    rt = jobs_runtime(make_runtime, mutate=lambda cfg: cfg["schedules"][1]["targetIds"].append("cats"))
    error = refused(rt, task(params={"target_id": "cats"}), 409)
    assert error["detail"] == {"reason": "ambiguous_target", "targets": ["cats"],
                               "schedules": ["evening-berlin", "morning-tokyo"]}


def test_the_account_must_be_the_configured_one_or_default(make_runtime):
    rt = jobs_runtime(make_runtime)
    error = refused(rt, task(params={"query": {"tags": ["cats"]}, "source": {"platform": "pixiv", "account": "other"}}))
    assert error["detail"] == {"reason": "account_unavailable", "requested": "other", "configured": "default"}
    nothing_written(rt)
    admitted(rt, task(params={"query": {"tags": ["cats"]}, "source": {"account": "default"}}))


def test_a_configured_pixiv_account_is_accepted_by_its_id(make_runtime):
    rt = jobs_runtime(make_runtime, mutate=both(single_target, lambda cfg: cfg.update(pixiv={"accountId": "acct-9"})))
    admitted(rt, task("k-a", params={"query": {"tags": ["cats"]}, "source": {"account": "acct-9"}}))
    error = refused(rt, task("k-b", params={"query": {"tags": ["cats"]}, "source": {"account": "acct-8"}}))
    assert error["detail"]["configured"] == "acct-9"


def test_work_types_must_include_the_target_type(make_runtime):
    rt = jobs_runtime(make_runtime)
    error = refused(rt, task(params={"query": {"tags": ["cats"]}, "constraints": {"work_types": ["novel"]}}))
    assert error["detail"] == {"reason": "work_type_not_available", "target_type": "illustration"}
    nothing_written(rt)
    admitted(rt, task(params={"query": {"tags": ["cats"]}, "constraints": {"work_types": ["novel", "illustration"]}}))


# -- identity: conflicts, the legacy route, concurrency ------------------------------------------


def test_the_same_key_with_different_params_is_409_idempotency_conflict(make_runtime):
    rt = jobs_runtime(make_runtime)
    admitted(rt, task())
    assert post_job(rt, task(params={"query": {"tags": ["dogs"]}})) == (409, {"error": {
        "code": "idempotency_conflict", "message": "idempotency key was first used with different params",
        "retryable": False, "detail": {"reason": "idempotency_conflict", "slot_id": SLOT}}})
    # the same params spelled differently are the same params
    assert post_job(rt, task(params={"query": {"tags": [" cats "], "expand": False}, "x": 1}))[0] == 200
    assert manual_slots(rt) == [SLOT]


def test_the_same_key_for_another_target_is_409(make_runtime):
    rt = jobs_runtime(make_runtime, mutate=lambda cfg: None)
    admitted(rt, task(params={"target_id": "cats"}))
    error = refused(rt, task(params={"target_id": "landscape"}), 409)
    assert error == {"code": "idempotency_conflict", "message": "idempotency key already names another job",
                     "retryable": False, "detail": {"reason": "idempotency_conflict", "slot_id": SLOT}}


def test_another_spelling_of_the_key_cannot_take_over_the_slot(make_runtime):
    rt = jobs_runtime(make_runtime)
    admitted(rt, task("Key-A"))
    error = refused(rt, task("key-a"), 409)
    assert error["code"] == "idempotency_conflict"
    assert manual_slots(rt) == [f"{PLAN}@manual-key-a"]


def refetch(rt, request_id, target=TARGET):
    return rt.http("POST", f"/internal/targets/{target}/refetch", {"requestId": request_id}, token=JOBS_TOKEN)


def test_legacy_refetch_then_jobs_is_one_slot_and_one_job(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    key = str(uuid.uuid4())
    slot_id = f"{PLAN}@manual-{key}"
    assert refetch(rt, key) == (202, {"status": "accepted", "slotId": slot_id, "disposition": "accepted"})
    job = admitted(rt, task(key), status=200)
    assert job["job_id"] == slot_id and job["idempotency_key"] == key
    rt.settle()
    assert admitted(rt, task(key), status=200)["status"] == "succeeded"
    assert manual_slots(rt) == [slot_id] and len(downstream.requests) == 1


def test_jobs_then_legacy_refetch_is_one_slot_and_the_job_params_drive_it(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    key = str(uuid.uuid4())
    slot_id = f"{PLAN}@manual-{key}"
    params = {"query": {"tags": ["cats"]}, "constraints": {"exclude": [{"kind": "work", "id": "501"}]}}
    assert admitted(rt, task(key, params=params))["job_id"] == slot_id
    assert refetch(rt, key) == (202, {"status": "accepted", "slotId": slot_id, "disposition": "accepted"})
    rt.settle()
    assert refetch(rt, key)[1]["disposition"] == "already_completed"
    assert manual_slots(rt) == [slot_id] and len(downstream.requests) == 1
    assert downstream.requests[0].body["work_id"] == "502"  # the job's exclusion held


def test_a_legacy_refetch_of_another_target_with_a_job_key_is_refused(make_runtime):
    rt = jobs_runtime(make_runtime, mutate=lambda cfg: None)
    key = str(uuid.uuid4())
    admitted(rt, task(key, params={"target_id": "cats"}))
    assert refetch(rt, key, "landscape") == (409, {"status": "error", "error": "ambiguous target"})


def test_eight_concurrent_admissions_of_one_key_make_one_slot_and_one_delivery(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    wiring = rt.wiring
    barrier = threading.Barrier(8)
    results: list = []
    errors: list = []

    def submit():
        try:
            barrier.wait()
            results.append(jobs_service.submit(wiring, task()))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r.created for r in results) == [False] * 7 + [True]  # exactly one 202
    assert {r.job["job_id"] for r in results} == {SLOT}
    assert manual_slots(rt) == [SLOT]
    rt.settle()
    assert len(downstream.requests) == 1
    page = call(rt, "GET", job_path(SLOT, "/events"))[1]
    assert [e["type"] for e in page["events"]] == ["job.accepted", "job.started", "job.succeeded"]


def test_concurrent_legacy_and_job_admissions_of_one_key_make_one_slot(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    wiring = rt.wiring
    key = str(uuid.uuid4())
    barrier = threading.Barrier(6)
    errors: list = []

    def job():
        try:
            barrier.wait()
            jobs_service.submit(wiring, task(key))
        except BaseException as exc:
            errors.append(exc)

    def legacy():
        try:
            barrier.wait()
            manual.refetch(wiring.refetches, TARGET, key)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (job, legacy) * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert manual_slots(rt) == [f"{PLAN}@manual-{key}"]
    rt.settle()
    assert len(downstream.requests) == 1


# -- reading jobs ---------------------------------------------------------------------------------


def test_get_jobs_by_idempotency_key(make_runtime):
    rt = jobs_runtime(make_runtime)
    now = rt.clock.now_ms()
    assert call(rt, "GET", "/jobs", query={"idempotency_key": "job-key-1"}) == (200, {"jobs": [], "server_time": now})
    job = admitted(rt, task())
    status, page = call(rt, "GET", "/jobs", query={"idempotency_key": "job-key-1"})
    assert status == 200
    validate("JobPage", page)
    assert page == {"jobs": [job], "server_time": now}
    assert call(rt, "GET", "/jobs", query={"idempotency_key": "JOB-KEY-1"})[1]["jobs"] == []  # exactly as sent
    for query in (None, {"idempotency_key": ""}, {"idempotency_key": "  "}):
        assert call(rt, "GET", "/jobs", query=query) == (400, {"error": {
            "code": "invalid_params", "message": "idempotency_key is required", "retryable": False,
            "detail": {"field": "idempotency_key"}}})


def test_get_job_projects_the_slot_and_an_unknown_job_is_404(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    admitted(rt, task())
    rt.settle()
    status, job = get_job(rt, SLOT)
    assert status == 200
    validate("Job", job)
    assert job["status"] == "succeeded" and job["result"]["candidates"][0]["work_id"] == "501"
    assert job["attempt"] >= 1 and job["started_at"] is not None and job["lease_active"] is False
    assert get_job(rt, "nope@manual-x") == (404, {"error": {
        "code": "invalid_params", "message": "unknown job", "retryable": False,
        "detail": {"reason": "unknown_job", "job_id": "nope@manual-x"}}})


def test_get_job_resolves_a_scheduled_occurrence_too(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    slot_id = rt.fire(PLAN, iso="2026-11-30T23:00:00Z")["slot_id"]
    rt.settle()
    status, job = get_job(rt, slot_id)
    assert status == 200 and job["status"] == "succeeded" and "idempotency_key" not in job
    validate("Job", job)


def test_a_key_with_url_characters_round_trips_through_the_path(make_runtime):
    rt = jobs_runtime(make_runtime)
    job = admitted(rt, task("tenant/42 #7?x"))
    assert job["events_url"] == job_path(job["job_id"], "/events")
    assert get_job(rt, job["job_id"])[1]["job_id"] == job["job_id"]
    assert call(rt, "GET", job["events_url"])[0] == 200


# -- the stored params drive the run --------------------------------------------------------------


def test_exclusions_and_tags_of_the_params_drive_the_run(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    admitted(rt, task("k-exclude", params={"query": {"tags": ["cats"]},
                                           "constraints": {"exclude": [{"kind": "work", "id": "501"},
                                                                       {"kind": "tag", "id": "cats"}]}}))
    admitted(rt, task("k-tags", params={"query": {"tags": ["cats", "sleepy"]}}))
    rt.settle()
    delivered = {r.body["slot_id"]: r.body["work_id"] for r in downstream.requests}
    assert delivered == {f"{PLAN}@manual-k-exclude": "502", f"{PLAN}@manual-k-tags": "503"}


def test_an_excluded_only_candidate_ends_the_job_with_no_candidate(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    job = admitted(rt, task(params={"query": {"tags": ["dogs"]}, "constraints": {"exclude": [{"kind": "work", "id": "900"}]}}))
    rt.settle()
    status, current = get_job(rt, job["job_id"])
    assert current["status"] == "failed" and current["error"]["code"] == "no_candidate"
    assert downstream.requests == []


def test_a_resumed_job_re_applies_its_params(make_runtime, downstream):
    """The first executor dies right after claiming the cell (its message is gone); the sweep's
    re-dispatch runs selection again, and the job's exclusion still holds."""
    from pixivflow import aws

    rt = jobs_runtime(make_runtime)
    admitted(rt, task(params={"query": {"tags": ["cats"]}, "constraints": {"exclude": [{"kind": "work", "id": "501"}]}}))
    sqs = aws.client("sqs")
    url = rt.env["EXECUTION_QUEUE_URL"]
    dropped = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert len(dropped) == 1
    sqs.delete_message(QueueUrl=url, ReceiptHandle=dropped[0]["ReceiptHandle"])
    assert claim(rt.wiring.ledger, SLOT, TARGET, "exec-ghost", rt.clock.now_ms(), 180_000) is not None
    rt.settle()
    assert [r.body["work_id"] for r in downstream.requests] == ["502"]
    assert get_job(rt, SLOT)[1]["attempt"] == 2  # the ghost's claim and the rescue


# -- the outcome line ------------------------------------------------------------------------------


def test_each_request_logs_one_outcome_line_with_its_status(make_runtime, logs):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    post_job(rt, task())
    post_job(rt, {**task(), "protocol_version": "9"})
    admitted_lines = logs.events("schedule.job_admitted")
    assert [(line["disposition"], line["http_status"], line["job_id"]) for line in admitted_lines] == [
        ("accepted", 202, SLOT), ("replayed", 200, SLOT)]
    [rejected] = logs.events("schedule.job_rejected")
    assert (rejected["code"], rejected["stage"], rejected["http_status"], rejected["path"], rejected["method"]) == (
        "unsupported_protocol_version", "validation", 400, "/jobs", "POST")
    assert all(isinstance(line["elapsed_ms"], int) and line["elapsed_ms"] >= 0 for line in admitted_lines + [rejected])


def test_an_unexpected_error_is_500_internal_error_and_leaks_nothing(make_runtime, logs, monkeypatch):
    rt = jobs_runtime(make_runtime)

    def broken(wiring, body):
        raise RuntimeError("table arn:aws:dynamodb:secret-internal-detail")

    monkeypatch.setattr(jobs_service, "submit", broken)
    status, body = post_job(rt, task())
    assert (status, body) == (500, {"error": {"code": "internal_error", "message": "internal error", "retryable": False,
                                              "detail": {}}})
    error_body(body)
    [line] = logs.events("schedule.job_rejected")
    assert (line["code"], line["stage"], line["http_status"], line["reason"]) == ("internal_error", "admission", 500,
                                                                                  "RuntimeError")
    assert "secret-internal-detail" not in json.dumps(body)


def test_expand_turns_several_tags_into_either_tag(make_runtime, downstream):
    """No work is tagged both "sleepy" and "cute": as one query nothing matches; with ``expand`` the
    tags are alternatives and the newest work carrying either one is delivered."""
    rt = jobs_runtime(make_runtime)
    admitted(rt, task("k-and", params={"query": {"tags": ["sleepy", "cute"]}}))
    admitted(rt, task("k-or", params={"query": {"tags": ["sleepy", "cute"], "expand": True}}))
    rt.settle()
    assert get_job(rt, f"{PLAN}@manual-k-and")[1]["error"]["code"] == "no_candidate"
    assert [(r.body["slot_id"], r.body["work_id"]) for r in downstream.requests] == [(f"{PLAN}@manual-k-or", "501")]


def test_a_job_that_ran_once_reports_attempt_1_however_often_its_message_came(make_runtime):
    """``attempt`` counts the executions that really started: a duplicated execution message (SQS
    delivers at least once) that finds the cell already handed to the outbox starts none."""
    from support.jobs import call
    from support.queues import take

    from pixivflow.services.execution import execute_cell

    rt = jobs_runtime(make_runtime)
    status, body = post_job(rt, task())
    assert status == 202
    job_id = body["job"]["job_id"]
    take(rt, "EXECUTION_QUEUE_URL")
    execute_cell(rt.wiring.executions, job_id, TARGET)  # the run: bound, handed to the outbox
    for _ in range(2):  # the same message again, twice
        assert execute_cell(rt.wiring.executions, job_id, TARGET).action in ("left_to_outbox", "applied")
    rt.settle()
    status, job = call(rt, "GET", f"/jobs/{job_id.replace('@', '%40')}")
    assert (job["status"], job["attempt"]) == ("succeeded", 1), job
