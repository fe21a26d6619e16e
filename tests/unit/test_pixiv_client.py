"""Contract tests of the Pixiv App API client over httpx.MockTransport (issue 10).

Each test scripts Pixiv's answers (shapes from ../shared/notes/pixiv-app-api.md, our own
fixtures) and asserts what the client sends and what it raises. No network, no real sleep:
the clock is virtual and ``sleep`` only records.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable
from urllib.parse import parse_qsl

import httpx
import pytest

from pixivflow.adapters.pixiv import MemoryPixivAccounts, build_source, constants
from pixivflow.adapters.pixiv.auth import client_hash, client_time, fingerprint
from pixivflow.adapters.pixiv.secrets import SecretResolver
from pixivflow.clock import Entropy, VirtualClock
from pixivflow.config import parse_config
from pixivflow.domain.errors import (AuthenticationError, RateLimitedError, SourceConfigurationError, SourceError,
                                     SourceOutage, WorkGoneError)
from pixivflow.domain.work import SearchRequest

T0 = 1_796_083_200_000  # 2026-12-01T00:00:00Z
REFRESH = "rt-original-5f1e9c0b2a7d"
OAUTH_INVALID = {"has_error": True, "errors": {"system": {"message": "Invalid refresh token", "code": 1508}},
                 "error": "invalid_grant"}
API_INVALID = {"error": {"user_message": "", "message": "Error occurred at the OAuth process. Please check your "
                         "Access Token to fix this. Error Message: invalid_grant", "reason": "", "user_message_details": {}}}
RATE_LIMIT = {"error": {"user_message": "", "message": "Rate Limit", "reason": "", "user_message_details": {}}}


def token_body(access: str, refresh: str = REFRESH, expires_in: int = 3600) -> dict[str, Any]:
    inner = {"access_token": access, "expires_in": expires_in, "token_type": "bearer", "scope": "",
             "refresh_token": refresh, "user": {"id": "1", "name": "u", "account": "u"}}
    return {**inner, "response": dict(inner)}


def illust_raw(work_id: int, create_date: str = "2026-11-29T10:00:00+09:00", pages: int = 1) -> dict[str, Any]:
    day = "2026/11/29/10/00/00"
    raw = {"id": work_id, "title": f"w{work_id}", "type": "illust", "tags": [{"name": "cats", "translated_name": None}],
           "user": {"id": 7, "name": "artist"}, "create_date": create_date, "page_count": pages, "width": 8,
           "height": 6, "x_restrict": 0, "illust_ai_type": 1, "total_bookmarks": 10, "visible": True,
           "image_urls": {"large": f"https://i.pximg.net/c/600x1200_90/img-master/img/{day}/{work_id}_p0_master1200.jpg"}}
    if pages == 1:
        raw["meta_single_page"] = {"original_image_url": f"https://i.pximg.net/img-original/img/{day}/{work_id}_p0.png"}
        raw["meta_pages"] = []
    else:
        raw["meta_single_page"] = {}
        raw["meta_pages"] = [{"image_urls": {"original": f"https://i.pximg.net/img-original/img/{day}/{work_id}_p{n}.png",
                                             "large": f"https://i.pximg.net/c/600x1200_90/img-master/img/{day}/{work_id}_p{n}_master1200.jpg"}}
                             for n in range(pages)]
    return raw


class Pixiv:
    """A scripted Pixiv behind MockTransport: ``routes[path] = fn(request) -> httpx.Response``."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.routes: dict[str, Callable[[httpx.Request], httpx.Response]] = {}
        self.issued = 0
        self.valid: set[str] = set()
        self.refresh_tokens = {REFRESH}
        self.rotate_to: str | None = None
        self.routes[constants.TOKEN_PATH] = self._token

    def _token(self, request: httpx.Request) -> httpx.Response:
        form = dict(parse_qsl(request.content.decode()))
        if form.get("refresh_token") not in self.refresh_tokens:
            return httpx.Response(400, json=OAUTH_INVALID)
        self.issued += 1
        access = f"at-{self.issued}-9c2e41d7b3"
        self.valid.add(access)
        return httpx.Response(200, json=token_body(access, self.rotate_to or form["refresh_token"]))

    def authorised(self, request: httpx.Request) -> bool:
        return request.headers.get("authorization", "").removeprefix("Bearer ") in self.valid

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        route = self.routes.get(request.url.path)
        if route is None:
            return httpx.Response(404, json={"error": {"user_message": "", "message": "Not Found"}})
        if request.url.path.startswith("/v") and not self.authorised(request):
            return httpx.Response(400, json=API_INVALID)
        return route(request)

    def api(self, path: str | None = None) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.path.startswith("/v") and (path is None or r.url.path == path)]

    def query(self, request: httpx.Request) -> dict[str, str]:
        return dict(parse_qsl(request.url.query.decode()))


@pytest.fixture
def pixiv() -> Pixiv:
    return Pixiv()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(T0)


