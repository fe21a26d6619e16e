"""Topic mode as PixivFlow does it, the pure rules.

A ``mode: topic`` target names a topic, not a tag. Each run:

1. takes the topic DAY in Japan's calendar (``YESTERDAY`` / ``TODAY`` in Asia/Tokyo, whatever the
   schedule's zone; an explicit ``YYYY-MM-DD`` as is) -- ``topic_day``;
2. resolves the topic's TAG SPACE: the seed (the topic itself) plus related tags scored from an
   autocomplete answer, a sample of the seed's works and a background sample (``score_tags``,
   ``tag_space``); the space is cached per (type, topic) for ``cacheDays`` (``cache_key``);
3. collects each space tag's newest works OF THAT DAY (the whole Japan day, 00:00-24:00 JST:
   PixivFlow's pager stops at UTC midnight, 09:00 JST, and misses the morning; we do not --
   ``on_day``), de-duplicated across tags;
4. keeps works that pass the metadata gate (``metadata_score``), orders them by popularity
   (``popularity``: bookmarks + views / 1000) and cuts the pool (``pool_size``); the scan then
   attempts ``attempt_window(limit, pool, scanBound)`` of them;
5. with ``noMatchPolicy.lookbackDays`` walks back day by day (``lookback_days``).

Works are read by attribute (``work_id``, ``title``, ``tags``, ``create_date``, ``total_bookmarks``,
``raw``) so ``pixivflow.domain.work.Work`` fits without importing it.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, Sequence
from zoneinfo import ZoneInfo

JAPAN = ZoneInfo("Asia/Tokyo")

# Request sizes (PixivFlow's TopicResolver / TopicCollector / TargetSearchRunner).
BACKGROUND_SAMPLE = 40
BACKGROUND_WORD = {"illustration": "イラスト", "novel": "小説"}
DAY_SEARCH_MAX_COLLECT = 200  # max(5 x maxPerTag 40, 100) works read per tag, newest first
SUGGESTED_ONLY_SCORE = 0.27
RELATED_WEIGHT_CAP = 0.6
ILLUST_POOL_MIN, POOL_MAX = 20, 100

# Candidate report codes of topic mode, beside the selection rules' own supply reasons.
DUPLICATE_ACROSS_TAGS = "duplicate_across_tags"  # a work two space tags both returned
BELOW_METADATA_SCORE = "below_metadata_score"  # failed the metadata gate
BEYOND_POOL = "beyond_pool"  # ranked below the selected pool

# PixivFlow's generic / stop list (TopicTagScorer + the resolver's own extra entry).
STOP_TAGS = frozenset(
    "r-18 r-18g r-15 original オリジナル 創作 女の子 男の子 イラスト 漫画 manga illustration artwork 落書き らくがき "
    "1000users入り 5000users入り 10000users入り 500users入り 100users入り pixiv commission skeb 依頼絵 仕事絵 aiイラスト".split()
)


# -- the day -------------------------------------------------------------------------------------


def japan_today(now_ms: int) -> date:
    return datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc).astimezone(JAPAN).date()


def topic_day(value: str | None, now_ms: int) -> str:
    """PixivFlow's ``resolveTopicDay``: ``TODAY`` is Japan's today; absent, empty or ``YESTERDAY``
    is Japan's yesterday; anything else must be ``YYYY-MM-DD`` (validated here, unlike PixivFlow)."""
    text = (value or "").strip()
    today = japan_today(now_ms)
    if text.upper() == "TODAY":
        return today.isoformat()
    if not text or text.upper() == "YESTERDAY":
        return (today - timedelta(days=1)).isoformat()
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"date: {text!r} is not a date (YYYY-MM-DD, TODAY or YESTERDAY)") from None
    if day.isoformat() != text:
        raise ValueError(f"date: {text!r} is not a date (YYYY-MM-DD, TODAY or YESTERDAY)")
    return text


def lookback_days(base_day: str, lookback: int) -> list[str]:
    """The base day, then each earlier day down to ``lookback`` days back (0-7)."""
    base = date.fromisoformat(base_day)
    return [(base - timedelta(days=n)).isoformat() for n in range(max(0, min(7, int(lookback))) + 1)]


def japan_date_of(create_date: str) -> str | None:
    """The Japan calendar day a ``create_date`` falls on (a naive stamp is taken as Japan time)."""
    try:
        moment = datetime.fromisoformat(str(create_date).replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=JAPAN)
    return moment.astimezone(JAPAN).date().isoformat()


def on_day(work: Any, day: str) -> bool:
    """The whole Japan day, 00:00-24:00 JST. Works without a date are kept, as in PixivFlow."""
    created = getattr(work, "create_date", "") or ""
    if not created:
        return True
    return japan_date_of(created) == day


def before_day(work: Any, day: str) -> bool:
    """True for a work older than the day's start: a newest-first walk may stop there."""
    created = japan_date_of(getattr(work, "create_date", "") or "")
    return created is not None and created < day


