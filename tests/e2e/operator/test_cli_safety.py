"""The operator CLI shows what consumers and remote servers wrote, never acts on it (issue 21 item 9).

Job ids carry a consumer's idempotency key, error texts carry a remote server's answer: an ESC,
BEL, CSI (U+009B), NEL (U+0085) or a bidi override in them reaches the operator's terminal as
visible escapes, in every human table and in --json. ``jobs show`` works for a job in every status,
a queued one (whose cell is not written yet) included."""

from __future__ import annotations

import json
import unicodedata

from support.cli import pixivflow
from support.jobs import PLAN, get_job, jobs_runtime, post_job, task

from pixivflow.services import jobs as jobs_service

HOSTILE = "k\x1b[2J\x07\x9b31m\x85\u202e"  # clear screen, bell, CSI, NEL, right-to-left override
SHOWN = "k\\x1b[2J\\x07\\x9b31m\\x85\\u202e"


def raw_controls(text: str) -> list[str]:
    return [hex(ord(ch)) for ch in text if ch != "\n" and (unicodedata.category(ch) in ("Cc", "Cs")
                                                           or ch in "\u2028\u2029\u202e")]


def test_a_job_id_with_escape_sequences_is_shown_escaped_everywhere(make_runtime):
    rt = jobs_runtime(make_runtime)
    # Admitted through the service (the HTTP edge's own text rule is not what this test is about).
    job_id = jobs_service.submit(rt.wiring.job_control, task(key=HOSTILE)).job["job_id"]
    assert "\x1b" in job_id
    for argv in (("jobs", "show", job_id), ("slots", "show", job_id), ("slots", "list"), ("jobs", "show", job_id, "--json")):
        run = pixivflow(*argv, now=rt.clock.now_ms())
        assert run.code == 0, (argv, run.err)
        assert raw_controls(run.out) == [] and raw_controls(run.err) == [], argv
        if "--json" in argv:
            assert json.loads(run.out)["job"]["job_id"] == job_id  # the JSON still carries the exact id
        else:
            assert f"{PLAN}@manual-{SHOWN.lower()}" in run.out
    missing = pixivflow("jobs", "show", job_id + "-nope", now=rt.clock.now_ms())
    assert missing.code == 1 and raw_controls(missing.err) == [] and SHOWN.lower() in missing.err


def test_jobs_show_of_a_queued_job(make_runtime):
    rt = jobs_runtime(make_runtime)
    status, answer = post_job(rt, task())
    body = answer["job"]
    assert status == 202 and body["status"] == "queued"
    run = pixivflow("jobs", "show", body["job_id"], now=rt.clock.now_ms())
    assert (run.code, run.err) == (0, "")
    lines = run.out.splitlines()
    assert lines[:3] == [f"job {body['job_id']}", "  status      queued", "  type        candidate_search"]
    view = json.loads(pixivflow("jobs", "show", body["job_id"], "--json", now=rt.clock.now_ms()).out)
    assert view["job"] == get_job(rt, body["job_id"])[1]  # what GET /jobs/{jobId} answers


def test_a_dead_row_with_controls_in_its_key_and_error_is_shown_escaped(make_runtime):
    """A refetch key comes from a consumer, an error text from a remote server's answer."""
    from pixivflow.domain.outbox import OutboxRow

    rt = jobs_runtime(make_runtime)
    rows, now = rt.wiring.outbox_rows, rt.clock.now_ms()
    row, _ = rows.enqueue(OutboxRow(kind="notification", key=f"refetch-outcome:{HOSTILE}", target="review",
                                    payload={"text": "t"}, next_attempt_at=now, created_at=now, updated_at=now))
    claimed = rows.claim(row, "w", now, 120_000)
    rows.settle(claimed, "w", now, status="dead", error="remote_4xx: HTTP 404: gone\x1b]0;owned\x07")
    for argv in (("outbox", "list", "--dead"), ("outbox", "list", "--dead", "--json")):
        run = pixivflow(*argv, now=now)
        assert run.code == 0 and raw_controls(run.out) == [], argv
    human = pixivflow("outbox", "list", "--dead", now=now).out
    assert f"refetch-outcome:{SHOWN}" in human and "gone\\x1b]0;owned\\x07" in human
    assert json.loads(pixivflow("outbox", "list", "--dead", "--json", now=now).out)[0]["key"] == f"refetch-outcome:{HOSTILE}"
