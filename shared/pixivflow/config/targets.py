"""Targets: the ``targets`` block and a target's own ``delivery`` (its route names)."""

from __future__ import annotations

from ..domain.text import ascii_digits
import hashlib
import json
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from ..domain.cells import is_single_work_cell
from ..domain.selection import RELATIVE_DAYS, Criteria, is_day, ranking_modes, search_targets
from .base import ID_PATTERN, _Model
from .routes import RichNovelPreview

# -- topic, language and no-match keys -------------------------------------------------------------
#
# Typed with PixivFlow's defaults and bounds so a published config loads unchanged and a bad value
# is refused naming its field. What they do is in ``domain/topic.py`` / ``domain/language.py``.

TagSource = Literal["seed", "cooccurrence", "autocomplete", "cooccurrence+autocomplete"]


class TopicTagRelations(_Model):
    """Which resolved tags may become search channels: deny beats allow; only deny can
    drop the seed."""

    allowSources: list[TagSource] | None = None
    allow: list[str] | None = None
    deny: list[str] | None = None


class TopicDiscovery(_Model):
    """``topicDiscovery``: how topic mode resolves its tag space (PixivFlow's TopicDiscoveryOptions)."""

    includeR18: bool = False  # the R-18 switch of topic mode; `r18` is ignored there
    maxTags: int = Field(default=12, ge=1, le=40)
    sampleWorks: int = Field(default=100, ge=10, le=200)
    cacheDays: int = Field(default=7, ge=1, le=90)
    # PixivFlow's validator allows 0..1; its code default is 0.22 (types.ts' comment says 0.18).
    minScore: float = Field(default=0.22, ge=0, le=1)
    refresh: bool = False
    # Unknown values act as `always` in PixivFlow; here they are refused, naming the key.
    relatedTags: Literal["always", "when_seed_insufficient", "never"] = "always"
    tagRelations: TopicTagRelations | None = None
    seedTier: Literal["off", "on"] = "off"
    matchTranslatedNames: bool = False


class CandidateCollection(_Model):
    """``candidateCollection``: how topic mode collects the day's works (PixivFlow's COLLECT_DEFAULTS)."""

    maxPerTag: int = Field(default=40, ge=5, le=100)
    maxCandidates: int = Field(default=250, ge=20, le=500)
    minMetadataScore: float = Field(default=0.35, ge=0, le=3)


class NoMatchPolicy(_Model):
    """``noMatchPolicy``: only these two keys exist in PixivFlow."""

    lookbackDays: int = Field(default=0, ge=0, le=7)
    notify: bool = False


class TargetDelivery(_Model):
    target: str | None = None
    targets: list[str] | None = None
    fields: dict[str, Any] | None = None
    richNovelPreview: RichNovelPreview | None = None  # novels only (model in config.routes)

    def routes(self) -> list[str]:
        """Route names, fan-out list first (trimmed, de-duplicated in order; PixivFlow's
        targetRoutes); the first is the primary route, the one notifications go to."""
        listed = [n.strip() for n in (self.targets or []) if isinstance(n, str) and n.strip()]
        names = listed or ([self.target.strip()] if self.target and self.target.strip() else [])
        seen: list[str] = []
        for name in names:
            if name not in seen:
                seen.append(name)
        return seen


# What a target selects, as opposed to how much or when: the keys an id-less target's id is
# derived from. Editing its limit, date, sort or filters keeps its id (and with it the
# works it already delivered); changing what it looks for makes it a new target.
_IDENTITY_KEYS = ("type", "mode", "topic", "tag", "filterTag", "rankingMode", "userId", "illustId", "novelId",
                  "seriesId")


def derived_target_id(data: dict[str, Any]) -> str:
    """The id of an id-less target: ``t-`` + the first 16 hex digits of SHA-256 over the canonical
    JSON of its identity keys. It depends on nothing but the target itself, so it survives
    reordering the targets, adding others, and reloading; the same identity gives the same id."""
    identity = {key: str(data[key]).strip() for key in _IDENTITY_KEYS if data.get(key) not in (None, "")}
    identity.setdefault("type", "illustration")
    identity.setdefault("mode", "search")
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    return "t-" + digest[:16]


