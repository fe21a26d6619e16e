"""Target selection through the real handlers (issue 15 items 1 and 2; spec §5.3, §6.1, §6.3, §6.4).

Each target is written the way PixivFlow's docs describe it, runs on its own 08:00 Asia/Tokyo
schedule against a catalogue made for it, and is judged by what a user notices: which work
reached the downstream, the cell's state and last error, and the candidate report's supply
(why the other works were passed over). A recording wrapper around the catalogue shows which
paged queries the domain sent: the source itself applies no selection rule.
"""

from __future__ import annotations

import pytest

from pixivflow.adapters.catalog_source import CatalogSource
from pixivflow.domain.selection import Criteria, order_candidates, plan_selection
from pixivflow.ports import WorkSource
from support.builders import with_target, work

FIRE = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01: the occurrence date is 2026-12-01
START = "2026-11-30T22:59:00Z"
SCHEDULE = "sel"
SLOT = f"{SCHEDULE}@2026-12-01T0800"


def illust(work_id, created, *, tags=("cat",), bookmarks=100, pages=1, user=9000, **extra) -> dict:
    return work(work_id, created, tags, kind="illust", user=(user, f"artist{user}"), bookmarks=bookmarks, pages=pages, **extra)


def novel(work_id, created, *, tags=("fantasy",), bookmarks=100, **extra) -> dict:
    return work(work_id, created, tags, title=f"novel {work_id}", user=(7, "writer"), bookmarks=bookmarks,
                image_urls=None, **extra)


def nov(d: int, hh: int = 10) -> str:
    return f"2026-11-{d:02d}T{hh:02d}:00:00+09:00"


class Recording(WorkSource):
    """The catalogue source, recording every paged query and lookup the engine sends it."""

    def __init__(self, path):
        self.inner = CatalogSource(path)
        self.queries: list = []
        self.lookups: list[tuple[str, str]] = []

    def search_page(self, request, cursor):
        self.queries.append((request, cursor))
        return self.inner.search_page(request, cursor)

    def get_work(self, work_type, work_id):
        self.lookups.append((work_type, work_id))
        return self.inner.get_work(work_type, work_id)

    def download(self, work):
        return self.inner.download(work)

    def first_pages(self):
        return [request for request, cursor in self.queries if cursor is None]


@pytest.fixture
def select_with(make_runtime, tmp_path, downstream):
    """``select_with(target, catalog)`` -> (runtime, recording source): fire the target's schedule once and settle."""

    def run(target: dict, catalog: dict, *, page_size: int | None = None):
        target = {"id": "sel-target", "storageMode": "cache", "delivery": {"target": "review"}, **target}

        source = Recording(tmp_path / "catalog.json")  # make_runtime writes the catalogue there
        if page_size:
            source.inner = CatalogSource(tmp_path / "catalog.json", page_size=page_size)
        rt = make_runtime(START, mutate=with_target(target, SCHEDULE), catalog=catalog, overrides={"source": source})
        assert rt.fire(SCHEDULE, iso=FIRE)["sent"] == 1
        rt.settle()
        return rt, source

    return run


def delivered(downstream) -> list[str]:
    return [str(r.body["work_id"]) for r in downstream.requests]


def cell(rt, target_id="sel-target"):
    return rt.wiring.ledger.get_cell(SLOT, target_id)


def supply(rt, target_id="sel-target") -> dict:
    return cell(rt, target_id).candidate_report["supply"]


# -- 1. a pinned work ----------------------------------------------------------------------------------


def test_a_pinned_illustration_is_delivered_not_the_newest_work(select_with, downstream):
    catalog = {"illusts": [illust(100 + i, nov(10 + i)) for i in range(1, 12)]}  # 101..111, 111 newest
    rt, source = select_with({"type": "illustration", "mode": "search", "illustId": 105}, catalog)
    assert delivered(downstream) == ["105"]
    c = cell(rt)
    assert (c.status, c.work_id) == ("submitted", "105")
    assert source.queries == [] and source.lookups == [("illustration", "105")]  # fetched by id, never searched
    assert supply(rt) == {"fetched": 1, "selected": 1, "rejected": 0, "reasons": []}
    assert rt.wiring.ledger.get_slot(SLOT).status == "success"


def test_a_pinned_novel_is_delivered(select_with, downstream):
    catalog = {"novels": [novel(200 + i, nov(10 + i)) for i in range(1, 6)]}
    rt, source = select_with({"type": "novel", "novelId": 203}, catalog)
    assert delivered(downstream) == ["203"]
    assert downstream.requests[0].body["work"]["type"] == "novel"
    assert source.queries == [] and source.lookups == [("novel", "203")]
    assert (cell(rt).status, cell(rt).work_id, cell(rt).work_type) == ("submitted", "203", "novel")


