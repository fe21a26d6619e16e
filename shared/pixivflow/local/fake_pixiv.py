"""A loopback fake of Pixiv: the OAuth token endpoint, the App API and the image host.

``with FakePixiv() as fake:`` serves all three on one ``127.0.0.1`` port (stdlib
``ThreadingHTTPServer`` in a thread). Point a config at it with
``source: {"kind": "pixiv", "baseUrls": fake.base_urls}``; the real client code then talks to it
exactly as to Pixiv. Answers are shaped like the real ones (docs/explanation/pixiv-source.md,
borrowing field names from pixivpy's models and recorded dumps) and built from this module's own
fixtures (``default_fixtures()``): multi-page works, a ugoira, novels with covers and webview
text, day rankings, a user feed, restricted placeholders, an AI work and an R-18 one. Absolute
URLs in answers name the REAL hosts (``https://app-api.pixiv.net/...``, ``https://i.pximg.net/...``)
so the client's re-basing is exercised.

On demand (for tests and the demo):

* ``fail(path_prefix, status, body=None, headers=None, times=1)``: the next matching requests get
  that answer instead (a 429 with Retry-After, a "Rate Limit" body on a 403, a 503, ...);
* ``expire_access_tokens()``: every issued access token stops working (an API call answers the
  OAuth ``invalid_grant`` error body), ``revoke(refresh_token)``: the grant answers
  ``invalid_grant``; ``rotate=True``: each grant hands out a new refresh token;
* ``requests``: the log of every request (method, path, query, headers, form), for assertions.

It checks what the real endpoints check: the client id/secret, the ``X-Client-Hash`` of the
``X-Client-Time``, the bearer token, the image host's ``Referer``, and the 5000-offset cap.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import threading
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Mapping, Sequence, cast
from urllib.parse import parse_qsl, urlencode, urlsplit
from zoneinfo import ZoneInfo

from ..adapters.pixiv import constants

API = "https://app-api.pixiv.net"
IMAGE = "https://i.pximg.net"
PLACEHOLDER = "https://s.pximg.net/common/images/limit_sanity_level_360.png"
OFFSET_CAP = 5000
JAPAN = ZoneInfo("Asia/Tokyo")
DEFAULT_REFRESH_TOKEN = "fake-refresh-token-0f3c9a1d7e"


# --------------------------------------------------------------------------------------------
# tiny, valid image files


def png(width: int, height: int, seed: int) -> bytes:
    """A real PNG (RGB, filter 0) whose pixels depend on ``seed``."""
    rows = b"".join(b"\x00" + bytes(((seed * 37 + x * 11 + y * 7) % 256 for x in range(width * 3)))
                    for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def jpeg(width: int, height: int, seed: int) -> bytes:
    """A JPEG header (SOI, JFIF, a comment, SOF0 with the size, EOI): enough to be sniffed."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    comment = f"fake-pixiv {seed}".encode()
    com = b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + com + sof + b"\xff\xd9"