class TargetConfig(_Model):
    """One target. Every selection key PixivFlow documents means what it means there;
    the rules themselves live in ``pixivflow.domain.selection`` (``criteria()`` hands them over).

    ``id`` may be left out, as PixivFlow allows: the target then gets a derived id
    (``derived_target_id``) for the ledger, PixivFlow's label for logs, and ``{{targetId}}``
    renders ``""`` as in PixivFlow."""

    _id_derived: bool = PrivateAttr(default=False)
    id: str = Field(pattern=ID_PATTERN)
    type: Literal["illustration", "novel"] = "illustration"
    mode: Literal["search", "ranking", "topic"] = "search"
    tag: str | None = None
    tagRelation: Literal["and", "or"] = "and"
    searchTarget: str = "partial_match_for_tags"
    sort: Literal["date_desc", "date_asc", "popular_desc"] = "date_desc"
    startDate: str | None = None
    endDate: str | None = None
    minBookmarks: int | None = Field(default=None, ge=0)
    excludeAI: bool = False
    # Pixiv's own search window (sent as the search's ``duration``; a server-side hint,
    # the date rules stay startDate/endDate's).
    duration: Literal["within_last_day", "within_last_week", "within_last_month"] | None = None
    aiMetadataCheck: bool = False
    r18: bool = False
    maxPageCount: int | None = Field(default=None, ge=0)
    random: bool = False
    topic: str | None = None
    date: str | None = None  # mode topic: the one-day window (YYYY-MM-DD, TODAY or YESTERDAY)
    rankingMode: str = "day"
    rankingDate: str | None = None
    filterTag: str | None = None
    illustId: int | str | None = None
    novelId: int | str | None = None
    seriesId: int | str | None = None
    userId: int | str | None = None
    limit: int | None = Field(default=None, ge=1)
    candidateScanLimit: int | None = None
    # Novels only: checked on each candidate's title and text after it is fetched.
    languageFilter: Literal["chinese", "non-chinese"] | None = None
    languageCandidateLimit: int = Field(default=20, ge=1, le=100)
    strictLanguageFilter: bool = False
    detectLanguage: bool = True
    topicDiscovery: TopicDiscovery = Field(default_factory=TopicDiscovery)
    candidateCollection: CandidateCollection = Field(default_factory=CandidateCollection)
    noMatchPolicy: NoMatchPolicy = Field(default_factory=NoMatchPolicy)
    storageMode: Literal["persistent", "cache"] = "persistent"
    delivery: TargetDelivery | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _derived_id(cls, data: Any, handler: Any) -> "TargetConfig":
        derived = isinstance(data, dict) and data.get("id") in (None, "")
        if derived:
            data = {**data, "id": derived_target_id(data)}
        target = handler(data)
        if derived:
            target._id_derived = True
        return target

    @field_validator("startDate", "endDate")
    @classmethod
    def _day(cls, value: str | None) -> str | None:
        if value is not None and not is_day(value):
            raise ValueError(f"{value!r} is not a date (YYYY-MM-DD)")
        return value

    @field_validator("date", "rankingDate")
    @classmethod
    def _relative_day(cls, value: str | None) -> str | None:
        if value is not None and not (is_day(value) or value in RELATIVE_DAYS):
            raise ValueError(f"{value!r} is not a date (YYYY-MM-DD, TODAY or YESTERDAY)")
        return value

    @field_validator("illustId", "novelId", "userId")
    @classmethod
    def _numeric_id(cls, value: int | str | None) -> int | str | None:
        if value is None:
            return None
        text = str(value).strip()
        if isinstance(value, bool) or not ascii_digits(text) or int(text) <= 0:
            raise ValueError(f"{value!r} is not a Pixiv id (a positive integer)")
        return text

    @model_validator(mode="after")
    def _needs_query(self) -> "TargetConfig":
        if self.seriesId is not None:
            raise ValueError("seriesId: novel series targets are not supported (pin one novel with novelId, or search by tag)")
        if self.type == "novel" and self.illustId is not None:
            raise ValueError("illustId: only for illustration targets (a novel target pins novelId)")
        if self.type != "novel" and self.novelId is not None:
            raise ValueError("novelId: only for novel targets (an illustration target pins illustId)")
        if self.searchTarget not in search_targets(self.type):
            raise ValueError(f"searchTarget: must be one of {', '.join(search_targets(self.type))} for a {self.type} target")
        if self.rankingMode not in ranking_modes(self.type) + _NOVEL_RANKING_ALIASES * (self.type == "novel"):
            raise ValueError(f"rankingMode: {self.rankingMode!r} is not a {self.type} ranking ({', '.join(ranking_modes(self.type))})")
        if self.mode == "topic" and not (self.topic or self.tag):
            raise ValueError("topic: required when mode is topic")
        if self.mode == "search" and not (self.tag or self.pinned_id or self.userId):
            raise ValueError("tag: required for mode search unless a work id (illustId/novelId) or userId is given")
        return self

    @property
    def id_derived(self) -> bool:
        """True when the config gave no id and ``id`` was derived (``derived_target_id``)."""
        return self._id_derived

    @property
    def configured_id(self) -> str:
        """The id as the config wrote it: ``""`` for an id-less target (PixivFlow's ``{{targetId}}``)."""
        return "" if self._id_derived else self.id

    @property
    def label(self) -> str:
        """How logs name the target: its id, or for an id-less one PixivFlow's label
        (``filterTag`` ‖ ``tag`` ‖ ``topic`` ‖ ``unknown``; its getTargetLabel)."""
        if not self._id_derived:
            return self.id
        return next((v.strip() for v in (self.filterTag, self.tag, self.topic) if v and v.strip()), "unknown")

    def routes(self) -> list[str]:
        """The delivery channel: route names when storageMode is cache, else none (download-only)."""
        if self.storageMode != "cache" or self.delivery is None:
            return []
        return self.delivery.routes()

    @property
    def dry_run(self) -> bool:
        """A cache-mode target with no route: it selects and stores, never delivers."""
        return self.storageMode == "cache" and not self.routes()

    @property
    def pinned_id(self) -> str | None:
        """The pinned work: novelId for a novel, illustId otherwise."""
        value = self.novelId if self.type == "novel" else self.illustId
        return None if value is None else str(value)

    @property
    def single_work(self) -> bool:
        # the rules read the fields themselves: dumping the whole model first was a cost paid on
        # every cell and intent the engine looked at (not cached: model_copy would carry it over)
        return is_single_work_cell(self)

    @property
    def effective_limit(self) -> int:
        if self.limit is not None:
            return self.limit
        return 1 if self.mode == "topic" else 10

    def criteria(self) -> Criteria:
        ranking_mode = self.rankingMode
        if self.type == "novel" and ranking_mode in _NOVEL_RANKING_ALIASES:
            ranking_mode = "week"  # PixivFlow maps the illustration-only weekly lists this way
        return Criteria(
            work_type=self.type, mode=self.mode, tag=self.tag, tag_relation=self.tagRelation,
            sort=self.sort, search_target=self.searchTarget, start_date=self.startDate, end_date=self.endDate,
            # Topic mode's R-18 switch is topicDiscovery.includeR18; `r18` is ignored there.
            min_bookmarks=self.minBookmarks, exclude_ai=self.excludeAI, duration=self.duration,
            r18=self.topicDiscovery.includeR18 if self.mode == "topic" else self.r18,
            max_page_count=self.maxPageCount or None, ranking_mode=ranking_mode, ranking_date=self.rankingDate,
            filter_tag=self.filterTag if self.mode == "ranking" else None, topic=self.topic, topic_date=self.date,
            user_id=None if self.userId is None else str(self.userId), pinned_id=self.pinned_id,
            random=self.random, limit=self.effective_limit,
        )


_NOVEL_RANKING_ALIASES = ("week_original", "week_rookie")
