"""Every placeholder of the real-configs note's §8 table, rendered from what a delivery freezes
(``services.payload.template_context``) through ``domain.templates.template_variables``, for
targets written like the published configs' (issue 22)."""

from __future__ import annotations

import pytest

from conftest import ms
from pixivflow.config import parse_config
from pixivflow.domain.model import Slot
from pixivflow.domain.templates import japan_day, ranking_date, template_variables
from pixivflow.domain.work import Work
from pixivflow.services.payload import template_context

OCCURRENCE = "2026-12-01T02:00:00Z"  # 10:00 in Shanghai, 11:00 in Tokyo on 2026-12-01
SLOT = Slot(slot_id="bot1-daily@2026-12-01T1000", schedule_id="bot1-daily", status="running",
            target_ids=["bot1-illust"], created_at=ms(OCCURRENCE), occurrence_at=ms(OCCURRENCE),
            occurrence_date="2026-12-01", timezone="Asia/Shanghai", slot_name="10:00")

CONFIG = parse_config({"pixiv": {"refreshToken": "${T}"}, "targets": [
    {"id": "bot1-illust", "type": "illustration", "mode": "topic", "topic": "ボテ腹", "date": "YESTERDAY",
     "topicDiscovery": {"includeR18": True}},
    {"id": "bot1-novel", "type": "novel", "mode": "topic", "topic": " 丸呑み ", "date": "2026-11-20"},
    {"id": "daily", "type": "illustration", "mode": "ranking", "rankingMode": "day", "rankingDate": "2026-08-28",
     "filterTag": "西瓜肚"},
    {"id": "latest", "type": "illustration", "mode": "ranking"},
    {"id": "cats", "type": "illustration", "tag": "cats"},
    {"type": "novel", "tag": "西瓜肚", "sort": "popular_desc"},
]})


def illustration(**raw) -> Work:
    base = {"id": 1234, "x_restrict": 1, "total_bookmarks": 12_345, "total_view": 1_500,
            "create_date": "2026-11-30T23:30:00+09:00"}
    base.update(raw)
    return Work(work_id="1234", work_type="illustration", title="月夜", tags=("ボテ腹", "オリジナル"),
                user_name="artist", create_date=str(base["create_date"]), total_bookmarks=12_345, raw=base)


def novel(**raw) -> Work:
    base = {"id": 777, "x_restrict": 0, "total_bookmarks": 999, "total_view": 10_000,
            "create_date": "2026-11-19T08:00:00+09:00", "series": {"id": 5, "title": "長い旅"},
            "language": "Chinese (Mandarin) (cmn)"}
    base.update(raw)
    return Work(work_id="777", work_type="novel", title="第3話", tags=("丸呑み",), user_name="writer",
                create_date=str(base["create_date"]), total_bookmarks=999, raw=base)


def rendered(target_index: int, work: Work) -> dict[str, str]:
    return template_variables(template_context(SLOT, CONFIG.targets[target_index], work))


def test_the_table_for_a_topic_illustration_of_the_published_production_config():
    v = rendered(0, illustration())
    assert {k: v[k] for k in v if k not in ("idempotencyKey", "refetchRequestId")} == {
        "title": "月夜", "displayTitle": "月夜", "seriesTitle": "",
        "pixivId": "1234", "workId": "1234", "type": "illustration", "targetId": "bot1-illust",
        "tag": "", "topic": "ボテ腹", "topicTag": "ボテ腹", "workTags": "ボテ腹,オリジナル", "author": "artist",
        "link": "https://www.pixiv.net/artworks/1234",
        "spoiler": "true", "xRestrict": "1", "xRestrictLabel": "R-18", "xRestrictTag": "R18",
        "rankingDate": "2026-11-30",  # the topic day: YESTERDAY in Japan of the occurrence
        "publishedDate": "2026-11-30", "language": "",
        "bookmarkCount": "1.2w", "viewCount": "1.5k",
        "scheduleId": "bot1-daily", "slotId": "bot1-daily@2026-12-01T1000", "slotName": "10:00",
        "slotDate": "2026-12-01", "executionId": "bot1-daily@2026-12-01T1000",
        "occurrenceAt": "2026-12-01T02:00:00.000Z", "triggerSource": "cron",
    }


