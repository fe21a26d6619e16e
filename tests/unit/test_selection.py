"""Target selection rules (spec §6.1, §6.3, §6.4): the plan a target makes, and what a pass keeps.

Each rule is checked with the candidate supply report entry it leaves (``fetched``, ``selected``,
``rejected``, ``reasons``), because that is what an operator reads to learn why a work was passed
over.
"""

from __future__ import annotations

import pytest

from pixivflow.domain.errors import PaginationError
from pixivflow.domain.selection import (
    RANDOM_MAX_ATTEMPTS,
    Criteria,
    has_ai_file_markers,
    is_ai_generated,
    page_cap_decline,
    plan_selection,
    resolve_day,
    select,
    select_pinned,
)
from pixivflow.domain.work import Page, SearchRequest, Work

OCCURRENCE = "2026-12-01"  # the slot's occurrence date in its schedule's zone


def w(work_id, created="2026-11-20T10:00:00+09:00", *, bookmarks=100, pages=1, tags=("cat",), kind="illustration", **facts):
    return Work(work_id=str(work_id), work_type=kind, title=f"w{work_id}", tags=tuple(tags), create_date=created,
                total_bookmarks=bookmarks, page_count=pages, **facts)


def day(d: int, hour: int = 10, offset: str = "+09:00") -> str:
    return f"2026-11-{d:02d}T{hour:02d}:00:00{offset}"


class Source:
    """Answers each query from ``by_tag[query.tag]`` in pages of ``size``; records every request."""

    def __init__(self, by_tag: dict, size: int = 2):
        self.by_tag = by_tag
        self.size = size
        self.requests: list[tuple[SearchRequest, str | None]] = []

    def __call__(self, query: SearchRequest, cursor: str | None) -> Page:
        self.requests.append((query, cursor))
        works = self.by_tag.get(query.tag if query.mode != "ranking" else query.ranking_mode, [])
        start = int(cursor or 0)
        end = start + self.size
        return Page(items=works[start:end], next_cursor=str(end) if end < len(works) else None)

    def words(self) -> list[str | None]:
        return [q.tag for q, cursor in self.requests if cursor is None]


def run(criteria: Criteria, source: Source, *, occurrence: str | None = OCCURRENCE, seed: str = "slot#target"):
    plan = plan_selection(criteria, occurrence_date=occurrence, seed=seed)
    return plan, select(plan, source)


def ids(works) -> list[str]:
    return [x.work_id for x in works]


# -- queries ------------------------------------------------------------------------------------


def test_and_relation_is_one_query_with_every_word():
    plan = plan_selection(Criteria(tag="cat  dog", sort="popular_desc", search_target="exact_match_for_tags"),
                          occurrence_date=OCCURRENCE)
    assert [q.tag for q in plan.queries] == ["cat dog"]
    query = plan.queries[0]
    assert (query.mode, query.sort, query.search_target) == ("search", "popular_desc", "exact_match_for_tags")
    # a plan's query is the request the source port answers, not a copy of it
    assert isinstance(query, SearchRequest) and query.tag == "cat dog"


def test_or_relation_searches_each_tag_merges_and_dedupes_by_id():
    shared = w(2, day(19))
    source = Source({"cat": [w(1, day(20)), shared], "dog": [shared, w(3, day(21), tags=("dog",))]})
    plan, found = run(Criteria(tag="cat dog cat", tag_relation="or", limit=2), source)
    assert [q.tag for q in plan.queries] == ["cat", "dog"]  # a repeated word is searched once
    assert source.words() == ["cat", "dog"]
    assert ids(found.candidates) == ["3", "1", "2"]  # merged, then sorted newest first
    assert found.supply.to_dict() == {"fetched": 3, "selected": 3, "rejected": 0, "reasons": []}


def test_or_relation_stops_searching_once_enough_works_are_gathered():
    many = [w(i, day(28 - i % 20)) for i in range(1, 131)]
    source = Source({"cat": many, "dog": [w(999, day(25), tags=("dog",))]}, size=30)
    plan, found = run(Criteria(tag="cat dog", tag_relation="or", limit=2), source)
    assert plan.gather == 100  # max(2 × 5, 100): the over-fetch bound of spec §6.4
    assert source.words() == ["cat"]  # "dog" is never asked: the first tag already filled the bound
    assert len(source.requests) == 4 and found.supply.fetched == 120  # whole pages of 30


