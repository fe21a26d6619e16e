"""Workflow Protocol v1, pure rules: Task parsing in the spec's order with exact error bodies,
the retrieval view of stored params, the Job projection and the event body (spec §12)."""

from __future__ import annotations

import copy

import pytest

from support.protocol_schema import error_body, validate

from pixivflow.config import TargetConfig
from pixivflow.domain.model import Cell, Intent, Slot
from pixivflow.domain.protocol import (
    ProtocolError, build_event, event_id, events_url, implied_events, parse_ack_body, parse_event_id,
    parse_event_query, project_job,
)
from pixivflow.domain.task import canonical_json, job_target, parse_task, retrieval_view

TASK = {
    "protocol_version": "1",
    "job_type": "candidate_search",
    "idempotency_key": "c78dd065-60aa-4e7a-bba5-38275019217c",
    "correlation_id": "review-chain:135",
    "labels": {"origin": "moderation"},
    "callback_url": "https://consumer.example/api/v1/jobs/events",
    "deadline_ms": 5_400_000,
    "params": {
        "source": {"platform": "pixiv", "account": "default"},
        "query": {"tags": ["西瓜肚"], "expand": True},
        "constraints": {"exclude": [{"kind": "work", "id": "149713091"}], "limit": 1, "scan_limit": 5,
                        "work_types": ["illustration", "novel"]},
    },
}


def refused(body) -> dict:
    with pytest.raises(ProtocolError) as info:
        parse_task(body)
    exc = info.value
    out = exc.body()
    error_body(out)
    return {"status": exc.status, **out["error"]}


def invalid(message, **detail):
    return {"status": 400, "code": "invalid_params", "message": message, "retryable": False, "detail": detail}


def with_(**changes):
    body = copy.deepcopy(TASK)
    for path, value in changes.items():
        node = body
        parts = path.split("__")
        for part in parts[:-1]:
            node = node[part]
        if value is DELETE:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return body


DELETE = object()


def test_the_published_task_fixture_parses_and_its_params_are_stored_normalised():
    validate("Task", TASK)
    task = parse_task(TASK)
    assert task.idempotency_key == TASK["idempotency_key"]
    assert (task.correlation_id, task.callback_url, task.deadline_ms, task.target_id) == (
        "review-chain:135", "https://consumer.example/api/v1/jobs/events", 5_400_000, None)
    assert task.params == TASK["params"]
    assert task.account == "default" and task.work_types == ["illustration", "novel"]


@pytest.mark.parametrize("body", [None, [], "text", 3, True])
def test_rule_1_the_body_must_be_an_object(body):
    assert refused(body) == invalid("body must be a JSON object", reason="not_an_object", field="body")


def test_rule_2_protocol_version_absent_is_invalid_and_different_is_unsupported():
    assert refused(with_(protocol_version=DELETE)) == invalid("protocol_version is required", field="protocol_version")
    assert refused(with_(protocol_version=None)) == invalid("protocol_version is required", field="protocol_version")
    for version in ("2", 1, "1.0"):
        assert refused(with_(protocol_version=version)) == {
            "status": 400, "code": "unsupported_protocol_version", "message": "protocol_version is not supported",
            "retryable": False, "detail": {"received": version, "supported": ["1"]}}


def test_rule_3_an_unknown_job_type_is_invalid_params_with_its_reason():
    assert refused(with_(job_type="image_search")) == invalid(
        "job_type is not supported", reason="unsupported_job_type", job_type="image_search", supported=["candidate_search"])
    assert refused(with_(job_type=DELETE))["detail"]["job_type"] is None


@pytest.mark.parametrize("key", [None, "", "   ", 42, "x" * 201, ["k"]])
def test_rule_4_idempotency_key(key):
    assert refused(with_(idempotency_key=key)) == invalid(
        "idempotency_key must be a non-empty string of at most 200 chars", field="idempotency_key")


def test_rule_4_the_trimmed_key_is_used():
    assert parse_task(with_(idempotency_key="  k-1  ")).idempotency_key == "k-1"
    assert parse_task(with_(idempotency_key=" " + "x" * 200 + " ")).idempotency_key == "x" * 200