# -- the tag space --------------------------------------------------------------------------------


def tag_key(tag: Any) -> str:
    """Tag identity as PixivFlow compares it: trimmed, NFKC, lower-cased."""
    return unicodedata.normalize("NFKC", str(tag or "").strip()).lower()


def cache_key(work_type: str, topic: str) -> str:
    """The cache identity of a (type, topic) space: first 16 hex of SHA-256 of ``type:key``."""
    return hashlib.sha256(f"{work_type}:{tag_key(topic)}".encode()).hexdigest()[:16]


def work_tag_keys(work: Any, *, translated: bool = False) -> set[str]:
    keys = {tag_key(t) for t in getattr(work, "tags", ()) or ()}
    raw = getattr(work, "raw", None)
    if translated and isinstance(raw, Mapping):
        for tag in raw.get("tags") or ():
            if isinstance(tag, Mapping) and tag.get("translated_name"):
                keys.add(tag_key(tag["translated_name"]))
    keys.discard("")
    return keys


@dataclass(frozen=True)
class ScoredTag:
    tag: str
    score: float
    occurrences: int = 0
    suggested: bool = False


def score_tags(topic: str, suggestions: Sequence[str], seed_sample: Sequence[Any],
               background: Sequence[Any]) -> list[ScoredTag]:
    """PixivFlow's TopicTagScorer over the seed sample (the seed itself excluded), best first."""
    seed = tag_key(topic)
    suggested = {tag_key(s): s for s in suggestions if tag_key(s) and tag_key(s) != seed}
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for work in seed_sample:
        seen = set()
        for tag in getattr(work, "tags", ()) or ():
            key = tag_key(tag)
            if not key or key == seed or key in seen:
                continue
            seen.add(key)
            names.setdefault(key, str(tag).strip())
            counts[key] = counts.get(key, 0) + 1
    bg_counts: dict[str, int] = {}
    for work in background:
        for key in work_tag_keys(work):
            bg_counts[key] = bg_counts.get(key, 0) + 1
    n, nb = max(1, len(seed_sample)), max(1, len(background))
    scored: list[ScoredTag] = []
    for key, count in counts.items():
        coverage = count / n
        bg = bg_counts.get(key, 0) / nb if background else 0.0
        lift = math.log((coverage + 0.03) / (bg + 0.03))
        specificity = min(1.2, max(0.0, lift / 3 + 0.5))
        score = math.sqrt(coverage) * specificity * (1.1 if key in suggested else 1.0) * (0.4 if key in STOP_TAGS else 1.0)
        scored.append(ScoredTag(names[key], round(score, 4), count, key in suggested))
    for key, name in suggested.items():
        if key not in counts and key not in STOP_TAGS:
            scored.append(ScoredTag(name.strip(), SUGGESTED_ONLY_SCORE, 0, True))
    scored.sort(key=lambda s: (-s.score, -s.occurrences, s.tag))
    return scored


def tag_space(topic: str, scored: Iterable[ScoredTag], *, max_tags: int = 12, min_score: float = 0.22) -> list[ScoredTag]:
    """The seed (score 1, first) and the best related tags scoring ``>= minScore``, outside the
    stop list, ``maxTags`` in all."""
    space = [ScoredTag(topic.strip(), 1.0)]
    for tag in scored:
        if len(space) >= max_tags:
            break
        if tag.score >= min_score and tag_key(tag.tag) not in STOP_TAGS:
            space.append(tag)
    return space


def space_to_doc(space: Sequence[ScoredTag]) -> list[dict[str, Any]]:
    return [{"tag": s.tag, "score": s.score, "occurrences": s.occurrences} for s in space]


def space_from_doc(doc: Any) -> list[ScoredTag]:
    out = []
    for item in doc if isinstance(doc, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("tag"), str):
            out.append(ScoredTag(item["tag"], float(item.get("score") or 0), int(item.get("occurrences") or 0)))
    return out


# -- gate and order -------------------------------------------------------------------------------


def _norm_text(value: Any) -> str:
    return unicodedata.normalize("NFKC", str(value or "")).lower()


def metadata_score(work: Any, space: Sequence[ScoredTag], *, translated: bool = False) -> float:
    """PixivFlow's MetadataTopicFilter score: the seed tag dominates; related tags add
    their weight (each capped at 0.6); the title and caption count when the seed tag is absent."""
    seed = tag_key(space[0].tag) if space else ""
    keys = work_tag_keys(work, translated=translated) - STOP_TAGS
    related = [min(s.score, RELATED_WEIGHT_CAP) for s in space[1:] if tag_key(s.tag) in keys]
    total = sum(related)
    title = _norm_text(getattr(work, "title", ""))
    raw = getattr(work, "raw", None)
    caption = _norm_text(raw.get("caption") if isinstance(raw, Mapping) else "")
    if seed and seed in keys:
        return 1.0 + min(total, 0.5) + (0.4 if seed in title else 0.0)
    score = 0.8 * (seed in title) + 0.4 * (bool(seed) and seed in caption)
    score += 0.5 * any(w >= RELATED_WEIGHT_CAP for w in related)
    score += min(total, 0.6) * (1.0 if len(related) >= 2 else 0.5)
    return score