def test_paging_is_bounded_by_the_over_fetch_rule_not_by_the_source_running_out():
    endless = [w(i, day(28)) for i in range(1, 1001)]
    source = Source({"cat": endless}, size=30)
    _, found = run(Criteria(tag="cat", limit=1), source)
    assert len(source.requests) == 4  # 120 ≥ 100 gathered: paging stops (it used to walk all 1000)
    assert found.supply.fetched == 120


def test_popular_with_a_date_window_gathers_ten_times_the_limit():
    plan = plan_selection(Criteria(tag="cat", limit=20, sort="popular_desc", end_date="2026-11-30"), occurrence_date=OCCURRENCE)
    assert plan.gather == 200
    assert plan_selection(Criteria(tag="cat", limit=60), occurrence_date=OCCURRENCE).gather == 200  # max(2 × 60, 200)


def test_the_date_window_travels_as_a_server_side_hint():
    plan = plan_selection(Criteria(tag="cat", start_date="2026-11-01", end_date="2026-11-30", exclude_ai=True),
                          occurrence_date=OCCURRENCE)
    (query,) = plan.queries
    assert (query.start_date, query.end_date, query.exclude_ai) == ("2026-11-01", "2026-11-30", True)


def test_ranking_resolves_yesterday_and_today_against_the_occurrence_date():
    yesterday = plan_selection(Criteria(mode="ranking", ranking_mode="week", ranking_date="YESTERDAY"), occurrence_date=OCCURRENCE)
    assert yesterday.queries[0] == SearchRequest(mode="ranking", ranking_mode="week", ranking_date="2026-11-30")
    today = plan_selection(Criteria(mode="ranking", ranking_date="TODAY"), occurrence_date=OCCURRENCE)
    assert today.queries[0].ranking_date == "2026-12-01"
    fixed = plan_selection(Criteria(mode="ranking", ranking_date="2026-10-10"), occurrence_date=OCCURRENCE)
    assert fixed.queries[0].ranking_date == "2026-10-10"
    latest = plan_selection(Criteria(mode="ranking"), occurrence_date=OCCURRENCE)
    assert latest.queries[0].ranking_date is None  # the source's latest list


def test_resolve_day():
    assert resolve_day("YESTERDAY", "2026-03-01") == "2026-02-28"
    assert resolve_day("today", "2026-03-01") == "2026-03-01"
    assert resolve_day("2026-01-05", None) == "2026-01-05"
    assert resolve_day("YESTERDAY", None) is None
    assert resolve_day(None, "2026-03-01") is None


def test_ranking_keeps_the_rank_order_and_still_applies_the_rules():
    source = Source({"day": [w(5, bookmarks=10), w(4, bookmarks=900), w(3, x_restrict=1), w(2, bookmarks=500)]})
    _, found = run(Criteria(mode="ranking", min_bookmarks=100, sort="popular_desc"), source)
    assert ids(found.candidates) == ["4", "2"]  # rank order, not bookmarks order
    assert found.supply.to_dict()["reasons"] == [{"code": "below_min_bookmarks", "count": 1}, {"code": "r18", "count": 1}]


def test_an_r18_ranking_is_an_explicit_choice_of_r18_works():
    source = Source({"day_r18": [w(1, x_restrict=1), w(2, x_restrict=2)]})
    _, found = run(Criteria(mode="ranking", ranking_mode="day_r18"), source)
    assert ids(found.candidates) == ["1", "2"]


def test_filter_tag_ranking_is_a_one_day_search_ranked_by_bookmarks():
    source = Source({"cat": [w(1, day(30, 23), bookmarks=5), w(2, day(30, 1), bookmarks=50), w(3, day(29, 23), bookmarks=999)]})
    plan, found = run(Criteria(mode="ranking", filter_tag="cat", ranking_date="YESTERDAY", limit=3), source)
    (query,) = plan.queries
    assert (query.mode, query.tag, query.sort, query.start_date, query.end_date) == (
        "search", "cat", "date_desc", "2026-11-30", "2026-11-30")
    assert plan.gather == 100  # max(20 × 3, 100)
    assert ids(found.candidates) == ["2", "1"]  # the day's works by bookmarks; 3 is the day before
    assert found.supply.reasons == {"date_out_of_range": 1}


