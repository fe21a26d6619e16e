"""Candidate scan and search paging through a real cell run (spec §6.1, §6.3, §6.4, §3.3).

The ``cats`` target (single work, route ``review``) on its own schedule; what the user sees is
the cell's status, its lastError and candidateReport, and what reached the downstream.
"""

from __future__ import annotations

import pytest

from identity_support import FIRE, SCHEDULE, SLOT, START, TARGET, add_schedule, cell, delivered_work_ids, intents, queued
from pixivflow.domain.cells import CellStatus
from pixivflow.domain.work import ArtifactFile, Page, Work
from pixivflow.ports import WorkSource
from pixivflow.services.execution import execute_cell
from support.builders import work

# --------------------------------------------------------------------------------------------
# 7. a pager that does not advance


def _w(work_id: str, day: int) -> Work:
    return Work(work_id=work_id, work_type="illustration", title=f"w{work_id}", tags=("cats",),
                create_date=f"2026-11-{day:02d}T10:00:00+09:00")


class PagedSource(WorkSource):
    """A source that answers each cursor with a scripted page and records every request."""

    def __init__(self, pages: dict):
        self.pages = pages
        self.requests: list[str | None] = []
        self.downloads: list[str] = []

    def search_page(self, request, cursor):
        self.requests.append(cursor)
        items, next_cursor = self.pages[cursor]
        return Page(items=tuple(items), next_cursor=next_cursor)

    def get_work(self, work_type, work_id):
        return _w(work_id, 1)

    def download(self, w):
        self.downloads.append(w.work_id)
        return [ArtifactFile(name=f"{w.work_id}_p0.png", content=b"\x89PNG-" + w.work_id.encode(), content_type="image/png")]


PAGERS = {
    "stuck": ({None: ([_w("701", 3)], "STUCK"), "STUCK": ([_w("702", 4)], "STUCK")}, [None, "STUCK"]),
    "cycle": ({None: ([_w("701", 3)], "A"), "A": ([_w("702", 4)], "B"), "B": ([_w("703", 5)], "A")}, [None, "A", "B"]),
}


def _runtime(make_runtime, *, catalog=None, mutate=None, source=None):
    def cfg(c):
        add_schedule(c)
        if mutate:
            mutate(c)

    rt = make_runtime(START, mutate=cfg, catalog=catalog, overrides={"source": source} if source else None)
    assert rt.fire(SCHEDULE, iso=FIRE)["sent"] == 1
    return rt


@pytest.mark.parametrize("pager", list(PAGERS))
def test_a_pager_that_does_not_advance_fails_the_cell_with_pagination_error(make_runtime, downstream, pager):
    pages, expected_requests = PAGERS[pager]
    source = PagedSource(pages)
    rt = _runtime(make_runtime, source=source)
    rt.settle()
    assert source.requests == expected_requests  # and never asked again: the fault is deterministic
    c = cell(rt)
    assert c.status == CellStatus.FAILED
    assert c.status != CellStatus.NO_CANDIDATE
    assert "PAGINATION_ERROR" in c.last_error
    assert not (c.last_error or "").startswith("no eligible candidate")
    assert c.terminal_reason_code not in (None, "no_candidate", "no_match", "candidate_exhausted")
    assert c.work_id is None and source.downloads == []
    assert downstream.requests == []
    assert rt.wiring.ledger.get_slot(SLOT).status == "failed"


def test_an_advancing_pager_is_walked_to_the_end_and_the_newest_work_delivered(make_runtime, downstream):
    """The control for the two cases above: the same source with a well-behaved cursor."""
    source = PagedSource({None: ([_w("701", 3)], "A"), "A": ([_w("702", 9)], "B"), "B": ([_w("703", 5)], None)})
    rt = _runtime(make_runtime, source=source)
    rt.settle()
    assert source.requests == [None, "A", "B"]
    assert delivered_work_ids(downstream) == ["702"]
    assert cell(rt).status == CellStatus.SUBMITTED


# --------------------------------------------------------------------------------------------
# 9. the bounded candidate scan


def _catalog(*works):
    return {"illusts": list(works)}


def test_gone_and_failing_downloads_are_skipped_and_the_scan_reaches_a_good_work(make_runtime, downstream):
    catalog = _catalog(
        work("801", "2026-11-20T10:00:00+09:00", fault="gone"),
        work("802", "2026-11-19T10:00:00+09:00", fault="download_error"),
        work("803", "2026-11-18T10:00:00+09:00"),
        work("804", "2026-11-17T10:00:00+09:00"),
    )
    rt = _runtime(make_runtime, catalog=catalog)
    rt.settle()
    assert delivered_work_ids(downstream) == ["803"]
    c = cell(rt)
    assert (c.status, c.work_id) == (CellStatus.SUBMITTED, "803")
    report = c.candidate_report
    assert report["bound"] == 5 and report["attempted"] == 3
    assert [(s["code"], s["workId"]) for s in report["skipped"]] == [("deleted", "801"), ("unavailable", "802")]
    assert [i.work_id for i in intents(rt)] == ["803"]  # the skipped candidates left no delivery intent


