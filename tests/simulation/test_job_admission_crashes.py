"""POST /jobs dies between any two of its writes (spec §12.3, §13.3, §13.21, §13.23).

Admission is an idempotent sequence: request item -> slot (its snapshot is the cell; the cell's
item is written by its first claim) -> execution message -> the ``job.requested`` event (with its
callback row). Whichever prefix a crash leaves, the consumer's
retry of the same Task, or the engine itself, completes it: one slot, one delivery, each event
once, and a declared callback still reaches the consumer."""

from __future__ import annotations

import pytest

from support.jobs import PLAN, Receiver, events, jobs_runtime, manual_slots, post_job, task

SLOT = f"{PLAN}@manual-job-key-1"
INTERNAL = {"error": {"code": "internal_error", "message": "internal error", "retryable": False, "detail": {}}}


def crash_once(obj, name):
    """``name`` dies once: before its write, or after it with ``name:after``."""
    name, _, when = name.partition(":")
    real = getattr(obj, name)
    state = {"armed": True}

    def wrapper(*args, **kwargs):
        if state["armed"]:
            state["armed"] = False
            if when == "after":
                real(*args, **kwargs)
            raise RuntimeError(f"process died in {name}")
        return real(*args, **kwargs)

    setattr(obj, name, wrapper)
    return state


@pytest.mark.parametrize("where,replay_status", [
    ("ledger.create_slot", 202),  # the request item exists, the slot does not: the retry creates it
    ("ledger.create_slot:after", 200),  # the slot exists, nothing was dispatched
    ("queues.send_execution", 200),  # slot and cell exist, the execution message never left
    ("jobs.append", 200),  # dispatched, but job.requested (and its callback row) not written
])
def test_the_retried_task_converges_whatever_prefix_the_crash_left(make_runtime, downstream, where, replay_status):
    with Receiver() as receiver:
        rt = jobs_runtime(make_runtime)
        owner, name = where.split(".")
        crash_once(getattr(rt.wiring, owner), name)
        body = task(callback_url=receiver.url)
        assert post_job(rt, body) == (500, INTERNAL)
        assert rt.wiring.ledger.get_request_key("job-key-1") is not None  # the identity was claimed first
        status, answer = post_job(rt, body)
        assert status == replay_status, answer
        assert answer["job"]["job_id"] == SLOT
        rt.settle()
        assert manual_slots(rt) == [SLOT]
        assert len(downstream.requests) == 1
        page = events(rt, SLOT)[1]
        assert [e["type"] for e in page["events"]] == ["job.accepted", "job.started", "job.succeeded"]
        assert sorted(receiver.event_types()) == ["job.accepted", "job.started", "job.succeeded"]


@pytest.mark.parametrize("where", ["ledger.create_slot:after", "queues.send_execution", "jobs.append"])
def test_without_a_retry_the_engine_completes_the_job_and_its_callbacks(make_runtime, downstream, where):
    """The consumer never retries: the sweep dispatches the cell (and writes its item), and the events
    (with the callback the Task declared, kept on its request item) follow the job."""
    with Receiver() as receiver:
        rt = jobs_runtime(make_runtime)
        owner, name = where.split(".")
        crash_once(getattr(rt.wiring, owner), name)
        assert post_job(rt, task(callback_url=receiver.url)) == (500, INTERNAL)
        rt.settle()
        assert len(downstream.requests) == 1
        assert sorted(receiver.event_types()) == ["job.accepted", "job.started", "job.succeeded"]
        assert [e["type"] for e in events(rt, SLOT)[1]["events"]] == ["job.accepted", "job.started", "job.succeeded"]


def test_a_crash_before_the_slot_leaves_nothing_the_engine_would_run(make_runtime, downstream):
    rt = jobs_runtime(make_runtime)
    crash_once(rt.wiring.ledger, "create_slot")
    assert post_job(rt, task())[0] == 500
    rt.settle()
    assert manual_slots(rt) == [] and downstream.requests == []
    # ... and the key stays bound to the same job: a retry with other params is still a conflict
    status, body = post_job(rt, task(params={"query": {"tags": ["dogs"]}}))
    assert (status, body["error"]["code"]) == (409, "idempotency_conflict")
