"""The published PixivFlow deployments' topic targets end to end (issue 22; pixivflow-real-configs
note §1-§4, §11).

For each published config whose schedules deliver (``production.json``: two bots, four topic
targets; ``fly-two-bots.example.json``: the same shape with ``notify`` on the novels;
``pixivflow.production.json``: production's targets reviewed through two Telegram bots), and for
``standalone.example.json`` once PixivFlow's ``PIXIV_SCHEDULER_ENABLED`` switches its legacy plan
on, one occurrence goes through the real trigger, execute and deliver handlers (embedded runtime on
moto), the real Pixiv client against the strict fake Pixiv (``topic_fixtures``), and a loopback
TelePost-like receiver. The targets, schedules and routes are the published blocks verbatim (the
copies in tests/fixtures/pixivflow_configs/); only the Pixiv credentials and the source point at
the fake, and ``richNovelPreview`` (another issue's route feature) is left out.

Each assertion names the rule that picked the work: topic day (Japan's yesterday), the whole
Japan day, tag space, popularity, R-18 (``includeR18`` / ``for_ios``), AI exclusion, language
verdict, lookback day.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from pixivflow import aws
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv, topic_fixtures
from conftest import TRIGGER_TOKEN, ms
from support.builders import fake_pixiv, pixiv_config, pixiv_runtime, published
from support.route_receiver import Receiver

SECRETS = "/pixivflow/routes"
# 10:00 Asia/Shanghai on 1 Dec = 11:00 JST: Japan's yesterday is 30 Nov.
FIRE = "2026-12-01T02:00:00Z"
TOPIC_DAY = "2026-11-30"


@pytest.fixture
def receiver(monkeypatch):
    with Receiver() as r:
        monkeypatch.setenv("TELEPOST_API_BASE_URL", r.base)
        for n in (1, 2):
            monkeypatch.setenv(f"TELEPOST_BOT{n}_SUBMIT_TOKEN", f"telepost-bot{n}-token-value")
        yield r


fake = fake_pixiv(topic_fixtures)


@pytest.fixture
def start(make_runtime, monkeypatch, receiver, fake):
    monkeypatch.setenv("ROUTE_SECRETS_PATH", SECRETS)
    monkeypatch.delenv("PIXIV_REFRESH_TOKEN", raising=False)

    def factory(name: str, pacing_ms: int = 1000, edit=None):
        cfg_in = published(name)
        targets = copy.deepcopy(cfg_in["targets"])
        for t in targets:
            t.get("delivery", {}).pop("richNovelPreview", None)
        if edit:
            edit(targets)
        schedules = [{k: v for k, v in s.items() if k in ("id", "name", "enabled", "cron", "timezone", "targetIds")}
                     for s in cfg_in["schedules"]]
        mutate = pixiv_config(fake, targets, schedules=schedules, pixiv={"refreshToken": "${PIXIV_E2E_TOKEN}", "accountId": "main"},
                              network={"requestPacingMs": pacing_ms, "timeoutMs": 5000}, delivery=copy.deepcopy(cfg_in["delivery"]))
        return pixiv_runtime(make_runtime, mutate, start="2026-12-01T01:59:00Z", ssm=True,
                             ssm_token=(f"{SECRETS}/PIXIV_E2E_TOKEN", DEFAULT_REFRESH_TOKEN))

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
    return rt.wiring.ledger.load(answer["slot_id"])


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


# -- pixivflow.production.json: the same four topic targets, reviewed through two Telegram bots ------

BOT_TOKENS = {1: "7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", 2: "7087654321:AAFbqTcvCH1vGWJxfSeofSAs0K5PALDswb"}
CHATS = {1: "-1004318193445", 2: "-1004303586404"}
CP_SECRET = "control-plane-callback-secret-value"


@pytest.fixture
def telegram(monkeypatch):
    from pixivflow.local.route_fakes import FakeControlPlane, FakeTelegram

    with FakeTelegram() as bot_api, FakeControlPlane(token=CP_SECRET) as cp:
        monkeypatch.setenv("TELEGRAM_API_BASE", bot_api.base)
        for n, token in BOT_TOKENS.items():
            monkeypatch.setenv(f"TELEGRAM_BOT{n}_TOKEN", token)
        monkeypatch.setenv("CONTROL_PLANE_URL", cp.base)
        monkeypatch.setenv("CONTROL_PLANE_CALLBACK_SECRET", CP_SECRET)
        yield bot_api, cp


def reviewed(bot_api, cp, bot: int) -> dict[str, tuple[str, list]]:
    """target_id -> (the reviewed work id, the Bot API calls that posted it), for one bot's chat."""
    out = {}
    for record in cp.reviews.values():
        if record["bot_id"] == f"bot{bot}":
            assert record["chat_id"] == CHATS[bot]
            ids = set(record["media_message_ids"]) | {record["control_message_id"]}
            calls = [c for c in bot_api.sent() if set(c.message_ids) & ids]
            out[record["target_id"]] = (record["work_id"], calls)
    return out