class Rig:
    def __init__(self, pixiv: Pixiv, clock: VirtualClock, *, cfg: dict | None = None, env: dict | None = None,
                 store: Any = None, resolver: SecretResolver | None = None) -> None:
        self.sleeps: list[float] = []
        self.logs: list[tuple[str, str, dict]] = []
        self.store = store or MemoryPixivAccounts()
        config = parse_config({"source": {"kind": "pixiv"}, "pixiv": {"refreshToken": "${PIXIV_TOKEN}"},
                               "network": {"requestPacingMs": 0}, "download": {"requestDelay": 0}, **(cfg or {})})
        def sleep(seconds: float) -> None:  # waiting passes virtual time (the account's pacing turn reads it)
            self.sleeps.append(seconds)
            clock.advance(int(seconds * 1000))

        self.source = build_source(
            config, now_ms=clock.now_ms, uniform=Entropy(3).uniform, store=self.store, sleep=sleep,
            resolver=resolver or SecretResolver(env={"PIXIV_TOKEN": REFRESH} if env is None else env),
            env=env if env is not None else {"PIXIV_TOKEN": REFRESH},
            log=lambda level, message, **fields: self.logs.append((level, message, fields)),
            transport=httpx.MockTransport(pixiv))

    def events(self, name: str) -> list[dict]:
        return [f for _, _, f in self.logs if f.get("event") == name]


def page(items: list[dict], next_url: str | None, section: str = "illusts") -> httpx.Response:
    return httpx.Response(200, json={section: items, "next_url": next_url, "search_span_limit": 31536000})


# ------------------------------------------------------------------ hosts, headers, hash


def test_real_default_hosts_app_identity_and_headers_are_pinned():
    assert (constants.OAUTH_BASE, constants.API_BASE, constants.IMAGE_BASE) == (
        "https://oauth.secure.pixiv.net", "https://app-api.pixiv.net", "https://i.pximg.net")
    assert constants.TOKEN_PATH == "/auth/token"
    assert constants.CLIENT_ID == "MOBrBDS8blbauoSck0ZfDbtuzpyT"
    assert constants.CLIENT_SECRET == "lsACyCD94FhDUtGTXi3QzcFE2uU1hqtDaKeqrdwj"
    assert constants.HASH_SECRET == "28c1fdd170a5204386cb1313c7077b34f83e4aaf4aa829ce78c231e05b0bae2c"
    assert constants.identity_headers() == {"User-Agent": "PixivIOSApp/7.19.1 (iOS 16.7.2; iPhone12,8)",
                                            "App-OS": "ios", "App-OS-Version": "16.7.2", "App-Version": "7.19.1"}
    # A UA override keeps the OS headers consistent with it, or sends none it cannot vouch for.
    assert constants.identity_headers("PixivAndroidApp/5.0.234 (Android 11; Pixel 6)") == {
        "User-Agent": "PixivAndroidApp/5.0.234 (Android 11; Pixel 6)", "App-OS": "android",
        "App-OS-Version": "11", "App-Version": "5.0.234"}
    assert constants.identity_headers("curl/8") == {"User-Agent": "curl/8"}
    assert constants.REFERER == "https://app-api.pixiv.net/"


def test_default_config_sends_every_request_to_the_real_hosts(pixiv, clock):
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.url.scheme}://{request.url.host}{request.url.path}")
        if request.url.host == "oauth.secure.pixiv.net":
            return httpx.Response(200, json=token_body("at-1"))
        if request.url.host == "app-api.pixiv.net":
            return httpx.Response(200, json={"illust": illust_raw(5)})
        return httpx.Response(200, content=b"\x89PNG\r\n\x1a\n" + b"\x00" * 8 + b"IHDR" + b"\x00\x00\x00\x08\x00\x00\x00\x06")

    config = parse_config({"pixiv": {"refreshToken": "${T}"}})
    assert config.source.kind == "pixiv"
    source = build_source(config, now_ms=clock.now_ms, uniform=lambda: 0.0, sleep=lambda s: None,
                          resolver=SecretResolver(env={"T": REFRESH}), env={}, transport=httpx.MockTransport(handler))
    source.download(source.get_work("illustration", "5"))
    assert seen == ["https://oauth.secure.pixiv.net/auth/token", "https://app-api.pixiv.net/v1/illust/detail",
                    "https://i.pximg.net/img-original/img/2026/11/29/10/00/00/5_p0.png"]


def test_refresh_grant_sends_the_form_the_time_and_its_hash_and_consistent_identity(pixiv, clock):
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock)
    rig.source.get_work("illustration", "5")
    token_request, detail = pixiv.requests
    assert token_request.method == "POST" and token_request.url.path == "/auth/token"
    assert token_request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert dict(parse_qsl(token_request.content.decode())) == {
        "client_id": constants.CLIENT_ID, "client_secret": constants.CLIENT_SECRET, "grant_type": "refresh_token",
        "refresh_token": REFRESH, "get_secure_url": "1", "include_policy": "true"}
    assert token_request.headers["x-client-time"] == "2026-12-01T00:00:00+00:00" == client_time(T0)
    expected = hashlib.md5(("2026-12-01T00:00:00+00:00" + constants.HASH_SECRET).encode()).hexdigest()
    assert token_request.headers["x-client-hash"] == expected == client_hash("2026-12-01T00:00:00+00:00")
    for request in (token_request, detail):
        assert request.headers["user-agent"] == constants.USER_AGENT
        assert (request.headers["app-os"], request.headers["app-os-version"], request.headers["app-version"]) == (
            "ios", "16.7.2", "7.19.1")
    assert detail.headers["authorization"] == "Bearer at-1-9c2e41d7b3"
    assert detail.headers["referer"] == "https://app-api.pixiv.net/"
    assert "authorization" not in token_request.headers


