"""The local fake Pixiv (pixivflow.local.fake_pixiv) answers like Pixiv, and the source maps its
answers into Work facts (issue 10). A fake that accepted anything would prove nothing."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from pixivflow.adapters.pixiv import build_source, constants
from pixivflow.adapters.pixiv.auth import client_hash, client_time
from pixivflow.adapters.pixiv.secrets import SecretResolver
from pixivflow.clock import VirtualClock
from pixivflow.config import parse_config
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN
from pixivflow.domain.work import SearchRequest
from support.builders import fake_pixiv

T0 = 1_796_083_200_000


fake = fake_pixiv(scope="module", page_size=3)


@pytest.fixture
def source(fake):
    config = parse_config({"pixiv": {"refreshToken": "${T}"}, "source": {"kind": "pixiv", "baseUrls": fake.base_urls},
                           "network": {"requestPacingMs": 0}, "download": {"requestDelay": 0}})
    return build_source(config, now_ms=VirtualClock(T0).now_ms, uniform=lambda: 0.0, sleep=lambda s: None,
                        resolver=SecretResolver(env={"T": DEFAULT_REFRESH_TOKEN}), env={})


def grant(fake, *, stamp="2026-12-01T00:00:00+00:00", hash_=None, token=DEFAULT_REFRESH_TOKEN):
    return httpx.post(f"{fake.url}/auth/token", headers={"X-Client-Time": stamp, "X-Client-Hash": hash_ or client_hash(stamp)},
                      data={"client_id": constants.CLIENT_ID, "client_secret": constants.CLIENT_SECRET,
                            "grant_type": "refresh_token", "refresh_token": token})


def test_the_fake_checks_the_hash_the_token_the_bearer_the_referer_and_the_offset_cap(fake):
    assert grant(fake, hash_="0" * 32).json()["errors"]["system"] == {"message": "access_denied", "code": 1508}
    bad = grant(fake, token="nope")
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_grant")
    ok = grant(fake).json()
    assert ok["access_token"] == ok["response"]["access_token"] and ok["expires_in"] == 3600
    api = httpx.get(f"{fake.url}/v1/illust/detail?illust_id=91001", headers={"Authorization": "Bearer wrong"})
    assert api.status_code == 400 and "invalid_grant" in api.json()["error"]["message"]
    bearer = {"Authorization": f"Bearer {ok['access_token']}"}
    capped = httpx.get(f"{fake.url}/v1/search/illust?word=cats&offset=5010", headers=bearer)
    assert capped.status_code == 400 and "offset must be no more than 5000" in capped.json()["error"]["message"]
    path = "/img-original/img/2026/11/29/21/15/00/91001_p0.png"
    assert httpx.get(fake.url + path).status_code == 403  # no Referer
    assert httpx.get(fake.url + path, headers={"Referer": constants.REFERER}).content.startswith(b"\x89PNG")
    assert hashlib.md5(("2026-12-01T00:00:00+00:00" + constants.HASH_SECRET).encode()).hexdigest() == client_hash(client_time(T0))


def test_search_pages_and_maps_the_selection_facts(source, fake):
    request = SearchRequest(tag="cats")
    first = source.search_page(request, None)
    second = source.search_page(request, first.next_cursor)
    works = list(first.items) + list(second.items)
    # filter=for_ios (sent on every search without R-18) leaves the R-18 work 91005 out, as Pixiv does
    assert [w.work_id for w in works] == ["91000", "91001", "91002", "91003", "91004"]
    r18 = SearchRequest(mode="topic", tag="cats", include_r18=True)
    page = source.search_page(r18, None)
    assert "filter" not in fake.requests[-1].query
    with_r18 = list(page.items) + list(source.search_page(r18, page.next_cursor).items if page.next_cursor else [])
    assert "91005" in [w.work_id for w in with_r18]
    by_id = {w.work_id: w for w in works} | {w.work_id: w for w in with_r18}
    assert by_id["91000"].restricted and by_id["91000"].tags == () and by_id["91000"].title == ""
    assert not any(w.restricted for i, w in by_id.items() if i != "91000")
    assert (by_id["91001"].page_count, by_id["91001"].total_bookmarks, by_id["91001"].tags) == (3, 420, ("cats", "cute"))
    assert (by_id["91001"].user_id, by_id["91001"].user_name) == ("777", "Fixture Artist")
    assert by_id["91001"].create_date == "2026-11-29T21:15:00+09:00"
    assert (by_id["91004"].ai_type, by_id["91005"].x_restrict, by_id["91002"].ai_type) == (2, 1, 1)
    assert first.next_cursor.startswith(fake.url + "/v1/search/illust?") and second.next_cursor is None
    hidden = source.search_page(SearchRequest(tag="cats", exclude_ai=True), None)
    assert "91004" not in [w.work_id for w in hidden.items] + [w.work_id for w in source.search_page(
        SearchRequest(tag="cats", exclude_ai=True), hidden.next_cursor).items]


def test_novels_ranking_and_user_feed(source):
    ranked = source.search_page(SearchRequest(mode="ranking", ranking_mode="day", work_type="novel"), None)
    assert [w.work_id for w in ranked.items] == ["93001", "93002"] and ranked.items[0].work_type == "novel"
    novel = source.get_work("novel", "93001")
    assert (novel.page_count, novel.ai_type, novel.tags) == (2, 1, ("fantasy", "cats"))
    feed = source.search_page(SearchRequest(mode="user", user_id="777"), None)
    assert feed.items and all(w.user_id == "777" for w in feed.items)
