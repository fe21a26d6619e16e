"""Target selection as PixivFlow does it (docs/explanation/selection.md).

A work source only answers paged queries (``search_page``) and single lookups (``get_work``).
Every rule that decides WHICH works a target may take lives here, so the catalogue and the
Pixiv App API source cannot drift apart:

* ``plan_selection`` turns a target's selection keys into the queries to send: one query with
  every word for ``tagRelation: and``; one query per word for ``or`` (merged, de-duplicated by
  id, no further query once enough works are gathered); a ranking list, a topic, a user's works,
  a ``filterTag`` ranking (a one-day ``date_desc`` search ranked locally by bookmarks), or a
  pinned work id (``illustId`` / ``novelId``: fetched alone, never searched, never substituted).
  ``YESTERDAY`` / ``TODAY`` resolve against the slot's occurrence date in its schedule's zone.
* ``select`` pages every query through ``pager.walk`` (the over-fetch bound and the
  client-side date window: inclusive days compared with the date written in the work's own
  ``create_date`` offset), applies the per-work rules, and orders the survivors (the target's
  ``sort``, the ranking's own order, or a seeded shuffle for ``random``).
* Every work passed over is counted once, under the first rule that rejected it, in the
  candidate supply report (``supply``), so an operator sees why nothing was taken.

Rejection codes (``supply.reasons[].code``): ``date_out_of_range``, ``restricted`` (the source
saw a placeholder: deleted, private or hidden), ``r18`` (``x_restrict`` ≥ 1 while the target
does not include R-18: ``r18`` in search mode, ``topicDiscovery.includeR18`` in topic mode; Pixiv's
``filter=for_ios`` alone does not guarantee it), ``ai_generated`` (``excludeAI``, illustrations
only), ``below_min_bookmarks``, ``too_many_pages`` (``maxPageCount`` of a pinned illustration; a
searched one is declined when attempted: ``page_cap_decline``).

Works are read by attribute (``work_id``, ``work_type``, ``tags``, ``create_date``,
``total_bookmarks``, ``page_count``, ``x_restrict``, ``ai_type``, ``restricted``, ``raw``), so
this module stays free of the ports layer; ``pixivflow.domain.work.Work`` fits.
"""

from __future__ import annotations

import random as _random
import re
from dataclasses import dataclass, replace
from functools import partial
from datetime import date, timedelta
from typing import Any, Callable, Mapping, Sequence

from .outcomes import CandidateSupply
from .work import SearchRequest
from .pager import (
    SORT_DATE_ASC,
    SORT_DATE_DESC,
    SORT_POPULAR_DESC,
    InvalidDateWindow,
    PageLike,
    fetch_limit,
    parse_window,
    sort_works,
    walk,
)

# -- rejection codes (supply reasons) ---------------------------------------------------------

DATE_OUT_OF_RANGE = "date_out_of_range"
RESTRICTED = "restricted"
R18 = "r18"
AI_GENERATED = "ai_generated"
BELOW_MIN_BOOKMARKS = "below_min_bookmarks"
TOO_MANY_PAGES = "too_many_pages"
REJECTION_CODES = (DATE_OUT_OF_RANGE, RESTRICTED, R18, AI_GENERATED, BELOW_MIN_BOOKMARKS, TOO_MANY_PAGES)

# -- the vocabulary of a target's selection keys ------------------------------------------------

SORTS = (SORT_DATE_DESC, SORT_DATE_ASC, SORT_POPULAR_DESC)
ILLUST_SEARCH_TARGETS = ("partial_match_for_tags", "exact_match_for_tags", "title_and_caption")
# Pixiv's novel search also matches the body text or a keyword (tags, title, caption).
NOVEL_SEARCH_TARGETS = ILLUST_SEARCH_TARGETS + ("text", "keyword")
# PixivFlow's own mode lists (query-mapper.ts): day_ai is in its config type but refused there.
ILLUST_RANKING_MODES = (
    "day", "week", "month", "day_male", "day_female", "week_original", "week_rookie",
    "day_r18", "day_male_r18", "day_female_r18", "week_r18", "week_r18g",
)
NOVEL_RANKING_MODES = (
    "day", "week", "month", "day_male", "day_female",
    "day_r18", "day_male_r18", "day_female_r18", "week_r18", "week_r18g",
)
RELATIVE_DAYS = ("TODAY", "YESTERDAY")

