"""R-18, excludeAI, aiMetadataCheck and maxPageCount through the real handlers and the real Pixiv
client (issue 22; real-configs note §2, §5), against a scripted Pixiv behind httpx.MockTransport.

The scripted Pixiv honours ``filter=for_ios`` by leaving R-18 works out, as the real one is
believed to; a "leaky" one ignores it, which is why the client-side ``r18`` rule exists. What a
user notices is judged: which work reached the downstream, the query Pixiv received, and the
candidate report (why the others were passed over)."""

from __future__ import annotations

from urllib.parse import parse_qsl

import httpx
import pytest

from conftest import ms
from pixivflow.adapters.pixiv import build_source
from pixivflow.adapters.pixiv.secrets import SecretResolver
from pixivflow.config import parse_config
from support import builders
from support.builders import with_target

FIRE = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
NEXT_FIRE = "2026-12-01T23:00:00Z"
SCHEDULE = "gates"
SLOT = f"{SCHEDULE}@2026-12-01T0800"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00\x00\x00\x08\x00\x00\x00\x06" + b"\x08\x02\x00\x00\x00"
# What the Stable Diffusion web UIs write into the PNG: a tEXt chunk keyed "parameters".
AI_PNG = PNG + b"\x00\x00\x00\x40tEXtparameters\x00masterpiece, Steps: 20, Sampler: Euler a" + b"\x00" * 8


def work(work_id: int, hour: int, *, x_restrict: int = 0, ai_type: int = 1, pages: int = 1, tags=("cats",)) -> dict:
    """An illustration as Pixiv's App API lists it, posted at ``hour`` on 2026-11-30 (Tokyo)."""
    day = f"2026/11/30/{hour:02d}/00/00"
    raw = builders.work(work_id, f"2026-11-30T{hour:02d}:00:00+09:00", tags, title=f"w{work_id}", kind="illust",
                        pages=pages, image_urls={}, width=8, height=6, x_restrict=x_restrict, illust_ai_type=ai_type,
                        total_view=100, visible=True)
    urls = [f"https://i.pximg.net/img-original/img/{day}/{work_id}_p{n}.png" for n in range(pages)]
    if pages == 1:
        raw["meta_single_page"], raw["meta_pages"] = {"original_image_url": urls[0]}, []
    else:
        raw["meta_single_page"] = {}
        raw["meta_pages"] = [{"image_urls": {"original": u}} for u in urls]
    return raw


class ScriptedPixiv:
    def __init__(self, works: list[dict], *, leaky: bool = False, ai_files: frozenset[int] = frozenset()) -> None:
        self.works = works
        self.leaky = leaky
        self.ai_files = ai_files
        self.searches: list[dict[str, str]] = []
        self.images: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/auth/token":
            return httpx.Response(200, json={"access_token": "at-1", "expires_in": 3600, "refresh_token": "rt-0123456789"})
        if path == "/v1/search/illust":
            query = dict(parse_qsl(request.url.query.decode()))
            self.searches.append(query)
            shown = [w for w in self.works if self.leaky or query.get("filter") != "for_ios" or w["x_restrict"] == 0]
            return httpx.Response(200, json={"illusts": shown, "next_url": None})
        if path.startswith("/img-original/"):
            self.images.append(path)
            work_id = int(path.rsplit("/", 1)[1].split("_", 1)[0])
            return httpx.Response(200, content=AI_PNG if work_id in self.ai_files else PNG,
                                  headers={"content-type": "image/png"})
        return httpx.Response(404, json={"error": {"message": "Not Found"}})


@pytest.fixture
def gated(make_runtime):
    """``gated(target, pixiv)`` -> the runtime after one fired and settled occurrence."""

    def run(target: dict, pixiv: ScriptedPixiv):
        target = {"id": "gate", "type": "illustration", "mode": "search", "tag": "cats", "limit": 1,
                  "storageMode": "cache", "delivery": {"target": "review"}, **target}

        source_config = parse_config({"pixiv": {"refreshToken": "${PIXIV_GATE_TOKEN}"},
                                      "network": {"requestPacingMs": 0}, "download": {"requestDelay": 0}})
        box: list = []
        source = build_source(source_config, now_ms=lambda: box[0].clock.now_ms() if box else ms(FIRE),
                              uniform=lambda: 0.0, sleep=lambda s: None,
                              resolver=SecretResolver(env={"PIXIV_GATE_TOKEN": "rt-0123456789"}), env={},
                              transport=httpx.MockTransport(pixiv))
        rt = make_runtime("2026-11-30T22:59:00Z", mutate=with_target(target, SCHEDULE), overrides={"source": source})
        box.append(rt)
        assert rt.fire(SCHEDULE, iso=FIRE)["sent"] == 1
        rt.settle()
        return rt

    return run


def delivered(downstream) -> list[str]:
    return [str(r.body["work_id"]) for r in downstream.requests]