def popularity(work: Any) -> float:
    """``calculatePopularityScore``: bookmarks + views / 1000, negatives and junk as 0."""
    raw = getattr(work, "raw", None)
    raw = raw if isinstance(raw, Mapping) else {}

    def num(*values: Any) -> float:
        for value in values:
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(number):
                return max(0.0, number)
        return 0.0

    bookmarks = num(raw.get("total_bookmarks"), raw.get("bookmark_count"), getattr(work, "total_bookmarks", 0))
    views = num(raw.get("total_view"), raw.get("view_count"))
    return bookmarks + views / 1000


def pool_size(work_type: str, limit: int, *, language_filter: str | None = None, language_candidate_limit: int = 20) -> int:
    """How many of the ranked works are selected, as PixivFlow sizes its pool."""
    limit = max(1, int(limit))
    if work_type == "novel":
        if language_filter:
            return max(limit, min(int(language_candidate_limit), POOL_MAX))
        return limit
    return max(limit, min(max(2 * limit, ILLUST_POOL_MIN), POOL_MAX))


def attempt_window(limit: int, pool: int, scan_bound: int) -> int:
    """``max(limit, min(pool, scanBound))``: how many candidates a day's scan may attempt."""
    return max(int(limit), min(int(pool), int(scan_bound)))


@dataclass
class Entry:
    """One collected work, small enough to checkpoint on the cell: what ranking needs."""

    work_id: str
    popularity: float
    meta: float
    created: str = ""

    def to_doc(self) -> list[Any]:
        return [self.work_id, round(self.popularity, 3), round(self.meta, 4), self.created]

    @classmethod
    def from_doc(cls, doc: Sequence[Any]) -> "Entry":
        return cls(str(doc[0]), float(doc[1]), float(doc[2]), str(doc[3]) if len(doc) > 3 else "")


def rank(entries: Iterable[Entry], *, min_meta: float, fallback: int) -> list[Entry]:
    """The gate then popularity: accepted works by popularity (ties: newer, then higher id). When
    none passes, the seed-tag works (score >= 1) up to ``fallback`` (PixivFlow's seed fallback)."""
    entries = list(entries)

    def order(items: list[Entry]) -> list[Entry]:
        return sorted(items, key=lambda e: (-e.popularity, e.created, e.work_id), reverse=False)

    accepted = [e for e in entries if e.meta >= min_meta]
    if accepted or not entries:
        return order(accepted)
    return order([e for e in entries if e.meta >= 1.0])[: max(1, fallback)]


@dataclass
class DayProgress:
    """Selection progress of ONE topic day, checkpointed on the cell after each tag (a
    day's discovery and up to 12 tag searches do not fit one 60 s invocation)."""

    day: str
    space: list[ScoredTag] | None = None
    next_tag: int = 0
    entries: dict[str, Entry] = field(default_factory=dict)
    raw: int = 0  # works the day searches returned (before de-duplication and the day filter)
    off_day: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # selection rule code -> works it rejected
    passed_over: set[str] = field(default_factory=set)  # ids rejected already (counted once per day)
    failed: dict[str, str] = field(default_factory=dict)  # tag -> the reason its day search failed with

    def seen(self, work_id: str) -> bool:
        return work_id in self.entries or work_id in self.passed_over

    def reject(self, work_id: str, code: str) -> None:
        self.passed_over.add(work_id)
        self.rejected[code] = self.rejected.get(code, 0) + 1

    def to_doc(self) -> dict[str, Any]:
        return {"day": self.day, "space": space_to_doc(self.space) if self.space is not None else None,
                "nextTag": self.next_tag, "entries": [e.to_doc() for e in self.entries.values()],
                "raw": self.raw, "offDay": self.off_day, "rejected": dict(self.rejected),
                "passedOver": sorted(self.passed_over), "failed": dict(self.failed)}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> "DayProgress":
        entries = [Entry.from_doc(e) for e in doc.get("entries") or () if isinstance(e, list) and e]
        space = doc.get("space")
        return cls(day=str(doc["day"]), space=space_from_doc(space) if space is not None else None,
                   next_tag=int(doc.get("nextTag") or 0), entries={e.work_id: e for e in entries},
                   raw=int(doc.get("raw") or 0), off_day=int(doc.get("offDay") or 0),
                   rejected={str(k): int(v) for k, v in (doc.get("rejected") or {}).items()},
                   passed_over={str(i) for i in doc.get("passedOver") or ()},
                   failed={str(k): str(v) for k, v in (doc.get("failed") or {}).items()})


def checkpoint_fingerprint(work_type: str, topic: str, base_day: str) -> str:
    """What a checkpoint belongs to: a config change or another base day starts afresh."""
    return f"topic:{cache_key(work_type, topic)}:{base_day}"
