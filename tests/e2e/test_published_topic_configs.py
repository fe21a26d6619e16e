"""The published PixivFlow deployments' topic targets end to end (issue 22; pixivflow-real-configs
note §1-§4, §11).

For each published config whose schedules deliver (``production.json``: two bots, four topic
targets; ``fly-two-bots.example.json``: the same shape with ``notify`` on the novels), one
occurrence goes through the real trigger, execute and deliver handlers (embedded runtime on
moto), the real Pixiv client against the strict fake Pixiv (``topic_fixtures``), and a loopback
TelePost-like receiver. The targets, schedules and routes are the published blocks verbatim (the
copies in tests/fixtures/pixivflow-configs/); only the Pixiv credentials and the source point at
the fake, and ``richNovelPreview`` (another issue's route feature) is left out.

Each assertion names the rule that picked the work: topic day (Japan's yesterday), the whole
Japan day, tag space, popularity, R-18 (``includeR18`` / ``for_ios``), AI exclusion, language
verdict, lookback day.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from pixivflow import aws
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv, topic_fixtures
from conftest import ms
from route_receiver import Receiver

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "pixivflow-configs"
SECRETS = "/pixivflow/routes"
# 10:00 Asia/Shanghai on 1 Dec = 11:00 JST: Japan's yesterday is 30 Nov.
FIRE = "2026-12-01T02:00:00Z"
TOPIC_DAY = "2026-11-30"


def published(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text(encoding="utf-8"))


@pytest.fixture
def receiver(monkeypatch):
    with Receiver() as r:
        monkeypatch.setenv("TELEPOST_API_BASE_URL", r.base)
        for n in (1, 2):
            monkeypatch.setenv(f"TELEPOST_BOT{n}_SUBMIT_TOKEN", f"telepost-bot{n}-token-value")
        yield r


@pytest.fixture
def fake():
    with FakePixiv(topic_fixtures()) as f:
        yield f


@pytest.fixture
def start(make_runtime, monkeypatch, receiver, fake):
    monkeypatch.setenv("ROUTE_SECRETS_PATH", SECRETS)
    monkeypatch.delenv("PIXIV_REFRESH_TOKEN", raising=False)

    def factory(name: str, pacing_ms: int = 1000, edit=None):
        cfg_in = published(name)

        def mutate(cfg):
            cfg["source"] = {"kind": "pixiv", "baseUrls": fake.base_urls}
            cfg["pixiv"] = {"refreshToken": "${PIXIV_E2E_TOKEN}", "accountId": "main"}
            cfg["network"] = {"requestPacingMs": pacing_ms, "timeoutMs": 5000}
            targets = copy.deepcopy(cfg_in["targets"])
            for t in targets:
                t.get("delivery", {}).pop("richNovelPreview", None)
            cfg["targets"] = targets
            if edit:
                edit(targets)
            cfg["schedules"] = [{k: v for k, v in s.items() if k in ("id", "name", "enabled", "cron", "timezone", "targetIds")}
                                for s in cfg_in["schedules"]]
            cfg["delivery"] = copy.deepcopy(cfg_in["delivery"])

        clock_box: list = []

        def sleep(seconds: float) -> None:
            clock_box[0].advance(int(seconds * 1000))

        rt = make_runtime("2026-12-01T01:59:00Z", mutate=mutate, overrides={"sleep": sleep}, backend="moto")
        clock_box.append(rt.clock)
        aws.client("ssm").put_parameter(Name=f"{SECRETS}/PIXIV_E2E_TOKEN", Value=DEFAULT_REFRESH_TOKEN, Type="SecureString")
        return rt

    return factory


def submissions(receiver, bot: int) -> dict[str, dict[str, list[str]]]:
    """target_id -> the submitted form fields, per bot's submission API."""
    out = {}
    for post in receiver.at(f"/api/bot{bot}/v1/submissions", "POST"):
        fields = post.fields()
        out[fields["target_id"][0]] = fields
    return out


def work_id(fields: dict[str, list[str]]) -> str:
    """The submitted work: ``pixiv_id`` where the route sends it, else the id at the end of ``link``."""
    if "pixiv_id" in fields:
        return fields["pixiv_id"][0]
    return re.search(r"(\d+)$", fields["link"][0]).group(1)


def fire(rt, schedule: str, iso: str = FIRE):
    if rt.clock.now_ms() < ms(iso):
        rt.clock.set(ms(iso))
    answer = rt.fire(schedule, iso=iso)
    assert answer["disposition"] == "accepted", answer
    rt.settle()
    return rt.engine.ledger.load(answer["slot_id"])