@pytest.mark.parametrize("field,value,message", [
    ("correlation_id", 5, "correlation_id must be a string of at most 200 chars"),
    ("correlation_id", "c" * 201, "correlation_id must be a string of at most 200 chars"),
    ("callback_url", 5, "callback_url must be a string of at most 2000 chars"),
    ("callback_url", "https://a.example/" + "p" * 2000, "callback_url must be a string of at most 2000 chars"),
    ("deadline_ms", 999, "deadline_ms must be an integer of at least 1000"),
    ("deadline_ms", 1500.5, "deadline_ms must be an integer of at least 1000"),
    ("deadline_ms", True, "deadline_ms must be an integer of at least 1000"),
    ("labels", {"a": 1}, "labels must be an object whose values are strings"),
    ("labels", ["a"], "labels must be an object whose values are strings"),
])
def test_rule_5_optional_fields(field, value, message):
    assert refused(with_(**{field: value})) == invalid(message, field=field)


def test_rule_5_null_optional_fields_are_absent():
    task = parse_task(with_(correlation_id=None, callback_url=None, deadline_ms=None, labels=None))
    assert (task.correlation_id, task.callback_url, task.deadline_ms) == (None, None, None)


@pytest.mark.parametrize("path,value,message,field", [
    ("params", [], "params must be an object", "params"),
    ("params", DELETE, "params must be an object", "params"),
    ("params__source", "pixiv", "params.source must be an object", "params.source"),
    ("params__source__platform", "fanbox", 'params.source.platform must be "pixiv"', "params.source.platform"),
    ("params__source__account", "", "params.source.account must be a non-empty string of at most 100 chars",
     "params.source.account"),
    ("params__source__account", "a" * 101, "params.source.account must be a non-empty string of at most 100 chars",
     "params.source.account"),
    ("params__query", DELETE, "params.query must be an object", "params.query"),
    ("params__query", "cats", "params.query must be an object", "params.query"),
    ("params__query__tags", [], "params.query.tags must be 1 to 20 non-empty strings of at most 100 chars",
     "params.query.tags"),
    ("params__query__tags", ["t"] * 21, "params.query.tags must be 1 to 20 non-empty strings of at most 100 chars",
     "params.query.tags"),
    ("params__query__tags", ["ok", " "], "params.query.tags must be 1 to 20 non-empty strings of at most 100 chars",
     "params.query.tags[1]"),
    ("params__query__tags", ["x" * 101], "params.query.tags must be 1 to 20 non-empty strings of at most 100 chars",
     "params.query.tags[0]"),
    ("params__query__expand", "yes", "params.query.expand must be a boolean", "params.query.expand"),
    ("params__constraints", 1, "params.constraints must be an object", "params.constraints"),
    ("params__constraints__exclude", [{"kind": "work", "id": "1"}] * 101,
     "params.constraints.exclude must be a list of at most 100 entries", "params.constraints.exclude"),
    ("params__constraints__exclude", [{"kind": "user", "id": "1"}],
     "params.constraints.exclude entries need kind work, candidate or tag", "params.constraints.exclude[0].kind"),
    ("params__constraints__exclude", [{"kind": "work", "id": " "}],
     "params.constraints.exclude entries need a non-empty id of at most 100 chars", "params.constraints.exclude[0].id"),
    ("params__constraints__limit", 0, "params.constraints.limit must be an integer of at least 1",
     "params.constraints.limit"),
    ("params__constraints__scan_limit", "5", "params.constraints.scan_limit must be an integer of at least 1",
     "params.constraints.scan_limit"),
    ("params__constraints__work_types", ["illustration", ""],
     "params.constraints.work_types must be a list of non-empty strings", "params.constraints.work_types"),
])
def test_rule_6_params(path, value, message, field):
    assert refused(with_(**{path: value})) == invalid(message, field=field)


def test_the_rules_apply_in_the_spec_order():
    # version before job type before key before params
    assert refused({"job_type": "x", "params": 1})["detail"] == {"field": "protocol_version"}
    assert refused({"protocol_version": "1", "job_type": "x", "params": 1})["detail"]["reason"] == "unsupported_job_type"
    assert refused({"protocol_version": "1", "job_type": "candidate_search", "params": 1})["detail"] == {"field": "idempotency_key"}
    assert refused(with_(correlation_id=1, params=1))["detail"] == {"field": "correlation_id"}