RANDOM_MAX_ATTEMPTS = 50  # PixivFlow's random mode tries at most 50 works (DownloadPlanner)
FILTER_TAG_FACTOR, FILTER_TAG_MIN = 20, 100  # a filterTag ranking gathers max(20 × limit, 100)
SOURCE_ORDER = "source"
RANDOM_ORDER = "random"

_DAY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def ranking_modes(work_type: str) -> tuple[str, ...]:
    return NOVEL_RANKING_MODES if work_type == "novel" else ILLUST_RANKING_MODES


def search_targets(work_type: str) -> tuple[str, ...]:
    return NOVEL_SEARCH_TARGETS if work_type == "novel" else ILLUST_SEARCH_TARGETS


def is_day(value: Any) -> bool:
    """``YYYY-MM-DD`` naming a real calendar day."""
    if not isinstance(value, str) or not _DAY_RE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def resolve_day(value: str | None, occurrence_date: str | None) -> str | None:
    """``TODAY`` / ``YESTERDAY`` against the occurrence date (the schedule's zone); a day stays itself.

    PixivFlow resolves them against the machine's clock at run time; a slot resolves them
    against its own occurrence, so a late or resumed run still means the day it was planned
    for. Without an occurrence date a relative day cannot be resolved and is dropped.
    """
    if value is None:
        return None
    text = value.strip()
    upper = text.upper()
    if upper in RELATIVE_DAYS:
        if not occurrence_date:
            return None
        day = date.fromisoformat(occurrence_date)
        return (day - timedelta(days=1)).isoformat() if upper == "YESTERDAY" else day.isoformat()
    return text


# -- the criteria ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Criteria:
    """A target's selection keys, already validated by the config."""

    work_type: str = "illustration"
    mode: str = "search"  # search | ranking | topic
    tag: str | None = None
    tag_relation: str = "and"
    sort: str = SORT_DATE_DESC
    search_target: str = "partial_match_for_tags"
    start_date: str | None = None  # YYYY-MM-DD, inclusive
    end_date: str | None = None
    min_bookmarks: int | None = None
    exclude_ai: bool = False
    duration: str | None = None  # Pixiv's search window hint (within_last_day|week|month)
    r18: bool = False
    max_page_count: int | None = None  # 0 or None: no cap
    ranking_mode: str = "day"
    ranking_date: str | None = None  # YYYY-MM-DD | TODAY | YESTERDAY
    filter_tag: str | None = None
    topic: str | None = None
    topic_date: str | None = None  # the topic's one-day window (PixivFlow's ``date``)
    user_id: str | None = None
    pinned_id: str | None = None  # illustId (illustrations) / novelId (novels)
    random: bool = False
    limit: int = 10

    @property
    def words(self) -> list[str]:
        return (self.tag or "").split()

    @property
    def allows_r18(self) -> bool:
        # An R-18 ranking list is an explicit choice of R-18 works.
        return self.r18 or (self.mode == "ranking" and not self.filter_tag and "r18" in self.ranking_mode)


@dataclass(frozen=True)
class Plan:
    criteria: Criteria
    queries: tuple[SearchRequest, ...] = ()  # the pages the source is asked for
    pinned_id: str | None = None
    walk_order: str = SORT_DATE_DESC  # the order the source returns items in (drives the date stop)
    order: str = SORT_DATE_DESC  # the candidates' final order: a sort, "source" or "random"
    gather: int = 100  # in-window works to gather before paging stops (the over-fetch bound)
    start_date: str | None = None  # the client-side date window (inclusive days)
    end_date: str | None = None
    note: str | None = None  # set when nothing can match (an empty date window)
    seed: str = ""  # the random order's seed: the same cell always shuffles the same way


