"""The offline catalogue source: search, ranking, paging, lookups, artifacts and fault hooks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pixivflow.adapters.catalog_source import CatalogSource
from pixivflow.domain.errors import PaginationError, SourceError, TransientSourceError, WorkGoneError
from pixivflow.domain.pager import collect
from pixivflow.domain.scan import classify_candidate_failure
from pixivflow.domain.work import SearchRequest, Work


def illust(work_id: int, tags: list[str], day: int, bookmarks: int = 0, pages: int = 1, tags_translated=None, **extra) -> dict:
    translated = tags_translated or {}
    entry = {
        "id": work_id,
        "title": f"work {work_id}",
        "type": "illust",
        "tags": [{"name": t, "translated_name": translated.get(t)} for t in tags],
        "user": {"id": 9000 + work_id, "name": f"artist {work_id}"},
        "create_date": f"2024-05-{day:02d}T12:00:00+09:00",
        "total_bookmarks": bookmarks,
        "page_count": pages,
        "image_urls": {"medium": f"https://example.invalid/{work_id}.jpg"},
        "meta_single_page": {},
    }
    entry.update(extra)
    return entry


def write(tmp_path: Path, catalogue: dict) -> Path:
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps(catalogue), encoding="utf-8")
    return path


@pytest.fixture()
def catalogue_path(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        {
            "illusts": [
                illust(101, ["Landscape", "sunset"], day=1, bookmarks=50),
                illust(102, ["landscape"], day=3, bookmarks=900, pages=3),
                illust(103, ["LANDSCAPE", "Sunset", "sea"], day=2, bookmarks=300),
                illust(104, ["portrait"], day=4, bookmarks=10),
                illust(105, ["landscape", "sunset"], day=5, bookmarks=300, x_fault="gone"),
                illust(106, ["sunsets"], day=6),
            ],
            "novels": [
                {
                    "id": 501,
                    "title": "a novel",
                    "tags": [{"name": "landscape"}],
                    "user": {"id": 1, "name": "writer"},
                    "create_date": "2024-05-07T00:00:00+09:00",
                    "total_bookmarks": 5,
                    "page_count": 2,
                }
            ],
            "ranking": {"day": ["103", "101", "999", "501", "102"], "week": ["104"]},
        },
    )


def ids(works) -> list[str]:
    return [w.work_id for w in works]


# ------------------------------------------------------------------- search


def test_search_matches_all_words_case_insensitively_newest_first(catalogue_path):
    source = CatalogSource(catalogue_path)
    page = source.search_page(SearchRequest(tag="landscape SUNSET"), None)
    # every word must match (106 has no landscape tag); novels never show up in illustration searches
    assert ids(page.items) == ["105", "103", "101"]
    assert page.next_cursor is None


def test_search_target_partial_exact_and_title_and_caption(tmp_path):
    path = write(tmp_path, {"illusts": [
        illust(1, ["sunsets"], day=1, caption="a calm evening"),
        illust(2, ["sunset"], day=2, title="Evening sea"),
        illust(3, ["夕焼け"], day=3, tags_translated={"夕焼け": "sunset"}),
    ]})
    source = CatalogSource(path)
    assert ids(source.search_page(SearchRequest(tag="sunset"), None).items) == ["3", "2", "1"]  # partial (default)
    exact = source.search_page(SearchRequest(tag="sunset", search_target="exact_match_for_tags"), None)
    # a translated tag name counts like the tag (PixivFlow asks Pixiv for translated tag results)
    assert ids(exact.items) == ["3", "2"]
    titled = source.search_page(SearchRequest(tag="evening", search_target="title_and_caption"), None)
    assert ids(titled.items) == ["2", "1"]
    with pytest.raises(SourceError, match="search_target 'text'"):
        source.search_page(SearchRequest(tag="x", search_target="text"), None)


def test_novel_search_targets_text_and_keyword(tmp_path):
    novel = {"id": 9, "title": "Night", "tags": [{"name": "fantasy"}], "user": {"id": 1, "name": "w"},
             "create_date": "2024-05-01T00:00:00+09:00", "caption": "a dragon", "text": "the castle gate"}
    source = CatalogSource(write(tmp_path, {"novels": [novel]}))
    def found(word, target):
        return ids(source.search_page(SearchRequest(work_type="novel", tag=word, search_target=target), None).items)
    assert found("castle", "text") == ["9"] and found("castle", "keyword") == []
    assert found("dragon", "keyword") == ["9"] and found("fantasy", "keyword") == ["9"]


def test_user_mode_lists_one_users_works_newest_first(catalogue_path):
    source = CatalogSource(catalogue_path)
    page = source.search_page(SearchRequest(mode="user", user_id="9103"), None)
    assert ids(page.items) == ["103"]
    assert list(source.search_page(SearchRequest(mode="user", user_id="1"), None).items) == []


def test_the_server_side_hints_are_left_to_the_domain(catalogue_path):
    source = CatalogSource(catalogue_path)
    hinted = SearchRequest(tag="landscape", start_date="2024-05-03", end_date="2024-05-03", exclude_ai=True)
    assert ids(source.search_page(hinted, None).items) == ["105", "102", "103", "101"]


def test_selection_facts_are_read_as_pixiv_writes_them(tmp_path):
    path = write(tmp_path, {"illusts": [
        illust(1, ["a"], day=1, x_restrict=2, illust_ai_type=2, series={"id": 77, "title": "s"}),
        illust(2, ["a"], day=2, visible=False),
        illust(3, ["a"], day=3, image_urls={"medium": "https://s.pximg.net/common/images/limit_sanity_level_360.png"}),
        illust(4, ["a"], day=4),
    ], "novels": [{"id": 5, "title": "n", "tags": [], "user": {"id": 1}, "create_date": "2024-05-01T00:00:00+09:00",
                   "novel_ai_type": 2, "x_restrict": 1}]})
    source = CatalogSource(path)
    one, two, three, four = (source.get_work("illustration", str(i)) for i in (1, 2, 3, 4))
    assert (one.x_restrict, one.ai_type, one.restricted, one.series_id) == (2, 2, False, "77")
    assert two.restricted and three.restricted and not four.restricted
    assert (four.x_restrict, four.ai_type, four.series_id) == (0, 0, None)
    novel = source.get_work("novel", "5")
    assert (novel.x_restrict, novel.ai_type) == (1, 2)


def test_single_word_search_and_popular_order(catalogue_path):
    source = CatalogSource(catalogue_path)
    newest = source.search_page(SearchRequest(tag="landscape"), None)
    assert ids(newest.items) == ["105", "102", "103", "101"]
    popular = source.search_page(SearchRequest(tag="landscape", sort="popular_desc"), None)
    assert ids(popular.items) == ["102", "103", "105", "101"]  # 103 and 105 tie: catalogue order kept


def test_search_maps_raw_json_to_works(catalogue_path):
    source = CatalogSource(catalogue_path)
    (work,) = source.search_page(SearchRequest(tag="portrait"), None).items
    assert work == Work(
        work_id="104",
        work_type="illustration",
        title="work 104",
        tags=("portrait",),
        user_id="9104",
        user_name="artist 104",
        create_date="2024-05-04T12:00:00+09:00",
        total_bookmarks=10,
        page_count=1,
        raw=work.raw,
    )
    assert work.raw["image_urls"]["medium"].endswith("104.jpg")


def test_novel_search(catalogue_path):
    source = CatalogSource(catalogue_path)
    page = source.search_page(SearchRequest(work_type="novel", tag="landscape"), None)
    assert ids(page.items) == ["501"]
    assert page.items[0].work_type == "novel"


def test_topic_is_searched_like_a_tag(catalogue_path):
    source = CatalogSource(catalogue_path)
    page = source.search_page(SearchRequest(mode="topic", topic="sea"), None)
    assert ids(page.items) == ["103"]


def test_no_match_is_an_empty_last_page(catalogue_path):
    page = CatalogSource(catalogue_path).search_page(SearchRequest(tag="nothing-like-this"), None)
    assert list(page.items) == []
    assert page.next_cursor is None


# ------------------------------------------------------------------ ranking


def test_ranking_keeps_the_listed_order(catalogue_path):
    source = CatalogSource(catalogue_path)
    page = source.search_page(SearchRequest(mode="ranking", ranking_mode="day", sort="date_desc"), None)
    # unknown ids and works of the other type are left out
    assert ids(page.items) == ["103", "101", "102"]
    week = source.search_page(SearchRequest(mode="ranking", ranking_mode="week"), None)
    assert ids(week.items) == ["104"]
    novels = source.search_page(SearchRequest(work_type="novel", mode="ranking", ranking_mode="day"), None)
    assert ids(novels.items) == ["501"]
    missing = source.search_page(SearchRequest(mode="ranking", ranking_mode="month"), None)
    assert list(missing.items) == [] and missing.next_cursor is None


# ------------------------------------------------------------------- paging


def test_pages_and_cursor(catalogue_path):
    source = CatalogSource(catalogue_path, page_size=2)
    request = SearchRequest(tag="landscape")
    first = source.search_page(request, None)
    assert ids(first.items) == ["105", "102"]
    assert isinstance(first.next_cursor, str)
    second = source.search_page(request, first.next_cursor)
    assert ids(second.items) == ["103", "101"]
    assert second.next_cursor is None  # the last page ends exactly at the end


def test_pages_walked_by_the_shared_pager(catalogue_path):
    source = CatalogSource(catalogue_path, page_size=1)
    request = SearchRequest(tag="landscape")
    calls: list[str | None] = []

    def fetch(cursor):
        calls.append(cursor)
        return source.search_page(request, cursor)

    result = collect(fetch, limit=3, sort=request.sort)
    assert ids(result) == ["105", "102", "103"]
    assert len(calls) == 4 and calls[0] is None  # every page until next is None


def test_a_cursor_that_is_not_ours_is_refused(catalogue_path):
    with pytest.raises(SourceError):
        CatalogSource(catalogue_path).search_page(SearchRequest(tag="landscape"), "page-two")


def test_pager_guard_catches_a_source_that_repeats_its_cursor(catalogue_path):
    source = CatalogSource(catalogue_path, page_size=1)

    def stuck(cursor):
        # a broken adapter that ignores the cursor: always page one, always the same next
        return source.search_page(SearchRequest(tag="landscape"), None)

    with pytest.raises(PaginationError):
        collect(stuck, limit=None)


# ------------------------------------------------------------------ get_work


def test_get_work(catalogue_path):
    source = CatalogSource(catalogue_path)
    work = source.get_work("illustration", "102")
    assert (work.work_id, work.page_count, work.total_bookmarks) == ("102", 3, 900)
    assert source.get_work("novel", "501").title == "a novel"


def test_get_work_unknown_or_wrong_type_is_gone(catalogue_path):
    source = CatalogSource(catalogue_path)
    with pytest.raises(WorkGoneError, match="work 999 not found"):
        source.get_work("illustration", "999")
    with pytest.raises(WorkGoneError):
        source.get_work("novel", "101")


def test_gone_fault_is_listed_but_not_fetchable(catalogue_path):
    source = CatalogSource(catalogue_path)
    listed = source.search_page(SearchRequest(tag="landscape sunset"), None).items
    assert "105" in ids(listed)
    with pytest.raises(WorkGoneError, match="work 105 not found"):
        source.get_work("illustration", "105")
    with pytest.raises(WorkGoneError):
        source.download(listed[0])
    assert classify_candidate_failure(WorkGoneError("work 105 not found")).skip_code == "deleted"


# ------------------------------------------------------------------ download


def test_download_one_file_per_page_deterministic(catalogue_path, tmp_path):
    source = CatalogSource(catalogue_path)
    work = source.get_work("illustration", "102")
    files = source.download(work)
    assert [f.name for f in files] == ["102_p0.png", "102_p1.png", "102_p2.png"]
    assert all(f.content_type == "image/png" and f.content.startswith(b"\x89PNG\r\n\x1a\n") for f in files)
    assert len({f.content for f in files}) == 3  # each page differs
    # a fresh source over the same file gives the same bytes
    again = CatalogSource(catalogue_path).download(work)
    assert [f.content for f in again] == [f.content for f in files]
    # the bytes depend only on (id, page), not on anything else in the entry
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = write(elsewhere, {"illusts": [illust(102, ["other"], day=9, pages=1)]})
    assert CatalogSource(other).download(work)[0].content == files[0].content
    digest = hashlib.sha256(b"pixivflow-catalog:102:1").digest()
    assert files[1].content.endswith(digest)


def test_novel_download_is_text(catalogue_path):
    source = CatalogSource(catalogue_path)
    files = source.download(source.get_work("novel", "501"))
    assert [f.name for f in files] == ["501_p0.txt", "501_p1.txt"]
    assert files[0].content.decode("utf-8").startswith("a novel")
    assert files[0].content != files[1].content


@pytest.mark.parametrize(
    ("fault", "error_type", "message", "expected_skip"),
    [
        ("download_error", SourceError, "image download failed", "unavailable"),
        ("transient", TransientSourceError, "ECONNRESET while downloading", "unavailable"),
    ],
)
def test_download_fault_hooks(tmp_path, fault, error_type, message, expected_skip):
    path = write(tmp_path, {"illusts": [illust(7, ["x"], day=1, x_fault=fault)]})
    source = CatalogSource(path)
    work = source.get_work("illustration", "7")  # metadata is still fetchable
    with pytest.raises(error_type, match=message) as caught:
        source.download(work)
    if fault == "download_error":
        assert not isinstance(caught.value, TransientSourceError)
    verdict = classify_candidate_failure(caught.value)
    assert verdict.skip_code == expected_skip and verdict.retryable


def test_slow_fault_downloads_normally(tmp_path):
    path = write(tmp_path, {"illusts": [illust(8, ["x"], day=1, pages=2, x_fault="slow")]})
    source = CatalogSource(path)
    assert [f.name for f in source.download(source.get_work("illustration", "8"))] == ["8_p0.png", "8_p1.png"]


def test_unknown_fault_is_a_catalogue_error(tmp_path):
    path = write(tmp_path, {"illusts": [illust(8, ["x"], day=1, x_fault="explode")]})
    with pytest.raises(SourceError, match="x_fault"):
        CatalogSource(path).get_work("illustration", "8")


# ------------------------------------------------------------------- loading


def test_catalogue_is_loaded_lazily_and_once(tmp_path):
    path = tmp_path / "later.json"
    source = CatalogSource(path)  # the file does not exist yet: nothing is read here
    path.write_text(json.dumps({"illusts": [illust(1, ["a"], day=1)]}), encoding="utf-8")
    assert ids(source.search_page(SearchRequest(tag="a"), None).items) == ["1"]
    path.write_text(json.dumps({"illusts": []}), encoding="utf-8")
    assert source.get_work("illustration", "1").work_id == "1"  # still the first load


@pytest.mark.parametrize(
    "content",
    ["not json", json.dumps([1, 2]), json.dumps({"illusts": [{"title": "no id"}]}),
     json.dumps({"illusts": [illust(1, [], day=1), illust(1, [], day=2)]})],
)
def test_bad_catalogue_is_a_non_retryable_source_error(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        CatalogSource(path).search_page(SearchRequest(tag="a"), None)
    assert caught.value.retryable is False


def test_missing_catalogue_file(tmp_path):
    with pytest.raises(SourceError, match="cannot be read"):
        CatalogSource(tmp_path / "absent.json").get_work("illustration", "1")