def test_unknown_keys_are_ignored_at_every_level():
    body = with_(future_field={"x": 1}, params__future=True, params__query__weights=[1], params__source__region="jp",
                 params__constraints__exclude=[{"kind": "work", "id": "1", "why": "seen"}])
    task = parse_task(body)
    assert task.params["query"] == {"tags": ["西瓜肚"], "expand": True}
    assert task.params["constraints"]["exclude"] == [{"kind": "work", "id": "1"}]
    assert "future" not in task.params


def test_normalisation_trims_and_drops_defaults():
    task = parse_task(with_(params={"query": {"tags": [" cats ", "cute"], "expand": False},
                                    "constraints": {"scan_limit": 500, "exclude": [{"kind": "tag", "id": " x "}]}}))
    assert task.params == {"query": {"tags": ["cats", "cute"]},
                           "constraints": {"exclude": [{"kind": "tag", "id": "x"}], "scan_limit": 100}}
    assert canonical_json(task.params) == task.params_json


def test_the_v1_1_target_selector():
    task = parse_task(with_(params={"target_id": " cats "}))
    assert task.target_id == "cats" and task.params == {}  # never stored; query may be omitted
    for bad in (5, "", "   ", ["cats"]):
        assert refused(with_(params={"target_id": bad})) == invalid("params.target_id must be a non-empty string",
                                                                    field="params.target_id")
    assert parse_task(with_(params__target_id="cats")).params["query"] == {"tags": ["西瓜肚"], "expand": True}


# -- retrieval view ---------------------------------------------------------------------------

CATS = TargetConfig(id="cats", type="illustration", mode="search", tag="cats", limit=1, storageMode="cache",
                    delivery={"target": "review"})


def test_the_retrieval_view_maps_params_onto_the_target_selection_fields():
    target, excluded = job_target(CATS, {"query": {"tags": ["a", "b"], "expand": True},
                                         "constraints": {"limit": 3, "scan_limit": 2,
                                                         "exclude": [{"kind": "work", "id": "7"}, {"kind": "tag", "id": "x"},
                                                                     {"kind": "candidate", "id": "8"}]}})
    assert (target.tag, target.tagRelation, target.limit, target.candidateScanLimit) == ("a b", "or", 3, 3)
    assert excluded == frozenset({"7"})  # only work exclusions select anything
    assert (target.id, target.delivery, target.storageMode) == ("cats", CATS.delivery, "cache")  # wiring never changes


def test_the_retrieval_view_clamps_and_keeps_the_and_relation_without_expand():
    target, _ = job_target(CATS, {"query": {"tags": ["a", "b"]}, "constraints": {"limit": 500, "scan_limit": 1}})
    assert (target.tag, target.tagRelation, target.limit, target.candidateScanLimit) == ("a b", "and", 100, 100)
    target, _ = job_target(CATS, {"query": {"tags": ["solo"], "expand": True}})
    assert (target.tag, target.tagRelation, target.limit) == ("solo", "and", 1)


@pytest.mark.parametrize("params", [None, {}, "", "not json", "[]", {"source": {"account": "default"}}])
def test_unusable_or_empty_params_run_the_target_as_configured(params):
    assert retrieval_view(params) is None
    assert job_target(CATS, params) == (CATS, frozenset())


def test_params_stored_as_json_text_are_read_too():
    target, _ = job_target(CATS, '{"query":{"tags":["dogs"]}}')
    assert target.tag == "dogs"


# -- projection -------------------------------------------------------------------------------

NOW = 1_790_481_290_000


def slot(**kw):
    base = dict(slot_id="plan@manual-k", schedule_id="plan", status="running", target_ids=["cats"], created_at=1_000,
                occurrence_at=1_000, manual_request_id="K", correlation_id="corr", timeout_ms=600_000, started_at=2_000)
    base.update(kw)
    return Slot(**base)


def cell(status, **kw):
    base = dict(slot_id="plan@manual-k", target_id="cats", status=status, created_at=1_000, updated_at=3_000,
                attempt_count=1, heartbeat_at=2_500)
    base.update(kw)
    return Cell(**base)