def test_overrides_of_client_id_secret_and_user_agent_are_sent(pixiv, clock):
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock, cfg={"pixiv": {"refreshToken": "${PIXIV_TOKEN}", "clientId": "cid-x", "clientSecret": "cs-y",
                                           "userAgent": "PixivAndroidApp/6.1.0 (Android 13; Pixel 8)"}})
    rig.source.get_work("illustration", "5")
    form = dict(parse_qsl(pixiv.requests[0].content.decode()))
    assert (form["client_id"], form["client_secret"]) == ("cid-x", "cs-y")
    assert pixiv.requests[1].headers["app-os"] == "android" and pixiv.requests[1].headers["app-os-version"] == "13"


# ------------------------------------------------------------------ access token lifecycle


def test_access_token_is_cached_until_a_minute_before_expiry(pixiv, clock):
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock)
    rig.source.get_work("illustration", "5")
    clock.advance(3600_000 - 60_000 - 1)  # still a minute and a bit of life left
    rig.source.get_work("illustration", "5")
    assert pixiv.issued == 1
    clock.advance(1)  # now within the last minute
    rig.source.get_work("illustration", "5")
    assert pixiv.issued == 2
    assert [r.headers["authorization"] for r in pixiv.api()] == ["Bearer at-1-9c2e41d7b3"] * 2 + ["Bearer at-2-9c2e41d7b3"]


def test_an_expired_access_token_is_refreshed_once_and_the_call_repeated(pixiv, clock):
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock)
    rig.source.get_work("illustration", "5")
    pixiv.valid.clear()  # Pixiv forgot every access token
    work = rig.source.get_work("illustration", "5")
    assert work.work_id == "5"
    assert pixiv.issued == 2
    assert [r.url.path for r in pixiv.requests] == ["/auth/token", "/v1/illust/detail", "/v1/illust/detail",
                                                    "/auth/token", "/v1/illust/detail"]


def test_an_access_token_rejected_again_after_the_refresh_is_an_auth_failure(pixiv, clock):
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(401, json=API_INVALID)
    rig = Rig(pixiv, clock)
    pixiv.authorised = lambda request: True  # the route itself rejects
    with pytest.raises(AuthenticationError, match="^auth_failed: "):
        rig.source.get_work("illustration", "5")
    assert pixiv.issued == 2 and len(pixiv.api()) == 2  # one refresh, one repeat, then stop


def test_invalid_grant_is_terminal_logged_once_and_never_retried(pixiv, clock):
    pixiv.refresh_tokens.clear()
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock)
    for _ in range(3):
        with pytest.raises(AuthenticationError) as caught:
            rig.source.get_work("illustration", "5")
    assert caught.value.retryable is False and caught.value.reason == "auth_failed"
    assert "invalid" in str(caught.value) and REFRESH not in str(caught.value)
    assert [r.url.path for r in pixiv.requests] == ["/auth/token"] * 3  # no quick retries of a 400
    assert len(rig.events("pixiv.auth_failed")) == 1
    assert rig.sleeps == []
    for level, message, fields in rig.logs:
        assert REFRESH not in json.dumps([message, fields]) and REFRESH[:8] not in json.dumps([message, fields])


def test_missing_refresh_token_is_a_configuration_error(pixiv, clock):
    rig = Rig(pixiv, clock, env={})
    with pytest.raises(SourceConfigurationError, match="^configuration_error: .*PIXIV_TOKEN"):
        rig.source.get_work("illustration", "5")
    assert pixiv.requests == []


def test_pixiv_refresh_token_env_overrides_the_config(pixiv, clock):
    pixiv.refresh_tokens = {"rt-from-env-override"}
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock, env={"PIXIV_TOKEN": REFRESH, "PIXIV_REFRESH_TOKEN": "rt-from-env-override"})
    rig.source.get_work("illustration", "5")
    assert dict(parse_qsl(pixiv.requests[0].content.decode()))["refresh_token"] == "rt-from-env-override"


class FakeSsm:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)
        self.gets: list[str] = []
        self.puts: list[tuple[str, str, str, bool]] = []

    def get_parameter(self, Name: str, WithDecryption: bool) -> dict:  # noqa: N803 - boto3's names
        assert WithDecryption is True
        self.gets.append(Name)
        if Name not in self.values:
            raise _client_error("ParameterNotFound")
        return {"Parameter": {"Name": Name, "Value": self.values[Name]}}

    def put_parameter(self, Name: str, Value: str, Type: str, Overwrite: bool) -> dict:  # noqa: N803
        self.puts.append((Name, Value, Type, Overwrite))
        self.values[Name] = Value
        return {"Version": 2}


def _client_error(code: str):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": code}}, "GetParameter")