def test_production_bot1_picks_by_the_whole_japan_day_popularity_and_the_language_verdict(start, receiver, fake):
    rt = start("production.json")
    state = fire(rt, "bot1-daily")
    sent = submissions(receiver, 1)
    # Illustration: rule "whole Japan day + popularity". 95001 (900 bookmarks, posted 03:00 JST on the
    # topic day, R-18 allowed by includeR18) beats 95003 (300); 95002 (2000) is AI (excludeAI);
    # 95004 (5000) is of the day before. PixivFlow's UTC pager would never have seen 95001.
    illust = sent["bot1-illust-botefuku"]
    assert illust["pixiv_id"] == ["95001"]
    assert illust["note"][0].startswith(f"📅 {TOPIC_DAY} · ⭐ 900")  # rankingDate = the topic day
    assert "R-18" in illust["note"][0]
    supply = state.cells["bot1-illust-botefuku"].candidate_report["supply"]
    assert {"code": "ai_generated", "count": 1} in supply["reasons"]  # 95002, counted once across tags
    # Novel: rule "language verdict". 96001 (800, Japanese) is skipped as filtered; 96002 (400,
    # Chinese with Pixiv markup) is submitted.
    novel = sent["bot1-novel-botefuku"]
    assert novel["pixiv_id"] == ["96002"] and novel["work_type"] == ["novel"]
    report = state.cells["bot1-novel-botefuku"].candidate_report
    assert [(s["workId"], s["code"]) for s in report["skipped"]] == [("96001", "filtered")]
    assert "language filter mismatch (detected: Japanese, required: chinese)" in report["skipped"][0]["reason"]
    assert {c.status for c in state.cells.values()} == {"submitted"}
    # Topic requests as PixivFlow sends them: includeR18 true -> no filter=for_ios on topic searches.
    topic_searches = [r for r in fake.requests if r.path == "/v1/search/illust" and r.query.get("word") == "ボテ腹"]
    assert topic_searches and all("filter" not in r.query for r in topic_searches)
    day_searches = [r for r in topic_searches if r.query.get("start_date")]
    assert {(r.query["start_date"], r.query["end_date"], r.query["sort"]) for r in day_searches} == {
        (TOPIC_DAY, TOPIC_DAY, "date_desc")}
    assert any(r.path == "/v2/search/autocomplete" and r.query["word"] == "ボテ腹" for r in fake.requests)


@pytest.mark.size("large")  # a published config end to end (tests/README.md, test sizes)
def test_production_bot2_illustration_falls_back_to_a_lookback_day(start, receiver):
    rt = start("production.json")
    state = fire(rt, "bot2-daily", "2026-12-01T02:10:00Z")  # 10:10 Shanghai
    sent = submissions(receiver, 2)
    # Rule "lookback day": nothing of 丸呑み on 30 Nov or 29 Nov; 95101 of 28 Nov is the first day that
    # delivers (95102, far more popular, is 10 days old: never reached with lookbackDays 3).
    illust = sent["bot2-illust-marunomi"]
    assert illust["pixiv_id"] == ["95101"]
    assert illust["note"][0].startswith("📅 2026-11-28 · ")  # rankingDate = the lookback day that delivered
    # The novel target finds its Chinese novel (posted 08:00 JST: the Japan morning) on the topic day.
    assert sent["bot2-novel-marunomi"]["pixiv_id"] == ["96101"]
    assert {c.status for c in state.cells.values()} == {"submitted"}


@pytest.mark.size("large")  # a published config end to end (tests/README.md, test sizes)
def test_fly_two_bots_tag_space_r18_filter_and_no_match_notice(start, receiver, fake):
    rt = start("fly-two-bots.example.json")
    state = fire(rt, "morning")
    bot1, bot2 = submissions(receiver, 1), submissions(receiver, 2)
    # ミク, includeR18 false: 97001 (3000, R-18) never comes back (filter=for_ios); rule "popularity":
    # 97002 (1000, tagged 初音ミク: partial match) over 97003 (200).
    assert work_id(bot1["bot1-illust-topic-a"]) == "97002"
    miku = [r for r in fake.requests if r.path == "/v1/search/illust" and r.query.get("word") == "ミク"]
    assert miku and all(r.query.get("filter") == "for_ios" for r in miku)
    # アークナイツ: rule "tag space". 98003 (2000) carries only 明日方舟, a tag the space resolved from
    # the seed sample and autocomplete; it is found by that tag's day search and beats 98002 (500).
    assert work_id(bot2["bot2-illust-topic-b"]) == "98003"
    assert any(r.query.get("word") == "明日方舟" and r.query.get("start_date") == TOPIC_DAY for r in fake.requests)
    assert "明日方舟" in bot2["bot2-illust-topic-b"]["tags"][0]
    # Chinese with one kana: franc says Japanese, the kana share corrects it (rule "language verdict").
    assert work_id(bot2["bot2-novel-topic-b"]) == "96201"
    assert f"热门日期：{TOPIC_DAY}" in bot2["bot2-novel-topic-b"]["note"][0]
    # ミク has no novel on any of the 4 days: no_candidate, and notify sends the no-match notice.
    cell = state.cells["bot1-novel-topic-a"]
    assert cell.status == "no_candidate"
    assert "2026-11-30, 2026-11-29, 2026-11-28, 2026-11-27" in (cell.last_error or ""), cell
    notices = receiver.at("/api/bot1/v1/notifications", "POST")
    assert len(notices) == 1
    body = notices[0].json
    assert body["text"].startswith("⚠️ PixivFlow 本次没有可投稿内容")
    assert "目标：bot1-novel-topic-a（小说）" in body["text"]
    assert body["idempotency_key"] == f"notification:{state.slot.slot_id}:bot1-novel-topic-a:no-candidate"
    assert "bot1-novel-topic-a" not in bot1


