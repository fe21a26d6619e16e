"""The shared search pager: progress guard, over-fetch bound, date window, sort (spec §6.4)."""

from __future__ import annotations

import pytest

from pixivflow.domain.errors import PaginationError
from pixivflow.domain.pager import collect, fetch_limit, sort_works
from pixivflow.domain.work import Page, Work


def work(work_id: int | str, create_date: str = "2024-05-01T12:00:00+09:00", bookmarks: int = 0) -> Work:
    return Work(work_id=str(work_id), work_type="illustration", create_date=create_date, total_bookmarks=bookmarks)


class ScriptedPager:
    """Answers each request from a script of (items, next_cursor) and records the cursors asked for."""

    def __init__(self, script: list[tuple[list[Work], str | None]]) -> None:
        self.script = script
        self.cursors: list[str | None] = []

    def __call__(self, cursor: str | None) -> Page:
        self.cursors.append(cursor)
        if len(self.cursors) > len(self.script):
            raise AssertionError(f"request {len(self.cursors)} was not expected")
        items, next_cursor = self.script[len(self.cursors) - 1]
        return Page(items=items, next_cursor=next_cursor)


class EndlessPager:
    """Fresh cursors forever, ``page_size`` new works per page."""

    def __init__(self, page_size: int = 30) -> None:
        self.page_size = page_size
        self.calls = 0

    def __call__(self, cursor: str | None) -> Page:
        self.calls += 1
        start = 0 if cursor is None else int(cursor)
        items = [work(i) for i in range(start, start + self.page_size)]
        return Page(items=items, next_cursor=str(start + self.page_size))


# ------------------------------------------------------------- progress guard


def test_stuck_cursor_fails_on_the_second_request():
    pager = ScriptedPager([([work(1)], "STUCK"), ([work(2)], "STUCK"), ([work(3)], None)])
    with pytest.raises(PaginationError) as caught:
        collect(pager, limit=None)
    assert pager.cursors == [None, "STUCK"]  # exactly two requests
    assert "did not advance" in str(caught.value)
    assert caught.value.code == "PAGINATION_ERROR"
    assert caught.value.retryable is False


def test_cursor_cycle_fails_after_the_third_request():
    pager = ScriptedPager([([work(1)], "A"), ([work(2)], "B"), ([work(3)], "A"), ([work(4)], None)])
    with pytest.raises(PaginationError) as caught:
        collect(pager, limit=None)
    assert pager.cursors == [None, "A", "B"]
    assert "did not advance" in str(caught.value)


def test_reaching_the_bound_stops_before_a_repeat_can_be_seen():
    pager = ScriptedPager([([work(i) for i in range(200)], "X"), ([], "X")])
    assert len(collect(pager, limit=1)) == 1
    assert pager.cursors == [None]
    # below the bound the same repeat is a broken pager
    pager = ScriptedPager([([work(1)], "X"), ([work(2)], "X")])
    with pytest.raises(PaginationError):
        collect(pager, limit=1)


def test_paging_passes_each_cursor_and_stops_at_none():
    pager = ScriptedPager([([work(1), work(2)], "c1"), ([work(3)], "c2"), ([work(4)], None)])
    result = collect(pager, limit=None, sort="none")
    assert pager.cursors == [None, "c1", "c2"]
    assert [w.work_id for w in result] == ["1", "2", "3", "4"]


def test_empty_first_page_ends_with_no_results():
    pager = ScriptedPager([([], None)])
    assert collect(pager, limit=5) == []
    assert pager.cursors == [None]


# ----------------------------------------------------------- over-fetch bound


@pytest.mark.parametrize(
    ("limit", "sort", "dated", "expected"),
    [
        (None, "date_desc", False, None),
        (0, "date_desc", False, None),
        (1, "date_desc", False, 100),
        (30, "date_desc", False, 150),
        (30, "popular_desc", False, 150),
        (30, "popular_desc", True, 300),
        (5, "popular_desc", True, 100),
        (30, "date_desc", True, 150),  # only popular_desc pays extra for a date filter
        (49, "date_desc", False, 245),
        (50, "date_desc", False, 200),
        (150, "date_desc", False, 300),
        (150, "popular_desc", True, 450),
        (60, "popular_desc", True, 200),
    ],
)
def test_fetch_limit(limit, sort, dated, expected):
    assert fetch_limit(limit, sort, dated) == expected


