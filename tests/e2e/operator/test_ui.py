"""The read-only operator page ``/ui`` through the real trigger handler (issue 12).

The same known ledger as the CLI tests (a success, a partial, a stalled occurrence). The page is
reached the way a browser reaches it: a login form POST with the trigger token answers a session
cookie (HttpOnly, Secure, SameSite=Strict, an HMAC-signed expiry, never the token); every page is
server-rendered HTML with no script and no external asset. Assertions read the rendered tables
as a person would see them."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
from support.builders import fan_out_with_a_dead_second_route
from support.cli import PARTIAL, STALLED, SUCCESS, T0_ISO, known_ledger, stall
from conftest import JOBS_TOKEN, TRIGGER_TOKEN
from support.ui import FORM, Page, get, login, post

from pixivflow.local.harness import http_event
from pixivflow.local.lambda_context import context_for


def fragments(token: str) -> set[str]:
    """8-character pieces of a token (digit-only pieces are left out: log lines carry account ids)."""
    return {token[i:i + 8] for i in range(len(token) - 7) if not token[i:i + 8].isdigit()}


def assert_no_token(page: Page) -> None:
    text = page.body + json.dumps(page.headers) + json.dumps(page.cookies)
    assert not [f for t in (TRIGGER_TOKEN, JOBS_TOKEN) for f in fragments(t) if f in text]


# -- login and the session ------------------------------------------------------------------------------


def test_the_login_form_takes_the_token_once_and_answers_a_signed_session_cookie(make_runtime, downstream, logs):
    rt = known_ledger(make_runtime, downstream)
    form = get(rt, "/ui/login")
    assert form.status == 200 and form.headers["content-type"] == "text/html; charset=utf-8"
    assert '<form class="login" method="post" action="/ui/login">' in form.body
    assert "script" not in form.body and "http://" not in form.body and "https://" not in form.body  # nothing external
    csp = form.headers["content-security-policy"]
    assert csp.startswith("default-src 'none'; style-src 'sha256-") and "script-src" not in csp
    assert form.headers["cache-control"] == "no-store" and form.headers["x-frame-options"] == "DENY"

    wrong = post(rt, "/ui/login", "token=" + quote(TRIGGER_TOKEN + "x"))
    assert wrong.status == 401 and wrong.cookies == [] and "That is not the trigger token." in wrong.text()
    assert post(rt, "/ui/login", "token=" + quote(JOBS_TOKEN)).status == 401  # the jobs token opens nothing here

    page = post(rt, "/ui/login", f"token={quote(TRIGGER_TOKEN)}")
    assert (page.status, page.headers["location"]) == (303, "/ui")
    [cookie] = page.cookies
    value = cookie.split(";", 1)[0].split("=", 1)[1]
    expiry = (rt.clock.now_ms() + 8 * 3_600_000) // 1000
    assert re.fullmatch(rf"v2\.0\.{expiry}\.[A-Za-z0-9_-]{{43}}", value)  # epoch 0: no logout yet
    assert cookie == f"pixivflow_ui={value}; Path=/ui; Max-Age=28800; HttpOnly; Secure; SameSite=Strict"
    for answer in (form, wrong, page):
        assert_no_token(answer)
    lines, printed = logs()
    assert not [f for f in fragments(TRIGGER_TOKEN) if f in printed]
    outcomes = [line for line in lines if "http_status" in line and line.get("path", "").startswith("/ui")]
    assert [(line["event"], line["http_status"]) for line in outcomes] == [
        ("ui.page", 200), ("ui.login_refused", 401), ("ui.login_refused", 401), ("ui.login", 303)]


def test_every_page_wants_a_live_session(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    good = login(rt)
    value = good.split("=", 1)[1]
    forged = "pixivflow_ui=v2.0.9999999999." + value.rsplit(".", 1)[1]  # a later expiry under the old signature
    assert value.startswith("v2.0.")
    for path in ("/ui", "/ui/slots", f"/ui/slots/{SUCCESS}", "/ui/dead"):
        for cookie in (None, "pixivflow_ui=", "pixivflow_ui=garbage", forged, "other=1"):
            page = get(rt, path, cookie=cookie)
            assert (page.status, page.headers["location"]) == (303, "/ui/login"), (path, cookie)
            assert "Occurrence" not in page.text()
        assert get(rt, path, cookie=good).status == 200, path
    rt.clock.advance(8 * 3_600_000)  # the session ends after 8 hours
    assert get(rt, "/ui", cookie=good).status == 303
    assert get(rt, "/ui", cookie=login(rt)).status == 200


def test_logout_ends_the_session_server_side_and_the_old_cookie_gets_the_login_page(make_runtime, downstream):
    """Issue 21 item 10: the cookie is not stateless any more. Logout advances the ledger's session
    epoch, so the logged-out cookie -- and a copy of it anywhere else -- is sent to the login page."""
    rt = known_ledger(make_runtime, downstream)
    cookie, other_browser = login(rt), login(rt)
    assert get(rt, "/ui", cookie=cookie).status == 200 and get(rt, "/ui", cookie=other_browser).status == 200
    out = post(rt, "/ui/logout", None, cookie=cookie)
    assert (out.status, out.headers["location"]) == (303, "/ui/login")
    assert out.cookies == ["pixivflow_ui=; Path=/ui; Max-Age=0; HttpOnly; Secure; SameSite=Strict"]
    for stale in (cookie, other_browser):
        for path in ("/ui", "/ui/slots", f"/ui/slots/{SUCCESS}", "/ui/dead"):
            page = get(rt, path, cookie=stale)
            assert (page.status, page.headers["location"]) == (303, "/ui/login"), path
    form = get(rt, "/ui/login")
    assert form.status == 200 and "Trigger token" in form.text()
    assert rt.wiring.ledger.ui_session_epoch() == 1
    fresh = login(rt)
    assert fresh != cookie and get(rt, "/ui", cookie=fresh).status == 200
    assert get(rt, "/ui", cookie=cookie).status == 303  # a new login does not revive the old cookie
    # a logout without a live session ends nothing (a stale cookie cannot log the fresh one out)
    assert post(rt, "/ui/logout", None, cookie=cookie).status == 303
    assert rt.wiring.ledger.ui_session_epoch() == 1 and get(rt, "/ui", cookie=fresh).status == 200


def test_two_logouts_racing_advance_the_epoch_once(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    ledger = rt.wiring.ledger
    assert ledger.end_ui_sessions(0, 1) == 1
    assert ledger.end_ui_sessions(0, 2) == 1  # the loser finds the epoch already past the one it saw
    assert ledger.ui_session_epoch() == 1
    assert ledger.end_ui_sessions(1, 3) == 2 and ledger.ui_session_epoch() == 2
    assert ledger.end_ui_sessions(0, 4) == 2 and ledger.ui_session_epoch() == 2  # a late racer never winds it back


def test_rotating_the_token_ends_every_session_and_logout_clears_the_cookie(make_runtime, downstream, monkeypatch):
    rt = known_ledger(make_runtime, downstream)
    cookie = login(rt)
    out = post(rt, "/ui/logout", None)
    assert (out.status, out.headers["location"]) == (303, "/ui/login")
    assert out.cookies == ["pixivflow_ui=; Path=/ui; Max-Age=0; HttpOnly; Secure; SameSite=Strict"]
    monkeypatch.setenv("TRIGGER_TOKEN", "a-rotated-trigger-token-42")
    assert get(rt, "/ui", cookie=cookie).status == 303
    assert get(rt, "/ui", cookie=login(rt, "a-rotated-trigger-token-42")).status == 200
    monkeypatch.setenv("TRIGGER_TOKEN", "")
    disabled = get(rt, "/ui", cookie=cookie)
    assert disabled.status == 503 and "no trigger token is configured" in disabled.text()
    assert post(rt, "/ui/login", "token=x").status == 503


def test_the_login_form_refuses_other_bodies_in_html(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    assert post(rt, "/ui/login", json.dumps({"token": TRIGGER_TOKEN}), content_type="application/json").status == 415
    assert post(rt, "/ui/login", "token=" + "x" * 5000).status == 413
    assert post(rt, "/ui/login", "token=%ZZ&" * 3, b64=False).status == 401  # an unreadable escape is just a wrong token
    assert post(rt, "/ui/login", "not base64!", b64=False).status == 401
    event = http_event("POST", "/ui/login")
    event["headers"]["content-type"] = FORM
    event["body"], event["isBase64Encoded"] = "%%%", True
    bad = Page(rt.handlers["trigger"](event, context_for("trigger")))
    assert bad.status == 400 and bad.headers["content-type"].startswith("text/html")
    assert post(rt, "/ui/login", f"token={quote(TRIGGER_TOKEN)}", b64=True).status == 303  # API Gateway may base64 it


# -- the pages ---------------------------------------------------------------------------------------------


def test_the_overview_shows_schedules_with_next_fires_and_the_latest_occurrences(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    stall(rt)
    page = get(rt, "/ui", cookie=login(rt))
    assert page.status == 200
    schedules, latest = page.tables
    assert schedules[0] == ["Schedule", "Zone", "Cron", "State", "Targets", "Next fires (local = UTC)", "Actions"]
    assert schedules[1][:6] == ["morning-tokyo", "Asia/Tokyo", "0 8 * * *", "enabled", "3",
                                "2026-12-02 08:00 JST = 2026-12-01T23:00:00.000Z; 2026-12-03 08:00 JST = 2026-12-02T23:00:00.000Z; "
                                "2026-12-04 08:00 JST = 2026-12-03T23:00:00.000Z"]
    # The actions sit beside the schedule they act on: run it now, pause it, refetch each of its targets.
    assert all(f in schedules[1][6] for f in ("Run morning-tokyo now", "Pause morning-tokyo", "Refetch cats"))
    took = {row[0]: row.pop(5) for row in latest}  # how long each ran, beside its status
    assert took.pop("Occurrence") == "Took" and all(re.fullmatch(r"\d+ (s|min \d+ s)|-", t) for t in took.values()), took
    assert [row[0] for row in schedules[1:]] == ["morning-tokyo", "evening-berlin", "noon-flaky", "mixed", "solo"]
    assert latest == [
        ["Occurrence", "Status", "Trigger", "Local time", "UTC", "Cells", "Reasons", "Last error"],
        [STALLED, "failed", "cron", "2026-12-01 08:00 JST", "2026-11-30T23:00:00.000Z", "1 failed", "stalled_no_heartbeat",
         "执行中断，长时间没有进展"],
        [PARTIAL, "partial", "cron", "2026-12-01 08:00 JST", "2026-11-30T23:00:00.000Z", "1 no_candidate, 1 submitted",
         "no_candidate", "-"],
        [SUCCESS, "success", "cron", "2026-12-01 08:00 JST", "2026-11-30T23:00:00.000Z", "3 submitted", "-", "-"],
    ]
    # status colours
    assert f'<a href="/ui/slots/{STALLED}">{STALLED}</a></td><td><span class="st st-failed">failed</span>' in page.body
    assert '<span class="st st-partial">partial</span>' in page.body and '<span class="st st-success">success</span>' in page.body
    assert "No dead letters among these occurrences." in page.text()
    occurrences = get(rt, "/ui/slots", cookie=login(rt))  # the whole ledger, each slot's trigger kind named
    assert [[r[0], r[1], r[2], r[3]] for r in occurrences.tables[0][1:]] == [
        [row[0], row[1], "scheduled", row[0].split("@")[0]] for row in latest[1:]]
    only = get(rt, "/ui/slots", cookie=login(rt), query={"schedule": "mixed"})
    assert [row[0] for row in only.tables[0][1:]] == [PARTIAL]
    jump = get(rt, "/ui/slots", cookie=login(rt), query={"id": SUCCESS})
    assert (jump.status, jump.headers["location"]) == (303, f"/ui/slots/{SUCCESS}")
    assert get(rt, "/ui/slots", cookie=login(rt), query={"schedule": "<x>"}).status == 400


def test_a_running_occurrence_is_listed_from_the_active_index(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)  # solo still running on an expired lease
    page = get(rt, "/ui", cookie=login(rt))
    rows = page.tables[1]
    assert rows[1][:2] == [STALLED, "running"] and '<span class="st st-running">running</span>' in page.body


@pytest.mark.parametrize("slot_id", [SUCCESS, PARTIAL, STALLED])
def test_one_occurrence_shows_cells_deliveries_acks_and_events_on_a_timeline(make_runtime, downstream, slot_id):
    rt = known_ledger(make_runtime, downstream)
    stall(rt)
    page = get(rt, f"/ui/slots/{quote(slot_id, safe='@')}", cookie=login(rt))
    assert page.status == 200
    by_header = {t[0][0] + "/" + t[0][1]: t for t in page.tables}
    facts, cells, events = by_header["Field/Value"], by_header["Target/Status"], by_header["At/Kind"]
    deliveries = by_header.get("Target/Route", [])
    timeline = re.findall(r"<li><time>(.*?)</time> <strong>(.*?)</strong> (.*?)</li>", page.body)
    took, retry = [row.pop(4) for row in cells], [row.pop() for row in cells]  # how long each ran; a failed cell's retry
    assert (took[0], retry[0]) == ("Took", "Retry") and all(re.fullmatch(r"\d+ (s|min \d+ s)|-", t) for t in took[1:])
    assert [r for r, row in zip(retry[1:], cells[1:]) if row[1] == "failed"] == ["RetryRetry relaxed"] * (slot_id == STALLED)
    assert all(r == "-" for r, row in zip(retry[1:], cells[1:]) if row[1] != "failed")
    assert cells[0] == ["Target", "Status", "Work", "Attempts", "Lease", "Reason", "Last error", "Candidate report"]
    assert "no notifications" in page.text()
    assert events[1][1:3] == ["execution.summary", "-"]
    if slot_id == SUCCESS:
        assert dict(r for r in facts[1:])["status"] == "success"
        assert [row[:6] for row in cells[1:]] == [["cats", "submitted", "illustration 111356", "1", "-", "-"],
                                                  ["landscape", "submitted", "illustration 110498", "1", "-", "-"],
                                                  ["ranking-daily", "submitted", "illustration 111126", "1", "-", "-"]]
        assert [row[:8] for row in deliveries[1:]] == [
            ["cats", "review", "111356", "delivered", "done", "1/12", "accepted", "r-cats pending_review"],
            ["landscape", "review", "110498", "delivered", "done", "1/12", "accepted", "r-landscape pending_review"],
            ["ranking-daily", "review", "111126", "delivered", "done", "1/12", "accepted", "r-ranking-daily pending_review"]]
        assert deliveries[1][10] == f"pixivflow:review:illustration:111356:{SUCCESS}:cats"
        assert ("2026-11-30T23:00:02.000Z", "delivery cats -&gt; review", "ACK accepted (r-cats pending_review)") in timeline
        assert timeline[-1] == ("2026-11-30T23:00:02.000Z", "slot", "success")
    elif slot_id == PARTIAL:
        assert dict(r for r in facts[1:])["outcome"] == "partial (business status partial_success)"
        assert [row[:6] for row in cells[1:]] == [["cats", "submitted", "illustration 111299", "1", "-", "-"],
                                                  ["nothing", "no_candidate", "-", "1", "-", "the source answered and no new work qualified no_candidate"]]
        assert cells[2][6] == "no eligible candidate found after scanning 0 candidate(s): the source returned no works"
        assert '<span class="st st-no_candidate">no_candidate</span>' in page.body
        assert len(deliveries) == 2
    else:
        facts = dict(r for r in facts[1:])
        assert (facts["status"], facts["last error"]) == ("failed", "执行中断，长时间没有进展")
        assert facts["outcome"] == "failed (business status failed, alertable)"
        assert [row[:6] for row in cells[1:]] == [["cats", "failed", "-", "1", "-", "the run stopped making progress stalled_no_heartbeat"]]
        assert deliveries == []  # "no delivery intents"
        assert "no delivery intents" in page.text()
        assert timeline[-3:] == [
            ("2026-11-30T23:16:00.000Z", "cell cats", "failed [stalled_no_heartbeat] 执行中断，长时间没有进展"),
            ("2026-11-30T23:16:00.000Z", "event", "execution.summary"),
            ("2026-11-30T23:16:00.000Z", "slot", "failed: 执行中断，长时间没有进展")]
    assert_no_token(page)


def test_an_unknown_slot_is_a_404_page_and_what_it_echoes_is_escaped(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    page = get(rt, "/ui/slots/%3Cscript%3Ealert(1)%3C%2Fscript%3E", cookie=login(rt))
    assert page.status == 404 and page.headers["content-type"].startswith("text/html")
    assert "<script>" not in page.body and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.body


def test_the_dead_letter_page_lists_dead_rows_of_the_latest_occurrences(make_runtime, downstream):
    from conftest import ms

    rt = make_runtime(T0_ISO, mutate=fan_out_with_a_dead_second_route(downstream))
    rt.fire("fan", ms(T0_ISO))
    rt.settle()
    cookie = login(rt)
    page = get(rt, "/ui/dead", cookie=cookie)
    assert page.status == 200
    assert page.tables[0] == [
        ["Kind", "Key", "Target", "Occurrence", "Attempts", "Died at", "Error", "Redrive"],
        ["delivery", "pixivflow:second:illustration:111356:fan@2026-12-01T0800:both", "second", "fan@2026-12-01T0800", "1/12",
         "2026-11-30T23:00:00.000Z", 'delivery endpoint HTTP 404: {"error":"no such board"}', "Redrive"]]
    assert "1 dead letter(s)" in get(rt, "/ui", cookie=cookie).text()
    view = get(rt, "/ui/slots/fan@2026-12-01T0800", cookie=cookie)
    assert '<span class="st st-dead">dead</span>' in view.body and "delivery_abandoned" in view.text()


def test_the_api_surface_and_its_document_are_unchanged_by_the_page(make_runtime, downstream):
    from pixivflow.http.openapi import openapi_document

    rt = known_ledger(make_runtime, downstream)
    assert not [p for p in openapi_document()["paths"] if p.startswith("/ui")]
    status, body = rt.http("PUT", "/ui")
    assert status == 405 and body == {"status": "error", "error": "method not allowed"}
    status, body = rt.http("GET", "/ui/nowhere")
    assert status == 404 and body == {"status": "error", "error": "not found"}


def test_every_page_route_is_deployed_on_the_trigger_function():
    from pixivflow.http import trigger_api
    from pixivflow.local.template import load_template

    events = load_template()["Resources"]["TriggerFunction"]["Properties"]["Events"].values()
    deployed = {(ev["Properties"]["Method"], ev["Properties"]["Path"]) for ev in events if ev["Type"] == "HttpApi"}
    pages = {("ANY", spec.rule.replace("<", "{").replace(">", "}")) for spec in trigger_api.shell.routes
             if not spec.in_schema}
    assert pages == {p for p in deployed if p[1].startswith("/ui")} and len(pages) == 11  # one ANY per path


def test_login_is_throttled_to_ten_wrong_tokens_a_minute_per_address_even_for_the_right_one(make_runtime, downstream,
                                                                                             logs):
    rt = make_runtime(T0_ISO)
    for _ in range(10):
        assert post(rt, "/ui/login", "token=" + quote(TRIGGER_TOKEN + "x")).status == 401
    throttled = post(rt, "/ui/login", f"token={quote(TRIGGER_TOKEN)}")  # the right one, after ten wrong
    assert throttled.status == 429 and throttled.cookies == []
    wait = int(throttled.headers["retry-after"])
    assert 1 <= wait <= 60 and f"try again in {wait} s" in throttled.body
    assert logs.events("ui.login_refused")[-1]["reason"] == "throttled"
    # another address is not held back by this one's tries
    event = http_event("POST", "/ui/login")
    event["requestContext"]["http"]["sourceIp"] = "198.51.100.7"
    event["headers"]["content-type"] = FORM
    event["body"] = f"token={quote(TRIGGER_TOKEN)}"
    assert Page(rt.handlers["trigger"](event, context_for("trigger"))).status == 303
    rt.clock.advance(wait * 1000)  # the next minute: the address may try again
    login(rt)
    # the count never passes the limit, however many containers count at once (a conditional ADD)
    sessions, minute = rt.wiring.sessions, rt.clock.now_ms() // 60_000
    assert [sessions.count_login_failure("203.0.113.9", minute, 3, rt.clock.now_ms()) for _ in range(5)] == [
        True, True, True, False, False]
    assert sessions.login_failures("203.0.113.9", minute) == 3
