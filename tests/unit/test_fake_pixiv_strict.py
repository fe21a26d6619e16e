"""The fake Pixiv is as strict as Pixiv where topic mode relies on it (issue 22): autocomplete,
``filter=for_ios``, the ranking ``date``, refused parameter values, partial tag matching, search
dates as Japan days, novels with Pixiv's markup."""

from __future__ import annotations

import httpx
import pytest

from pixivflow.adapters.pixiv import build_source
from pixivflow.adapters.pixiv.secrets import SecretResolver
from pixivflow.clock import VirtualClock
from pixivflow.config import parse_config
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, topic_fixtures
from pixivflow.domain.work import SearchRequest
from support.builders import fake_pixiv

T0 = 1_796_083_200_000


fake = fake_pixiv(topic_fixtures, scope="module")


@pytest.fixture
def source(fake):
    config = parse_config({"pixiv": {"refreshToken": "${T}"}, "source": {"kind": "pixiv", "baseUrls": fake.base_urls},
                           "network": {"requestPacingMs": 0}, "download": {"requestDelay": 0}})
    return build_source(config, now_ms=VirtualClock(T0).now_ms, uniform=lambda: 0.0, sleep=lambda s: None,
                        resolver=SecretResolver(env={"T": DEFAULT_REFRESH_TOKEN}), env={})


@pytest.fixture
def bearer(fake, source):
    source.search_page(SearchRequest(tag="cats"), None)  # one grant through the real client
    return {"Authorization": f"Bearer {fake.issued_access_tokens[-1]}"}


def ids(source, request):
    return [w.work_id for w in source.search_page(request, None).items]


def test_autocomplete_answers_suggestions(source, fake):
    assert source.autocomplete("アークナイツ") == ["アークナイツ", "明日方舟"]
    assert fake.requests[-1].query == {"word": "アークナイツ", "merge_plain_keyword_results": "true"}
    assert source.autocomplete("初音") == ["初音ミク"]  # no scripted answer: tags starting with the word


def test_for_ios_leaves_r18_out_and_include_r18_brings_it_back(source, fake):
    day = dict(start_date="2026-11-30", end_date="2026-11-30")
    safe = ids(source, SearchRequest(mode="topic", tag="ミク", **day))
    assert fake.requests[-1].query["filter"] == "for_ios"
    assert safe == ["97003", "97002"]  # 97001 is R-18; partial match finds 初音ミク
    assert ids(source, SearchRequest(mode="topic", tag="ミク", include_r18=True, **day)) == ["97003", "97001", "97002"]


def test_search_dates_are_japan_days_the_whole_day(source):
    # 95001 was posted 03:00 JST on 30 Nov (18:00 UTC on the 29th): it belongs to the 30th.
    got = ids(source, SearchRequest(mode="topic", tag="ボテ腹", include_r18=True, start_date="2026-11-30",
                                    end_date="2026-11-30"))
    assert got == ["95003", "95002", "95001"]


def test_the_ranking_date_is_honoured(source):
    assert ids(source, SearchRequest(mode="ranking", ranking_mode="day", ranking_date="2026-11-30")) == ["92002", "92001"]
    assert ids(source, SearchRequest(mode="ranking", ranking_mode="day", ranking_date="2026-11-29")) == ["92001", "92003"]
    assert ids(source, SearchRequest(mode="ranking", ranking_mode="day", ranking_date="2026-11-01")) == []


@pytest.mark.parametrize("path,query,name", [
    ("/v1/search/illust", "word=x&search_target=text", "search_target"),
    ("/v1/search/illust", "word=x&search_target=keyword", "search_target"),
    ("/v1/search/novel", "word=x&search_target=tags", "search_target"),
    ("/v1/search/illust", "word=x&sort=popular", "sort"),
    ("/v1/search/novel", "word=x&start_date=2026-11-31", "start_date"),
    ("/v1/illust/ranking", "mode=daily", "mode"),
    ("/v1/novel/ranking", "mode=week_original", "mode"),
    ("/v1/illust/ranking", "mode=day&date=30-11-2026", "date"),
])
def test_values_pixiv_refuses_are_a_400_naming_the_parameter(fake, bearer, path, query, name):
    answer = httpx.get(f"{fake.url}{path}?{query}", headers=bearer)
    assert answer.status_code == 400
    assert f'"{name}"' in answer.json()["error"]["message"]


def test_accepted_values_answer(fake, bearer):
    for path, query in (("/v1/search/novel", "word=x&search_target=text&sort=date_asc"),
                        ("/v1/search/illust", "word=x&search_target=title_and_caption&sort=popular_desc"),
                        ("/v1/novel/ranking", "mode=week_rookie&date=2026-11-30")):
        assert httpx.get(f"{fake.url}{path}?{query}", headers=bearer).status_code == 200


def test_novels_carry_pixiv_markup_in_chinese_and_japanese(source):
    zh = {f.role: f for f in source.download(source.get_work("novel", "96002"))}["text"].content.decode()
    ja = {f.role: f for f in source.download(source.get_work("novel", "96001"))}["text"].content.decode()
    for text in (zh, ja):
        assert "[newpage]" in text and "[[rb:" in text
    assert "[pixivimage:95001]" in zh and "夜市" in zh and "彼女" in ja
