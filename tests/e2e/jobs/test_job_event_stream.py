"""GET /jobs/{id}/events and POST /jobs/{id}/events/ack (spec §12.5, §13.22).

Each way a job can end (delivered, no candidate, the stall sweep, a cancel) leaves exactly one
terminal event, written by the path that ended it, before anyone reads the stream."""

from __future__ import annotations

import pytest

from support.jobs import PLAN, ack, cancel, events, get_job, jobs_runtime, post_job, task
from support.protocol_schema import error_body, validate
from support.queues import drop_executions

from pixivflow.domain.event_stream import AppendResult, StoredEvent

SLOT = f"{PLAN}@manual-job-key-1"
MIN = 60_000
TERMINAL = {"job.succeeded", "job.failed", "job.expired", "job.cancelled"}


def page(rt, job_id=SLOT, **query):
    status, body = events(rt, job_id, **query)
    assert status == 200, body
    validate("EventPage", body)
    return body


def stored_kinds(rt, job_id=SLOT):
    """What the stream holds right now, read without reconciling."""
    return [e.kind for e in rt.wiring.jobs.stream(job_id).events]


def check_stream(body):
    ids = [e["event_id"] for e in body["events"]]
    assert len(set(ids)) == len(ids)
    ats = [e["at"] for e in body["events"]]
    assert ats == sorted(ats)  # never backwards
    for n, event in enumerate(body["events"], start=1):
        assert event["event_id"] == f"evt-{event['at']}-{n}"
        assert event["job_id"] == body["job_id"] and event["correlation_id"] == "review-chain:1"
    assert sum(1 for e in body["events"] if e["type"] in TERMINAL) <= 1