def test_topic_searches_its_words_and_an_explicit_date_is_a_one_day_window():
    plan = plan_selection(Criteria(mode="topic", topic="blue sky", topic_date="YESTERDAY"), occurrence_date=OCCURRENCE)
    (query,) = plan.queries
    assert (query.mode, query.topic, query.tag, query.start_date, query.end_date) == (
        "topic", "blue sky", "blue sky", "2026-11-30", "2026-11-30")
    undated = plan_selection(Criteria(mode="topic", topic="sky"), occurrence_date=OCCURRENCE)
    assert (undated.start_date, undated.end_date) == (None, None)


def test_user_id_lists_that_users_works():
    plan = plan_selection(Criteria(user_id="42", tag="ignored"), occurrence_date=OCCURRENCE)
    (query,) = plan.queries
    assert (query.mode, query.user_id) == ("user", "42")
    assert plan.walk_order == "date_desc"


# -- the date window (inclusive days, the work's own offset) ---------------------------------------


def test_date_desc_skips_newer_works_and_stops_at_the_first_older_one():
    works = [w(1, day(25)), w(2, day(20)), w(3, day(15)), w(4, day(9)), w(5, day(8))]
    source = Source({"cat": works}, size=1)
    _, found = run(Criteria(tag="cat", start_date="2026-11-10", end_date="2026-11-20"), source)
    assert ids(found.candidates) == ["2", "3"]
    assert len(source.requests) == 4  # the older work 4 ended the walk; 5 was never asked for
    assert found.supply.to_dict() == {"fetched": 4, "selected": 2, "rejected": 2,
                                      "reasons": [{"code": "date_out_of_range", "count": 2}]}


def test_date_asc_is_symmetric():
    works = [w(1, day(5)), w(2, day(10)), w(3, day(20)), w(4, day(21)), w(5, day(22))]
    source = Source({"cat": works}, size=1)
    _, found = run(Criteria(tag="cat", sort="date_asc", start_date="2026-11-10", end_date="2026-11-20"), source)
    assert ids(found.candidates) == ["2", "3"]
    assert len(source.requests) == 4


def test_popular_desc_filters_the_window_without_stopping():
    works = [w(1, day(5), bookmarks=900), w(2, day(15), bookmarks=500), w(3, day(25), bookmarks=400), w(4, day(16), bookmarks=100)]
    source = Source({"cat": works}, size=1)
    _, found = run(Criteria(tag="cat", sort="popular_desc", start_date="2026-11-10", end_date="2026-11-20"), source)
    assert ids(found.candidates) == ["2", "4"]
    assert len(source.requests) == 4 and found.supply.reasons == {"date_out_of_range": 2}


def test_window_days_are_inclusive_and_read_in_the_works_own_offset():
    works = [
        w(1, "2026-11-21T00:30:00+09:00"),  # 2026-11-20T15:30Z, but the 21st where it was posted: out
        w(2, "2026-11-20T23:59:00+09:00"),  # last minute of the end day: in
        w(3, "2026-11-10T00:10:00+09:00"),  # 2026-11-09 in UTC, the 10th in its own offset: in
        w(4, "2026-11-09T23:59:00+09:00"),  # the day before the start: out, ends the walk
    ]
    _, found = run(Criteria(tag="cat", start_date="2026-11-10", end_date="2026-11-20"), Source({"cat": works}))
    assert ids(found.candidates) == ["2", "3"]
    assert found.supply.reasons == {"date_out_of_range": 2}


def test_an_inverted_window_is_empty_and_nothing_is_fetched():
    source = Source({"cat": [w(1)]})
    plan, found = run(Criteria(tag="cat", start_date="2026-11-20", end_date="2026-11-10"), source)
    assert found.candidates == [] and source.requests == []
    assert found.note == "the date window 2026-11-20..2026-11-10 is empty (start after end)"
    assert found.supply.to_dict() == {"fetched": 0, "selected": 0, "rejected": 0, "reasons": []}


def test_a_work_without_a_readable_date_is_outside_any_window():
    _, found = run(Criteria(tag="cat", start_date="2026-11-01"), Source({"cat": [w(1, created=""), w(2, day(20))]}))
    assert ids(found.candidates) == ["2"] and found.supply.reasons == {"date_out_of_range": 1}


def test_a_pager_that_does_not_advance_is_an_error_not_an_empty_result():
    def stuck(query, cursor):
        return Page(items=[w(1)], next_cursor="SAME")

    with pytest.raises(PaginationError):
        select(plan_selection(Criteria(tag="cat"), occurrence_date=OCCURRENCE), stuck)