def test_a_rotated_refresh_token_from_ssm_is_persisted_by_the_one_winner(pixiv, clock):
    ssm = FakeSsm({"/pixivflow/routes/PIXIV_TOKEN": REFRESH})
    store = MemoryPixivAccounts()
    pixiv.rotate_to = "rt-rotated-77aa01"
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock, env={}, store=store, resolver=SecretResolver("/pixivflow/routes", env={}, ssm=ssm))
    rig.source.get_work("illustration", "5")
    assert ssm.puts == [("/pixivflow/routes/PIXIV_TOKEN", "rt-rotated-77aa01", "SecureString", True)]
    assert store.token_fingerprint("default") == fingerprint("rt-rotated-77aa01")
    assert rig.events("pixiv.token_rotated") == [{"event": "pixiv.token_rotated", "account_id": "default", "persisted": True}]

    # A second container that also started from the old token rotates too, but loses the
    # guard: it keeps its new token in memory and never overwrites SSM.
    pixiv.refresh_tokens.add(REFRESH)
    pixiv.rotate_to = "rt-rotated-by-loser"
    stale = FakeSsm({"/pixivflow/routes/PIXIV_TOKEN": REFRESH})  # what the loser read before the rotation
    other = Rig(pixiv, clock, env={}, store=store, resolver=SecretResolver("/pixivflow/routes", env={}, ssm=stale))
    other.source.get_work("illustration", "5")
    assert stale.puts == []
    assert store.token_fingerprint("default") == fingerprint("rt-rotated-77aa01")
    assert other.events("pixiv.token_rotated")[0]["persisted"] is False
    for rig_ in (rig, other):
        assert not any("rt-rotated" in json.dumps([m, f]) for _, m, f in rig_.logs)


def test_a_token_from_the_environment_rotates_in_memory_only(pixiv, clock):
    store = MemoryPixivAccounts()
    pixiv.rotate_to = "rt-rotated-env-1"
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock, store=store)
    rig.source.get_work("illustration", "5")
    assert store.rotations == 0
    pixiv.valid.clear()
    pixiv.refresh_tokens = {"rt-rotated-env-1"}  # only the rotated token works now
    rig.source.get_work("illustration", "5")
    assert dict(parse_qsl(pixiv.requests[-2].content.decode()))["refresh_token"] == "rt-rotated-env-1"


def test_a_token_changed_in_ssm_is_used_at_the_next_refresh_before_pixiv_refuses_the_old_one(pixiv, clock):
    ssm = FakeSsm({"/p/PIXIV_TOKEN": REFRESH})
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock, env={}, resolver=SecretResolver("/p", env={}, ssm=ssm))
    rig.source.get_work("illustration", "5")
    # The token in SSM changed (issue 24: every refresh compares it); ours is now refused.
    ssm.values["/p/PIXIV_TOKEN"] = "rt-persisted-by-other"
    pixiv.refresh_tokens = {"rt-persisted-by-other"}
    pixiv.valid.clear()
    rig.source.get_work("illustration", "5")
    grants = [dict(parse_qsl(r.content.decode()))["refresh_token"] for r in pixiv.requests if r.url.path == "/auth/token"]
    assert grants == [REFRESH, "rt-persisted-by-other"]  # never sent the refused one again
    assert rig.events("pixiv.auth_failed") == []


def test_transient_ssm_failure_is_retried_and_never_cached_as_missing(pixiv, clock):
    class Flaky(FakeSsm):
        failures = 3

        def get_parameter(self, Name, WithDecryption):  # noqa: N803
            if self.failures:
                self.failures -= 1
                raise _client_error("ThrottlingException")
            return super().get_parameter(Name, WithDecryption)

    ssm = Flaky({"/p/PIXIV_TOKEN": REFRESH})
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock, env={}, resolver=SecretResolver("/p", env={}, ssm=ssm, sleep=lambda s: None))
    with pytest.raises(SourceOutage, match="^network_error: .*secret store unavailable") as caught:
        rig.source.get_work("illustration", "5")
    assert caught.value.retryable is True
    assert pixiv.requests == []
    rig.source.get_work("illustration", "5")  # the store is back: read again, not "missing"
    assert pixiv.issued == 1


# ------------------------------------------------------------------ endpoints and parameters