def report(rt, slot_id: str = SLOT) -> dict:
    return rt.wiring.ledger.get_cell(slot_id, "gate").candidate_report


R18_FIRST = [work(1, 22, x_restrict=1), work(2, 21, x_restrict=2), work(3, 20)]


def test_without_r18_the_search_asks_for_ios_and_pixiv_leaves_r18_out(gated, downstream):
    pixiv = ScriptedPixiv(R18_FIRST)
    rt = gated({}, pixiv)
    assert [q.get("filter") for q in pixiv.searches] == ["for_ios"]
    assert delivered(downstream) == ["3"]
    assert report(rt)["supply"]["reasons"] == []


def test_without_r18_works_pixiv_lets_through_anyway_are_rejected_and_counted_r18(gated, downstream):
    pixiv = ScriptedPixiv(R18_FIRST, leaky=True)
    rt = gated({}, pixiv)
    assert [q.get("filter") for q in pixiv.searches] == ["for_ios"]
    assert delivered(downstream) == ["3"]
    assert report(rt)["supply"]["reasons"] == [{"code": "r18", "count": 2}]


def test_with_r18_nothing_filters_them(gated, downstream):
    pixiv = ScriptedPixiv(R18_FIRST)
    rt = gated({"r18": True}, pixiv)
    assert ["filter" in q for q in pixiv.searches] == [False]
    assert delivered(downstream) == ["1"]  # the newest, an R-18 work
    assert report(rt)["supply"]["reasons"] == []


def test_a_topic_target_takes_its_r18_switch_from_topic_discovery_not_r18():
    """Topic mode: ``topicDiscovery.includeR18`` decides, ``r18`` is ignored (note §1, §2)."""
    base = {"id": "t", "type": "illustration", "mode": "topic", "topic": "ミク", "date": "YESTERDAY"}
    cfg = {"pixiv": {"refreshToken": "${T}"}, "targets": [
        {**base, "id": "on", "topicDiscovery": {"includeR18": True}},
        {**base, "id": "off", "r18": True, "topicDiscovery": {"includeR18": False}},
        {**base, "id": "default"}]}
    config = parse_config(cfg)
    assert [config.target(i).criteria().r18 for i in ("on", "off", "default")] == [True, False, False]
    assert [config.target(i).criteria().allows_r18 for i in ("on", "off", "default")] == [True, False, False]


def test_exclude_ai_rejects_pixivs_flag_and_ai_tags_after_normalisation(gated, downstream):
    pixiv = ScriptedPixiv([work(1, 23, ai_type=2), work(2, 22, tags=("cats", "AI-生成")),
                           work(3, 21, tags=("cats", "Generative AI")), work(4, 20, ai_type=0)])
    rt = gated({"excludeAI": True}, pixiv)
    assert delivered(downstream) == ["4"]  # ai type 0 (unknown) alone keeps the work
    assert report(rt)["supply"]["reasons"] == [{"code": "ai_generated", "count": 3}]


def test_ai_metadata_in_the_first_page_skips_the_work_and_it_is_never_fetched_again(gated, downstream):
    pixiv = ScriptedPixiv([work(1, 22), work(2, 21)], ai_files=frozenset({1}))
    rt = gated({"aiMetadataCheck": True}, pixiv)
    assert delivered(downstream) == ["2"]
    first = report(rt)
    assert first["attempted"] == 2
    assert first["skipped"] == [{"code": "filtered", "workId": "1",
                                 "reason": "excluded by aiMetadataCheck: the first page carries AI generator metadata"}]
    assert pixiv.images.count("/img-original/img/2026/11/30/22/00/00/1_p0.png") == 1
    # The next day's occurrence sees work 1 first again: remembered as seen, it is passed over as
    # held on the route, without a second download; work 2 was delivered; the new work 5 is taken.
    pixiv.works.append(work(5, 19))
    rt.clock.set(ms(NEXT_FIRE) - 60_000)
    assert rt.fire(SCHEDULE, iso=NEXT_FIRE)["sent"] == 1
    rt.settle()
    assert delivered(downstream) == ["2", "5"]
    second = report(rt, f"{SCHEDULE}@2026-12-02T0800")
    assert [(s["code"], s["workId"]) for s in second["skipped"]] == [("duplicate", "1"), ("duplicate", "2")]
    assert pixiv.images.count("/img-original/img/2026/11/30/22/00/00/1_p0.png") == 1


def test_max_page_count_is_a_filtered_skip_and_the_scan_moves_on(gated, downstream):
    pixiv = ScriptedPixiv([work(1, 22, pages=31), work(2, 21, pages=30)])
    rt = gated({"maxPageCount": 30}, pixiv)
    assert delivered(downstream) == ["2"]
    assert report(rt)["skipped"] == [{"code": "filtered", "workId": "1",
                                      "reason": "declined by maxPageCount: 31 pages, more than 30"}]
    assert not any("/1_p" in p for p in pixiv.images)  # declined before any download