# -- per-work rules and their supply entries ---------------------------------------------------------


def test_min_bookmarks_keeps_works_at_or_above_the_floor():
    source = Source({"cat": [w(1, day(1), bookmarks=149), w(2, day(2), bookmarks=150), w(3, day(3), bookmarks=10)]})
    _, found = run(Criteria(tag="cat", sort="date_asc", min_bookmarks=150), source)
    assert ids(found.candidates) == ["2"]
    assert found.supply.to_dict() == {"fetched": 3, "selected": 1, "rejected": 2,
                                      "reasons": [{"code": "below_min_bookmarks", "count": 2}]}


def test_exclude_ai_drops_pixivs_ai_flag_and_ai_tags():
    works = [
        w(1, ai_type=2),
        w(2, tags=("cat", "AI生成")),
        w(3, tags=("cat", "Generative AI")),
        w(4, tags=("cat", "ai-generated")),
        w(5, ai_type=1, tags=("cat", "aisle")),  # a human work; "aisle" is no AI marker
        w(6, raw={"tags": [{"name": "猫", "translated_name": "AI generated"}]}),
    ]
    _, found = run(Criteria(tag="cat", exclude_ai=True), Source({"cat": works}, size=10))
    assert ids(found.candidates) == ["5"]
    assert found.supply.reasons == {"ai_generated": 5}
    _, kept = run(Criteria(tag="cat"), Source({"cat": works}, size=10))
    assert len(kept.candidates) == 6  # without excludeAI nothing is dropped


def test_r18_off_drops_r18_and_r18g_for_both_work_types_and_on_keeps_them():
    works = [w(1, x_restrict=0), w(2, x_restrict=1), w(3, x_restrict=2)]
    _, found = run(Criteria(tag="cat"), Source({"cat": works}))
    assert ids(found.candidates) == ["1"] and found.supply.reasons == {"r18": 2}
    novels = [w(7, kind="novel", x_restrict=1), w(8, kind="novel")]
    _, novel_found = run(Criteria(tag="cat", work_type="novel"), Source({"cat": novels}))
    assert ids(novel_found.candidates) == ["8"]
    _, allowed = run(Criteria(tag="cat", r18=True), Source({"cat": works}))
    assert ids(allowed.candidates) == ["1", "2", "3"] and allowed.supply.reasons == {}


def test_max_page_count_declines_illustrations_only_when_attempted():
    """PixivFlow's downloader declines a work over the cap (note §5): it stays a candidate and is
    a ``filtered`` skip when attempted, not a selection-time rejection."""
    works = [w(1, pages=3), w(2, pages=4), w(3, pages=30)]
    criteria = Criteria(tag="cat", max_page_count=3)
    _, found = run(criteria, Source({"cat": works}))
    assert ids(found.candidates) == ["1", "2", "3"] and found.supply.reasons == {}
    assert [page_cap_decline(work, criteria) for work in works] == [
        None, "declined by maxPageCount: 4 pages, more than 3", "declined by maxPageCount: 30 pages, more than 3"]
    novel = w(5, kind="novel", pages=40)
    assert page_cap_decline(novel, Criteria(tag="cat", work_type="novel", max_page_count=3)) is None
    assert page_cap_decline(works[2], Criteria(tag="cat", max_page_count=None)) is None


def test_exclude_ai_is_an_illustration_rule_only():
    novels = [w(7, kind="novel", ai_type=2), w(8, kind="novel", tags=("AI生成",))]
    _, found = run(Criteria(tag="cat", work_type="novel", exclude_ai=True), Source({"cat": novels}))
    assert ids(found.candidates) == ["7", "8"] and found.supply.reasons == {}
    plan = plan_selection(Criteria(tag="cat", work_type="novel", exclude_ai=True), occurrence_date=OCCURRENCE)
    assert [q.exclude_ai for q in plan.queries] == [False]  # no search_ai_type hint either


def test_a_restricted_placeholder_is_never_a_candidate():
    _, found = run(Criteria(tag="cat", r18=True), Source({"cat": [w(1, restricted=True), w(2)]}))
    assert ids(found.candidates) == ["2"] and found.supply.reasons == {"restricted": 1}