@pytest.mark.parametrize(
    "request_,path,params",
    [
        (SearchRequest(tag="cats cute"), "/v1/search/illust",
         {"word": "cats cute", "search_target": "partial_match_for_tags", "sort": "date_desc",
          "include_translated_tag_results": "true", "filter": "for_ios"}),
        (SearchRequest(tag="cats", sort="date_asc", search_target="exact_match_for_tags", start_date="2026-11-01",
                       end_date="2026-11-30", exclude_ai=True), "/v1/search/illust",
         {"word": "cats", "search_target": "exact_match_for_tags", "sort": "date_asc",
          "include_translated_tag_results": "true", "start_date": "2026-11-01", "end_date": "2026-11-30",
          "filter": "for_ios", "search_ai_type": "0"}),
        (SearchRequest(work_type="novel", tag="fantasy", sort="popular_desc", search_target="text"), "/v1/search/novel",
         {"word": "fantasy", "search_target": "text", "sort": "popular_desc", "merge_plain_keyword_results": "true",
          "include_translated_tag_results": "true", "filter": "for_ios"}),
        (SearchRequest(mode="topic", topic="sky"), "/v1/search/illust",
         {"word": "sky", "search_target": "partial_match_for_tags", "sort": "date_desc",
          "include_translated_tag_results": "true", "filter": "for_ios"}),
        (SearchRequest(mode="ranking", ranking_mode="week", ranking_date="2026-11-20"), "/v1/illust/ranking",
         {"mode": "week", "date": "2026-11-20", "filter": "for_ios"}),
        # 2026-12-01T00:00Z is 09:00 on 2026-12-01 in Japan: YESTERDAY is Japan's yesterday.
        (SearchRequest(mode="ranking", ranking_date="YESTERDAY"), "/v1/illust/ranking",
         {"mode": "day", "date": "2026-11-30", "filter": "for_ios"}),
        (SearchRequest(mode="ranking", ranking_date="TODAY", work_type="novel"), "/v1/novel/ranking",
         {"mode": "day", "date": "2026-12-01"}),
        (SearchRequest(mode="ranking"), "/v1/illust/ranking", {"mode": "day", "filter": "for_ios"}),
        (SearchRequest(mode="user", user_id="777"), "/v1/user/illusts", {"user_id": "777", "type": "illust", "filter": "for_ios"}),
        (SearchRequest(mode="user", user_id="888", work_type="novel"), "/v1/user/novels",
         {"user_id": "888", "filter": "for_ios"}),
        # R-18 included (real-configs note §2): searches drop filter=for_ios; rankings and user works do not.
        (SearchRequest(tag="cats", include_r18=True), "/v1/search/illust",
         {"word": "cats", "search_target": "partial_match_for_tags", "sort": "date_desc",
          "include_translated_tag_results": "true"}),
        (SearchRequest(mode="topic", topic="sky", work_type="novel", include_r18=True), "/v1/search/novel",
         {"word": "sky", "search_target": "partial_match_for_tags", "sort": "date_desc"}),
        (SearchRequest(mode="ranking", ranking_mode="day_r18", include_r18=True), "/v1/illust/ranking",
         {"mode": "day_r18", "filter": "for_ios"}),
        (SearchRequest(mode="ranking", work_type="novel", include_r18=True), "/v1/novel/ranking", {"mode": "day"}),
        (SearchRequest(mode="user", user_id="777", include_r18=True), "/v1/user/illusts",
         {"user_id": "777", "type": "illust", "filter": "for_ios"}),
        (SearchRequest(mode="user", user_id="888", work_type="novel", include_r18=True), "/v1/user/novels",
         {"user_id": "888", "filter": "for_ios"}),
    ],
    ids=["search", "search-hints", "novel-search", "topic", "ranking", "ranking-yesterday", "novel-ranking-today",
         "ranking-latest", "user-illusts", "user-novels", "search-r18", "novel-topic-r18", "ranking-r18",
         "novel-ranking-r18", "user-illusts-r18", "user-novels-r18"],
)
def test_each_list_endpoint_gets_its_parameters(pixiv, clock, request_, path, params):
    section = "novels" if request_.work_type == "novel" else "illusts"
    pixiv.routes[path] = lambda r: page([], None, section)
    rig = Rig(pixiv, clock)
    result = rig.source.search_page(request_, None)
    assert (list(result.items), result.next_cursor) == ([], None)
    [call] = pixiv.api()
    assert call.url.path == path and pixiv.query(call) == params


def test_detail_ugoira_and_webview_endpoints_get_their_parameters(pixiv, clock):
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": {**illust_raw(6), "type": "ugoira"}})
    pixiv.routes["/v2/novel/detail"] = lambda r: httpx.Response(200, json={"novel": {
        "id": 8, "title": "n", "tags": [], "user": {"id": 1, "name": "w"}, "create_date": "2026-11-29T10:00:00+09:00",
        "page_count": 1, "image_urls": {"large": "https://s.pximg.net/common/images/novel-cover.png"}}})
    pixiv.routes["/v1/ugoira/metadata"] = lambda r: httpx.Response(200, json={"ugoira_metadata": {
        "zip_urls": {"medium": "https://i.pximg.net/img-zip-ugoira/img/2026/11/29/10/00/00/6_ugoira600x600.zip"},
        "frames": [{"file": "000000.jpg", "delay": 70}, {"file": "000001.jpg", "delay": 90}]}})
    pixiv.routes["/webview/v2/novel"] = lambda r: httpx.Response(
        200, text='<script>Object.defineProperty(window, "pixiv", {value: {\n novel: {"id": "8", "text": "本文\\n[newpage]\\nend", '
                  '"title": "n"},\n isOwnWork: false,\n}});</script>')
    pixiv.routes["/img-zip-ugoira/img/2026/11/29/10/00/00/6_ugoira1920x1080.zip"] = lambda r: httpx.Response(
        200, content=b"PK\x03\x04zipdata")
    rig = Rig(pixiv, clock)
    [zipped] = rig.source.download(rig.source.get_work("illustration", "6"))
    assert (zipped.name, zipped.content_type, zipped.role) == ("6_ugoira.zip", "application/zip", "archive")
    assert zipped.meta["frames"] == [{"file": "000000.jpg", "delay": 70}, {"file": "000001.jpg", "delay": 90}]
    files = rig.source.download(rig.source.get_work("novel", "8"))
    assert [(f.name, f.content_type, f.content.decode()) for f in files] == [
        ("8.txt", "text/plain; charset=utf-8", "本文\n[newpage]\nend")]  # a placeholder cover is never fetched
    calls = [(r.url.path, pixiv.query(r)) for r in pixiv.requests if r.url.path != "/auth/token"]
    assert calls == [
        ("/v1/illust/detail", {"illust_id": "6"}),
        ("/v1/ugoira/metadata", {"illust_id": "6"}),
        ("/img-zip-ugoira/img/2026/11/29/10/00/00/6_ugoira1920x1080.zip", {}),
        ("/v2/novel/detail", {"novel_id": "8"}),
        ("/webview/v2/novel", {"id": "8", "viewer_version": "20221031_ai"}),
    ]
    image = pixiv.requests[3]
    assert image.headers["referer"] == "https://app-api.pixiv.net/" and "authorization" not in image.headers


