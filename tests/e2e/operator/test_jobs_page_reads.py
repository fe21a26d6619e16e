"""/ui/jobs reads one page, however many jobs the ledger holds (http/ui_pages.jobs): one Query of
the JobsByCreated index and two batched reads of that page's slots and cells. About 160 jobs once
took 40-63 s (each read one by one, after a scan of every slot)."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from urllib.parse import unquote

import pytest

from support.ui import get, login, reads_of_one_page

from pixivflow.domain.model import Slot

T0 = 1_796_083_200_000


def _jobs(rt, first: int, last: int) -> None:
    for n in range(first, last):
        slot = Slot(slot_id=f"morning-tokyo@manual-job-{n:05d}", schedule_id="morning-tokyo", status="success",
                    target_ids=["cats"], created_at=T0 - 10_000_000 + n * 1_000, occurrence_at=T0,
                    occurrence_date="2026-12-01", occurrence_label="manual", timezone="Asia/Tokyo", trigger_source="manual",
                    slot_name="job", manual_request_id=f"job-{n:05d}", params={"query": {"tags": ["cats"]}})
        assert rt.wiring.ledger.create_slot(replace(slot))[1]


@pytest.mark.size("large")  # a thousand jobs written first
def test_the_jobs_page_reads_the_same_with_10_jobs_as_with_1000(make_runtime, monkeypatch):
    many = make_runtime("2026-12-01T00:00:00Z", backend="moto")
    _jobs(many, 0, 10)
    reads_few = reads_of_one_page(many, monkeypatch, "/ui/jobs")
    _jobs(many, 10, 1_000)
    reads_many = reads_of_one_page(many, monkeypatch, "/ui/jobs")
    queries = [c for c in reads_many if c[0] == "Query"]
    assert queries == [("Query", "JobsByCreated", 50)]  # one page of the index
    assert not any(c[0] == "Scan" for c in reads_many)
    assert [c for c in reads_many if c[0] == "BatchGetItem"] == [("BatchGetItem", None, 50), ("BatchGetItem", None, 50)]
    assert len(reads_many) == len(reads_few)  # the same calls, whatever the ledger holds
    page = get(many, "/ui/jobs", cookie=login(many))
    assert page.body.count('href="/ui/jobs/') == 50 and "morning-tokyo@manual-job-00999" in page.body
    [older] = re.findall(r'<a href="(/ui/jobs\?before=[^"]+)">older jobs</a>', page.body)
    second = get(many, html.unescape(older).replace("%23", "#").split("?", 1)[0], cookie=login(many),
                 query={"before": unquote(html.unescape(older).split("before=", 1)[1])})
    assert second.status == 200 and "morning-tokyo@manual-job-00949" in second.body
    at = second.body.find("manual-job-00950")  # the first page's last job is not repeated
    assert at < 0, second.body[at - 300:at + 100]


def test_a_jobs_cursor_that_is_not_one_the_page_wrote_is_a_400(make_runtime):
    rt = make_runtime("2026-12-01T00:00:00Z")
    for bad in ("x", "123#job", "0001796083200000", "0001796083200000#" + "j" * 401):
        page = get(rt, "/ui/jobs", cookie=login(rt), query={"before": bad})
        assert page.status == 400 and "before:" in page.body, bad


def test_jobs_reindex_lists_the_jobs_written_before_the_index(make_runtime):
    from support.cli import pixivflow

    rt = make_runtime("2026-12-01T00:00:00Z")
    _jobs(rt, 0, 3)
    for n in range(3):
        rt.wiring.ledger._call("update_item", TableName=rt.wiring.ledger._table,  # noqa: SLF001 (an old item)
                               Key={"pk": {"S": f"SLOT#morning-tokyo@manual-job-{n:05d}"}, "sk": {"S": "META"}},
                               UpdateExpression="REMOVE jobsPk, jobsSk")
    assert "no jobs yet" in get(rt, "/ui/jobs", cookie=login(rt)).body
    done = pixivflow("jobs", "reindex", now=rt.clock.now_ms())
    assert done.code == 0 and done.out == "3 job(s) added to the jobs index\n", done.err
    assert get(rt, "/ui/jobs", cookie=login(rt)).body.count('href="/ui/jobs/') == 3


def _slots(rt, first: int, last: int) -> None:
    for n in range(first, last):
        slot = Slot(slot_id=f"morning-tokyo@2026-10-01T{n:04d}", schedule_id="morning-tokyo", status="success",
                    target_ids=["cats", "landscape"], created_at=T0 - 10_000_000 + n * 1_000, occurrence_at=T0,
                    timezone="Asia/Tokyo", trigger_source="cron")
        assert rt.wiring.ledger.create_slot(replace(slot))[1]


@pytest.mark.size("large")  # three hundred slots written first
def test_the_occurrence_list_reads_the_same_with_10_slots_as_with_300(make_runtime, monkeypatch):
    rt = make_runtime("2026-12-01T00:00:00Z", backend="moto")
    _slots(rt, 0, 10)
    few = reads_of_one_page(rt, monkeypatch, "/ui/slots")
    _slots(rt, 10, 300)
    many = reads_of_one_page(rt, monkeypatch, "/ui/slots", {"status": "success"})
    assert [c for c in many if c[0] == "Query"] == [("Query", "SlotsByCreated", 50)]  # one page of the index
    assert not any(c[0] == "Scan" for c in many)
    assert [c for c in many if c[0] == "BatchGetItem"] == [("BatchGetItem", None, 50), ("BatchGetItem", None, 100)]
    assert [c[:2] for c in many] == [c[:2] for c in few]  # the same calls, whatever the ledger holds
    page = get(rt, "/ui/slots", cookie=login(rt))
    assert "morning-tokyo@2026-10-01T0299" in page.body and "morning-tokyo@2026-10-01T0249" not in page.body
    assert "older occurrences" in page.body


def _dead(rt, first: int, last: int) -> None:
    from pixivflow.domain.model import Intent

    for n in range(first, last):
        slot_id = f"morning-tokyo@2026-10-01T{n:04d}"
        rt.wiring.ledger.put_intent(Intent(
            slot_id=slot_id, target_id="cats", route="review", work_type="illustration", work_id=str(100_000 + n),
            idempotency_key=f"pixivflow:review:illustration:{100_000 + n}:{slot_id}:cats", status="failed",
            outbox_status="dead", attempts=1, max_attempts=12, next_attempt_at=T0, created_at=T0, updated_at=T0 + n,
            last_error="delivery endpoint HTTP 404: gone"))


@pytest.mark.size("large")  # three hundred dead rows written first
def test_the_dead_letter_page_reads_the_same_with_10_dead_rows_as_with_300(make_runtime, monkeypatch):
    import html
    import re

    rt = make_runtime("2026-12-01T00:00:00Z", backend="moto")
    _dead(rt, 0, 10)
    few = reads_of_one_page(rt, monkeypatch, "/ui/dead")
    _dead(rt, 10, 300)
    many = reads_of_one_page(rt, monkeypatch, "/ui/dead")
    assert [c for c in many if c[0] == "Query"] == [("Query", "DeadRows", 50)]
    assert [c for c in many if c[0] == "BatchGetItem"] == [("BatchGetItem", None, 50)]
    assert not any(c[0] == "Scan" for c in many) and [c[:2] for c in many] == [c[:2] for c in few]
    page = get(rt, "/ui/dead", cookie=login(rt))
    assert "T0299" in page.body and "T0249" not in page.body
    [older] = re.findall(r'<a href="/ui/dead\?before=([^"]+)">older dead letters</a>', page.body)
    second = get(rt, "/ui/dead", cookie=login(rt), query={"before": html.unescape(older)})
    assert second.status == 200 and "T0249" in second.body and "T0250" not in second.body
    for bad in ("x", "W10", "WyJhIiwgImIiLCAieCJd"):  # not base64 JSON; [] ; ["a","b","x"]: not a position
        refused = get(rt, "/ui/dead", cookie=login(rt), query={"before": bad})
        assert refused.status == 400 and "before:" in refused.text(), bad


def test_no_operator_page_scans_the_table(make_runtime, downstream, monkeypatch):
    """Every page reads items and index pages only: the trigger function needs no Scan grant."""
    from botocore.client import BaseClient
    from support.cli import known_ledger

    rt = known_ledger(make_runtime, downstream, backend="moto")
    _dead(rt, 0, 3)
    cookie = login(rt)
    real = BaseClient._make_api_call

    def make_api_call(client, operation, params):
        assert operation != "Scan", f"a page scanned the table: {params}"
        return real(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", make_api_call)
    slot = "morning-tokyo@2026-12-01T0800"
    for path, query in (("/ui", None), ("/ui/slots", None), ("/ui/slots", {"status": "failed"}), (f"/ui/slots/{slot}", None),
                        ("/ui/jobs", None), ("/ui/failures", None), ("/ui/dead", None), ("/ui/search", {"q": slot}),
                        ("/ui/search", {"q": "111356"})):
        page = get(rt, path, cookie=cookie, query=query)
        assert page.status in (200, 303), (path, page.status, page.body[:300])
