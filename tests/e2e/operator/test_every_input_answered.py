"""Every input is answered (docs/explanation/architecture.md, the HTTP edge): a number is ASCII
digits or a 400 naming it; an identifier holds nothing invisible or direction-changing; free text
that carries such a character reaches the page and the logs escaped, its ZWJ emoji intact; a key is
trimmed the same way on every route; an internationalised callback host is used in its ASCII form."""

from __future__ import annotations

import pytest

from support.jobs import call, jobs_runtime, post_job, task
from conftest import TRIGGER_TOKEN
from support.ui import get, login

RLO = "\u202e"


@pytest.mark.parametrize("page", ["\u00b2", "\u0663", "1\u00b2", "-1", "0", " 1"])
def test_a_page_number_that_is_not_ascii_digits_is_a_400_naming_it(make_runtime, page):
    rt = make_runtime()
    answer = get(rt, "/ui/slots", cookie=login(rt), query={"page": page})  # as API Gateway decodes it
    assert answer.status == 400 and "page" in answer.body


@pytest.mark.parametrize("bad", [RLO, "\u200b", "\ufeff", "\u2066", "\u200d"])
def test_an_idempotency_key_with_an_invisible_or_bidi_character_is_400_and_stores_nothing(make_runtime, bad):
    rt = jobs_runtime(make_runtime)
    status, body = post_job(rt, task(f"key{bad}1"))
    assert status == 400 and body["error"]["detail"]["field"] == "idempotency_key", body
    assert f"U+{ord(bad):04X}" in body["error"]["message"]
    assert rt.wiring.ledger.slot_ids() == []


def test_a_label_keeps_its_zwj_emoji_and_an_rlo_in_it_is_escaped_on_the_page_and_in_the_log(make_runtime, logs):
    rt = make_runtime()
    emoji = "\U0001f469\u200d\U0001f4bb"  # woman technologist: a ZWJ sequence
    answer = rt.http("POST", "/internal/schedules/morning-tokyo/run", {"label": f"dog{RLO}tac {emoji}"},
                     token=TRIGGER_TOKEN)
    assert answer[0] == 202, answer
    page = get(rt, f"/ui/slots/{answer[1]['schedule']['slotId']}", cookie=login(rt)).body
    at = page.find(RLO)
    assert at < 0, page[max(0, at - 200):at + 50]
    assert "dog&lt;U+202E&gt;tac" in page and emoji in page

    from pixivflow.observability import logger

    logs()  # what was printed so far
    logger.info("a free-text field", extra={"event": "test.free_text", "tag": f"dog{RLO}tac {emoji}"})
    [line], raw = logs()
    assert line["tag"] == f"dog{RLO}tac {emoji}"  # the same JSON value, decoded
    assert RLO not in raw and "dog\\u202etac" in raw and emoji in raw  # as written: escaped, the emoji whole


def test_get_jobs_by_key_trims_the_key_as_post_does_and_a_key_of_spaces_is_400(make_runtime):
    rt = jobs_runtime(make_runtime)
    status, body = post_job(rt, task("  spaced-key  "))
    assert status == 202, body
    status, found = call(rt, "GET", "/jobs", query={"idempotency_key": " spaced-key "})
    assert status == 200 and [j["job_id"] for j in found["jobs"]] == [body["job"]["job_id"]], found
    status, refused = call(rt, "GET", "/jobs", query={"idempotency_key": "   "})
    assert status == 400 and refused["error"]["detail"]["field"] == "idempotency_key"