# ------------------------------------------------------------------ paging


def test_paging_follows_next_url_rebased_onto_the_configured_base_and_stops_when_the_caller_stops(pixiv, clock):
    def search(request: httpx.Request) -> httpx.Response:
        offset = int(pixiv.query(request).get("offset", 0))
        nxt = f"https://app-api.pixiv.net/v1/search/illust?word=cats&sort=date_desc&offset={offset + 2}"
        return page([illust_raw(100 - offset), illust_raw(99 - offset)], nxt)

    pixiv.routes["/pixiv-api/v1/search/illust"] = search
    rig = Rig(pixiv, clock, cfg={"source": {"kind": "pixiv", "baseUrls": {"api": "http://127.0.0.1:9/pixiv-api"}},
                                 "download": {"requestDelay": 250}})
    from pixivflow.domain.pager import collect

    works = collect(lambda cursor: rig.source.search_page(SearchRequest(tag="cats"), cursor), limit=1, max_items=5)
    calls = [r for r in pixiv.requests if r.url.path == "/pixiv-api/v1/search/illust"]
    # collect asked for at most 5 works: three pages of two, then it stopped; Pixiv's endless
    # next_url was never followed further.
    assert len(calls) == 3 and [w.work_id for w in works] == ["100"]
    assert [str(c.url) for c in calls[1:]] == [
        "http://127.0.0.1:9/pixiv-api/v1/search/illust?word=cats&sort=date_desc&offset=2",
        "http://127.0.0.1:9/pixiv-api/v1/search/illust?word=cats&sort=date_desc&offset=4"]
    assert rig.sleeps == [0.25, 0.25]  # download.requestDelay between pages


def test_a_next_url_on_a_foreign_host_is_refused(pixiv, clock):
    pixiv.routes["/v1/search/illust"] = lambda r: page([illust_raw(1)], "https://evil.example/v1/search/illust?offset=30")
    rig = Rig(pixiv, clock)
    with pytest.raises(SourceError, match="unexpected host"):
        rig.source.search_page(SearchRequest(tag="cats"), None)


def test_offset_cap_continues_a_date_desc_search_by_end_date_and_skips_what_was_seen(pixiv, clock):
    first = [illust_raw(500, "2026-11-20T10:00:00+09:00"), illust_raw(499, "2026-11-18T23:30:00+09:00")]
    again = [illust_raw(499, "2026-11-18T23:30:00+09:00"), illust_raw(498, "2026-11-18T23:30:00+09:00"),
             illust_raw(497, "2026-11-18T08:00:00+09:00")]

    def search(request: httpx.Request) -> httpx.Response:
        q = pixiv.query(request)
        if "end_date" not in q:
            return page(first, "https://app-api.pixiv.net/v1/search/illust?word=cats&sort=date_desc&offset=5010")
        return page(again, None)

    pixiv.routes["/v1/search/illust"] = search
    rig = Rig(pixiv, clock)
    req = SearchRequest(tag="cats")
    one = rig.source.search_page(req, None)
    assert [w.work_id for w in one.items] == ["500", "499"]
    two = rig.source.search_page(req, one.next_cursor)
    calls = pixiv.api()
    # no offset above the cap is ever sent: the date moved instead (last work's day + 1, gallery-dl's rule)
    assert pixiv.query(calls[1]) == {"word": "cats", "sort": "date_desc", "end_date": "2026-11-19"}
    assert [w.work_id for w in two.items] == ["498", "497"]  # 499 was already returned
    assert two.next_cursor is None
    assert rig.events("pixiv.offset_cap")[0]["continued"] is True


def test_offset_cap_continues_a_date_asc_search_by_start_date(pixiv, clock):
    def search(request: httpx.Request) -> httpx.Response:
        q = pixiv.query(request)
        if "start_date" not in q:
            return page([illust_raw(10, "2026-11-02T10:00:00+09:00")],
                        "https://app-api.pixiv.net/v1/search/illust?word=cats&sort=date_asc&offset=5000")
        return page([illust_raw(10, "2026-11-02T10:00:00+09:00"), illust_raw(11, "2026-11-03T10:00:00+09:00")], None)

    pixiv.routes["/v1/search/illust"] = search
    rig = Rig(pixiv, clock)
    req = SearchRequest(tag="cats", sort="date_asc")
    two = rig.source.search_page(req, rig.source.search_page(req, None).next_cursor)
    assert pixiv.query(pixiv.api()[1]) == {"word": "cats", "sort": "date_asc", "start_date": "2026-11-01"}
    assert [w.work_id for w in two.items] == ["11"]


@pytest.mark.parametrize("request_", [SearchRequest(tag="cats", sort="popular_desc"), SearchRequest(mode="user", user_id="7")],
                         ids=["popular", "user"])
