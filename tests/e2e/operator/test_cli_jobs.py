"""`pixivflow jobs show <jobId>` (issue 12): the Job projection a consumer sees, its events and their
callbacks, read-only (showing a job materialises nothing)."""

from __future__ import annotations

import json

from support.cli import pixivflow
from support.jobs import PLAN, Receiver, get_job, jobs_runtime, post_job, task

from pixivflow.cli import render_job

JOB = f"{PLAN}@manual-job-key-1"
JOB_TEXT = """\
job morning-tokyo@manual-job-key-1
  status      succeeded
  type        candidate_search
  key         job-key-1
  correlation review-chain:1
  created     2026-11-30T22:59:00.000Z
  started     2026-11-30T22:59:00.000Z
  updated     2026-11-30T22:59:00.000Z
  heartbeat   2026-11-30T22:59:00.000Z
  deadline    2026-11-30T23:29:00.000Z
  attempt     1
  lease       none
  progress    done
  result      1 candidate(s): illustration 501; scanned 3

events
  AT                        TYPE           EVENT ID             CALLBACK
  2026-11-30T22:59:00.000Z  job.accepted   evt-1796079540000-1  dead 1/8 remote_4xx: HTTP 404
  2026-11-30T22:59:00.000Z  job.started    evt-1796079540000-2  dead 1/8 remote_4xx: HTTP 404
  2026-11-30T22:59:00.000Z  job.succeeded  evt-1796079540000-3  dead 1/8 remote_4xx: HTTP 404

timeline
  2026-11-30T22:59:00.000Z  slot                          admitted (manual)
  2026-11-30T22:59:00.000Z  cell cats                     pending
  2026-11-30T22:59:00.000Z  slot                          running
  2026-11-30T22:59:00.000Z  cell cats                     claimed (attempt 1)
  2026-11-30T22:59:00.000Z  delivery cats -> review       intent recorded (illustration 501)
  2026-11-30T22:59:00.000Z  delivery cats -> review       ACK accepted (r-1 pending_review)
  2026-11-30T22:59:00.000Z  cell cats                     submitted
  2026-11-30T22:59:00.000Z  event                         execution.summary
  2026-11-30T22:59:00.000Z  event                         job.requested (job.accepted, evt-1796079540000-1)
  2026-11-30T22:59:00.000Z  event                         job.execution_started (job.started, evt-1796079540000-2)
  2026-11-30T22:59:00.000Z  event                         job.outcome_succeeded (job.succeeded, evt-1796079540000-3)
  2026-11-30T22:59:00.000Z  callback evt-1796079540000-1  dead after 1 attempt(s): remote_4xx: HTTP 404
  2026-11-30T22:59:00.000Z  callback evt-1796079540000-2  dead after 1 attempt(s): remote_4xx: HTTP 404
  2026-11-30T22:59:00.000Z  callback evt-1796079540000-3  dead after 1 attempt(s): remote_4xx: HTTP 404
  2026-11-30T22:59:00.000Z  slot                          success
"""


def test_show_a_job_with_its_events_and_dead_callbacks(make_runtime):
    with Receiver(default=404) as receiver:
        rt = jobs_runtime(make_runtime)
        assert post_job(rt, task(callback_url=receiver.url))[0] == 202
        rt.settle()
        writes_before = rt.wiring.jobs.stream(JOB)
        run = pixivflow("jobs", "show", JOB, now=rt.clock.now_ms())
        assert (run.code, run.err) == (0, "")
        assert run.out == JOB_TEXT
        view = json.loads(pixivflow("jobs", "show", JOB, "--json", now=rt.clock.now_ms()).out)
        assert view["job"] == get_job(rt, JOB)[1]  # exactly what GET /jobs/{jobId} answers
        assert "\n".join(render_job(view)) + "\n" == JOB_TEXT
        assert [e["callback"]["target"] for e in view["events"] if e.get("callback")] == [receiver.url] * 3
        assert rt.wiring.jobs.stream(JOB) == writes_before  # read-only


def test_a_wrong_job_id_exits_1(make_runtime):
    rt = jobs_runtime(make_runtime)
    rt.fire(PLAN, rt.clock.now_ms() + 60_000)  # a scheduled slot is not a job
    for job_id in ("morning-tokyo@manual-nope", "morning-tokyo@2026-12-01T0800"):
        run = pixivflow("jobs", "show", job_id, now=rt.clock.now_ms())
        assert (run.code, run.out, run.err) == (1, "", f"pixivflow jobs show: no job {job_id!r} in the ledger\n")


def test_wait_returns_only_once_the_terminal_event_is_in_the_stream(make_runtime, monkeypatch):
    """The cell was settled and the job reads ``succeeded``, but ``job.succeeded`` is not stored yet
    (the API or the sweep writes it): ``--wait`` keeps reading until a consumer would see it too."""
    from pixivflow import cli
    from pixivflow.services import inspection

    rt = jobs_runtime(make_runtime)
    assert post_job(rt, task())[0] == 202
    rt.settle()
    real = inspection.show_job
    reads = []

    def show_job(reads_, job_id):
        view = real(reads_, job_id)
        reads.append(view)
        if len(reads) < 3:  # as if job.succeeded were not stored yet
            view = {**view, "events": [e for e in view["events"] if e.get("type") != "job.succeeded"]}
        return view

    monkeypatch.setattr(inspection, "show_job", show_job)
    monkeypatch.setattr(cli, "_sleep", lambda s: None)
    shown = pixivflow("jobs", "show", JOB, "--wait", "30", "--json", now=rt.clock.now_ms())
    assert shown.code == 0 and len(reads) == 3, shown.err
    assert any(e.get("type") == "job.succeeded" for e in json.loads(shown.out)["events"])


def test_a_negative_or_zero_limit_is_refused(make_runtime):
    rt = jobs_runtime(make_runtime)
    for limit in ("-3", "0"):
        refused = pixivflow("slots", "list", "--limit", limit, now=rt.clock.now_ms())
        assert refused.code == 2 and "--limit must be a whole number of at least 1" in refused.err