def test_a_series_novel_has_its_display_title_series_link_and_language():
    v = rendered(1, novel())
    assert (v["title"], v["displayTitle"], v["seriesTitle"]) == ("第3話", "《長い旅》 第3話", "長い旅")
    assert v["link"] == "https://www.pixiv.net/novel/show.php?id=777"
    assert (v["topic"], v["topicTag"], v["language"]) == ("丸呑み", "丸呑み", "Chinese (Mandarin) (cmn)")
    assert (v["bookmarkCount"], v["viewCount"]) == ("999", "1w")  # ".0" dropped
    assert (v["spoiler"], v["xRestrict"], v["xRestrictLabel"], v["xRestrictTag"]) == ("false", "0", "all-ages", "AllAges")
    assert v["rankingDate"] == "2026-11-20"  # an explicit topic date


@pytest.mark.parametrize("index, raw, expected", [
    (0, {"topic_day": "2026-11-27"}, "2026-11-27"),  # a lookback day that delivered
    (0, {}, "2026-11-30"),
    (2, {}, "2026-08-28"),  # a ranking target: its rankingDate
    (3, {"ranking_date": "2026-11-29"}, "2026-11-29"),  # the list's own date
    (3, {}, "2026-11-30"),  # no rankingDate: yesterday in Japan (PixivFlow's old outbox)
    (4, {}, "2026-11-30"),  # a search target: yesterday in Japan
])
def test_ranking_date_is_the_day_the_configs_note_templates_mean(index, raw, expected):
    assert rendered(index, illustration(**raw))["rankingDate"] == expected


def test_an_id_less_target_renders_an_empty_target_id_and_its_tag():
    v = rendered(5, novel())
    assert CONFIG.targets[5].id.startswith("t-")
    assert (v["targetId"], v["tag"], v["topicTag"], v["topic"]) == ("", "西瓜肚", "西瓜肚", "")


def test_ranking_filter_tag_is_the_tag():
    assert rendered(2, illustration())["tag"] == "西瓜肚"


@pytest.mark.parametrize("x_restrict, expected", [
    (0, ("0", "all-ages", "AllAges", "false")),
    (1, ("1", "R-18", "R18", "true")),
    (2, ("2", "R-18G", "R18G", "true")),
    (5, ("5", "unknown(5)", "XRestrict5", "true")),
    (None, ("", "unknown", "", "false")),
])
def test_x_restrict_family(x_restrict, expected):
    raw = {"x_restrict": x_restrict} if x_restrict is not None else {}
    work = Work(work_id="1", work_type="illustration", raw=raw)
    v = template_variables(template_context(SLOT, CONFIG.targets[4], work))
    assert (v["xRestrict"], v["xRestrictLabel"], v["xRestrictTag"], v["spoiler"]) == expected


@pytest.mark.parametrize("created, expected", [
    ("2026-11-30T23:30:00+09:00", "2026-11-30"),
    ("2026-11-30T15:30:00Z", "2026-12-01"),  # 00:30 in Japan
    ("2026-11-30T15:30:00+00:00", "2026-12-01"),
    ("2026-11-30", "2026-11-30"),
    ("", ""),
    ("yesterday", ""),
])
def test_published_date_is_the_japan_date(created, expected):
    work = Work(work_id="1", work_type="illustration", create_date=created, raw={"x_restrict": 0})
    assert template_variables(template_context(SLOT, CONFIG.targets[4], work))["publishedDate"] == expected


@pytest.mark.parametrize("count, expected", [(None, ""), (0, "0"), (999, "999"), (1_000, "1k"), (1_250, "1.2k"),
                                             (9_999, "10k"), (10_000, "1w"), (15_000, "1.5w"), (123_456, "12.3w")])
def test_bookmark_and_view_counts_use_pixivflows_k_and_w(count, expected):
    v = template_variables({"bookmarkCount": count, "viewCount": count})
    assert (v["bookmarkCount"], v["viewCount"]) == (expected, expected)


def test_japan_day_steps_back_from_the_japan_date_not_the_schedules():
    # 16:30 UTC on 2026-11-30 is 00:30 on 2026-12-01 in Japan but still 2026-11-30 in UTC/Shanghai.
    at = ms("2026-11-30T16:30:00Z")
    assert (japan_day("TODAY", at), japan_day("YESTERDAY", at), japan_day(None, at)) == (
        "2026-12-01", "2026-11-30", "2026-11-30")
    assert japan_day("2026-02-30", at) is None and japan_day("soon", at) is None
    assert ranking_date("search", occurrence_at_ms=None) is None