@pytest.mark.parametrize("catalog", [
    pytest.param({"illusts": [illust(105, nov(15), x_fault="gone"), illust(111, nov(21))]}, id="gone"),
    pytest.param({"illusts": [illust(111, nov(21))]}, id="not-in-the-catalogue"),
])
def test_a_pinned_work_that_is_gone_fails_and_is_never_substituted(select_with, downstream, catalog):
    rt, source = select_with({"illustId": 105}, catalog)
    assert downstream.requests == []
    c = cell(rt)
    assert c.status == "failed" and c.work_id is None
    assert c.last_error.startswith("LOCKED_WORK_UNAVAILABLE: pinned work 105 is no longer fetchable: ")
    assert source.queries == []  # no search for a replacement
    assert rt.wiring.ledger.get_slot(SLOT).status == "failed"


def test_a_pinned_work_whose_download_finds_it_gone_fails_the_same_way(select_with, downstream, monkeypatch):
    catalog = {"illusts": [illust(105, nov(15)), illust(111, nov(21))]}
    from pixivflow.domain.errors import WorkGoneError

    def gone(self, work):
        raise WorkGoneError(f"work {work.work_id} not found", status=404)

    monkeypatch.setattr(Recording, "download", gone)
    rt, _ = select_with({"illustId": 105}, catalog)
    assert downstream.requests == []
    c = cell(rt)
    assert c.status == "failed" and c.last_error.startswith("LOCKED_WORK_UNAVAILABLE: pinned work 105 is no longer fetchable")


# -- 2. each selection key of spec §6.1 ------------------------------------------------------------------


def test_tag_and_relation_needs_every_word(select_with, downstream):
    catalog = {"illusts": [illust(1, nov(20), tags=("cat",)), illust(2, nov(19), tags=("cat", "dog")),
                           illust(3, nov(21), tags=("dog",))]}
    rt, source = select_with({"tag": "cat dog", "limit": 1}, catalog)
    assert delivered(downstream) == ["2"]
    assert [q.tag for q in source.first_pages()] == ["cat dog"]  # one query with every word


def test_tag_or_relation_searches_both_tags_merges_and_delivers_two(select_with, downstream):
    catalog = {"illusts": [illust(1, nov(20), tags=("cat",)), illust(2, nov(19), tags=("cat",)),
                           illust(3, nov(21), tags=("dog",)), illust(4, nov(10), tags=("cat", "dog"))]}
    rt, source = select_with({"tag": "cat dog", "tagRelation": "or", "limit": 2}, catalog)
    assert [q.tag for q in source.first_pages()] == ["cat", "dog"]
    assert sorted(delivered(downstream)) == ["1", "3"]  # the two newest of the merged, de-duplicated set
    c = cell(rt)
    assert c.status == "submitted"
    assert supply(rt) == {"fetched": 4, "selected": 4, "rejected": 0, "reasons": []}  # 4 counted once


@pytest.mark.parametrize("sort, expected", [("date_desc", "2"), ("date_asc", "1"), ("popular_desc", "3")])
def test_sort(select_with, downstream, sort, expected):
    catalog = {"illusts": [illust(1, nov(1), bookmarks=50), illust(2, nov(20), bookmarks=10), illust(3, nov(10), bookmarks=900)]}
    _, source = select_with({"tag": "cat", "limit": 1, "sort": sort}, catalog)
    assert delivered(downstream) == [expected]
    assert source.first_pages()[0].sort == sort  # the server-side hint travels too


@pytest.mark.parametrize("search_target, expected", [
    ("partial_match_for_tags", "2"), ("exact_match_for_tags", "1"), ("title_and_caption", "3"),
])
def test_search_target(select_with, downstream, search_target, expected):
    catalog = {"illusts": [illust(1, nov(10), tags=("cat",)), illust(2, nov(20), tags=("cats",)),
                           illust(3, nov(5), tags=("pet",), caption="my cat sleeps")]}
    select_with({"tag": "cat", "limit": 1, "searchTarget": search_target}, catalog)
    assert delivered(downstream) == [expected]


def test_min_bookmarks_with_date_asc_delivers_the_oldest_work_above_the_floor(select_with, downstream):
    catalog = {"illusts": [illust(1, nov(1), bookmarks=10), illust(2, nov(2), bookmarks=149),
                           illust(3, nov(3), bookmarks=150), illust(4, nov(4), bookmarks=5000)]}
    rt, _ = select_with({"tag": "cat", "limit": 1, "sort": "date_asc", "minBookmarks": 150}, catalog)
    assert delivered(downstream) == ["3"]
    assert supply(rt) == {"fetched": 4, "selected": 2, "rejected": 2,
                          "reasons": [{"code": "below_min_bookmarks", "count": 2}]}


