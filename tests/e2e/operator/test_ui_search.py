"""The search box of every operator page (http/ui_search.py): a slot id opens its occurrence, a job
id its job, a refetch request id the occurrence it opened, a Pixiv work id lists the occurrences
holding that work on each route; anything else is a 404 saying so, and a bad query a 400 naming q.
Each answer is a few item reads, never a scan."""

from __future__ import annotations

from support.cli import PARTIAL, SUCCESS, known_ledger
from support.ui import get, login

REQUEST_ID = "3f2b8c1e-5d4a-4b6f-9a1e-2c3d4e5f6a7b"


def test_a_slot_a_request_and_a_work_id_each_lead_to_what_they_name(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    cookie = login(rt)
    overview = get(rt, "/ui", cookie=cookie)
    assert '<form class="search" method="get" action="/ui/search">' in overview.body  # in every page's header

    found = get(rt, "/ui/search", cookie=cookie, query={"q": f"  {SUCCESS} "})
    assert (found.status, found.headers["location"]) == (303, f"/ui/slots/{SUCCESS}")

    cats = rt.wiring.ledger.load(SUCCESS).cells["cats"]
    works = get(rt, "/ui/search", cookie=cookie, query={"q": cats.work_id})
    assert works.status == 200
    [holders] = works.tables
    assert holders[0] == ["Route", "Work", "Occurrence", "Target"]
    assert ["review", f"illustration {cats.work_id}", SUCCESS, "cats"] in holders[1:]

    # A refetch's request id: its request item names the slot it opened.
    rt.wiring.ledger.claim_request_key(REQUEST_ID, {"kind": "refetch", "slotRef": PARTIAL, "targetId": "cats"})
    by_request = get(rt, "/ui/search", cookie=cookie, query={"q": REQUEST_ID.upper()})
    assert (by_request.status, by_request.headers["location"]) == (303, f"/ui/slots/{PARTIAL}")


def test_a_query_that_names_nothing_is_a_404_and_a_bad_one_a_400(make_runtime, downstream):
    rt = known_ledger(make_runtime, downstream)
    cookie = login(rt)
    for query in ("nope@2026", "99999999", PARTIAL + "x"):
        missing = get(rt, "/ui/search", cookie=cookie, query={"q": query})
        assert missing.status == 404 and "Nothing in the ledger is named" in missing.text(), query
    for bad in ("", "   ", "x" * 301, "a\x00b", "<b>\x07"):
        refused = get(rt, "/ui/search", cookie=cookie, query={"q": bad})
        assert refused.status == 400 and "q:" in refused.text() and "<b>" not in refused.body, repr(bad)
    assert get(rt, "/ui/search", query={"q": SUCCESS}).status == 303  # no session: the login page
    assert get(rt, "/ui/search", query={"q": SUCCESS}).headers["location"] == "/ui/login"


def test_a_job_id_opens_the_jobs_page(make_runtime, downstream):
    from dataclasses import replace

    from pixivflow.domain.model import Slot

    rt = known_ledger(make_runtime, downstream)
    job = Slot(slot_id="morning-tokyo@manual-job-7", schedule_id="morning-tokyo", status="pending", target_ids=["cats"],
               created_at=rt.clock.now_ms(), trigger_source="manual", manual_request_id="job-7", params={"q": 1})
    rt.wiring.ledger.create_slot(replace(job))
    found = get(rt, "/ui/search", cookie=login(rt), query={"q": job.slot_id})
    assert (found.status, found.headers["location"]) == (303, f"/ui/jobs/{job.slot_id}")
