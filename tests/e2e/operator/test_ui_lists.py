"""The operator page shows the whole ledger (issue 26): every slot by trigger (scheduled, refetch,
job), filtered and paged; the jobs with their events, callbacks and cancel state; every dead row
(delivery, notification, job callback) with its last error; a live page reloads itself with a
``<meta http-equiv="refresh">`` (no script). Through the real trigger handler, as a browser reaches
it (login form, session cookie), reading the rendered tables as a person would."""

from __future__ import annotations

import json

from support.cli import pixivflow
from conftest import JOBS_TOKEN
from support.jobs import PLAN, Receiver, call, jobs_runtime, post_job, task
from support.ui import get, login

from pixivflow.domain.outbox import OutboxRow

JOB = f"{PLAN}@manual-job-key-1"
CANCELLED_JOB = f"{PLAN}@manual-job-key-2"
NOTICE = f"notification:{PLAN}@2026-12-01T0800:summary"
REFRESH = '<meta http-equiv="refresh" content="5">'


def _ledger(make_runtime, downstream, receiver):
    """A cron fire, a refetch, a job that ran, a job cancelled while queued, and a dead notification.
    The review route answers 404 (every delivery dies) and the consumer's callback URL too."""
    from conftest import ms

    downstream.state.responder = lambda req: (404, {"error": "no such board"})
    rt = jobs_runtime(make_runtime)
    assert post_job(rt, task(callback_url=receiver.url))[0] == 202
    rt.settle()
    assert post_job(rt, task("job-key-2"))[0] == 202
    assert call(rt, "POST", f"/jobs/{CANCELLED_JOB}/cancel")[0] == 200
    request_id = "3f2b8c1e-5d4a-4b6f-9a1e-2c3d4e5f6a7b"
    status, _ = rt.http("POST", "/internal/targets/cats/refetch", {"requestId": request_id}, token=JOBS_TOKEN)
    assert status in (200, 202)
    rt.settle()
    rt.clock.advance(60_000)
    rt.fire(PLAN, ms("2026-11-30T23:00:00Z"))
    rt.settle()
    rows, at = rt.wiring.outbox_rows, rt.clock.now_ms()
    rows.enqueue(OutboxRow(kind="notification", key=NOTICE, target="review", payload={"text": "summary"},
                           next_attempt_at=at, created_at=at, updated_at=at, max_attempts=3))
    rows.settle(rows.claim(rows.get("notification", NOTICE), "w1", at, 120_000), "w1", at, status="dead",
                error="remote_4xx: HTTP 410 消息已删除")
    return rt, f"{PLAN}@manual-{request_id}"


def test_every_slot_by_trigger_is_listed_and_filters_by_schedule_status_and_trigger(make_runtime, downstream):
    with Receiver(default=404) as receiver:
        rt, refetch_slot = _ledger(make_runtime, downstream, receiver)
        cookie = login(rt)
        page = get(rt, "/ui/slots", cookie=cookie)
        assert page.status == 200
        [listed] = page.tables
        assert listed[0] == ["Occurrence", "Status", "Trigger", "Schedule", "Local time", "UTC", "Took", "Cells", "Reasons",
                             "Last error"]
        kinds = {row[0]: row[2] for row in listed[1:]}
        assert kinds == {f"{PLAN}@2026-12-01T0800": "scheduled", refetch_slot: "refetch", JOB: "job",
                         CANCELLED_JOB: "job"}
        # the same slots `pixivflow slots list` prints
        cli = pixivflow("slots", "list", "--json", now=rt.clock.now_ms())
        assert cli.code == 0 and set(kinds) == {r["slotId"] for r in json.loads(cli.out)}

        jobs_only = get(rt, "/ui/slots", cookie=cookie, query={"trigger": "job"})
        assert sorted(row[0] for row in jobs_only.tables[0][1:]) == sorted([JOB, CANCELLED_JOB])
        refetches = get(rt, "/ui/slots", cookie=cookie, query={"trigger": "refetch", "schedule": PLAN})
        assert [row[0] for row in refetches.tables[0][1:]] == [refetch_slot]
        scheduled = get(rt, "/ui/slots", cookie=cookie, query={"trigger": "scheduled"})
        assert [row[0] for row in scheduled.tables[0][1:]] == [f"{PLAN}@2026-12-01T0800"]
        failed = {row[0] for row in get(rt, "/ui/slots", cookie=cookie, query={"status": "failed"}).tables[0][1:]}
        assert CANCELLED_JOB in failed and all(
            row[1] == "failed" for row in get(rt, "/ui/slots", cookie=cookie, query={"status": "failed"}).tables[0][1:])
        assert 'selected>job</option>' in jobs_only.body  # the form shows the filter in force

        for field, value in (("trigger", "cron"), ("status", "<b>"), ("page", "0"), ("page", "x")):
            refused = get(rt, "/ui/slots", cookie=cookie, query={field: value})
            assert refused.status == 400
            assert f"{field}:" in refused.text() and "<b>" not in refused.body