def test_a_date_window_is_inclusive_in_the_works_own_offset(select_with, downstream):
    catalog = {"illusts": [
        illust(1, "2026-11-25T10:00:00+09:00"),
        illust(2, "2026-11-21T00:30:00+09:00"),  # 2026-11-20 in UTC, but the 21st where it was posted
        illust(3, "2026-11-20T23:30:00+09:00"),  # the end day, inclusive
        illust(4, "2026-11-15T10:00:00+09:00"),
        illust(5, "2026-11-09T23:59:00+09:00"),  # before the start: ends the walk
        illust(6, "2026-11-01T10:00:00+09:00"),
    ]}
    rt, source = select_with({"tag": "cat", "limit": 1, "startDate": "2026-11-10", "endDate": "2026-11-20"}, catalog,
                             page_size=1)
    assert delivered(downstream) == ["3"]
    assert len(source.queries) == 5  # work 5 stopped the date_desc walk; 6 was never asked for
    assert (source.first_pages()[0].start_date, source.first_pages()[0].end_date) == ("2026-11-10", "2026-11-20")
    assert supply(rt) == {"fetched": 5, "selected": 2, "rejected": 3,
                          "reasons": [{"code": "date_out_of_range", "count": 3}]}


def test_an_inverted_date_window_selects_nothing_and_says_why(select_with, downstream):
    rt, source = select_with({"tag": "cat", "limit": 1, "startDate": "2026-11-20", "endDate": "2026-11-10"},
                             {"illusts": [illust(1, nov(15))]})
    assert downstream.requests == [] and source.queries == []
    c = cell(rt)
    assert c.status == "no_candidate"
    assert c.last_error == ("no eligible candidate found after scanning 0 candidate(s): "
                            "the date window 2026-11-20..2026-11-10 is empty (start after end)")


def test_exclude_ai(select_with, downstream):
    catalog = {"illusts": [illust(1, nov(20), illust_ai_type=2), illust(2, nov(19), tags=("cat", "AI生成")),
                           illust(3, nov(18), illust_ai_type=1)]}
    rt, source = select_with({"tag": "cat", "limit": 1, "excludeAI": True}, catalog)
    assert delivered(downstream) == ["3"]
    assert source.first_pages()[0].exclude_ai is True
    assert supply(rt)["reasons"] == [{"code": "ai_generated", "count": 2}]


@pytest.mark.parametrize("r18, expected", [(False, "3"), (True, "1")])
def test_r18(select_with, downstream, r18, expected):
    catalog = {"illusts": [illust(1, nov(20), x_restrict=1), illust(2, nov(19), x_restrict=2), illust(3, nov(18))]}
    rt, _ = select_with({"tag": "cat", "limit": 1, "r18": r18}, catalog)
    assert delivered(downstream) == [expected]
    assert supply(rt)["reasons"] == ([] if r18 else [{"code": "r18", "count": 2}])


def test_max_page_count(select_with, downstream):
    """Over the cap: a ``filtered`` skip of the scan, one attempt used (PixivFlow's downloader declines it)."""
    catalog = {"illusts": [illust(1, nov(20), pages=3), illust(2, nov(19), pages=2)]}
    rt, _ = select_with({"tag": "cat", "limit": 1, "maxPageCount": 2}, catalog)
    assert delivered(downstream) == ["2"]
    assert supply(rt)["reasons"] == []
    report = cell(rt).candidate_report
    assert report["attempted"] == 2
    assert report["skipped"] == [{"code": "filtered", "workId": "1", "reason": "declined by maxPageCount: 3 pages, more than 2"}]


def test_ranking_mode_and_a_ranking_date_resolved_in_the_schedules_zone(select_with, downstream):
    catalog = {"illusts": [illust(i, nov(i)) for i in (1, 2, 3)], "ranking": {"week": ["2", "3", "1"], "day": ["1"]}}
    _, source = select_with({"mode": "ranking", "rankingMode": "week", "rankingDate": "YESTERDAY", "limit": 1}, catalog)
    assert delivered(downstream) == ["2"]  # rank 1 of the weekly list
    (query,) = source.first_pages()
    # 08:00 Tokyo on 2026-12-01 is still 2026-11-30 in UTC: YESTERDAY is read in the schedule's zone
    assert (query.mode, query.ranking_mode, query.ranking_date) == ("ranking", "week", "2026-11-30")