@pytest.mark.size("large")  # two occurrences of a published config (tests/README.md, test sizes)
def test_the_tag_space_is_cached_in_the_ledger_for_the_next_occurrence(start, receiver, fake):
    rt = start("fly-two-bots.example.json")
    fire(rt, "morning")
    autocompletes = [r for r in fake.requests if r.path == "/v2/search/autocomplete"]
    assert sorted(r.query["word"] for r in autocompletes) == ["アークナイツ", "アークナイツ", "ミク", "ミク"]
    fire(rt, "evening", "2026-12-01T10:00:00Z")  # 18:00 Shanghai: the evening plan, same targets
    # cacheDays 7: no second discovery for any (type, topic)
    assert len([r for r in fake.requests if r.path == "/v2/search/autocomplete"]) == 4


@pytest.mark.size("large")  # several invocations of one selection (tests/README.md, test sizes)
def test_a_selection_longer_than_one_invocation_checkpoints_and_resumes_at_the_next_tag(start, receiver, fake, logs):
    """Rule "checkpoint per (day, tag)": with Pixiv paced at 6 s a request, bot2's lookback walk
    (4 days x the space's tags) outlasts the 30 s selection budget of one invocation. It hands over
    and the next invocation resumes at the next (day, tag): every day search is sent once, and the
    cell chooses what an uninterrupted run chooses."""
    rt = start("production.json", pacing_ms=6000)
    state = fire(rt, "bot2-daily", "2026-12-01T02:10:00Z")
    suspended = logs.events("topic.suspended")
    assert suspended, "the walk should not fit one invocation at 6 s a request"
    assert {e["target_id"] for e in suspended} >= {"bot2-illust-marunomi"}
    sent = submissions(receiver, 2)
    assert sent["bot2-illust-marunomi"]["pixiv_id"] == ["95101"]  # the lookback day, as without a break
    assert sent["bot2-novel-marunomi"]["pixiv_id"] == ["96101"]
    day_searches = [(r.path, r.query["word"], r.query["start_date"], r.query.get("offset"))
                    for r in fake.requests if r.path.startswith("/v1/search/") and r.query.get("start_date")]
    assert len(day_searches) == len(set(day_searches))  # no (day, tag) page was searched twice
    assert {day for path, word, day, _ in day_searches if word == "丸呑み" and path == "/v1/search/illust"} == {
        "2026-11-30", "2026-11-29", "2026-11-28"}
    assert {c.status for c in state.cells.values()} == {"submitted"}


@pytest.mark.size("large")  # a published config end to end (tests/README.md, test sizes)
def test_a_novel_target_asks_the_lookback_days_for_the_remaining_count(start, receiver):
    """Rule "lookback day, remaining count": with limit 2 the Chinese novel of the topic day (96002)
    is one; the walk goes on and the day before supplies the second (96003). The Japanese 96001 is
    never taken (the language rule is not relaxed)."""

    def limit_two(targets):
        for t in targets:
            if t["id"] == "bot1-novel-botefuku":
                t["limit"] = 2

    rt = start("production.json", edit=limit_two)
    state = fire(rt, "bot1-daily")
    posts = [p.fields() for p in receiver.at("/api/bot1/v1/submissions", "POST")]
    novels = sorted((f["pixiv_id"][0], f["note"][0].split(" · ")[0]) for f in posts if f["target_id"] == ["bot1-novel-botefuku"])
    assert novels == [("96002", f"📅 {TOPIC_DAY}"), ("96003", "📅 2026-11-29")]
    assert state.cells["bot1-novel-botefuku"].status == "submitted"


def test_a_non_retryable_failure_sends_the_failure_notice_to_notification_url(start, receiver, fake):
    """Pixiv refuses the refresh token: every topic cell ends failed (auth_failed, not retried) and
    each target's primary route gets the failure notice at its notificationUrl, once per key."""
    rt = start("fly-two-bots.example.json")
    fake.revoke()
    state = fire(rt, "morning")
    assert {c.status for c in state.cells.values()} == {"failed"}
    notices = {n.json["idempotency_key"]: n.json["text"] for bot in (1, 2)
               for n in receiver.at(f"/api/bot{bot}/v1/notifications", "POST")}
    slot = state.slot.slot_id
    assert set(notices) == {f"notification:{slot}:{t}:failed" for t in state.cells}
    assert all(text.startswith("❌ PixivFlow 本次处理失败") for text in notices.values())
    assert not receiver.at("/api/bot1/v1/submissions", "POST") and not receiver.at("/api/bot2/v1/submissions", "POST")