def test_over_fetch_bound_stops_paging():
    pager = EndlessPager(page_size=30)
    result = collect(pager, limit=1)  # bound 100 -> 30, 60, 90, 120: four pages
    assert pager.calls == 4
    assert len(result) == 1


def test_popular_with_date_filter_fetches_more():
    pager = EndlessPager(page_size=30)
    collect(pager, limit=20, sort="popular_desc", start_date="2024-01-01")  # bound 200 -> 7 pages
    assert pager.calls == 7


def test_max_items_lowers_the_bound():
    pager = EndlessPager(page_size=10)
    result = collect(pager, limit=None, sort="none", max_items=25)
    assert pager.calls == 3
    assert len(result) == 30  # whole pages are kept


def test_result_is_sliced_to_the_limit():
    pager = ScriptedPager([([work(i) for i in range(10)], None)])
    assert len(collect(pager, limit=3)) == 3


def test_repeated_work_is_kept_once():
    pager = ScriptedPager([([work(1), work(2)], "n"), ([work(2), work(3)], None)])
    assert [w.work_id for w in collect(pager, limit=None, sort="none")] == ["1", "2", "3"]


# --------------------------------------------------------------------- sort


def test_sort_orders_are_stable():
    items = [
        work("a", "2024-05-01T10:00:00+09:00", 5),
        work("b", "2024-05-03T10:00:00+09:00", 9),
        work("c", "2024-05-01T10:00:00+09:00", 9),
        work("d", "2024-05-02T10:00:00+09:00", 5),
    ]
    assert [w.work_id for w in sort_works(items, "date_desc")] == ["b", "d", "a", "c"]
    assert [w.work_id for w in sort_works(items, "date_asc")] == ["a", "c", "d", "b"]
    assert [w.work_id for w in sort_works(items, "popular_desc")] == ["b", "c", "a", "d"]
    assert [w.work_id for w in sort_works(items, "none")] == ["a", "b", "c", "d"]


def test_dates_compare_as_instants_across_offsets():
    items = [work("tokyo", "2024-05-01T08:00:00+09:00"), work("utc", "2024-05-01T00:30:00+00:00")]
    # 08:00 JST is 23:00 UTC the day before, so the UTC work is newer
    assert [w.work_id for w in sort_works(items, "date_desc")] == ["utc", "tokyo"]


def test_collect_sorts_across_pages_then_slices():
    pager = ScriptedPager(
        [([work(1, bookmarks=3), work(2, bookmarks=10)], "p2"), ([work(3, bookmarks=7), work(4, bookmarks=10)], None)]
    )
    result = collect(pager, limit=3, sort="popular_desc")
    assert [w.work_id for w in result] == ["2", "4", "3"]


def test_unknown_sort_is_refused_before_fetching():
    pager = ScriptedPager([])
    with pytest.raises(ValueError):
        collect(pager, limit=1, sort="random")
    assert pager.cursors == []


# -------------------------------------------------------------- date window


def dated(work_id: int, day: str) -> Work:
    return work(work_id, f"{day}T12:00:00+09:00")


def test_date_desc_stops_at_the_first_work_older_than_start():
    pager = ScriptedPager(
        [
            ([dated(1, "2024-05-10"), dated(2, "2024-05-06"), dated(3, "2024-05-05")], "p2"),
            ([dated(4, "2024-05-04"), dated(5, "2024-05-03"), dated(6, "2024-05-08")], "p3"),
            ([dated(7, "2024-05-01")], None),
        ]
    )
    result = collect(pager, limit=None, start_date="2024-05-04", end_date="2024-05-08")
    # 1 is newer than the end (skipped), 5 is older than the start: paging stops there,
    # so 6 (after it on the same page) and page 3 are never used
    assert [w.work_id for w in result] == ["2", "3", "4"]
    assert pager.cursors == [None, "p2"]


def test_date_asc_stops_at_the_first_work_newer_than_end():
    pager = ScriptedPager(
        [
            ([dated(1, "2024-05-01"), dated(2, "2024-05-04")], "p2"),
            ([dated(3, "2024-05-08"), dated(4, "2024-05-09"), dated(5, "2024-05-05")], "p3"),
            ([dated(6, "2024-05-06")], None),
        ]
    )
    result = collect(pager, limit=None, sort="date_asc", start_date="2024-05-04", end_date="2024-05-08")
    assert [w.work_id for w in result] == ["2", "3"]
    assert pager.cursors == [None, "p2"]


