"""Topic mode's pure rules (pixivflow-real-configs note §1, §4): the Japan day, the tag space's
scoring, the metadata gate, popularity and the attempt window."""

from dataclasses import dataclass, field
from datetime import datetime, timezone

import pytest

from pixivflow.domain.topic import (Entry, ScoredTag, attempt_window, before_day, cache_key, lookback_days,
                                    metadata_score, on_day, pool_size, popularity, rank, score_tags, tag_space,
                                    topic_day)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).astimezone(timezone.utc).timestamp() * 1000)


@dataclass
class W:
    work_id: str = "1"
    tags: tuple = ()
    title: str = ""
    create_date: str = ""
    total_bookmarks: int = 0
    raw: dict = field(default_factory=dict)


# -- the day is Japan's ----------------------------------------------------------------------------


@pytest.mark.parametrize("now,value,day", [
    # 23:30 UTC on the 1st is already 08:30 on the 2nd in Tokyo: yesterday is the 1st.
    ("2026-12-01T23:30:00+00:00", "YESTERDAY", "2026-12-01"),
    ("2026-12-01T23:30:00+00:00", "TODAY", "2026-12-02"),
    # 14:59 UTC is 23:59 JST, 15:00 UTC is the next Japan day.
    ("2026-12-01T14:59:59+00:00", "YESTERDAY", "2026-11-30"),
    ("2026-12-01T15:00:00+00:00", "YESTERDAY", "2026-12-01"),
    # A schedule at 10:00 Asia/Shanghai is 11:00 JST: the Japan yesterday, not Shanghai's.
    ("2026-12-02T10:00:00+08:00", "YESTERDAY", "2026-12-01"),
    # 00:30 Shanghai on the 2nd is 01:30 JST on the 2nd; Shanghai's and Japan's yesterday agree here,
    # but at 23:30 Shanghai on the 1st it is 00:30 JST on the 2nd: Japan's yesterday is the 1st.
    ("2026-12-01T23:30:00+08:00", "YESTERDAY", "2026-12-01"),
    ("2026-12-01T23:30:00+08:00", None, "2026-12-01"),
    ("2026-12-01T23:30:00+08:00", "", "2026-12-01"),
    ("2026-12-01T23:30:00+08:00", "2026-08-28", "2026-08-28"),
])
def test_topic_day_is_a_japan_day(now, value, day):
    assert topic_day(value, ms(now)) == day


@pytest.mark.parametrize("bad", ["2026-13-01", "2026-02-30", "20260228", "yesterdayish", "2026-2-3"])
def test_an_explicit_date_is_validated(bad):
    with pytest.raises(ValueError, match="date:"):
        topic_day(bad, ms("2026-12-01T00:00:00+00:00"))


def test_the_whole_japan_day_including_its_morning():
    day = "2026-11-30"
    # 00:05 JST is 15:05 UTC of the day before: PixivFlow's UTC pager never sees it; we keep it.
    assert on_day(W(create_date="2026-11-30T00:05:00+09:00"), day)
    assert on_day(W(create_date="2026-11-29T15:05:00+00:00"), day)
    assert on_day(W(create_date="2026-11-30T08:59:59+09:00"), day)
    assert on_day(W(create_date="2026-11-30T23:59:59+09:00"), day)
    assert not on_day(W(create_date="2026-12-01T00:00:00+09:00"), day)
    assert not on_day(W(create_date="2026-11-29T23:59:59+09:00"), day)
    assert before_day(W(create_date="2026-11-29T23:59:59+09:00"), day)
    assert not before_day(W(create_date="2026-11-30T00:00:00+09:00"), day)
    assert on_day(W(create_date=""), day)  # no date: kept, as PixivFlow does


def test_lookback_days_walk_back_from_the_topic_day():
    assert lookback_days("2026-03-02", 3) == ["2026-03-02", "2026-03-01", "2026-02-28", "2026-02-27"]
    assert lookback_days("2026-03-02", 0) == ["2026-03-02"]
    assert len(lookback_days("2026-03-02", 99)) == 8


# -- the tag space -----------------------------------------------------------------------------------