def test_the_list_is_paged_by_its_older_link(make_runtime, downstream, monkeypatch):
    import html
    import re
    from urllib.parse import parse_qs

    from pixivflow.http import ui_pages

    with Receiver(default=404) as receiver:
        rt, _ = _ledger(make_runtime, downstream, receiver)
        monkeypatch.setattr(ui_pages, "PAGE_SIZE", 3)
        cookie = login(rt)
        first = get(rt, "/ui/slots", cookie=cookie, query={"trigger": ""})
        assert len(first.tables[0]) == 4 and "3 occurrence(s) on this page of 3 read" in first.text()
        [older] = re.findall(r'<a href="/ui/slots\?([^"]+)">older occurrences</a>', first.body)
        second = get(rt, "/ui/slots", cookie=cookie, query={k: v[0] for k, v in parse_qs(html.unescape(older)).items()})
        assert second.status == 200 and len(second.tables[0]) == 2 and "older occurrences" not in second.text()
        assert '<a href="/ui/slots">newest</a>' in second.body
        seen = [row[0] for row in first.tables[0][1:] + second.tables[0][1:]]
        assert len(set(seen)) == 4
        filtered = get(rt, "/ui/slots", cookie=cookie, query={"trigger": "job"})
        assert "the filters leave the others out" in filtered.text()
        for bad in ({"page": "2"}, {"before": "x"}, {"before": "123#" + "a"}):
            refused = get(rt, "/ui/slots", cookie=cookie, query=bad)
            assert refused.status == 400 and f"{next(iter(bad))}:" in refused.text(), bad


def test_the_jobs_page_shows_status_events_callbacks_and_cancel_state(make_runtime, downstream):
    with Receiver(default=404) as receiver:
        rt, _ = _ledger(make_runtime, downstream, receiver)
        cookie = login(rt)
        page = get(rt, "/ui/jobs", cookie=cookie)
        assert page.status == 200
        [jobs] = page.tables
        assert jobs[0] == ["Job", "Status", "Idempotency key", "Created", "Updated", "Attempt", "Cancelled", "Error"]
        by_id = {row[0]: row for row in jobs[1:]}
        assert set(by_id) == {JOB, CANCELLED_JOB}
        assert by_id[CANCELLED_JOB][1:3] == ["cancelled", "job-key-2"] and by_id[CANCELLED_JOB][6] == "yes"
        assert by_id[JOB][2] == "job-key-1" and by_id[JOB][6] == "no" and by_id[JOB][5] == "1"
        assert REFRESH not in page.body  # nothing live

        one = get(rt, f"/ui/jobs/{JOB}", cookie=cookie)
        assert one.status == 200
        facts = dict(row for row in one.tables[0][1:])
        assert facts["idempotency key"] == "job-key-1" and facts["cancelled"] == "no"
        events = one.tables[1]
        assert events[0] == ["At", "Type", "Event id", "Callback", "Attempts", "Callback error"]
        callbacks = [row for row in events[1:] if row[3] == "dead"]
        assert [row[1] for row in callbacks][:2] == ["job.accepted", "job.started"]
        assert {row[5] for row in callbacks} == {"remote_4xx: HTTP 404"}
        cancelled = get(rt, f"/ui/jobs/{CANCELLED_JOB}", cookie=cookie)
        assert dict(row for row in cancelled.tables[0][1:])["cancelled"] == "yes"
        missing = get(rt, "/ui/jobs/%3Cb%3Enope", cookie=cookie)
        assert missing.status == 404 and "&lt;b&gt;nope" in missing.body and "<b>nope" not in missing.body
        assert get(rt, f"/ui/jobs/{JOB}").status == 303  # no session: the login page


def test_every_dead_row_of_the_three_kinds_is_listed_with_its_last_error(make_runtime, downstream):
    with Receiver(default=404) as receiver:
        rt, _ = _ledger(make_runtime, downstream, receiver)
        page = get(rt, "/ui/dead", cookie=login(rt))
        assert page.status == 200
        [dead] = page.tables  # one table: each dead row with its Redrive form beside it
        assert dead[0] == ["Kind", "Key", "Target", "Occurrence", "Attempts", "Died at", "Error", "Redrive"]
        assert all(row[7] == "Redrive" for row in dead[1:])
        kinds = {row[0] for row in dead[1:]}
        assert kinds == {"delivery", "notification", "event_callback"}
        cli = json.loads(pixivflow("outbox", "list", "--dead", "--json", now=rt.clock.now_ms()).out)
        assert sorted((row[0], row[1]) for row in dead[1:]) == sorted((r["kind"], r["key"]) for r in cli)
        errors = {row[1]: row[6] for row in dead[1:]}
        assert errors[NOTICE] == "remote_4xx: HTTP 410 消息已删除"
        assert {errors[r["key"]] for r in cli if r["kind"] == "event_callback"} == {"remote_4xx: HTTP 404"}
        assert {errors[r["key"]] for r in cli if r["kind"] == "delivery"} == {
            'delivery endpoint HTTP 404: {"error":"no such board"}'}