@pytest.mark.parametrize("where", ["target", "global"])
def test_the_scan_stops_at_candidate_scan_limit(make_runtime, downstream, where):
    def mutate(cfg):
        if where == "target":
            next(t for t in cfg["targets"] if t["id"] == TARGET)["candidateScanLimit"] = 2
        else:
            cfg["download"] = {"candidateScanLimit": 2}

    catalog = _catalog(
        work("811", "2026-11-20T10:00:00+09:00", fault="gone"),
        work("812", "2026-11-19T10:00:00+09:00", fault="gone"),
        work("813", "2026-11-18T10:00:00+09:00"),  # usable, but beyond the bound
    )
    rt = _runtime(make_runtime, catalog=catalog, mutate=mutate)
    rt.settle()
    assert downstream.requests == []
    c = cell(rt)
    assert (c.status, c.work_id) == (CellStatus.NO_CANDIDATE, None)
    assert c.last_error.startswith("no eligible candidate found after scanning 2 candidate(s)")
    assert c.candidate_report["bound"] == 2 and c.candidate_report["attempted"] == 2
    assert [s["workId"] for s in c.candidate_report["skipped"]] == ["811", "812"]


def test_every_candidate_unusable_ends_no_candidate_with_a_clear_reason(make_runtime, downstream):
    catalog = _catalog(
        work("821", "2026-11-20T10:00:00+09:00", fault="gone"),
        work("822", "2026-11-19T10:00:00+09:00", fault="gone"),
        work("823", "2026-11-18T10:00:00+09:00", fault="gone"),
    )
    rt = _runtime(make_runtime, catalog=catalog)
    rt.settle()
    assert downstream.requests == []
    c = cell(rt)
    assert (c.status, c.work_id) == (CellStatus.NO_CANDIDATE, None)
    assert c.last_error.startswith("no eligible candidate found after scanning 3 candidate(s)")
    assert "3 deleted" in c.last_error
    assert [s["code"] for s in c.candidate_report["skipped"]] == ["deleted"] * 3
    assert rt.wiring.ledger.get_slot(SLOT).status == "failed"  # lifecycle; business status is no_candidate


@pytest.mark.parametrize("fault", ["transient", "download_error"])
def test_a_retryable_candidate_failure_in_the_scan_keeps_the_cell_open(make_runtime, downstream, fault):
    """Spec §6.3: a transient candidate failure (and rule 13's unclassified download failure)
    must not be reported as "nothing to post": the run is a retryable failure."""
    catalog = _catalog(
        work("831", "2026-11-20T10:00:00+09:00", fault=fault),
        work("832", "2026-11-19T10:00:00+09:00", fault="gone"),
    )
    rt = _runtime(make_runtime, catalog=catalog)
    result = execute_cell(rt.wiring.executions, SLOT, TARGET)
    assert result.outcome == "failed_retryable"
    c = cell(rt)
    assert not c.terminal and c.status == CellStatus.PENDING
    assert c.work_id is None  # nothing was bound: the next run scans again
    assert c.last_error.startswith("candidate scan hit a job-level outage or a transient failure")
    assert [(s["code"], s.get("retryable", False)) for s in c.candidate_report["skipped"]] == [
        ("unavailable", True), ("deleted", False)]
    assert queued(rt, "execution") == 2  # the admission message and the delayed retry
    # It keeps retrying until the schedule's timeout, and never turns into no_candidate: the timeout
    # ends it with the cause of its failed attempts.
    rt.settle()
    c = cell(rt)
    cause = {"transient": "network_error", "download_error": "download_failed"}[fault]
    assert (c.status, c.terminal_reason_code) == (CellStatus.FAILED, cause)
    assert downstream.requests == []


def test_a_transient_candidate_does_not_stop_the_scan_from_reaching_a_good_work(make_runtime, downstream):
    catalog = _catalog(
        work("841", "2026-11-20T10:00:00+09:00", fault="transient"),
        work("842", "2026-11-19T10:00:00+09:00"),
    )
    rt = _runtime(make_runtime, catalog=catalog)
    rt.settle()
    assert delivered_work_ids(downstream) == ["842"]
    c = cell(rt)
    assert (c.status, c.work_id) == (CellStatus.SUBMITTED, "842")
    assert c.candidate_report["skipped"][0]["code"] == "unavailable"