def test_a_succeeded_job_has_accepted_started_and_one_succeeded_event(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    assert post_job(rt, task())[0] == 202
    assert stored_kinds(rt) == ["job.requested"]  # admission wrote it
    rt.settle()
    assert stored_kinds(rt) == ["job.requested", "job.execution_started", "job.outcome_succeeded"]  # the rollup did
    body = page(rt)
    check_stream(body)
    assert [e["type"] for e in body["events"]] == ["job.accepted", "job.started", "job.succeeded"]
    assert body["unacked"] == 3 and "next_after" not in body and body["server_time"] == rt.clock.now_ms()
    done = body["events"][-1]
    job = get_job(rt, SLOT)[1]
    assert done["payload"] == {"detail": {"internal_kind": "job.outcome_succeeded"}, "job": job, "result": job["result"]}
    assert done["at"] == job["updated_at"]
    # reading again adds nothing
    assert page(rt)["events"] == body["events"]


def test_a_job_without_a_candidate_ends_with_one_failed_event(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task(params={"query": {"tags": ["unicorns"]}}))
    rt.settle()
    assert stored_kinds(rt)[-1] == "job.outcome_failed"
    body = page(rt)
    check_stream(body)
    assert [e["type"] for e in body["events"]] == ["job.accepted", "job.started", "job.failed"]
    assert body["events"][-1]["payload"]["error"] == {
        "code": "no_candidate", "message": "没有找到合适的新作品", "retryable": True, "detail": {"internal_code": "no_candidate"}}


def test_a_job_never_started_ends_with_one_expired_event_from_the_sweep(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    drop_executions(rt)  # the message is lost and nobody ever claims the cell
    rt.clock.advance(31 * MIN)
    rt.sweep()
    assert stored_kinds(rt) == ["job.requested", "job.outcome_expired"]  # the sweep's close wrote it
    body = page(rt)
    check_stream(body)
    assert [e["type"] for e in body["events"]] == ["job.accepted", "job.expired"]
    assert body["events"][-1]["payload"]["error"]["code"] == "queued_too_long"
    assert get_job(rt, SLOT)[1]["status"] == "expired"
    rt.sweep()
    assert len(page(rt)["events"]) == 2


def test_a_cancelled_job_ends_with_one_cancelled_event(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    drop_executions(rt)
    assert cancel(rt, SLOT)[0] == 200
    assert stored_kinds(rt) == ["job.requested", "job.outcome_cancelled"]
    assert cancel(rt, SLOT)[0] == 200
    body = page(rt)
    check_stream(body)
    assert [e["type"] for e in body["events"]] == ["job.accepted", "job.cancelled"]


def test_a_terminal_event_missing_after_a_crash_is_written_by_the_next_read(make_runtime, downstream, monkeypatch):
    from pixivflow.services import job_events

    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    monkeypatch.setattr(job_events, "on_slot_terminal", lambda wiring, state: None)  # died right after the rollup
    rt.settle()
    assert stored_kinds(rt) == ["job.requested"]
    assert [e["type"] for e in page(rt)["events"]] == ["job.accepted", "job.started", "job.succeeded"]


# -- paging, after, unacked ----------------------------------------------------------------------


def add_progress(rt, count, job_id=SLOT):
    """Append ``count`` job.progressed events through the store (no writer emits them yet)."""
    store = rt.wiring.jobs
    stream = store.stream(job_id)
    for _ in range(count):
        event = StoredEvent(job_id, "job.progressed", stream.head_seq + 1, max(rt.clock.now_ms(), stream.head_ts))
        assert store.append(event, expected_head=stream.head_seq) == AppendResult.APPENDED
        stream = store.stream(job_id)
        rt.clock.advance(7)


def test_a_long_stream_is_paged_two_hundred_at_a_time(make_runtime):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    add_progress(rt, 250)
    first = page(rt)
    assert len(first["events"]) == 200 and first["unacked"] == 251
    assert first["events"][0]["type"] == "job.accepted" and first["events"][1]["type"] == "job.progress"
    assert first["next_after"] == first["events"][-1]["event_id"]
    second = page(rt, after=first["next_after"])
    assert len(second["events"]) == 51 and "next_after" not in second and second["unacked"] == 251
    ids = [e["event_id"] for e in first["events"] + second["events"]]
    assert len(set(ids)) == 251
    check_stream({"job_id": SLOT, "events": first["events"] + second["events"]})
    assert page(rt, after=second["events"][-1]["event_id"])["events"] == []


def test_after_that_is_not_an_event_of_this_job_replays_the_whole_stream(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    post_job(rt, task("other-key"))
    rt.settle()
    mine = page(rt)["events"]
    theirs = page(rt, f"{PLAN}@manual-other-key")["events"]
    for after in ("evt-1-1", "nonsense", theirs[1]["event_id"].replace("-2", "-9"), f"evt-{mine[0]['at'] + 1}-1"):
        assert page(rt, after=after)["events"] == mine, after
    assert [e["event_id"] for e in page(rt, after=mine[0]["event_id"])["events"]] == [e["event_id"] for e in mine[1:]]


def test_unacked_starts_after_the_durable_cursor_and_ignores_after(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    rt.settle()
    all_events = page(rt)["events"]
    assert page(rt, unacked="true")["events"] == all_events  # nothing acked yet
    ack(rt, SLOT, {"ack_through": all_events[0]["event_id"]})
    for flag in ("1", "true"):
        body = page(rt, unacked=flag, after=all_events[1]["event_id"])
        assert [e["event_id"] for e in body["events"]] == [e["event_id"] for e in all_events[1:]]
        assert body["unacked"] == 2
    for flag in ("0", "false", ""):
        assert len(page(rt, unacked=flag)["events"]) == 3
    assert page(rt, after=all_events[2]["event_id"])["unacked"] == 2  # counted from the cursor, not from after


@pytest.mark.parametrize("query,field", [({"after": ""}, "after"), ({"unacked": "yes"}, "unacked"),
                                         ({"unacked": "2"}, "unacked")])
def test_bad_event_queries_are_400(make_runtime, query, field):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    status, body = events(rt, SLOT, **query)
    assert status == 400
    error_body(body)
    assert body["error"]["code"] == "invalid_params" and body["error"]["detail"] == {"field": field}


def test_events_of_an_unknown_job_are_404(make_runtime):
    rt = jobs_runtime(make_runtime)
    status, body = events(rt, "nope")
    assert (status, body["error"]["message"], body["error"]["detail"]) == (404, "unknown job",
                                                                           {"reason": "unknown_job", "job_id": "nope"})


# -- ack ------------------------------------------------------------------------------------------


def acked(rt, through, job_id=SLOT):
    status, body = ack(rt, job_id, {"ack_through": through})
    assert status == 200, body
    validate("AckResult", body)
    assert body["server_time"] == rt.clock.now_ms()
    return body["acked"], body["unacked"]


def test_ack_is_monotonic_idempotent_and_never_changes_the_job(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    rt.settle()
    ids = [e["event_id"] for e in page(rt)["events"]]
    job_before = get_job(rt, SLOT)[1]
    assert acked(rt, ids[1]) == (2, 1)
    assert acked(rt, ids[1]) == (2, 1)  # idempotent
    assert acked(rt, ids[0]) == (2, 1)  # older: no-op
    assert acked(rt, ids[2]) == (3, 0)
    assert acked(rt, ids[0]) == (3, 0)
    assert get_job(rt, SLOT)[1] == job_before
    # a fully acknowledged terminal job still shows its terminal event on a plain read
    body = page(rt)
    assert body["events"][-1]["type"] == "job.succeeded" and body["unacked"] == 0
    assert page(rt, unacked="true")["events"] == []


def test_unknown_and_foreign_ids_are_no_ops(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    post_job(rt, task("other-key"))
    rt.settle()
    mine = [e["event_id"] for e in page(rt)["events"]]
    theirs = [e["event_id"] for e in page(rt, f"{PLAN}@manual-other-key")["events"]]
    acked(rt, mine[0])
    for through in ("evt-99999999999999-1", "junk", theirs[2].rsplit("-", 1)[0] + "-9", f"evt-0-{3}"):
        assert acked(rt, through) == (1, 2), through
    assert acked(rt, theirs[2], f"{PLAN}@manual-other-key") == (3, 0)
    assert acked(rt, mine[0]) == (1, 2)  # the other job's cursor moved, not mine


@pytest.mark.parametrize("body", [None, "not json", [], {"ack_through": ""}, {"ack_through": 5}, {}])
def test_bad_ack_bodies_are_400_and_leave_the_cursor(make_runtime, downstream, body):
    rt = jobs_runtime(make_runtime)
    post_job(rt, task())
    rt.settle()
    first = page(rt)["events"][0]["event_id"]
    acked(rt, first)
    status, answer = ack(rt, SLOT, body)
    assert status == 400
    error_body(answer)
    assert answer["error"]["code"] == "invalid_params"
    assert rt.wiring.jobs.stream(SLOT).cursor == tuple(int(x) for x in first.split("-")[1:])
    assert page(rt)["unacked"] == 2


def test_ack_of_an_unknown_job_is_404(make_runtime):
    rt = jobs_runtime(make_runtime)
    assert ack(rt, "nope", {"ack_through": "evt-1-1"})[0] == 404