def test_popular_desc_filters_without_stopping():
    pager = ScriptedPager(
        [
            ([dated(1, "2024-04-01"), dated(2, "2024-05-05")], "p2"),
            ([dated(3, "2024-06-01"), dated(4, "2024-05-06")], None),
        ]
    )
    result = collect(pager, limit=None, sort="popular_desc", start_date="2024-05-01", end_date="2024-05-31")
    assert sorted(w.work_id for w in result) == ["2", "4"]
    assert pager.cursors == [None, "p2"]


def test_date_only_bounds_include_the_whole_day():
    pager = ScriptedPager(
        [([work(1, "2024-05-08T23:59:00+09:00"), work(2, "2024-05-04T00:00:00+09:00")], None)]
    )
    result = collect(pager, limit=None, start_date="2024-05-04", end_date="2024-05-08")
    assert [w.work_id for w in result] == ["1", "2"]


def test_datetime_bounds_compare_instants():
    pager = ScriptedPager(
        [([work(1, "2024-05-04T09:30:00+09:00"), work(2, "2024-05-04T08:30:00+09:00")], None)]
    )
    # 00:00 UTC is 09:00 JST: work 2 is before the start and ends the walk
    result = collect(pager, limit=None, start_date="2024-05-04T00:00:00Z")
    assert [w.work_id for w in result] == ["1"]


def test_work_without_a_date_is_skipped_when_filtering():
    pager = ScriptedPager([([work(1, ""), work(2, "not a date"), dated(3, "2024-05-05")], None)])
    result = collect(pager, limit=None, start_date="2024-05-01")
    assert [w.work_id for w in result] == ["3"]


def test_without_a_date_filter_nothing_is_dropped():
    pager = ScriptedPager([([work(1, ""), dated(2, "2020-01-01")], None)])
    assert len(collect(pager, limit=None)) == 2


@pytest.mark.parametrize(
    ("start", "end"),
    [("2024-05-09", "2024-05-01"), ("2024-05-09T00:00:00Z", "2024-05-08"), ("yesterday-ish", None)],
)
def test_invalid_date_range_is_empty_without_fetching(start, end):
    pager = ScriptedPager([])
    assert collect(pager, limit=5, start_date=start, end_date=end) == []
    assert pager.cursors == []


# -- walk: what one bounded search returned and passed over ---------------------------------------


def test_walk_reports_what_it_passed_over_and_the_work_that_ended_it():
    from pixivflow.domain.pager import walk

    pager = ScriptedPager([
        ([work(1, "2024-05-09T10:00:00+09:00"), work(2, "2024-05-05T10:00:00+09:00")], "A"),
        ([work(2, "2024-05-05T10:00:00+09:00"), work(3, "2024-04-30T10:00:00+09:00"), work(4, "2024-04-29")], "B"),
    ])
    found = walk(pager, bound=100, order="date_desc", start_date="2024-05-01", end_date="2024-05-06")
    assert [w.work_id for w in found.items] == ["2"]
    assert [w.work_id for w in found.outside] == ["1", "3"]  # newer than the end; older: stopped here
    assert found.stopped and found.requests == 2 and found.examined == 3  # the repeated 2 is counted once


def test_walk_never_examines_more_than_its_cap_even_when_the_window_keeps_everything_out():
    from pixivflow.domain.pager import walk

    pager = EndlessPager(page_size=30)
    found = walk(pager, bound=100, order="popular_desc", start_date="2030-01-01", max_examined=300)
    assert found.items == [] and found.examined == 300 and pager.calls == 10


def test_walk_refuses_a_bad_window_before_fetching():
    from pixivflow.domain.pager import InvalidDateWindow, walk

    pager = ScriptedPager([])
    with pytest.raises(InvalidDateWindow):
        walk(pager, bound=10, start_date="2024-05-10", end_date="2024-05-01")
    with pytest.raises(InvalidDateWindow):
        walk(pager, bound=10, start_date="soon")
    assert pager.cursors == []