def plan_selection(c: Criteria, *, occurrence_date: str | None, seed: str = "") -> Plan:
    """The queries and rules one selection pass runs for a target."""
    if c.pinned_id is not None:
        return Plan(criteria=c, pinned_id=c.pinned_id, order=SOURCE_ORDER, gather=1)

    start, end = c.start_date, c.end_date
    walk_order, order = c.sort, c.sort
    limit = max(1, int(c.limit or 1))
    base: dict[str, Any] = dict(work_type=c.work_type, sort=c.sort, search_target=c.search_target,
                exclude_ai=c.exclude_ai and c.work_type == "illustration", include_r18=c.r18, duration=c.duration)
    if c.user_id:
        # A user's works come newest first (Pixiv's /v1/user/illusts and /v1/user/novels).
        queries: tuple[SearchRequest, ...] = (SearchRequest(mode="user", user_id=c.user_id, **base),)
        walk_order = SORT_DATE_DESC
    elif c.mode == "ranking" and c.filter_tag:
        # PixivFlow's tag-scoped daily popularity: the ranking day becomes a one-day window of a
        # date-ordered search, ranked locally by bookmarks. No date means the occurrence's day.
        day = resolve_day(c.ranking_date or "TODAY", occurrence_date)
        start = end = day
        queries = (SearchRequest(mode="search", tag=c.filter_tag, **(base | {"sort": SORT_DATE_DESC})),)
        walk_order, order = SORT_DATE_DESC, SORT_POPULAR_DESC
    elif c.mode == "ranking":
        # No rankingDate: the source's latest list. PixivFlow sends today's date here, which
        # Pixiv has usually not published yet (it then falls back); the rank is the order.
        day = resolve_day(c.ranking_date, occurrence_date)
        queries = (SearchRequest(mode="ranking", ranking_mode=c.ranking_mode, ranking_date=day, **base),)
        walk_order = order = SOURCE_ORDER
    elif c.mode == "topic":
        topic = (c.topic or c.tag or "").strip()
        if c.topic_date:
            start = end = resolve_day(c.topic_date, occurrence_date)
        queries = (SearchRequest(mode="topic", topic=topic, tag=topic, **base),)
    elif c.tag_relation == "or" and len(c.words) > 1:
        queries = tuple(SearchRequest(mode="search", tag=word, **base) for word in dict.fromkeys(c.words))
    else:
        queries = (SearchRequest(mode="search", tag=" ".join(c.words), **base),)

    dated = bool(start or end)
    # The window travels as a server-side hint too: a source that can filter by date pages less.
    queries = tuple(replace(q, start_date=start, end_date=end) for q in queries)
    if c.mode == "ranking" and c.filter_tag:
        gather = max(limit * FILTER_TAG_FACTOR, FILTER_TAG_MIN)
    else:
        gather = fetch_limit(limit, c.sort, dated) or FILTER_TAG_MIN
    if c.random:
        order = RANDOM_ORDER
    note = None
    try:
        parse_window(start, end)
    except InvalidDateWindow as exc:
        note = str(exc)  # an invalid range has an empty result; nothing is fetched
    return Plan(criteria=c, queries=queries, walk_order=walk_order, order=order, gather=gather,
                start_date=start, end_date=end, note=note, seed=seed)


# -- per-work rules ----------------------------------------------------------------------------

# Tag names that mark an AI-generated work (PixivFlow's ai-detection), matched after
# lower-casing and dropping spaces, dashes, underscores, brackets and Japanese separators.
_AI_TAG_MARKERS = ("生成ai", "ai生成", "generativeai", "aigenerated")
_TAG_NOISE = re.compile(r"[\s\-_()（）【】\[\]・、]")
AI_TYPE_GENERATED = 2  # Pixiv's illust_ai_type / novel_ai_type


def _tag_texts(work: Any) -> list[str]:
    texts = [str(t) for t in getattr(work, "tags", ()) or ()]
    raw = getattr(work, "raw", None)
    raw_tags = raw.get("tags") if isinstance(raw, Mapping) else None
    for tag in raw_tags if isinstance(raw_tags, list) else ():
        if isinstance(tag, Mapping) and isinstance(tag.get("translated_name"), str):
            texts.append(tag["translated_name"])
    return texts


def is_ai_generated(work: Any) -> bool:
    """Pixiv's own flag (ai type 2), or an explicit AI-generation tag (it also catches works
    whose flag is missing or not yet set)."""
    if int(getattr(work, "ai_type", 0) or 0) == AI_TYPE_GENERATED:
        return True
    for text in _tag_texts(work):
        normal = _TAG_NOISE.sub("", text.lower())
        if any(marker in normal for marker in _AI_TAG_MARKERS):
            return True
    return False


# aiMetadataCheck (PixivFlow's detectAiFileMetadata): the first 2 MiB of the first page, lower-cased
# (PixivFlow reads it as latin-1, i.e. byte for byte), searched for PixivFlow's generator markers.
# One more: ``parameters`` + NUL, the keyword of the PNG tEXt chunk the Stable Diffusion web UIs
# write; PixivFlow's ``parameters=`` never matches that chunk (README: differs from PixivFlow).
AI_FILE_SCAN_BYTES = 2 * 1024 * 1024
_AI_FILE_MARKERS = (b"novelai", b"stable diffusion", b"stablediffusion", b"parameters=", b"dreamstudio",
                    b"parameters\x00")