@pytest.mark.size("large")  # two occurrences of four topic cells on moto (tests/README.md, test sizes)
def test_pixivflow_production_reviews_what_the_topic_rules_pick_through_each_bots_telegram_route(start, telegram):
    """``pixivflow.production.json`` (the control plane's copy): the four topic targets of
    ``production.json``, delivered for review through two ``type: telegram`` routes. The same rules
    pick the same works (topic day + whole Japan day + popularity + excludeAI for bot1's
    illustration, the language verdict for the novels, the lookback day for bot2's illustration),
    and each goes to its bot's review chat: illustrations as photos, novels as documents, the
    published caption rendered on the media, one control card and one review record each."""
    bot_api, cp = telegram
    rt = start("pixivflow.production.json")
    first = fire(rt, "bot1-daily")
    second = fire(rt, "bot2-daily", "2026-12-01T02:10:00Z")
    assert {c.status for s in (first, second) for c in s.cells.values()} == {"submitted"}

    bot1, bot2 = reviewed(bot_api, cp, 1), reviewed(bot_api, cp, 2)
    assert {t: w for t, (w, _) in bot1.items()} == {"bot1-illust-botefuku": "95001", "bot1-novel-botefuku": "96002"}
    assert {t: w for t, (w, _) in bot2.items()} == {"bot2-illust-marunomi": "95101", "bot2-novel-marunomi": "96101"}
    assert len(cp.reviews) == 4

    # Each bot posts with its own token to its own chat: one media message, then the control card.
    for bot, posts in ((1, bot1), (2, bot2)):
        for target, (_, calls) in posts.items():
            kind = "sendPhoto" if "illust" in target else "sendDocument"
            assert [c.method for c in calls] == [kind, "sendMessage"], (target, calls)
            assert {(c.token, c.fields["chat_id"]) for c in calls} == {(BOT_TOKENS[bot], CHATS[bot])}

    # The published caption, rendered: rankingDate = the topic day (or the lookback day that delivered),
    # the R-18 label of includeR18 targets, the work's link.
    caption = bot1["bot1-illust-botefuku"][1][0].fields["caption"]
    lines = caption.splitlines()
    assert lines[0] == "ボテ腹の朝"
    assert lines[1].startswith(f"📅 {TOPIC_DAY} · ⭐ 900 · 👁 ")
    assert lines[2] == "🏷 ボテ腹 · Pixiv 分级：R-18"
    assert lines[3] == "🔗 https://www.pixiv.net/artworks/95001"
    novel_caption = bot1["bot1-novel-botefuku"][1][0].fields["caption"]
    assert novel_caption.startswith("夜市的猫\n") and novel_caption.endswith("🔗 https://www.pixiv.net/novel/show.php?id=96002")
    assert bot2["bot2-illust-marunomi"][1][0].fields["caption"].splitlines()[1].startswith("📅 2026-11-28 · ")

    # Why the novels are these: bot1's Japanese favourite was read and refused by the language rule.
    report = first.cells["bot1-novel-botefuku"].candidate_report
    assert [(s["workId"], s["code"]) for s in report["skipped"]] == [("96001", "filtered")]
    # Nothing reached the bot tokens' owner but the Bot API; no token in the review records.
    assert not any(token in json.dumps(cp.reviews) for token in BOT_TOKENS.values())


# -- standalone.example.json: id-less targets, a disabled legacy plan, run by hand ---------------------

RANKING_DAY = "2026-08-28"


def standalone_fixtures():
    """The fake Pixiv's works for ``standalone.example.json``: 西瓜肚 illustrations around its
    ranking date (a Japan day) and 西瓜肚 novels in Chinese, Japanese and too short to tell."""
    from pixivflow.local.fake_pixiv import NOVEL_JA, NOVEL_ZH, illust, novel

    fx = topic_fixtures()
    artist, writer = (6100, "Standalone Artist"), (6200, "Standalone Writer")
    day = [  # (id, JST time on the ranking day, bookmarks, extra)
        (70001, "02:00", 800, {}),                # before 09:00 JST: a UTC-day pager would miss it
        (70002, "10:00", 50, {}),
        (70003, "12:00", 600, {}),
        (70004, "13:00", 3000, {"x_restrict": 1}),  # not asked for (no r18 key), refused
        (70005, "15:00", 400, {}),
        (70006, "18:00", 700, {}),
        (70007, "21:00", 500, {}),
        (70008, "23:59", 900, {"ai_type": 2}),     # AI is allowed: the target sets no excludeAI
    ]
    for wid, hhmm, bookmarks, extra in day:
        fx.add_illust(illust(wid, f"西瓜肚 {wid}", ["西瓜肚"], f"{RANKING_DAY}T{hhmm}:00+09:00", bookmarks=bookmarks,
                             user=artist, **extra))
    fx.add_illust(illust(70009, "西瓜肚 前日", ["西瓜肚"], "2026-08-27T23:00:00+09:00", bookmarks=9000, user=artist))
    fx.add_illust(illust(70010, "西瓜肚 翌日", ["西瓜肚"], "2026-08-29T00:30:00+09:00", bookmarks=9000, user=artist))
    short = "西瓜肚。"
    for wid, text, bookmarks in ((71001, NOVEL_JA, 5000), (71002, NOVEL_ZH, 400), (71003, NOVEL_ZH, 300),
                                 (71004, short, 250), (71005, NOVEL_ZH, 200), (71006, NOVEL_ZH, 100),
                                 (71007, NOVEL_ZH, 10)):
        fx.add_novel(novel(wid, f"西瓜肚 {wid}", ["西瓜肚"], "2026-11-20T12:00:00+09:00", text, bookmarks=bookmarks,
                           user=writer), text)
    return fx