@pytest.mark.parametrize("cell_status,reason,slot_status,status,stage", [
    ("pending", None, "pending", "queued", "queued"),
    ("selected", None, "running", "running", "searching"),
    ("artifact_ready", None, "running", "running", "delivering"),
    ("delivery_pending", None, "running", "running", "delivering"),
    ("submitted", None, "success", "succeeded", "done"),
    ("failed", "cancelled_by_consumer", "failed", "cancelled", "cancelled"),
    ("failed", "queued_too_long", "failed", "expired", "expired"),
    ("failed", "stalled_no_heartbeat", "failed", "expired", "expired"),
    ("failed", "execution_timeout", "failed", "expired", "expired"),
    ("failed", "download_failed", "expired", "expired", "expired"),
    ("failed", "download_failed", "failed", "failed", "failed"),
    ("no_candidate", "no_candidate", "failed", "failed", "failed"),
    ("duplicate", "duplicate_exhausted", "failed", "failed", "failed"),
])
def test_job_status_and_progress_stage(cell_status, reason, slot_status, status, stage):
    job = project_job(slot(status=slot_status), cell(cell_status, terminal_reason_code=reason), [], NOW)
    validate("Job", job)
    assert (job["status"], job["progress"]) == (status, {"stage": stage, "at": 3_000})


def test_the_projection_fields():
    job = project_job(slot(), cell("selected", lease_owner="exec-1", lease_until=NOW + 60_000), [], NOW)
    assert job == {
        "protocol_version": "1", "job_id": "plan@manual-k", "job_type": "candidate_search", "status": "running",
        "idempotency_key": "K", "correlation_id": "corr", "created_at": 1_000, "started_at": 2_000, "updated_at": 3_000,
        "heartbeat_at": 2_500, "deadline_at": 601_000, "lease_active": True, "lease_expires_at": NOW + 60_000,
        "attempt": 1, "progress": {"stage": "searching", "at": 3_000}, "events_url": "/jobs/plan%40manual-k/events",
    }
    assert not any(k.startswith(("slot", "refetch")) for k in job)


def test_optional_strings_are_omitted_and_unknown_times_are_null():
    job = project_job(slot(manual_request_id=None, correlation_id=None, started_at=None, occurrence_at=None),
                      cell("pending", heartbeat_at=None, updated_at=0), [], NOW)
    validate("Job", job)
    assert "idempotency_key" not in job and "correlation_id" not in job
    assert (job["started_at"], job["heartbeat_at"], job["deadline_at"], job["lease_expires_at"]) == (None, None, None, None)
    assert job["updated_at"] == job["created_at"] == 1_000 and job["lease_active"] is False


def test_a_succeeded_job_carries_its_delivered_work_and_the_scan_count():
    intents = [
        Intent("plan@manual-k", "cats", "review", "illustration", "41", "k41", status="failed", delivered_at=None),
        Intent("plan@manual-k", "cats", "review", "illustration", "42", "k42", status="delivered", delivered_at=5_000),
    ]
    job = project_job(slot(status="success"), cell("submitted", work_id="41", work_type="illustration",
                                                    candidate_report={"supply": {"fetched": 9}}), intents, NOW)
    assert job["result"] == {"candidates": [{"candidate_id": "42", "platform": "pixiv", "work_id": "42",
                                             "work_type": "illustration"}], "scanned": 9}
    assert "error" not in job
    validate("Result_CandidateSearch", job["result"])
    # without a delivered intent (download-only), the cell's own work; without a report, the count
    job = project_job(slot(status="success"), cell("submitted", work_id="77", work_type="novel"), [], NOW)
    assert job["result"] == {"candidates": [{"candidate_id": "77", "platform": "pixiv", "work_id": "77",
                                             "work_type": "novel"}], "scanned": 1}


def test_a_failed_job_carries_the_mapped_error_and_the_internal_code_only_in_detail():
    job = project_job(slot(status="failed"), cell("failed", terminal_reason_code="rate_limited",
                                                  terminal_reason_message="Pixiv 请求频率受限"), [], NOW)
    assert job["error"] == {"code": "quota_exceeded", "message": "Pixiv 请求频率受限", "retryable": True,
                            "detail": {"internal_code": "rate_limited"}}
    job = project_job(slot(status="failed"), cell("failed"), [], NOW)
    assert job["error"] == {"code": "internal_error", "retryable": False}
    assert "result" not in job