def test_tag_scoring_follows_pixivflows_formula():
    seed = [W(tags=("ミク", "初音ミク", "VOCALOID")), W(tags=("ミク", "初音ミク")), W(tags=("ミク", "女の子")),
            W(tags=("ミク", "初音ミク", "女の子"))]
    background = [W(tags=("女の子",)), W(tags=("風景",)), W(tags=("女の子", "オリジナル")), W(tags=("猫",))]
    scored = {s.tag: s for s in score_tags("ミク", ["初音ミク", "ミクさん"], seed, background)}
    # 初音ミク: coverage 3/4, bg 0, lift ln(0.78/0.03), specificity clamp(lift/3+0.5) = 1.2, x1.1 suggested
    assert scored["初音ミク"].score == round(0.75 ** 0.5 * 1.2 * 1.1, 4) == 1.1432
    # VOCALOID: coverage 1/4 -> sqrt(.25) * clamp(ln(.28/.03)/3 + .5) = .5 * 1.2
    assert scored["VOCALOID"].score == 0.6
    # 女の子: coverage 2/4, bg 2/4: lift 0 -> specificity .5, generic x0.4
    assert scored["女の子"].score == round(0.5 ** 0.5 * 0.5 * 0.4, 4) == 0.1414
    # suggested but never seen in the sample: the fixed 0.27
    assert scored["ミクさん"].score == 0.27 and scored["ミクさん"].occurrences == 0
    assert "ミク" not in scored  # the seed itself is not scored
    order = [s.tag for s in score_tags("ミク", ["初音ミク", "ミクさん"], seed, background)]
    assert order == ["初音ミク", "VOCALOID", "ミクさん", "女の子"]


def test_the_space_is_the_seed_then_tags_above_min_score_minus_stop_tags():
    scored = [ScoredTag("初音ミク", 1.14), ScoredTag("オリジナル", 0.9), ScoredTag("VOCALOID", 0.6),
              ScoredTag("ミクさん", 0.27), ScoredTag("low", 0.21)]
    space = tag_space("ミク", scored, max_tags=12, min_score=0.22)
    assert [s.tag for s in space] == ["ミク", "初音ミク", "VOCALOID", "ミクさん"]
    assert [s.tag for s in tag_space("ミク", scored, max_tags=2)] == ["ミク", "初音ミク"]
    assert [s.tag for s in tag_space("ミク", scored, min_score=0.5)] == ["ミク", "初音ミク", "VOCALOID"]


def test_cache_key_normalises_the_topic_and_separates_types():
    assert cache_key("novel", " ＡＢＣ ") == cache_key("novel", "abc")
    assert cache_key("novel", "abc") != cache_key("illustration", "abc")
    assert len(cache_key("novel", "abc")) == 16


# -- the gate, popularity and the window ---------------------------------------------------------------


def test_metadata_gate():
    space = [ScoredTag("ミク", 1.0), ScoredTag("初音ミク", 1.14), ScoredTag("VOCALOID", 0.3), ScoredTag("ネギ", 0.25)]
    assert metadata_score(W(tags=("ミク",), title="ミクの歌"), space) == pytest.approx(1.4)
    assert metadata_score(W(tags=("ミク", "初音ミク", "VOCALOID")), space) == pytest.approx(1.5)
    # no seed tag: one related tag of weight >= 0.6 -> 0.5 + 0.6 x 0.5
    assert metadata_score(W(tags=("初音ミク",)), space) == pytest.approx(0.8)
    # a weak related tag alone stays below the 0.35 gate
    assert metadata_score(W(tags=("ネギ",)), space) == pytest.approx(0.125)
    assert metadata_score(W(tags=("風景",), title="ミク"), space) == pytest.approx(0.8)
    assert metadata_score(W(tags=("風景",), raw={"caption": "ミク"}), space) == pytest.approx(0.4)


def test_popularity_is_bookmarks_plus_views_over_1000():
    assert popularity(W(raw={"total_bookmarks": 100, "total_view": 5000})) == 105
    assert popularity(W(raw={"bookmark_count": 3, "view_count": -50})) == 3
    assert popularity(W(total_bookmarks=7)) == 7


def test_rank_orders_accepted_works_by_popularity():
    entries = [Entry("1", 10, 1.0), Entry("2", 50, 0.5), Entry("3", 99, 0.2), Entry("4", 50, 1.2)]
    assert [e.work_id for e in rank(entries, min_meta=0.35, fallback=1)] == ["2", "4", "1"]


@pytest.mark.parametrize("work_type,limit,lf,lcl,pool", [
    ("illustration", 1, None, 20, 20), ("illustration", 15, None, 20, 30), ("illustration", 80, None, 20, 100),
    ("illustration", 120, None, 20, 120), ("novel", 1, "chinese", 20, 20), ("novel", 1, "chinese", 300, 100),
    ("novel", 3, None, 20, 3),
])
def test_pool_size(work_type, limit, lf, lcl, pool):
    assert pool_size(work_type, limit, language_filter=lf, language_candidate_limit=lcl) == pool


@pytest.mark.parametrize("limit,pool,bound,window", [(1, 20, 5, 5), (1, 3, 5, 3), (1, 20, 1, 1), (8, 20, 5, 8),
                                                      (1, 0, 5, 1), (2, 20, 50, 20)])
def test_attempt_window(limit, pool, bound, window):
    assert attempt_window(limit, pool, bound) == window