def has_ai_file_markers(content: bytes) -> bool:
    head = bytes(content[:AI_FILE_SCAN_BYTES]).lower()
    return any(marker in head for marker in _AI_FILE_MARKERS)


def rejection(work: Any, c: Criteria) -> str | None:
    """The code of the first per-work rule ``work`` fails, or None when it may be taken."""
    if getattr(work, "restricted", False):
        return RESTRICTED
    if not c.allows_r18 and int(getattr(work, "x_restrict", 0) or 0) >= 1:
        return R18
    if c.exclude_ai and c.work_type == "illustration" and is_ai_generated(work):
        # excludeAI is an illustration rule in PixivFlow: a novel target ignores it.
        return AI_GENERATED
    if c.min_bookmarks is not None and int(getattr(work, "total_bookmarks", 0) or 0) < c.min_bookmarks:
        return BELOW_MIN_BOOKMARKS
    return None


def page_rejection(work: Any, c: Criteria) -> str | None:
    """``maxPageCount`` is PixivFlow's illustration safety cap (a novel's pages are text)."""
    return TOO_MANY_PAGES if page_cap_decline(work, c) else None


def page_cap_decline(work: Any, c: Criteria) -> str | None:
    """Why the downloader declines a candidate over ``maxPageCount``, or None.

    PixivFlow applies the cap when a candidate is attempted, not when candidates are chosen: the
    work is a ``filtered`` skip of the candidate scan (it uses one attempt of the window) and the
    scan moves on to the next one."""
    if c.max_page_count and c.work_type == "illustration":
        pages = int(getattr(work, "page_count", 1) or 1)
        if pages > c.max_page_count:
            return f"declined by maxPageCount: {pages} pages, more than {c.max_page_count}"
    return None


def pinned_rejection(work: Any, c: Criteria) -> str | None:
    """A pinned work is the operator's explicit choice: PixivFlow fetches it without the search
    filters, but a placeholder is still not the work, and the page cap is a download-time rule."""
    if getattr(work, "restricted", False):
        return RESTRICTED
    return page_rejection(work, c)


# -- one selection pass ------------------------------------------------------------------------


@dataclass
class Selection:
    candidates: list[Any]
    supply: CandidateSupply
    note: str | None = None  # why the pool is empty before anything was fetched


def _key(work: Any) -> tuple[str, str]:
    return (str(getattr(work, "work_type", "")), str(getattr(work, "work_id", "")))


def select(plan: Plan, fetch_page: Callable[[SearchRequest, str | None], PageLike]) -> Selection:
    """Run a (non-pinned) plan: page its queries, apply the rules, order the candidates.

    ``fetch_page(query, cursor)`` answers one page. ``PaginationError`` propagates (never read
    as "no results").
    """
    supply = CandidateSupply()
    if plan.note:
        return Selection([], supply, plan.note)
    inside: dict[tuple[str, str], Any] = {}
    outside: dict[tuple[str, str], Any] = {}
    for query in plan.queries:
        if len(inside) >= plan.gather:
            break  # an or-relation stops searching further words once enough works are gathered
        found = walk(partial(fetch_page, query), bound=plan.gather - len(inside),
                     order=plan.walk_order, start_date=plan.start_date, end_date=plan.end_date)
        for work in found.items:
            inside.setdefault(_key(work), work)
        for work in found.outside:
            outside.setdefault(_key(work), work)
    for key in inside:
        outside.pop(key, None)
    supply.fetched = len(inside) + len(outside)
    supply.reject(DATE_OUT_OF_RANGE, len(outside))
    eligible: list[Any] = []
    for work in inside.values():
        code = rejection(work, plan.criteria)
        if code is None:
            eligible.append(work)
        else:
            supply.reject(code)
    supply.selected = len(eligible)
    return Selection(order_candidates(eligible, plan), supply)


def select_pinned(plan: Plan, work: Any) -> Selection:
    """The pinned work as the only candidate (or none, when a rule rejects it)."""
    supply = CandidateSupply(fetched=1)
    code = pinned_rejection(work, plan.criteria)
    if code is not None:
        supply.reject(code)
        return Selection([], supply)
    supply.selected = 1
    return Selection([work], supply)


def order_candidates(works: Sequence[Any], plan: Plan) -> list[Any]:
    if plan.order == SOURCE_ORDER:
        return list(works)
    if plan.order == RANDOM_ORDER:
        shuffled = list(works)
        _random.Random(plan.seed).shuffle(shuffled)
        return shuffled[:RANDOM_MAX_ATTEMPTS]
    return sort_works(works, plan.order)