def test_a_page_showing_a_live_occurrence_reloads_itself_without_script(make_runtime, downstream):
    from conftest import ms

    rt = jobs_runtime(make_runtime)
    rt.clock.advance(60_000)
    rt.fire(PLAN, ms("2026-11-30T23:00:00Z"))  # admitted; nothing executed yet
    cookie = login(rt)
    live = get(rt, "/ui/slots", cookie=cookie)
    assert live.tables[0][1][1] in ("pending", "running") and REFRESH in live.body
    assert "<script" not in live.body and "script-src" not in live.headers["content-security-policy"]
    rt.settle()
    done = get(rt, "/ui/slots", cookie=cookie)
    assert done.tables[0][1][1] not in ("pending", "running") and REFRESH not in done.body


def test_the_candidate_report_reads_as_text_not_json(make_runtime, downstream):
    from support.cli import PARTIAL, known_ledger

    rt = known_ledger(make_runtime, downstream)
    page = get(rt, f"/ui/slots/{PARTIAL}", cookie=login(rt))
    cells = next(t for t in page.tables if t[0][:2] == ["Target", "Status"])
    assert {row[0]: row[8] for row in cells[1:]} == {
        "cats": "scanned 1 of at most 5; source returned 20, selected 20, rejected 0; "
                "passed over work 111356: duplicate already delivered or pending on route review",
        "nothing": "scanned 0 of at most 5; source returned 0, selected 0, rejected 0"}
    assert '{"' not in page.body  # no raw JSON left


def test_every_part_of_a_report_is_shown_and_escaped():
    from pixivflow.http.ui_pages import candidate_report

    report = {"bound": 5, "attempted": 2, "outages": ["pixiv_auth_failure"], "truncated": 3,
              "skipped": [{"code": "unavailable", "workId": "9", "reason": "<img src=x> 作品已删除", "retryable": True}],
              "supply": {"fetched": 40, "selected": 12, "rejected": 28,
                         "reasons": [{"code": "r18", "count": 20}, {"code": "ai_generated", "count": 8}]}}
    html = candidate_report(report)
    assert html == ('<ul class="report"><li>scanned 2 of at most 5</li><li>source returned 40, selected 12, rejected 28</li>'
                    "<li>rejected by rule: r18 × 20, ai_generated × 8</li><li>passed over work 9: <strong>unavailable</strong> "
                    "(retryable) &lt;img src=x&gt; 作品已删除</li><li>3 more work(s) passed over, not kept</li>"
                    "<li>outages: pixiv_auth_failure</li></ul>")


def test_the_history_strip_and_the_daily_chart_are_server_rendered_svg(make_runtime, downstream):
    import re

    from support.cli import PARTIAL, STALLED, SUCCESS, known_ledger, stall

    rt = known_ledger(make_runtime, downstream)
    stall(rt)
    page = get(rt, "/ui", cookie=login(rt))
    assert page.status == 200 and "<script" not in page.body
    strips = dict(re.findall(r"<dt>([^<]+)</dt><dd>(<svg.*?</svg>)</dd>", page.body))
    assert set(strips) == {"morning-tokyo", "evening-berlin", "noon-flaky", "mixed", "solo"}

    def squares(svg):
        return re.findall(r'(?:<a href="([^"]+)">)?<rect [^>]*fill="(#[0-9a-f]{6})" data-status="([a-z_]+)"[^>]*><title>([^<]+)'
                          r"</title></rect>", svg)

    tokyo = squares(strips["morning-tokyo"])
    assert len(tokyo) == 30  # the last 30 fires, oldest first
    assert tokyo[-1] == (f"/ui/slots/{SUCCESS}", "#1f8a4c", "success", "2026-12-01 08:00 JST: success")
    # no slot and never recorded missed (the ledger was written before any sweep watched): no data, no link
    assert tokyo[0] == ("", "#ffffff", "no_data", "2026-11-02 08:00 JST: no_data")
    assert squares(strips["solo"])[-1][:3] == (f"/ui/slots/{STALLED}", "#c0392b", "failed")
    assert squares(strips["mixed"])[-1][:3] == (f"/ui/slots/{PARTIAL}", "#b7791f", "partial")
    assert {s[2] for s in squares(strips["evening-berlin"])} == {"no_data"}

    chart = re.search(r'<svg class="chart".*?</svg>', page.body).group(0)
    bars = re.findall(r'data-day="([0-9-]+)" data-status="([a-z_]+)" data-count="(\d+)"', chart)
    assert bars == [("2026-11-30", "success", "1"), ("2026-11-30", "partial", "1"), ("2026-11-30", "failed", "1")]
    assert chart.count("<text ") == 14 and ">11-30</text>" in chart and ">11-17</text>" in chart
