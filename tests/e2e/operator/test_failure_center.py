"""The Failure Center (docs/explanation/failure-center.md) through the real trigger handler: every
failed cell listed with its reason in words, its delivery rows and a retry of that one target; the
retry runs the target again in a manual occurrence of its schedule, once however often it is asked;
a relaxed retry widens the target's soft limits for that occurrence only; a page's reads are one
page's, whatever the ledger holds."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support.ui import act, audit, csrf_of, get, login, reads_of_one_page

from pixivflow.domain.failures import retry_request_id
from pixivflow.domain.model import Slot

FIRE = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
SLOT = "morning-tokyo@2026-12-01T0800"
BAD_PAYLOAD = (400, {"error": "bad payload"})


def one_target(scan_limit: int | None = None):
    def mutate(cfg):
        cfg["schedules"][0]["targetIds"] = ["cats"]
        if scan_limit is not None:
            next(t for t in cfg["targets"] if t["id"] == "cats")["candidateScanLimit"] = scan_limit

    return mutate


def failed_occurrence(make_runtime, downstream, *, scan_limit: int | None = None, backend: str | None = None):
    """The morning occurrence with its one cell failed: the review route refused the work (HTTP 400)."""
    downstream.queue(BAD_PAYLOAD)
    rt = make_runtime(FIRE, mutate=one_target(scan_limit), **({"backend": backend} if backend else {}))
    assert rt.fire("morning-tokyo", iso=FIRE)["slot_id"] == SLOT
    rt.settle()
    cell = rt.wiring.ledger.load(SLOT).cells["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("failed", "delivery_abandoned"), cell
    return rt


def row_of(page, slot_id: str = SLOT, target: str = "cats") -> list[str]:
    [failures] = [t for t in page.tables if t and t[0][:3] == ["Failed at (UTC)", "Occurrence", "Target"]]
    [row] = [r for r in failures[1:] if r[2] == target and r[1].startswith(slot_id)]
    return row


def test_a_failed_cell_is_listed_and_its_retry_runs_the_target_again_once(make_runtime, downstream, logs):
    rt = failed_occurrence(make_runtime, downstream)
    cookie = login(rt)
    page = get(rt, "/ui/failures", cookie=cookie)
    assert page.status == 200
    row = row_of(page)
    assert SLOT in row[1] and "scheduled" in row[1]
    assert "delivery_abandoned" in row[5] and "the delivery was abandoned" in row[5]
    assert "review:" in row[7] and "dead" in row[7] and "HTTP 400" in row[7]  # the route's row and its error
    assert "Retry" in row[8] and "Retry relaxed" in row[8]

    token = csrf_of(page)
    retry_slot = f"morning-tokyo@manual-{retry_request_id(SLOT, 'cats', 'normal')}"
    form = {"slot": SLOT, "target": "cats", "mode": "normal"}
    assert act(rt, "retry", form, cookie).status == 403  # no CSRF token: nothing happens
    assert rt.wiring.ledger.get_slot(retry_slot) is None
    done = act(rt, "retry", {**form, "csrf": token}, cookie)
    assert done.status == 202 and retry_slot in done.text() and 'href="/ui/failures"' in done.body
    [line] = audit(logs, "failure.retry_requested")
    assert (line["operator"], line["slot_id"], line["target_id"], line["mode"], line["retry_slot_id"]) == (
        "ui", SLOT, "cats", "normal", retry_slot)

    assert 'http-equiv="refresh"' in get(rt, "/ui/failures", cookie=cookie).body  # reloads while its retry runs
    rt.settle()
    assert 'http-equiv="refresh"' not in get(rt, "/ui/failures", cookie=cookie).body
    retried = rt.wiring.ledger.load(retry_slot)
    assert retried.slot.retry_of == SLOT and retried.slot.retry_mode == "normal"
    assert retried.slot.target_ids == ["cats"] and retried.cells["cats"].status == "submitted"
    # The refused work never reached the review (a 400 is a refusal): the retry may deliver it now.
    assert [r["work_id"] for r in downstream.records.values()] == [retried.cells["cats"].work_id]
    delivered = len(downstream.records)

    again = act(rt, "retry", {**form, "csrf": token}, cookie)  # a second click, or a second operator
    assert again.status == 202 and retry_slot in again.text() and "already requested" in again.text()
    rt.settle()
    assert len(downstream.records) == delivered  # nothing ran twice
    row = row_of(get(rt, "/ui/failures", cookie=cookie))
    assert f"normal retry: {retry_slot} submitted" in row[8] and "Retry relaxed" in row[8]
    ok = act(rt, "retry", {"slot": retry_slot, "target": "cats", "mode": "normal", "csrf": token}, cookie)
    assert ok.status == 409 and f"not failed: cell cats of {retry_slot} is submitted" in ok.text()


def test_a_relaxed_retry_widens_the_scan_bound_of_that_occurrence_only(make_runtime, downstream):
    rt = failed_occurrence(make_runtime, downstream, scan_limit=10)
    assert rt.wiring.ledger.load(SLOT).cells["cats"].candidate_report["bound"] == 10
    cookie = login(rt)
    token = csrf_of(get(rt, "/ui/failures", cookie=cookie))
    done = act(rt, "retry", {"slot": SLOT, "target": "cats", "mode": "relaxed", "csrf": token}, cookie)
    assert done.status == 202
    rt.settle()
    retry_slot = f"morning-tokyo@manual-{retry_request_id(SLOT, 'cats', 'relaxed')}"
    cell = rt.wiring.ledger.load(retry_slot).cells["cats"]
    assert cell.status == "submitted" and cell.candidate_report["bound"] == 30
    assert rt.wiring.config.target("cats").candidateScanLimit == 10  # the config itself is untouched


def test_a_retry_of_what_is_not_a_retryable_failure_is_refused_naming_why(make_runtime, downstream):
    rt = failed_occurrence(make_runtime, downstream)
    cookie = login(rt)
    token = csrf_of(get(rt, "/ui/failures", cookie=cookie))
    for form, status, words in (
        ({"slot": SLOT, "target": "cats", "mode": "gentle"}, 400, "mode: one of normal, relaxed"),
        ({"slot": SLOT, "target": "dogs", "mode": "normal"}, 404, f"no cell dogs in occurrence {SLOT}"),
        ({"slot": "morning-tokyo@2026-12-02T0800", "target": "cats"}, 404, "no cell cats"),
    ):
        refused = act(rt, "retry", {**form, "csrf": token}, cookie)
        assert refused.status == status and words in refused.text(), refused.text()
    # A job's failed cell is listed but retried by its consumer.
    job = Slot(slot_id="morning-tokyo@manual-job-1", schedule_id="morning-tokyo", status="running", target_ids=["cats"],
               created_at=rt.clock.now_ms(), occurrence_at=rt.clock.now_ms(), trigger_source="manual",
               manual_request_id="job-1", params={"query": {"tags": ["cats"]}})
    rt.wiring.ledger.create_slot(replace(job))
    assert rt.wiring.ledger.terminalise_slot(rt.wiring.ledger.load(job.slot_id), fail_cells=["cats"], guard_cells=[],
                                             slot_status="failed", reason_code="queued_too_long",
                                             reason_message="queued", now_ms=rt.clock.now_ms())
    row = row_of(get(rt, "/ui/failures", cookie=cookie), job.slot_id)
    assert "job" in row[1] and "a protocol job is retried by its consumer" in row[8]
    # The occurrence's own page says the same beside the cell, from the same rule, and offers no form.
    page = get(rt, f"/ui/slots/{job.slot_id}", cookie=cookie)
    assert "a protocol job is retried by its consumer" in page.text() and "/ui/act/retry" not in page.body
    refused = act(rt, "retry", {"slot": job.slot_id, "target": "cats", "mode": "normal", "csrf": token}, cookie)
    assert refused.status == 409 and "retried by its consumer" in refused.text()


def test_the_filters_narrow_the_list_and_refuse_what_they_do_not_offer(make_runtime, downstream):
    rt = failed_occurrence(make_runtime, downstream)
    cookie = login(rt)
    for query, shown in (({"schedule": "morning-tokyo"}, True), ({"schedule": "evening-berlin"}, False),
                         ({"target": "cats"}, True), ({"target": "landscape"}, False),
                         ({"reason": "delivery_abandoned"}, True), ({"reason": "network_error"}, False),
                         ({"day": "2026-11-30"}, True), ({"day": "2026-12-01"}, False)):
        page = get(rt, "/ui/failures", cookie=cookie, query=query)
        assert page.status == 200 and (SLOT in page.body) is shown, query
        assert ("no failures match" in page.body) is not shown
    for field, bad in (("schedule", "nope"), ("target", "<b>"), ("reason", "boom"), ("day", "2026-13-01"),
                       ("day", "２０２６-11-30"), ("before", "x"), ("before", "1796083200000#a")):
        page = get(rt, "/ui/failures", cookie=cookie, query={field: bad})
        assert page.status == 400 and f"{field}:" in page.text() and "<b>" not in page.body, (field, bad)


def _failures(rt, first: int, last: int) -> None:
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    for n in range(first, last):
        slot = Slot(slot_id=f"morning-tokyo@2026-10-{1 + n % 28:02d}T{n:04d}", schedule_id="morning-tokyo", status="running",
                    target_ids=["cats"], created_at=now - 10_000_000 + n, occurrence_at=now, trigger_source="cron")
        assert ledger.create_slot(replace(slot))[1]
        assert ledger.terminalise_slot(ledger.load(slot.slot_id), fail_cells=["cats"], guard_cells=[], slot_status="failed",
                                       reason_code="stalled_no_heartbeat", reason_message="stalled", now_ms=now + n)


@pytest.mark.size("large")  # three hundred failures written first
def test_a_failure_center_page_reads_the_same_with_10_failures_as_with_300(make_runtime, monkeypatch):
    rt = make_runtime(FIRE, backend="moto")
    _failures(rt, 0, 10)
    few = reads_of_one_page(rt, monkeypatch, "/ui/failures")
    _failures(rt, 10, 300)
    many = reads_of_one_page(rt, monkeypatch, "/ui/failures")
    assert [c for c in many if c[0] == "Query"] == [("Query", "FailedCells", 25)]
    assert not any(c[0] == "Scan" for c in many)
    assert len(many) == len(few) and [c[0] for c in many] == [c[0] for c in few]
    assert sum(c[2] for c in many if c[0] == "BatchGetItem") <= 25 * 2 + 25 + 50  # slots+cells, rows, retry slots
    page = get(rt, "/ui/failures", cookie=login(rt))
    assert page.body.count("stalled_no_heartbeat</code>") == 25 and "T0299" in page.body
    [older] = re.findall(r'<a href="/ui/failures\?before=([^"]+)">older failures</a>', page.body)
    from urllib.parse import unquote
    import html

    second = get(rt, "/ui/failures", cookie=login(rt), query={"before": unquote(html.unescape(older))})
    assert second.status == 200 and "T0274" in second.body and "T0275" not in second.body


def test_a_consumers_cancel_is_not_listed_and_reindex_lists_failures_written_before_the_index(make_runtime):
    from support.cli import pixivflow

    rt = make_runtime(FIRE)
    _failures(rt, 0, 3)
    ledger = rt.wiring.ledger
    for n in range(3):
        ledger._call("update_item", TableName=ledger._table,  # noqa: SLF001 (an item from before the index)
                     Key={"pk": {"S": f"SLOT#morning-tokyo@2026-10-{1 + n:02d}T{n:04d}"}, "sk": {"S": "CELL#cats"}},
                     UpdateExpression="REMOVE failPk, failSk")
    cancelled = Slot(slot_id="morning-tokyo@manual-job-9", schedule_id="morning-tokyo", status="running",
                     target_ids=["cats"], created_at=rt.clock.now_ms(), trigger_source="manual", params={"q": 1})
    ledger.create_slot(replace(cancelled))
    assert ledger.cancel_cells(ledger.load(cancelled.slot_id), cells=["cats"], intents=[], slot_status="failed",
                               reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=rt.clock.now_ms())
    assert "no failures" in get(rt, "/ui/failures", cookie=login(rt)).body
    done = pixivflow("failures", "reindex", now=rt.clock.now_ms())
    assert done.code == 0 and done.out == "3 failure(s) added to the Failure Center's index\n", done.err
    body = get(rt, "/ui/failures", cookie=login(rt)).body
    assert body.count("stalled_no_heartbeat</code>") == 3 and "manual-job-9" not in body


def test_the_cli_lists_failures_and_retries_one_once(make_runtime, downstream):
    from support.cli import pixivflow

    rt = failed_occurrence(make_runtime, downstream)
    now = rt.clock.now_ms()
    listed = pixivflow("failures", "list", "--config", str(rt.config_path), now=now)
    assert listed.code == 0, listed.err
    [header, row] = listed.out.splitlines()
    assert header.split()[:4] == ["FAILED", "AT", "OCCURRENCE", "TARGET"]
    assert SLOT in row and "cats" in row and "delivery_abandoned" in row and row.endswith("yes")
    as_json = pixivflow("failures", "list", "--json", now=now)
    [failure] = __import__("json").loads(as_json.out)["failures"]
    assert (failure["slotId"], failure["reasonCode"], failure["deliveries"][0]["outboxStatus"]) == (
        SLOT, "delivery_abandoned", "dead")

    retry_slot = f"morning-tokyo@manual-{retry_request_id(SLOT, 'cats', 'relaxed')}"
    for _ in range(2):
        done = pixivflow("failures", "retry", SLOT, "cats", "--relaxed", "--config", str(rt.config_path), now=now)
        assert done.code == 0 and f"occurrence {retry_slot}" in done.out, done.err
    assert "already requested" in done.out
    rt.settle()
    assert rt.wiring.ledger.load(retry_slot).cells["cats"].status == "submitted"
    assert len(downstream.records) == 1
    again = pixivflow("failures", "list", "--config", str(rt.config_path), now=rt.clock.now_ms())
    assert f"relaxed {retry_slot} submitted" in again.out

    for argv, words in ((("list", "--limit", "0"), "--limit"), (("list", "--day", "yesterday"), "--day:"),
                        (("list", "--before", "x"), "--before"),
                        (("retry", SLOT, "dogs", "--config", str(rt.config_path)), "no cell dogs")):
        refused = pixivflow("failures", *argv, now=now)
        assert refused.code in (1, 2) and words in refused.err and refused.out == "", (argv, refused)
