"""The operator page's actions (issue 26): run a schedule now, refetch one target, redrive a dead
row, each a form POST behind the session and its per-session CSRF token, through the real trigger
handler. The token is read off the rendered page, as a browser would submit it; a POST without it
(or with another session's) is refused with 403 and changes nothing. Each action writes its audit
line; a redrive's is the CLI's (``outbox.redriven`` with the same fields)."""

from __future__ import annotations

import pytest
from support.cli import T0_ISO
from support.builders import SUMMARY_NOTICE, dead_notification
from support.ui import act, audit, csrf_of, get, login


NOTICE = SUMMARY_NOTICE
REQUEST_ID = "3f2b8c1e-5d4a-4b6f-9a1e-2c3d4e5f6a7b"


def test_run_now_needs_the_sessions_csrf_token(make_runtime, logs):
    rt = make_runtime(T0_ISO)  # 08:00 in Tokyo: morning-tokyo's fire is due now, no slot yet
    cookie = login(rt)
    overview = get(rt, "/ui", cookie=cookie)
    assert '<form class="act" method="post" action="/ui/act/run">' in overview.body
    assert "Run morning-tokyo now" in overview.text()
    token = csrf_of(overview)
    slot_id = "morning-tokyo@2026-12-01T0800"

    for forged in ({"schedule": "morning-tokyo"}, {"schedule": "morning-tokyo", "csrf": ""},
                   {"schedule": "morning-tokyo", "csrf": token[:-1] + ("A" if token[-1] != "A" else "B")}):
        refused = act(rt, "run", forged, cookie)
        assert refused.status == 403 and "csrf:" in refused.text()
    assert rt.wiring.ledger.get_slot(slot_id) is None  # nothing was admitted
    assert act(rt, "run", {"schedule": "morning-tokyo", "csrf": token}, None).status == 303  # no session: login
    assert len(audit(logs, "ui.csrf_refused")) == 3

    done = act(rt, "run", {"schedule": "morning-tokyo", "csrf": token}, cookie)
    assert done.status == 202 and f"occurrence {slot_id}" in done.text()
    slot = rt.wiring.ledger.get_slot(slot_id)
    assert slot is not None and slot.trigger_source == "http"
    [line] = audit(logs, "ui.run_requested")
    assert (line["operator"], line["schedule_id"], line["slot_id"], line["http_status"]) == ("ui", "morning-tokyo", slot_id,
                                                                                            202)
    unknown = act(rt, "run", {"schedule": "<nope>", "csrf": token}, cookie)
    assert unknown.status == 404 and "schedule:" in unknown.text() and "<nope>" not in unknown.body


def test_another_sessions_token_is_refused(make_runtime):
    rt = make_runtime(T0_ISO)
    first = login(rt)
    token = csrf_of(get(rt, "/ui", cookie=first))
    rt.clock.advance(1000)  # a later login: another session value
    second = login(rt)
    assert second != first
    assert act(rt, "run", {"schedule": "morning-tokyo", "csrf": token}, second).status == 403
    assert rt.wiring.ledger.get_slot("morning-tokyo@2026-12-01T0800") is None


def test_refetch_needs_the_csrf_token_and_one_form_is_one_refetch(make_runtime, logs):
    rt = make_runtime(T0_ISO)
    cookie = login(rt)
    overview = get(rt, "/ui", cookie=cookie)
    token = csrf_of(overview)
    assert "Refetch cats" in overview.text()
    slot_id = f"morning-tokyo@manual-{REQUEST_ID}"
    assert act(rt, "refetch", {"target": "cats", "requestId": REQUEST_ID}, cookie).status == 403
    assert rt.wiring.ledger.get_slot(slot_id) is None

    for _ in range(2):  # the same form submitted twice
        done = act(rt, "refetch", {"target": "cats", "requestId": REQUEST_ID, "csrf": token}, cookie)
        assert done.status == 202 and slot_id in done.text()
    slot = rt.wiring.ledger.get_slot(slot_id)
    assert slot is not None and slot.target_ids == ["cats"] and slot.trigger_source == "manual"
    lines = audit(logs, "ui.refetch_requested")
    assert [(line["operator"], line["target_id"], line["slot_id"]) for line in lines] == [("ui", "cats", slot_id)] * 2
    bad = act(rt, "refetch", {"target": "cats", "requestId": "not-a-uuid", "csrf": token}, cookie)
    assert bad.status == 400 and "requestId: requestId must be a UUID" in bad.text()


@pytest.mark.parametrize("with_token", [False, True])
def test_redrive_needs_the_csrf_token_and_writes_the_clis_audit_line(make_runtime, logs, with_token):
    rt = make_runtime(T0_ISO)
    dead_notification(rt)
    cookie = login(rt)
    page = get(rt, "/ui/dead", cookie=cookie)
    assert '<form class="act" method="post" action="/ui/act/redrive">' in page.body
    fields = {"kind": "notification", "key": NOTICE}
    if with_token:
        fields["csrf"] = csrf_of(page)
    answer = act(rt, "redrive", fields, cookie)
    row = rt.wiring.outbox_rows.get("notification", NOTICE)
    if not with_token:
        assert answer.status == 403 and row.status == "dead" and not audit(logs, "outbox.redriven")
        return
    assert answer.status == 200 and f"Re-armed notification row {NOTICE}" in answer.text()
    assert (row.status, row.attempts) == ("retry_wait", 0)
    [line] = audit(logs, "outbox.redriven")
    assert {k: line[k] for k in ("operator", "kind", "key", "previous_attempts", "previous_error", "sent")} == {
        "operator": "ui", "kind": "notification", "key": NOTICE, "previous_attempts": 1,
        "previous_error": "remote_4xx: HTTP 410", "sent": True}
    again = act(rt, "redrive", fields, cookie)  # not dead any more: refused, as the CLI refuses it
    assert again.status == 409 and "not dead: nothing to redrive" in again.text()
    assert audit(logs, "outbox.redrive_refused")[0]["reason"].endswith("not dead: nothing to redrive")