def test_a_slot_without_its_cell_is_a_500():
    with pytest.raises(ProtocolError) as info:
        project_job(slot(), None, [], NOW)
    assert (info.value.status, info.value.body()) == (500, {"error": {
        "code": "internal_error", "message": "internal error", "retryable": False,
        "detail": {"reason": "job_cell_missing", "job_id": "plan@manual-k"}}})


def test_events_url_keeps_one_path_segment():
    assert events_url("p@manual-a/b c") == "/jobs/p%40manual-a%2Fb%20c/events"


# -- events -----------------------------------------------------------------------------------


def test_event_ids_round_trip_and_reject_anything_else():
    assert event_id(1_790_481_174_570, 3) == "evt-1790481174570-3"
    assert parse_event_id("evt-1790481174570-3") == (1_790_481_174_570, 3)
    for bad in ("evt-1-x", "evt--1", "evt-1-2-3", "EVT-1-2", " evt-1-2", 12, None):
        assert parse_event_id(bad) is None


def test_implied_events_follow_the_job():
    queued = project_job(slot(started_at=None), cell("pending"), [], NOW)
    assert [(e.kind, e.at) for e in implied_events(queued)] == [("job.requested", 1_000)]
    done = project_job(slot(status="success"), cell("submitted", work_id="1"), [], NOW)
    assert [(e.kind, e.at) for e in implied_events(done)] == [
        ("job.requested", 1_000), ("job.execution_started", 2_000), ("job.outcome_succeeded", 3_000)]
    gone = project_job(slot(started_at=None), cell("failed", terminal_reason_code="queued_too_long"), [], NOW)
    assert [e.kind for e in implied_events(gone)] == ["job.requested", "job.outcome_expired"]


def test_event_bodies():
    job = project_job(slot(status="failed"), cell("failed", terminal_reason_code="cancelled_by_consumer",
                                                  terminal_reason_message="任务已被取消"), [], NOW)
    accepted = build_event(job, "job.requested", 1_000, 1)
    assert accepted == {"protocol_version": "1", "event_id": "evt-1000-1", "job_id": "plan@manual-k",
                        "type": "job.accepted", "at": 1_000, "correlation_id": "corr",
                        "payload": {"detail": {"internal_kind": "job.requested"}}}
    cancelled = build_event(job, "job.outcome_cancelled", 3_000, 2)
    assert cancelled["type"] == "job.cancelled"
    assert cancelled["payload"] == {"detail": {"internal_kind": "job.outcome_cancelled"}, "job": job,
                                    "error": {"code": "cancelled_by_consumer", "message": "任务已被取消",
                                              "retryable": False, "detail": {"internal_code": "cancelled_by_consumer"}}}
    for body in (accepted, cancelled):
        validate("Event", body)
    assert build_event(job, "execution.summary", 1, 1) is None  # internal only


def test_event_query_and_ack_body_rules():
    assert parse_event_query(None) == (None, False)
    assert parse_event_query({"after": "evt-1-1", "unacked": "true"}) == ("evt-1-1", True)
    assert parse_event_query({"unacked": "1"}) == (None, True)
    for off in ("0", "false", ""):
        assert parse_event_query({"unacked": off}) == (None, False)
    for bad, field in (({"after": ""}, "after"), ({"unacked": "yes"}, "unacked"), ({"unacked": "TRUE"}, "unacked")):
        with pytest.raises(ProtocolError) as info:
            parse_event_query(bad)
        assert info.value.body()["error"]["detail"] == {"field": field}
    assert parse_ack_body({"ack_through": "evt-1-1", "x": 1}) == "evt-1-1"
    for bad in (None, [], "evt-1-1", {}, {"ack_through": ""}, {"ack_through": "  "}, {"ack_through": 5}):
        with pytest.raises(ProtocolError) as info:
            parse_ack_body(bad)
        assert info.value.status == 400 and info.value.code == "invalid_params"