def ugoira_zip(frames: int, seed: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for n in range(frames):
            archive.writestr(f"{n:06d}.jpg", jpeg(4, 4, seed * 100 + n))
    return buffer.getvalue()


# --------------------------------------------------------------------------------------------
# fixtures


def _path_date(create_date: str) -> str:
    moment = datetime.fromisoformat(create_date)
    return moment.strftime("%Y/%m/%d/%H/%M/%S")


def _user(uid: int, name: str) -> dict[str, Any]:
    return {"id": uid, "name": name, "account": name.lower().replace(" ", "_"),
            "profile_image_urls": {"medium": f"{IMAGE}/user-profile/img/{uid}_170.png"}, "is_followed": False}


def illust(work_id: int, title: str, tags: list[str], create_date: str, *, pages: int = 1, bookmarks: int = 100,
           width: int = 8, height: int = 6, kind: str = "illust", ai_type: int = 1, x_restrict: int = 0,
           user: tuple[int, str] = (777, "Fixture Artist"), ext: str = "png", restricted: bool = False) -> dict[str, Any]:
    """An illustration as /v1/illust/detail and the search/ranking lists return it."""
    day = _path_date(create_date)
    base = {"id": work_id, "title": title, "type": kind, "caption": f"<p>{title}</p>", "restrict": 0,
            "user": _user(*user), "tags": [{"name": t, "translated_name": None} for t in tags],
            "tools": [], "create_date": create_date, "page_count": pages, "width": width, "height": height,
            "sanity_level": 2, "x_restrict": x_restrict, "series": None, "total_view": bookmarks * 10,
            "total_bookmarks": bookmarks, "is_bookmarked": False, "visible": True, "is_muted": False,
            "illust_ai_type": ai_type, "illust_book_style": 0, "total_comments": 0, "restriction_attributes": []}
    if restricted:
        # What Pixiv returns for a work this account may not see (upbit/pixivpy#280).
        base.update({"title": "", "user": {"id": 0, "name": "", "account": "", "profile_image_urls": {"medium": PLACEHOLDER}},
                     "tags": [], "width": 100, "height": 100, "visible": False, "illust_ai_type": 0,
                     "image_urls": {"square_medium": PLACEHOLDER, "medium": PLACEHOLDER, "large": PLACEHOLDER},
                     "meta_single_page": {"original_image_url": PLACEHOLDER}, "meta_pages": []})
        return base

    def master(n: int, size: str) -> str:
        return f"{IMAGE}/c/{size}/img-master/img/{day}/{work_id}_p{n}_master1200.jpg"

    base["image_urls"] = {"square_medium": master(0, "360x360_70"), "medium": master(0, "540x540_70"),
                          "large": master(0, "600x1200_90")}
    if kind == "ugoira":
        base["meta_single_page"] = {"original_image_url": f"{IMAGE}/img-original/img/{day}/{work_id}_ugoira0.jpg"}
        base["meta_pages"] = []
    elif pages == 1:
        base["meta_single_page"] = {"original_image_url": f"{IMAGE}/img-original/img/{day}/{work_id}_p0.{ext}"}
        base["meta_pages"] = []
    else:
        base["meta_single_page"] = {}
        base["meta_pages"] = [{"image_urls": {"square_medium": master(n, "360x360_70"), "medium": master(n, "540x540_70"),
                                              "large": master(n, "600x1200_90"),
                                              "original": f"{IMAGE}/img-original/img/{day}/{work_id}_p{n}.{ext}"}}
                              for n in range(pages)]
    return base


def novel(work_id: int, title: str, tags: list[str], create_date: str, text: str, *, bookmarks: int = 50,
          ai_type: int = 1, x_restrict: int = 0, user: tuple[int, str] = (888, "Fixture Writer"),
          restricted: bool = False) -> dict[str, Any]:
    day = _path_date(create_date)
    cover = f"{IMAGE}/c/240x480_80/novel-cover-master/img/{day}/ci{work_id}_master1200.jpg"
    raw = {"id": work_id, "title": title, "caption": f"{title} (caption)", "restrict": 0, "x_restrict": x_restrict,
           "is_original": True, "image_urls": {"square_medium": cover, "medium": cover, "large": cover},
           "create_date": create_date, "tags": [{"name": t, "translated_name": None, "added_by_uploaded_user": True} for t in tags],
           "page_count": text.count("[newpage]") + 1, "text_length": len(text), "user": _user(*user), "series": {},
           "is_bookmarked": False, "total_bookmarks": bookmarks, "total_view": bookmarks * 20, "visible": True,
           "total_comments": 0, "is_muted": False, "is_mypixiv_only": False, "is_x_restricted": False,
           "novel_ai_type": ai_type}
    if restricted:
        raw.update({"title": "", "tags": [], "visible": False,
                    "image_urls": {"square_medium": PLACEHOLDER, "medium": PLACEHOLDER, "large": PLACEHOLDER}})
    return raw


@dataclass
class Fixtures:
    illusts: dict[int, dict[str, Any]] = field(default_factory=dict)
    novels: dict[int, dict[str, Any]] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    ugoira: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> {"frames": [...]}
    ranking: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (illust|novel, mode) -> ids
    files: dict[str, bytes] = field(default_factory=dict)  # image-host path -> bytes
    missing: set[str] = field(default_factory=set)  # image-host paths that answer 404
    # What a search matches a work on: its tags, or for a restricted placeholder (which Pixiv
    # lists with no tags at all) the tags it had before it became restricted.
    listed: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    # A novel's inline images as the webview payload gives them: id -> {images, illusts}
    inline: dict[int, dict[str, Any]] = field(default_factory=dict)
    # (illust|novel, mode, YYYY-MM-DD) -> ids: rankings of named days (the ``date`` parameter)
    dated_ranking: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    suggestions: dict[str, list[str]] = field(default_factory=dict)  # autocomplete word -> tag names

    def add_inline_images(self, novel_id: int, uploaded: Sequence[str] = (), illusts: Sequence[str] = ()) -> None:
        """Images the novel's text refers to: ``[uploadedimage:<id>]`` and ``[pixivimage:<id>[-n]]``,
        each served by the image host (a small JPEG)."""
        day = "2026/11/29/00/00/00"
        images = {i: {"urls": {"original": f"{IMAGE}/novel-cover-original/img/{day}/ci{novel_id}_{i}.jpg"}} for i in uploaded}
        works = {k: {"illust": {"images": {"original": f"{IMAGE}/img-original/img/{day}/{k.split('-')[0]}_p0.jpg"}}} for k in illusts}
        self.inline[novel_id] = {"images": images, "illusts": works}
        for n, url in enumerate([v["urls"]["original"] for v in images.values()] +
                                [v["illust"]["images"]["original"] for v in works.values()]):
            self.files[urlsplit(url).path] = jpeg(64, 48, novel_id + n)

    def add_illust(self, raw: dict[str, Any], *, missing_originals: bool = False,
                   listed_under: list[str] | None = None) -> dict[str, Any]:
        self.illusts[int(raw["id"])] = raw
        self.listed[("illusts", int(raw["id"]))] = {t.casefold() for t in listed_under or [x["name"] for x in raw["tags"]]}
        if not raw.get("visible", True):
            return raw
        wid, w, h = int(raw["id"]), int(raw["width"]), int(raw["height"])
        for url in _all_urls(raw):
            path = urlsplit(url).path
            seed = int(hashlib.sha256(path.encode()).hexdigest()[:6], 16)
            self.files[path] = png(w, h, seed) if path.endswith(".png") else jpeg(w, h, seed)
            if "/img-original/" in path:
                # The uncropped master every original has on the real host (gallery-dl's fallback).
                master = path.replace("/img-original/", "/img-master/", 1).rsplit(".", 1)[0] + "_master1200.jpg"
                self.files[master] = jpeg(w, h, seed + 1)
                if missing_originals:
                    self.missing.add(path)
        if raw["type"] == "ugoira":
            day = _path_date(raw["create_date"])
            frames = [{"file": f"{n:06d}.jpg", "delay": 80 + 20 * n} for n in range(3)]
            medium = f"{IMAGE}/img-zip-ugoira/img/{day}/{wid}_ugoira600x600.zip"
            self.ugoira[wid] = {"zip_urls": {"medium": medium}, "frames": frames}
            self.files[urlsplit(medium).path] = ugoira_zip(3, wid)
            self.files[urlsplit(medium.replace("_ugoira600x600", "_ugoira1920x1080")).path] = ugoira_zip(3, wid + 1)
        return raw

    def add_novel(self, raw: dict[str, Any], text: str, *, listed_under: list[str] | None = None) -> dict[str, Any]:
        self.novels[int(raw["id"])] = raw
        self.texts[int(raw["id"])] = text
        self.listed[("novels", int(raw["id"]))] = {t.casefold() for t in listed_under or [x["name"] for x in raw["tags"]]}
        if raw.get("visible", True):
            path = urlsplit(raw["image_urls"]["large"]).path
            self.files[path] = jpeg(240, 320, int(raw["id"]))
        return raw


def _all_urls(raw: Mapping[str, Any]) -> list[str]:
    urls = list((raw.get("image_urls") or {}).values()) + list((raw.get("meta_single_page") or {}).values())
    for page in raw.get("meta_pages") or []:
        urls.extend((page.get("image_urls") or {}).values())
    return [u for u in urls if isinstance(u, str) and u.startswith(IMAGE)]


NOVEL_TEXT = "第一章\n猫は窓辺で眠っていた。\n[newpage]\n第二章\nThe cat woke at dawn and went looking for the sea."


def default_fixtures() -> Fixtures:
    """The fixture set the tests and ``pixivflow demo --source fake-pixiv`` use."""
    fx = Fixtures()
    # search "cats": the newest is a restricted placeholder, then a 3-page work, then singles
    fx.add_illust(illust(91000, "", ["cats"], "2026-11-30T09:00:00+09:00", restricted=True), listed_under=["cats"])
    fx.add_illust(illust(91001, "Three cats, three pages", ["cats", "cute"], "2026-11-29T21:15:00+09:00", pages=3,
                         bookmarks=420))
    fx.add_illust(illust(91002, "Cat on a roof", ["cats"], "2026-11-28T08:30:00+09:00", bookmarks=95))
    fx.add_illust(illust(91003, "Cat (original lost)", ["cats", "sketch"], "2026-11-27T12:00:00+09:00", bookmarks=30),
                  missing_originals=True)
    fx.add_illust(illust(91004, "Machine cat", ["cats", "AI生成"], "2026-11-26T12:00:00+09:00", ai_type=2, bookmarks=10))
    fx.add_illust(illust(91005, "Cat after dark", ["cats"], "2026-11-25T12:00:00+09:00", x_restrict=1, bookmarks=700))
    # landscapes and the day ranking
    fx.add_illust(illust(92001, "Harbour at dawn", ["landscape", "sea"], "2026-11-29T05:00:00+09:00", bookmarks=1500,
                         width=12, height=8))
    fx.add_illust(illust(92002, "Moving waves", ["landscape", "sea"], "2026-11-28T05:00:00+09:00", kind="ugoira",
                         bookmarks=900))
    fx.add_illust(illust(92003, "Mountain sketchbook", ["landscape"], "2026-11-27T05:00:00+09:00", pages=2,
                         bookmarks=600, ext="jpg"))
    fx.ranking[("illust", "day")] = [92001, 92002, 92003, 91001]
    fx.ranking[("illust", "week")] = [91001, 92001]
    # novels
    fx.add_novel(novel(93001, "The sea cat", ["fantasy", "cats"], "2026-11-29T20:00:00+09:00", NOVEL_TEXT, bookmarks=300),
                 NOVEL_TEXT)
    fx.add_novel(novel(93002, "Dragon ledger", ["fantasy"], "2026-11-28T20:00:00+09:00", "The dragon kept accounts.",
                       bookmarks=120), "The dragon kept accounts.")
    fx.add_novel(novel(93003, "", ["fantasy"], "2026-11-30T20:00:00+09:00", "hidden", restricted=True), "hidden",
                 listed_under=["fantasy"])
    fx.ranking[("novel", "day")] = [93001, 93002]
    return fx


# Novels with Pixiv's real markup (``[newpage]``, ``[[rb:base > reading]]``, ``[pixivimage:id]``):
# the language filter reads the text with its markup, as PixivFlow does.
NOVEL_ZH = ("第一章 夜市\n她在夜市的尽头看见了那只会说话的猫，猫说它已经等了她很久很久。[[rb:肚子 > はら]]饿了的时候，"
            "它就去河边找老渔夫讨一条小鱼。\n[pixivimage:95001]\n[newpage]\n第二章 海边\n第二天清晨，他们一起沿着海岸线走了很远，"
            "一直走到灯塔下面，灯塔的看守人给他们煮了一锅热汤。")
NOVEL_ZH_ONE_KANA = ("第一章\n罗德岛的博士在甲板上醒来，窗外是无边无际的荒野与移动城市的轮廓。干员们已经集合完毕，"
                     "等待新的作战指令。[newpage]\n第二章\n这次的任务是护送一支商队穿过天灾区域の边缘，没有人知道前方会遇到什么。")
NOVEL_JA = ("第一章\n[[rb:彼女 > かのじょ]]は夜市の外れで、言葉を話す猫に出会いました。猫はずっと待っていたのだと言いました。"
            "\n[newpage]\n第二章\n翌朝、ふたりは海岸線に沿って遠くまで歩き、灯台の下で温かいスープをご馳走になりました。")


def topic_fixtures() -> Fixtures:
    """``default_fixtures()`` plus works for the published configs' topics (ボテ腹, 丸呑み, ミク,
    アークナイツ) on several Japan days around 2026-11-30, and the background samples
    (``イラスト``, ``小説``) tag discovery compares them with. Each work is there to show one rule:
    the whole Japan day (a 03:00 JST work), popularity, R-18 under ``for_ios``, AI exclusion, a tag
    found only through the tag space, a language verdict, a lookback day."""
    fx = default_fixtures()
    artist = (5100, "Topic Artist")
    writer = (5200, "Topic Writer")
    for n in range(12):  # the background: generic works of older days
        fx.add_illust(illust(99100 + n, f"Background {n}", ["イラスト", "女の子", "オリジナル"] + (["ミク"] if n == 0 else []),
                             f"2026-10-{10 + n:02d}T12:00:00+09:00", bookmarks=5, user=(5300, "Background")))
        fx.add_novel(novel(99200 + n, f"背景 {n}", ["小説", "オリジナル"], f"2026-10-{10 + n:02d}T12:00:00+09:00", "背景",
                           bookmarks=5, user=(5301, "Background")), "背景")
    # ボテ腹 (production bot1): the most popular work of the day was posted at 03:00 JST.
    fx.add_illust(illust(95001, "ボテ腹の朝", ["ボテ腹", "妊婦"], "2026-11-30T03:00:00+09:00", bookmarks=900, x_restrict=1,
                         user=artist))
    fx.add_illust(illust(95002, "ボテ腹AI", ["ボテ腹", "AI生成"], "2026-11-30T12:00:00+09:00", bookmarks=2000, ai_type=2,
                         user=artist))
    fx.add_illust(illust(95003, "ボテ腹の夜", ["ボテ腹"], "2026-11-30T20:00:00+09:00", bookmarks=300, user=artist))
    fx.add_illust(illust(95004, "ボテ腹 前日", ["ボテ腹", "妊婦"], "2026-11-29T23:00:00+09:00", bookmarks=5000, user=artist))
    fx.add_illust(illust(95005, "妊婦さん", ["妊婦"], "2026-11-30T15:00:00+09:00", bookmarks=50, user=artist))
    fx.add_novel(novel(96001, "ボテ腹の猫", ["ボテ腹"], "2026-11-30T10:00:00+09:00", NOVEL_JA, bookmarks=800, x_restrict=1,
                       user=writer), NOVEL_JA)
    fx.add_novel(novel(96002, "夜市的猫", ["ボテ腹", "中文"], "2026-11-30T21:00:00+09:00", NOVEL_ZH, bookmarks=400,
                       x_restrict=1, user=writer), NOVEL_ZH)
    fx.add_novel(novel(96003, "前一天的夜市", ["ボテ腹"], "2026-11-29T21:00:00+09:00", NOVEL_ZH, bookmarks=30, x_restrict=1,
                       user=writer), NOVEL_ZH)
    # 丸呑み (production bot2): no illustration on the topic day; one two days before it.
    fx.add_illust(illust(95101, "丸呑み", ["丸呑み"], "2026-11-28T18:00:00+09:00", bookmarks=120, x_restrict=1, user=artist))
    fx.add_illust(illust(95102, "丸呑み 古い", ["丸呑み"], "2026-11-20T18:00:00+09:00", bookmarks=9000, user=artist))
    fx.add_novel(novel(96101, "丸吞之夜", ["丸呑み"], "2026-11-30T08:00:00+09:00", NOVEL_ZH, bookmarks=60, user=writer), NOVEL_ZH)
    # ミク (fly bot1, includeR18 false): the R-18 favourite never comes back under for_ios.
    fx.add_illust(illust(97001, "ミク R-18", ["ミク", "初音ミク"], "2026-11-30T11:00:00+09:00", bookmarks=3000, x_restrict=1,
                         user=artist))
    fx.add_illust(illust(97002, "初音ミク", ["初音ミク", "VOCALOID"], "2026-11-30T09:00:00+09:00", bookmarks=1000, user=artist))
    fx.add_illust(illust(97003, "ミク", ["ミク"], "2026-11-30T22:00:00+09:00", bookmarks=200, user=artist))
    fx.add_illust(illust(97004, "ミク 前日", ["ミク", "初音ミク"], "2026-11-27T22:00:00+09:00", bookmarks=40, user=artist))
    # アークナイツ (fly bot2): the day's favourite carries only the related tag 明日方舟.
    fx.add_illust(illust(98001, "アークナイツ", ["アークナイツ", "明日方舟"], "2026-11-30T10:00:00+09:00", bookmarks=100,
                         user=artist))
    fx.add_illust(illust(98002, "ドクター", ["アークナイツ", "明日方舟"], "2026-11-30T23:30:00+09:00", bookmarks=500,
                         user=artist))
    fx.add_illust(illust(98003, "方舟", ["明日方舟"], "2026-11-30T13:00:00+09:00", bookmarks=2000, user=artist))
    fx.add_illust(illust(98004, "アークナイツ 古い", ["アークナイツ", "明日方舟"], "2026-11-25T13:00:00+09:00", bookmarks=10,
                         user=artist))
    fx.add_novel(novel(96201, "罗德岛", ["アークナイツ", "明日方舟"], "2026-11-30T12:00:00+09:00", NOVEL_ZH_ONE_KANA,
                       bookmarks=90, user=writer), NOVEL_ZH_ONE_KANA)
    fx.suggestions.update({"ボテ腹": ["ボテ腹", "妊婦"], "ミク": ["初音ミク", "ミク"], "アークナイツ": ["アークナイツ", "明日方舟"]})
    fx.dated_ranking[("illust", "day", "2026-11-30")] = [92002, 92001]
    fx.dated_ranking[("illust", "day", "2026-11-29")] = [92001, 92003]
    return fx


# --------------------------------------------------------------------------------------------
# the server


@dataclass
class FakeRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    form: dict[str, str]

    @property
    def host(self) -> str:
        if self.path == constants.TOKEN_PATH:
            return "oauth"
        return "image" if not (self.path.startswith("/v") or self.path.startswith("/webview")) else "api"


class InFlight:
    """How many requests the fake is answering at once, and the most it ever did (an
    account's requests in flight). ``latency_s`` holds each answer that long, standing in for
    Pixiv's own response time so that overlapping requests actually overlap."""

    HOLD_TIMEOUT_S = 20.0  # a hold whose condition never comes true answers anyway: a test fails, never hangs

    def __init__(self) -> None:
        self.latency_s = 0.0
        self.current = 0
        self.peak = 0
        self.total = 0
        # ``hold_until``: a test's condition (called under the lock) that every answer waits for
        # before it is sent, so that "these requests overlap" does not depend on how soon a loaded
        # machine runs the callers' threads; ``poke()`` re-checks it after the test's own events.
        self.hold_until: Callable[[], bool] | None = None
        self.hold_timeouts = 0  # answers sent because the hold timed out (a test asserts none)
        self._lock = threading.Condition()

    def poke(self) -> None:
        with self._lock:
            self._lock.notify_all()

    @contextmanager
    def request(self, held: bool = True) -> Iterator["InFlight"]:
        """One request being answered. ``held=False`` (the OAuth token grant): the hold does not
        apply, since the executors a hold waits for are themselves waiting for the token the grant
        brings; holding it stalled every such race until the client's own timeout gave up on it."""
        with self._lock:
            self.current += 1
            self.total += 1
            self.peak = max(self.peak, self.current)
            self._lock.notify_all()
            if held and self.hold_until is not None and not self._lock.wait_for(self.hold_until,
                                                                               timeout=self.HOLD_TIMEOUT_S):
                self.hold_timeouts += 1
        try:
            if self.latency_s:
                threading.Event().wait(self.latency_s)  # the server thread's answer time, not the test's
            yield self
        finally:
            with self._lock:
                self.current -= 1


class GeneratedFiles:
    """Image-host files made on the fly, never held whole (big works): ``add(path, size,
    seed)`` serves a JPEG of ``size`` bytes (a real header, then deterministic filler) in chunks of
    ``CHUNK``; ``content(path)`` yields the same bytes for a test to hash. With ``bill(clock,
    bytes_per_s)`` each file served passes the virtual time its size takes at that bandwidth."""

    CHUNK = 1024 * 1024

    def __init__(self) -> None:
        self._files: dict[str, tuple[int, int]] = {}
        self.served: list[str] = []
        self._clock: Any = None
        self._bytes_per_s = 0

    def add(self, path: str, size: int, seed: int) -> None:
        self._files[path] = (size, seed)

    def bill(self, clock: Any, bytes_per_s: int) -> None:
        self._clock, self._bytes_per_s = clock, bytes_per_s

    def content(self, path: str):
        size, seed = self._files[path]
        head = jpeg(1200, 1700, seed)[:-2]  # SOI .. SOF0: sniffable; the rest is filler, then EOI
        block = hashlib.sha256(str(seed).encode()).digest() * (self.CHUNK // 32)
        sent = len(head)
        yield head
        while sent < size - 2:
            piece = block[: min(self.CHUNK, size - 2 - sent)]
            sent += len(piece)
            yield piece
        yield b"\xff\xd9"

    def serve(self, handler: BaseHTTPRequestHandler, path: str) -> bool:
        if path not in self._files:
            return False
        size, _ = self._files[path]
        handler.send_response(200)
        handler.send_header("Content-Type", "image/jpeg")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        last = None
        for piece in self.content(path):
            if last is not None:
                handler.wfile.write(last)
            last = piece
        self.served.append(path)
        if self._clock is not None and self._bytes_per_s:
            # Billed before the last piece leaves: the client cannot have read the whole file first.
            self._clock.advance(size * 1000 // self._bytes_per_s)
        if last is not None:
            handler.wfile.write(last)
        return True


class Interruptions:
    """Answers that never come (an OAuth endpoint that hangs): ``stall(prefix, seconds)`` holds the
    next matching request past the client's timeout, ``drop(prefix)`` closes its connection
    unanswered. Consumed in the order they were added, like ``FakePixiv.fail``."""

    def __init__(self) -> None:
        self._planned: list[list] = []  # [prefix, kind, seconds, times left]
        self._lock = threading.Lock()
        self.stop = threading.Event()  # set on shutdown: a stalled answer ends at once

    def stall(self, prefix: str, seconds: float, times: int = 1) -> None:
        with self._lock:
            self._planned.append([prefix, "stall", seconds, times])

    def drop(self, prefix: str, times: int = 1) -> None:
        with self._lock:
            self._planned.append([prefix, "drop", 0.0, times])

    def interrupt(self, handler: BaseHTTPRequestHandler, path: str) -> bool:
        """True when this request was interrupted (the caller answers nothing)."""
        with self._lock:
            plan = next((p for p in self._planned if path.startswith(p[0]) and p[3] > 0), None)
            if plan is None:
                return False
            plan[3] -= 1
        if plan[1] == "stall":
            self.stop.wait(plan[2])
        handler.close_connection = True
        try:
            handler.connection.shutdown(2)
        except OSError:
            pass
        return True


@dataclass
class _Fault:
    prefix: str
    status: int
    body: Any
    headers: dict[str, str]
    times: int
    query: dict[str, str] | None = None  # only requests whose query has these values

    def matches(self, request: "FakeRequest") -> bool:
        return (request.path.startswith(self.prefix) and self.times > 0
                and all(request.query.get(k) == v for k, v in (self.query or {}).items()))


class FakePixiv:
    """``with FakePixiv() as fake: fake.base_urls`` -- Pixiv on 127.0.0.1 (see the module docstring)."""

    def __init__(self, fixtures: Fixtures | None = None, *, refresh_token: str = DEFAULT_REFRESH_TOKEN,
                 rotate: bool = False, page_size: int = 30, expires_in: int = 3600) -> None:
        self.fixtures = fixtures or default_fixtures()
        self.page_size = page_size
        self.expires_in = expires_in
        self.rotate = rotate
        self._lock = threading.Lock()
        self._refresh_tokens = {refresh_token}
        self._access_tokens: set[str] = set()
        self._faults: list[_Fault] = []
        self._log: list[FakeRequest] = []
        self._issued = 0
        self.issued_refresh_tokens: list[str] = []
        self.issued_access_tokens: list[str] = []
        self.in_flight = InFlight()
        self.interruptions = Interruptions()
        self.generated = GeneratedFiles()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                with fake.in_flight.request():
                    fake._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                with fake.in_flight.request(held=urlsplit(self.path).path != constants.TOKEN_PATH):
                    fake._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for the serve loop to notice, 0.5 s at the default interval, and
        # every test that stops a fake paid that in wall time.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    # -- lifecycle and helpers ------------------------------------------------------------
    def __enter__(self) -> "FakePixiv":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.interruptions.stop.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = cast("tuple[str, int]", self._server.server_address[:2])  # AF_INET: the host is a str
        return f"http://{host}:{port}"

    @property
    def base_urls(self) -> dict[str, str]:
        return {"oauth": self.url, "api": self.url, "image": self.url}

    @property
    def requests(self) -> list[FakeRequest]:
        with self._lock:
            return list(self._log)

    def paths(self, host: str | None = None) -> list[str]:
        return [r.path for r in self.requests if host is None or r.host == host]

    def fail(self, prefix: str, status: int, body: Any = None, headers: Mapping[str, str] | None = None,
             times: int = 1, query: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._faults.append(_Fault(prefix, status, body, dict(headers or {}), times, dict(query) if query else None))

    def expire_access_tokens(self) -> None:
        with self._lock:
            self._access_tokens.clear()

    def revoke(self, refresh_token: str | None = None) -> None:
        with self._lock:
            if refresh_token is None:
                self._refresh_tokens.clear()
            else:
                self._refresh_tokens.discard(refresh_token)

    def accept(self, refresh_token: str) -> None:
        with self._lock:
            self._refresh_tokens.add(refresh_token)

    # -- dispatch -------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        form = dict(parse_qsl(raw.decode("utf-8"))) if raw and method == "POST" else {}
        request = FakeRequest(method, parts.path, dict(parse_qsl(parts.query, keep_blank_values=True)),
                              {k.lower(): v for k, v in handler.headers.items()}, form)
        with self._lock:
            self._log.append(request)
        if self.interruptions.interrupt(handler, request.path):
            return None
        with self._lock:
            fault = next((f for f in self._faults if f.matches(request)), None)
            if fault is not None:
                fault.times -= 1
        if fault is not None:
            body = fault.body if fault.body is not None else {"error": {"user_message": "", "message": "Rate Limit",
                                                                           "reason": "", "user_message_details": {}}}
            return self._send(handler, fault.status, body, fault.headers)
        if request.path == constants.TOKEN_PATH and method == "POST":
            return self._send(handler, *self._token(request))
        if request.host == "api":
            return self._send(handler, *self._api(request))
        return self._image(handler, request)

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: Any, headers: Mapping[str, str] | None = None,
              content_type: str = "application/json") -> None:
        if isinstance(body, (bytes, str)):
            data = body.encode("utf-8") if isinstance(body, str) else body
        else:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        handler.send_response(status)
        handler.send_header("Content-Type", content_type if not isinstance(body, str) else "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)

    # -- OAuth ----------------------------------------------------------------------------
    def _token(self, request: FakeRequest) -> tuple[int, Any]:
        stamp = request.headers.get("x-client-time", "")
        expected = hashlib.md5((stamp + constants.HASH_SECRET).encode()).hexdigest()  # noqa: S324
        form = request.form
        if not stamp or request.headers.get("x-client-hash") != expected:
            return 400, {"has_error": True, "errors": {"system": {"message": "access_denied", "code": 1508}}}
        if form.get("client_id") != constants.CLIENT_ID or form.get("client_secret") != constants.CLIENT_SECRET:
            return 400, {"has_error": True, "errors": {"system": {"message": "Invalid client", "code": 1508}},
                         "error": "invalid_client"}
        with self._lock:
            if form.get("grant_type") != "refresh_token" or form.get("refresh_token") not in self._refresh_tokens:
                return 400, {"has_error": True, "errors": {"system": {"message": "Invalid refresh token", "code": 1508}},
                             "error": "invalid_grant"}
            self._issued += 1
            access = f"fake-access-{self._issued:04d}-{hashlib.sha256(str(self._issued).encode()).hexdigest()[:16]}"
            self._access_tokens.add(access)
            self.issued_access_tokens.append(access)
            refresh = form["refresh_token"]
            if self.rotate:
                refresh = f"fake-refresh-rot{self._issued:04d}-{hashlib.sha256(access.encode()).hexdigest()[:12]}"
                self._refresh_tokens.add(refresh)
                self.issued_refresh_tokens.append(refresh)
        user = {"id": "4242", "name": "fixture-user", "account": "fixture_user", "mail_address": "",
                "is_premium": False, "x_restrict": 0, "is_mail_authorized": True}
        inner = {"access_token": access, "expires_in": self.expires_in, "token_type": "bearer",
                 "scope": "", "refresh_token": refresh, "user": user}
        return 200, {**inner, "response": dict(inner)}

    # -- App API --------------------------------------------------------------------------
    def _api(self, request: FakeRequest) -> tuple[int, Any]:
        bearer = request.headers.get("authorization", "")
        with self._lock:
            authorised = bearer.startswith("Bearer ") and bearer[len("Bearer "):] in self._access_tokens
        if not authorised:
            message = "Error occurred at the OAuth process. Please check your Access Token to fix this. Error Message: " \
                      + ("invalid_grant" if bearer else "invalid_request")
            return 400, {"error": {"user_message": "", "message": message, "reason": "", "user_message_details": {}}}
        q = request.query
        path = request.path
        if path in ("/v1/search/illust", "/v1/search/novel"):
            section = "illusts" if path.endswith("illust") else "novels"
            refused = _refused_search(q, section)
            return refused or self._search(request, section)
        if path == "/v2/search/autocomplete":
            return self._autocomplete(request)
        if path in ("/v1/illust/ranking", "/v1/novel/ranking"):
            kind = "illust" if "illust" in path else "novel"
            refused = _refused_ranking(q, kind)
            if refused:
                return refused
            ids = self._ranking_ids(kind, q.get("mode", "day"), q.get("date"))
            pool = self.fixtures.illusts if kind == "illust" else self.fixtures.novels
            return self._paged(request, "illusts" if kind == "illust" else "novels", [pool[i] for i in ids if i in pool])
        if path == "/v1/user/illusts":
            works = [w for w in self.fixtures.illusts.values() if str(w["user"]["id"]) == q.get("user_id")]
            return self._paged(request, "illusts", sorted(works, key=lambda w: w["create_date"], reverse=True), user=True)
        if path == "/v1/user/novels":
            works = [w for w in self.fixtures.novels.values() if str(w["user"]["id"]) == q.get("user_id")]
            return self._paged(request, "novels", sorted(works, key=lambda w: w["create_date"], reverse=True))
        if path == "/v1/illust/detail":
            work = self.fixtures.illusts.get(_int(q.get("illust_id")))
            return (200, {"illust": work}) if work else _not_found()
        if path == "/v2/novel/detail":
            work = self.fixtures.novels.get(_int(q.get("novel_id")))
            return (200, {"novel": work}) if work else _not_found()
        if path == "/v1/ugoira/metadata":
            meta = self.fixtures.ugoira.get(_int(q.get("illust_id")))
            return (200, {"ugoira_metadata": meta}) if meta else _not_found()
        if path == "/v1/novel/text":  # the App API's text endpoint (the webview's fallback)
            wid = _int(q.get("novel_id"))
            return (200, {"novel_text": self.fixtures.texts.get(wid, "")}) if wid in self.fixtures.novels else _not_found()
        if path == "/webview/v2/novel":
            wid = _int(q.get("id"))
            work = self.fixtures.novels.get(wid)
            if not work:
                return 404, "<html><body>not found</body></html>"
            payload = {"id": str(wid), "title": work["title"], "text": self.fixtures.texts.get(wid, ""),
                       "userId": str(work["user"]["id"]), "coverUrl": work["image_urls"]["large"],
                       "marker": None, "illusts": [], "images": [], "seriesNavigation": None,
                       **self.fixtures.inline.get(wid, {})}
            page = ("<!DOCTYPE html><html><head><script>\n    Object.defineProperty(window, 'pixiv', {value: {\n"
                    f"        novel: {json.dumps(payload, ensure_ascii=False)},\n        isOwnWork: false,\n"
                    "    }});\n</script></head><body></body></html>")
            return 200, page
        return 404, {"error": {"user_message": "", "message": "Not Found", "reason": "", "user_message_details": {}}}

    def _search(self, request: FakeRequest, section: str) -> tuple[int, Any]:
        q = request.query
        words = [w.casefold() for w in (q.get("word") or "").split()]
        pool = self.fixtures.illusts if section == "illusts" else self.fixtures.novels
        partial = q.get("search_target", "partial_match_for_tags") == "partial_match_for_tags"
        works = [w for w in pool.values()
                 if _matches(words, self.fixtures.listed.get((section, int(w["id"])), set()), partial)]
        ai_key = "illust_ai_type" if section == "illusts" else "novel_ai_type"
        if q.get("search_ai_type") == "0":
            works = [w for w in works if w.get(ai_key) != 2]
        if q.get("filter") == "for_ios":
            works = [w for w in works if not w.get("x_restrict")]  # for_ios leaves R-18 / R-18G out
        # Pixiv's search dates are Japan days; create_date is written in +09:00.
        if q.get("start_date"):
            works = [w for w in works if _japan_day(w["create_date"]) >= q["start_date"]]
        if q.get("end_date"):
            works = [w for w in works if _japan_day(w["create_date"]) <= q["end_date"]]
        sort = q.get("sort", "date_desc")
        if sort == "popular_desc":
            works.sort(key=lambda w: w["total_bookmarks"], reverse=True)
        else:
            works.sort(key=lambda w: (w["create_date"], w["id"]), reverse=(sort != "date_asc"))
        return self._paged(request, section, works, search=True)

    def _paged(self, request: FakeRequest, section: str, works: list[dict[str, Any]], *, search: bool = False,
               user: bool = False) -> tuple[int, Any]:
        offset = _int(request.query.get("offset"))
        if offset > OFFSET_CAP:
            return 400, {"error": {"user_message": "", "message": "{\"offset\":[\"offset must be no more than 5000\"]}",
                                   "reason": "", "user_message_details": {}}}
        page = works[offset:offset + self.page_size]
        nxt = None
        if offset + self.page_size < len(works):
            params = {k: v for k, v in request.query.items() if k != "offset"}
            params["offset"] = str(offset + self.page_size)
            nxt = f"{API}{request.path}?{urlencode(params)}"
        body: dict[str, Any] = {section: page, "next_url": nxt}
        if search:
            body.update({"search_span_limit": 31536000, "show_ai": request.query.get("search_ai_type") != "0"})
        if user:
            body["user"] = page[0]["user"] if page else {}
        return 200, body

    def _autocomplete(self, request: FakeRequest) -> tuple[int, Any]:
        """``/v2/search/autocomplete``: the fixtures' suggestions for the word, else every known tag
        that starts with it (Pixiv answers ``tags: [{name, translated_name}]``)."""
        word = (request.query.get("word") or "").strip()
        if not word:
            return 400, {"error": {"user_message": "", "message": '{"word":["word is required"]}', "reason": "",
                                   "user_message_details": {}}}
        names = self.fixtures.suggestions.get(word)
        if names is None:
            seen: dict[str, None] = {}
            for pool in (self.fixtures.illusts, self.fixtures.novels):
                for work in pool.values():
                    for tag in work.get("tags") or ():
                        if str(tag["name"]).casefold().startswith(word.casefold()) and tag["name"] != word:
                            seen.setdefault(tag["name"])
            names = list(seen)[:10]
        return 200, {"tags": [{"name": n, "translated_name": None} for n in names]}

    def _ranking_ids(self, kind: str, mode: str, day: str | None) -> list[int]:
        """A dated ranking is that day's list; no date (or a day without one) the latest list."""
        if day and (kind, mode, day) in self.fixtures.dated_ranking:
            return self.fixtures.dated_ranking[(kind, mode, day)]
        if day and any(k[:2] == (kind, mode) for k in self.fixtures.dated_ranking):
            return []  # the fixtures know this ranking's days: a day without a list is empty
        return self.fixtures.ranking.get((kind, mode), [])

    # -- image host -----------------------------------------------------------------------
    def _image(self, handler: BaseHTTPRequestHandler, request: FakeRequest) -> None:
        if request.headers.get("referer") not in ("https://app-api.pixiv.net/", "https://www.pixiv.net/"):
            return self._send(handler, 403, b"<html>403 Forbidden</html>", content_type="text/html")
        if self.generated.serve(handler, request.path):
            return None
        if request.path in self.fixtures.missing or request.path not in self.fixtures.files:
            return self._send(handler, 404, b"<html>404 Not Found</html>", content_type="text/html")
        data = self.fixtures.files[request.path]
        kind = {"png": "image/png", "jpg": "image/jpeg", "zip": "application/zip"}.get(request.path.rsplit(".", 1)[-1],
                                                                                        "application/octet-stream")
        self._send(handler, 200, data, content_type=kind)


# What Pixiv's App API accepts (pixivpy's _SEARCH_TARGET/_SORT/_MODE types):
# anything else is a 400 naming the parameter, as the real API answers.
SEARCH_TARGETS = {"illusts": ("partial_match_for_tags", "exact_match_for_tags", "title_and_caption"),
                  "novels": ("partial_match_for_tags", "exact_match_for_tags", "title_and_caption", "text", "keyword")}
SEARCH_SORTS = ("date_desc", "date_asc", "popular_desc", "popular_male_desc", "popular_female_desc")
RANKING_MODES = {
    "illust": ("day", "week", "month", "day_male", "day_female", "week_original", "week_rookie", "day_manga",
               "day_ai", "day_r18", "day_male_r18", "day_female_r18", "week_r18", "week_r18g", "day_r18_ai"),
    "novel": ("day", "week", "month", "day_male", "day_female", "week_rookie", "day_ai",
              "day_r18", "day_male_r18", "day_female_r18", "week_r18", "week_r18g", "day_r18_ai"),
}


def _bad_parameter(name: str, value: str) -> tuple[int, Any]:
    message = json.dumps({name: [f"{name} is invalid: {value}"]}, ensure_ascii=False)
    return 400, {"error": {"user_message": "", "message": message, "reason": "", "user_message_details": {}}}


def _refused_search(q: Mapping[str, str], section: str) -> tuple[int, Any] | None:
    target = q.get("search_target", "partial_match_for_tags")
    if target not in SEARCH_TARGETS[section]:
        return _bad_parameter("search_target", target)
    sort = q.get("sort", "date_desc")
    if sort not in SEARCH_SORTS:
        return _bad_parameter("sort", sort)
    for key in ("start_date", "end_date"):
        if q.get(key) and not _is_iso_day(q[key]):
            return _bad_parameter(key, q[key])
    return None


def _refused_ranking(q: Mapping[str, str], kind: str) -> tuple[int, Any] | None:
    mode = q.get("mode", "day")
    if mode not in RANKING_MODES[kind]:
        return _bad_parameter("mode", mode)
    if q.get("date") and not _is_iso_day(q["date"]):
        return _bad_parameter("date", q["date"])
    return None


def _matches(words: list[str], tags: set[str], partial: bool) -> bool:
    """Every word is a tag (exact) or part of one (``partial_match_for_tags``: ミク finds 初音ミク)."""
    if partial:
        return all(any(word in tag for tag in tags) for word in words)
    return set(words) <= tags


def _is_iso_day(value: str) -> bool:
    try:
        return datetime.strptime(value, "%Y-%m-%d").strftime("%Y-%m-%d") == value
    except ValueError:
        return False


def _japan_day(create_date: str) -> str:
    moment = datetime.fromisoformat(create_date)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=JAPAN)
    return moment.astimezone(JAPAN).date().isoformat()


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _not_found() -> tuple[int, Any]:
    return 404, {"error": {"user_message": "該当作品は削除されたか、存在しない作品IDです。", "message": "",
                           "reason": "", "user_message_details": {}}}