def test_standalone_with_pixivflows_scheduler_switch_stores_what_pixivflow_would_download(make_runtime, monkeypatch):
    """``standalone.example.json``: no schedules, a disabled legacy ``scheduler`` block, id-less
    targets (derived ids), persistent storage (download only, no route). Unchanged, it never fires
    (as in PixivFlow); PixivFlow's own switch ``PIXIV_SCHEDULER_ENABLED=true`` turns its legacy
    block into the daily plan ``default`` (03:00 Asia/Shanghai), which is how its Docker deployment
    runs it. One occurrence through the real handlers then stores, for the ranking target with
    ``filterTag``, the ranking date's one-day search in popularity order over the whole Japan day
    with R-18 refused (the target does not ask for it) and AI allowed (it sets no excludeAI); for the
    novel target, the popular search's Chinese novels and, not strict, the one too short to tell,
    the Japanese favourite filtered inside the five-candidate attempt window."""
    cfg_in = published("standalone.example.json")
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)  # its README's way past the placeholder
    with FakePixiv(standalone_fixtures()) as fake:
        def mutate(cfg):
            cfg.clear()
            cfg.update(copy.deepcopy(cfg_in))
            cfg["source"] = {"kind": "pixiv", "baseUrls": fake.base_urls}
            cfg["network"] = {**cfg_in["network"], "requestPacingMs": 0}
            cfg["network"].pop("proxy", None)  # its 127.0.0.1:7892 proxy is the author's machine, not this one

        unchanged = make_runtime("2026-11-30T18:59:00Z", mutate=mutate, backend="twin", ssm=True)
        assert not unchanged.wiring.config.schedule("default").enabled
        status, listing = unchanged.http("GET", "/internal/schedules", token=TRIGGER_TOKEN)
        assert status == 200 and listing["schedules"] == [], listing  # nothing would ever fire
        unchanged.__exit__(None, None, None)

        monkeypatch.setenv("PIXIV_SCHEDULER_ENABLED", "true")
        rt = make_runtime("2026-11-30T18:59:00Z", mutate=mutate, backend="twin", ssm=True)
        plan = rt.wiring.config.schedule("default")
        assert (plan.enabled, plan.cron, plan.timezone) == (True, "0 3 * * *", "Asia/Shanghai")
        ranking, novels = (t.id for t in rt.wiring.config.targets)
        state = fire(rt, "default", "2026-11-30T19:00:00Z")  # 03:00 on 1 Dec in Shanghai

        s3 = aws.client("s3")
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=rt.env["ARTIFACT_BUCKET"]).get("Contents", [])]

    def stored(target_id):
        """The cell (its first bound work is the most popular) and the works whose files it stored."""
        cell = state.cells[target_id]
        assert cell.status == "submitted" and cell.candidate_report["attempted"] == 5, cell
        return cell, {k.split("/")[2] for k in keys if k.split("/")[1] == target_id}

    ranking_cell, ranking_works = stored(ranking)
    # filterTag ranking: one Japan day (08-28, 00:00-23:59 JST), popularity order, R-18 (70004)
    # refused client-side and by for_ios, AI (70008) allowed; 70009/70010 are the days around it.
    assert ranking_cell.work_id == "70008"
    assert ranking_works == {"70008", "70001", "70006", "70003", "70007"}
    searches = [r for r in fake.requests if r.path == "/v1/search/illust" and r.query.get("word") == "西瓜肚"]
    assert searches and {(r.query["start_date"], r.query["end_date"]) for r in searches} == {(RANKING_DAY, RANKING_DAY)}
    assert all(r.query.get("filter") == "for_ios" for r in searches)
    novel_cell, novel_works = stored(novels)
    # languageFilter chinese, not strict: 71001 (Japanese, the favourite) is read and filtered, 71004
    # (too short to tell) kept. Rule "attempt window": max(limit 5, min(pool, scanBound 5)) = 5
    # candidates are tried, the filtered one among them, so four are stored and 71006 is never
    # tried, as in PixivFlow (note §1, §3).
    assert novel_cell.work_id == "71002"
    assert novel_works == {"71002", "71003", "71004", "71005"}
    assert [(s["workId"], s["code"]) for s in novel_cell.candidate_report["skipped"]] == [("71001", "filtered")]
