"""Targets: the ``targets`` block (spec §6.1) and a target's own ``delivery`` (its route names)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..domain.cells import is_single_work_cell
from ..domain.selection import RELATIVE_DAYS, Criteria, is_day, ranking_modes, search_targets
from .base import ID_PATTERN, _Model

class TargetDelivery(_Model):
    target: str | None = None
    targets: list[str] | None = None
    fields: dict[str, Any] | None = None

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


class TargetConfig(_Model):
    """One target (spec §6.1). Every selection key PixivFlow documents means what it means there;
    the rules themselves live in ``pixivflow.domain.selection`` (``criteria()`` hands them over)."""

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
    # Pixiv's own search window (issue 24: sent as the search's ``duration``; a server-side hint,
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
    languageFilter: str | None = None
    storageMode: Literal["persistent", "cache"] = "persistent"
    delivery: TargetDelivery | None = None

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
        if isinstance(value, bool) or not text.isdigit() or int(text) <= 0:
            raise ValueError(f"{value!r} is not a Pixiv id (a positive integer)")
        return text

    @model_validator(mode="after")
    def _needs_query(self) -> "TargetConfig":
        if self.seriesId is not None:
            raise ValueError("seriesId: novel series targets are not supported (pin one novel with novelId, or search by tag)")
        if self.languageFilter is not None:
            raise ValueError("languageFilter: not supported (novel language detection needs each novel's full text)")
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

    def routes(self) -> list[str]:
        """The delivery channel: route names when storageMode is cache, else none (download-only)."""
        if self.storageMode != "cache" or self.delivery is None:
            return []
        return self.delivery.routes()

    @property
    def pinned_id(self) -> str | None:
        """The pinned work (spec §5.3 order: novelId for a novel, illustId otherwise)."""
        value = self.novelId if self.type == "novel" else self.illustId
        return None if value is None else str(value)

    @property
    def single_work(self) -> bool:
        return is_single_work_cell(self.model_dump())

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
            min_bookmarks=self.minBookmarks, exclude_ai=self.excludeAI, r18=self.r18, duration=self.duration,
            max_page_count=self.maxPageCount or None, ranking_mode=ranking_mode, ranking_date=self.rankingDate,
            filter_tag=self.filterTag if self.mode == "ranking" else None, topic=self.topic, topic_date=self.date,
            user_id=None if self.userId is None else str(self.userId), pinned_id=self.pinned_id,
            random=self.random, limit=self.effective_limit,
        )


_NOVEL_RANKING_ALIASES = ("week_original", "week_rookie")