def test_offset_cap_stops_a_walk_that_cannot_continue_by_date(pixiv, clock, request_):
    nxt = "https://app-api.pixiv.net/v1/search/illust?offset=5010"
    pixiv.routes["/v1/search/illust"] = lambda r: page([illust_raw(1)], nxt)
    pixiv.routes["/v1/user/illusts"] = lambda r: page([illust_raw(1)], nxt.replace("search/illust", "user/illusts"))
    rig = Rig(pixiv, clock)
    result = rig.source.search_page(request_, None)
    assert [w.work_id for w in result.items] == ["1"] and result.next_cursor is None
    assert rig.events("pixiv.offset_cap")[0]["continued"] is False


def test_an_offset_refused_by_pixiv_ends_the_walk_plainly(pixiv, clock):
    body = {"error": {"user_message": "", "message": "{\"offset\":[\"offset must be no more than 5000\"]}"}}
    pixiv.routes["/v1/search/illust"] = lambda r: httpx.Response(400, json=body)
    rig = Rig(pixiv, clock)
    cursor = "http://app-api.pixiv.net/v1/search/illust?word=cats&offset=4990"
    result = rig.source.search_page(SearchRequest(tag="cats"), cursor.replace("http://", "https://"))
    assert (list(result.items), result.next_cursor) == ([], None)


# ------------------------------------------------------------------ errors and rate limits


def test_404_is_gone_and_403_is_access_denied(pixiv, clock):
    from pixivflow.domain.scan import classify_candidate_failure

    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(404, json={"error": {"user_message": "作品は削除されました"}})
    pixiv.routes["/v2/novel/detail"] = lambda r: httpx.Response(403, json={"error": {
        "user_message": "Your access is currently restricted.", "message": ""}})
    rig = Rig(pixiv, clock)
    with pytest.raises(WorkGoneError) as gone:
        rig.source.get_work("illustration", "5")
    with pytest.raises(SourceError) as denied:
        rig.source.get_work("novel", "6")
    assert classify_candidate_failure(gone.value).skip_code == "deleted"
    verdict = classify_candidate_failure(denied.value)
    assert (verdict.skip_code, verdict.retryable, denied.value.retryable) == ("access_denied", False, False)
    assert len(pixiv.api()) == 2  # neither is retried


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_gets_two_quick_retries_after_1_and_2_seconds_then_a_retryable_outage(pixiv, clock, status):
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(status, text="<html>oops</html>")
    rig = Rig(pixiv, clock)
    with pytest.raises(SourceOutage, match=f"^remote_http_error: .*HTTP {status} after 3 attempt") as caught:
        rig.source.get_work("illustration", "5")
    assert caught.value.retryable is True and caught.value.status == status
    assert len(pixiv.api()) == 3 and rig.sleeps == [1.0, 2.0]


def test_5xx_then_success_within_the_quick_retries(pixiv, clock):
    answers = iter([httpx.Response(503), httpx.Response(200, json={"illust": illust_raw(5)})])
    pixiv.routes["/v1/illust/detail"] = lambda r: next(answers)
    rig = Rig(pixiv, clock)
    assert rig.source.get_work("illustration", "5").work_id == "5"
    assert rig.sleeps == [1.0]


def test_a_timeout_is_retried_then_a_retryable_outage(pixiv, clock):
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    pixiv.routes["/v1/illust/detail"] = slow
    rig = Rig(pixiv, clock)
    with pytest.raises(SourceOutage, match="^network_error: .*timed out after 3 attempt"):
        rig.source.get_work("illustration", "5")
    assert rig.sleeps == [1.0, 2.0]


@pytest.mark.parametrize(
    "answer",
    [httpx.Response(429, headers={"Retry-After": "90"}, json=RATE_LIMIT), httpx.Response(403, json=RATE_LIMIT),
     httpx.Response(400, json=RATE_LIMIT)],
    ids=["429-retry-after", "403-rate-limit-body", "400-rate-limit-body"],
)
def test_rate_limit_answers_cool_the_whole_account_down(pixiv, clock, answer):
    pixiv.routes["/v1/illust/detail"] = lambda r: answer
    store = MemoryPixivAccounts()
    rig = Rig(pixiv, clock, store=store)
    with pytest.raises(RateLimitedError, match="^rate_limited: ") as caught:
        rig.source.get_work("illustration", "5")
    expected = 90_000 if answer.status_code == 429 else 60_000
    assert caught.value.retry_after_ms == expected and caught.value.retryable is True
    assert store.gate("default").cooldown_until == T0 + expected and store.gate("default").penalties == 1
    # Every request of the account is refused while it cools down, without reaching Pixiv...
    calls = len(pixiv.requests)
    with pytest.raises(RateLimitedError, match="cooling down"):
        rig.source.get_work("illustration", "5")
    assert len(pixiv.requests) == calls
    # ... also from another container sharing the ledger item
    other = Rig(pixiv, clock, store=store)
    with pytest.raises(RateLimitedError):
        other.source.get_work("illustration", "5")
    assert len(pixiv.requests) == calls
    [event] = rig.events("pixiv.rate_limited")
    assert (event["status"], event["cooldown_ms"], event["penalties"]) == (answer.status_code, expected, 1)