def test_each_work_is_counted_once_under_the_first_rule_that_rejects_it():
    works = [w(1, x_restrict=1, bookmarks=0, ai_type=2), w(2, bookmarks=0, ai_type=2), w(3, bookmarks=0), w(4, bookmarks=500)]
    _, found = run(Criteria(tag="cat", exclude_ai=True, min_bookmarks=100), Source({"cat": works}))
    assert ids(found.candidates) == ["4"]
    assert found.supply.to_dict() == {
        "fetched": 4, "selected": 1, "rejected": 3,
        "reasons": [{"code": "ai_generated", "count": 1}, {"code": "below_min_bookmarks", "count": 1},
                    {"code": "r18", "count": 1}],
    }


def test_ai_helpers():
    assert is_ai_generated(w(1, tags=("（生成 AI）",)))
    assert not is_ai_generated(w(1, tags=("cat",), ai_type=1))
    png = b"\x89PNG\r\n\x1a\n....tEXtparameters\x00masterpiece, cat"
    assert has_ai_file_markers(png)
    assert has_ai_file_markers(b"Exif... NovelAI ...")
    assert not has_ai_file_markers(b"\x89PNG\r\n\x1a\n plain picture")
    # PixivFlow's markers (note §5), case-insensitive, within the first 2 MiB only.
    for marker in (b"NovelAI", b"Stable Diffusion", b"stablediffusion", b"Parameters=steps", b"DreamStudio"):
        assert has_ai_file_markers(b"\x89PNG" + marker)
    assert not has_ai_file_markers(b"\x00" * (2 * 1024 * 1024) + b"novelai")
    assert has_ai_file_markers(b"\x00" * (2 * 1024 * 1024 - 7) + b"novelai")


# -- order: sort, random ------------------------------------------------------------------------------


@pytest.mark.parametrize(("sort", "expected"), [
    ("date_desc", ["2", "3", "1"]),
    ("date_asc", ["1", "3", "2"]),
    ("popular_desc", ["3", "1", "2"]),
])
def test_the_final_order_is_the_targets_sort(sort, expected):
    works = [w(1, day(1), bookmarks=50), w(2, day(9), bookmarks=10), w(3, day(5), bookmarks=90)]
    _, found = run(Criteria(tag="cat", sort=sort), Source({"cat": works}))
    assert ids(found.candidates) == expected


def test_random_shuffles_the_eligible_works_the_same_way_for_the_same_cell_and_tries_at_most_50():
    works = [w(i, day(1 + i % 28)) for i in range(1, 81)]
    _, first = run(Criteria(tag="cat", random=True), Source({"cat": works}, size=100), seed="slot-a#cats")
    _, again = run(Criteria(tag="cat", random=True), Source({"cat": works}, size=100), seed="slot-a#cats")
    _, other = run(Criteria(tag="cat", random=True), Source({"cat": works}, size=100), seed="slot-b#cats")
    _, ordered = run(Criteria(tag="cat"), Source({"cat": works}, size=100))
    assert len(first.candidates) == RANDOM_MAX_ATTEMPTS
    assert ids(first.candidates) == ids(again.candidates)
    assert ids(first.candidates) != ids(other.candidates)
    assert ids(first.candidates) != ids(ordered.candidates)[:RANDOM_MAX_ATTEMPTS]
    assert first.supply.selected == 80  # the eligible pool; the cap is how many the scan may try


# -- pinned works ----------------------------------------------------------------------------------


def test_a_pinned_work_is_never_searched():
    plan = plan_selection(Criteria(tag="cat", pinned_id="105"), occurrence_date=OCCURRENCE)
    assert plan.pinned_id == "105" and plan.queries == ()


def test_a_pinned_work_skips_the_search_filters_but_not_the_page_cap_or_a_placeholder():
    criteria = Criteria(pinned_id="105", min_bookmarks=10_000, exclude_ai=True, start_date="2030-01-01", max_page_count=2)
    plan = plan_selection(criteria, occurrence_date=OCCURRENCE)
    taken = select_pinned(plan, w(105, bookmarks=1, ai_type=2, pages=2))
    assert ids(taken.candidates) == ["105"]
    assert taken.supply.to_dict() == {"fetched": 1, "selected": 1, "rejected": 0, "reasons": []}
    too_long = select_pinned(plan, w(105, pages=3))
    assert too_long.candidates == [] and too_long.supply.reasons == {"too_many_pages": 1}
    hidden = select_pinned(plan, w(105, restricted=True))
    assert hidden.candidates == [] and hidden.supply.reasons == {"restricted": 1}