def test_filter_tag_ranking_is_the_days_most_bookmarked_work(select_with, downstream):
    catalog = {"illusts": [
        illust(1, "2026-12-01T09:00:00+09:00", bookmarks=9999),  # today, not yesterday
        illust(2, "2026-11-30T23:00:00+09:00", bookmarks=10),
        illust(3, "2026-11-30T01:00:00+09:00", bookmarks=500),
        illust(4, "2026-11-29T23:00:00+09:00", bookmarks=8000),  # the day before
    ]}
    rt, source = select_with({"mode": "ranking", "filterTag": "cat", "rankingDate": "YESTERDAY", "limit": 1}, catalog)
    assert delivered(downstream) == ["3"]
    (query,) = source.first_pages()
    assert (query.mode, query.tag, query.start_date, query.end_date) == ("search", "cat", "2026-11-30", "2026-11-30")
    assert supply(rt)["reasons"] == [{"code": "date_out_of_range", "count": 2}]


def test_topic(select_with, downstream):
    catalog = {"illusts": [illust(1, nov(20), tags=("sky", "clouds")), illust(2, nov(25), tags=("sea",)),
                           illust(3, "2026-11-30T12:00:00+09:00", tags=("sky",))]}
    _, source = select_with({"mode": "topic", "topic": "sky", "date": "YESTERDAY"}, catalog)
    assert delivered(downstream) == ["3"]  # the topic's one-day window: yesterday in Tokyo
    assert source.first_pages()[0].topic == "sky"


def test_user_id(select_with, downstream):
    catalog = {"illusts": [illust(1, nov(20), user=9001), illust(2, nov(25), user=9002), illust(3, nov(10), user=9001)]}
    _, source = select_with({"userId": 9001, "limit": 1}, catalog)
    assert delivered(downstream) == ["1"]
    assert (source.first_pages()[0].mode, source.first_pages()[0].user_id) == ("user", "9001")


def test_random_picks_the_cells_seeded_shuffle_not_the_newest(select_with, downstream):
    works = [illust(i, nov(i)) for i in range(1, 21)]
    rt, _ = select_with({"tag": "cat", "limit": 1, "random": True}, {"illusts": works})
    from pixivflow.adapters.catalog_source import _to_work

    plan = plan_selection(Criteria(tag="cat", random=True, limit=1), occurrence_date="2026-12-01",
                          seed=f"{SLOT}#sel-target")
    newest_first = list(reversed([_to_work(w, "illustration") for w in works]))  # as the search returns them
    expected = order_candidates(newest_first, plan)[0].work_id
    assert delivered(downstream) == [expected]
    assert expected != "20"  # this seed does not happen to pick the newest work
    assert supply(rt)["selected"] == 20


def test_paging_stops_at_the_over_fetch_bound(select_with, downstream):
    catalog = {"illusts": [illust(i, nov(1 + i % 28)) for i in range(1, 301)]}
    rt, source = select_with({"tag": "cat", "limit": 1}, catalog)
    assert len(source.queries) == 4  # 120 works gathered for a bound of 100; the 10 pages are never all read
    assert supply(rt)["fetched"] == 120 and len(delivered(downstream)) == 1


def test_no_candidate_names_the_rules_that_rejected_every_work(select_with, downstream):
    catalog = {"illusts": [illust(1, nov(20), bookmarks=5), illust(2, nov(19), x_restrict=1, bookmarks=5000)]}
    rt, _ = select_with({"tag": "cat", "limit": 1, "minBookmarks": 1000}, catalog)
    assert downstream.requests == []
    c = cell(rt)
    assert c.status == "no_candidate"
    assert c.last_error == ("no eligible candidate found after scanning 0 candidate(s): "
                            "2 fetched, 2 rejected by the selection rules (1 below_min_bookmarks, 1 r18)")
    assert c.candidate_report["supply"] == {"fetched": 2, "selected": 0, "rejected": 2, "reasons": [
        {"code": "below_min_bookmarks", "count": 1}, {"code": "r18", "count": 1}]}


def test_ai_metadata_check_passes_over_a_work_whose_file_names_its_generator(select_with, downstream, monkeypatch):
    from pixivflow.domain.work import ArtifactFile

    def download(self, work):
        marker = b"tEXtparameters\x00masterpiece" if work.work_id == "1" else b""
        return [ArtifactFile(name=f"{work.work_id}_p0.png", content=b"\x89PNG\r\n\x1a\n" + marker, content_type="image/png")]

    monkeypatch.setattr(Recording, "download", download)
    rt, _ = select_with({"tag": "cat", "limit": 1, "aiMetadataCheck": True},
                        {"illusts": [illust(1, nov(20)), illust(2, nov(19))]})
    assert delivered(downstream) == ["2"]
    report = cell(rt).candidate_report
    assert [(s["code"], s["workId"]) for s in report["skipped"]] == [("filtered", "1")]
    assert report["attempted"] == 2