def test_pacing_waits_between_api_requests_with_jitter_but_not_before_the_first(pixiv, clock):
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    rig = Rig(pixiv, clock, cfg={"network": {"requestPacingMs": 1000}})
    for _ in range(3):
        rig.source.get_work("illustration", "5")
    uniform = Entropy(3)
    jitter = [uniform.uniform() for _ in range(2)]  # each request's gap is the one its predecessor set
    assert rig.sleeps == [int(1000 * (1 + 0.25 * j)) / 1000 for j in jitter]
    assert all(1.0 <= s <= 1.25 for s in rig.sleeps)


# ------------------------------------------------------------------ images


def test_pages_are_downloaded_in_order_with_referer_and_content_type_and_size_sniffed(pixiv, clock):
    from pixivflow.local.fake_pixiv import jpeg, png

    raw = illust_raw(41, pages=2)
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": raw})
    pixiv.routes["/img-original/img/2026/11/29/10/00/00/41_p0.png"] = lambda r: httpx.Response(200, content=png(5, 4, 1))
    # page 1's original is gone: the master variant is used instead
    pixiv.routes["/img-master/img/2026/11/29/10/00/00/41_p1_master1200.jpg"] = lambda r: httpx.Response(
        200, content=jpeg(30, 20, 2))
    rig = Rig(pixiv, clock)
    files = rig.source.download(rig.source.get_work("illustration", "41"))
    assert [(f.name, f.content_type, f.width, f.height, f.role, f.meta["page"]) for f in files] == [
        ("41_p0.png", "image/png", 5, 4, "original", 0), ("41_p1.jpg", "image/jpeg", 30, 20, "original", 1)]
    images = [r for r in pixiv.requests if "/img-" in r.url.path]
    assert [r.url.path.rsplit("/", 1)[1] for r in images] == ["41_p0.png", "41_p1.png", "41_p1_master1200.jpg"]
    assert all(r.headers["referer"] == "https://app-api.pixiv.net/" and "authorization" not in r.headers for r in images)


def test_a_restricted_placeholder_is_mapped_and_refused_without_any_image_request(pixiv, clock):
    from pixivflow.domain.scan import classify_candidate_failure
    from pixivflow.domain.errors import WorkRestrictedError

    placeholder = "https://s.pximg.net/common/images/limit_sanity_level_360.png"
    raw = {**illust_raw(77), "title": "", "tags": [], "visible": False, "image_urls": {"large": placeholder},
           "meta_single_page": {"original_image_url": placeholder}, "illust_ai_type": 0}
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": raw})
    rig = Rig(pixiv, clock)
    work = rig.source.get_work("illustration", "77")
    assert work.restricted is True
    with pytest.raises(WorkRestrictedError) as caught:
        rig.source.download(work)
    assert classify_candidate_failure(caught.value).skip_code == "unavailable"
    assert not [r for r in pixiv.requests if "pximg" in str(r.url) or "/img-" in r.url.path]


def test_image_host_rate_limit_and_5xx(pixiv, clock):
    raw = illust_raw(42)
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": raw})
    answers = iter([httpx.Response(502), httpx.Response(502), httpx.Response(502)])
    pixiv.routes["/img-original/img/2026/11/29/10/00/00/42_p0.png"] = lambda r: next(answers)
    rig = Rig(pixiv, clock)
    work = rig.source.get_work("illustration", "42")
    with pytest.raises(SourceOutage, match="^download_failed: image .* HTTP 502 after 3 attempt"):
        rig.source.download(work)
    assert rig.sleeps == [1.0, 2.0]
    pixiv.routes["/img-original/img/2026/11/29/10/00/00/42_p0.png"] = lambda r: httpx.Response(429, headers={"Retry-After": "5"})
    with pytest.raises(RateLimitedError):
        rig.source.download(work)
    assert rig.store.gate("default").penalties == 1


def test_once_ssm_holds_a_rotated_token_it_wins_over_the_environment_seed(pixiv, clock):
    """Issue 24: PIXIV_REFRESH_TOKEN and the config only seed the token; a rotation goes to SSM
    (``<path>/PIXIV_REFRESH_TOKEN`` when the config names none) and wins from then on."""
    ssm = FakeSsm({})
    store = MemoryPixivAccounts()
    env = {"PIXIV_REFRESH_TOKEN": REFRESH}
    pixiv.rotate_to = "rt-rotated-from-env-seed"
    pixiv.routes["/v1/illust/detail"] = lambda r: httpx.Response(200, json={"illust": illust_raw(5)})
    first = Rig(pixiv, clock, env=env, store=store, cfg={"pixiv": {}}, resolver=SecretResolver("/p", env=env, ssm=ssm))
    first.source.get_work("illustration", "5")
    assert ssm.values == {"/p/PIXIV_REFRESH_TOKEN": "rt-rotated-from-env-seed"}
    pixiv.rotate_to = None
    pixiv.refresh_tokens = {"rt-rotated-from-env-seed"}  # the seed is spent
    # A cold container, still seeded with the old token by its environment, uses SSM's.
    second = Rig(pixiv, clock, env=env, store=store, cfg={"pixiv": {}}, resolver=SecretResolver("/p", env=env, ssm=ssm))
    second.source.get_work("illustration", "5")
    grants = [dict(parse_qsl(r.content.decode()))["refresh_token"] for r in pixiv.requests if r.url.path == "/auth/token"]
    assert grants == [REFRESH, "rt-rotated-from-env-seed"]
    assert second.events("pixiv.token_healed") == []  # nothing to heal: SSM holds the guard's token
