"""What a delivery intent freezes for its route when it is recorded: the work, the request ids,
and for a route that renders PixivFlow's templates the template context and the target's field
overrides, so every retry renders the same submission."""

from __future__ import annotations

import re
from typing import Any

from ..domain.model import Slot
from ..domain.outcome_record import iso_utc_ms
from ..domain.templates import ranking_date
from ..domain.work import Work
from ..ports import RouteSettings, TargetSettings


def delivery_payload(slot: Slot, target: TargetSettings, work: Work, route: RouteSettings | None) -> dict[str, Any]:
    """What an intent freezes for its route at enqueue time. The ``kind: webhook`` route keeps
    exactly today's payload. A PixivFlow route also freezes its template context
    (the work, the target, the slot) and the target's ``fields`` override, so every
    retry renders the same submission."""
    payload: dict[str, Any] = {"work": work.summary()}
    if slot.manual_request_id:
        payload["refetch_request_id"] = slot.manual_request_id
        if slot.correlation_id:
            payload["correlation_id"] = slot.correlation_id
    if route is None or not route.renders_templates:
        return payload
    payload["context"] = template_context(slot, target, work)
    overrides = target.delivery.fields if target.delivery is not None else None
    if overrides:
        payload["fields"] = dict(overrides)
    return payload


def _ranking_date(raw: Any, target: TargetSettings, slot: Slot) -> str | None:
    """``{{rankingDate}}`` (domain.templates.ranking_date): the inputs as the work and target carry them.
    The topic pipeline leaves the day a work was found on in its raw record (``topic_day``)."""
    listed = raw.get("ranking_date") if isinstance(raw, dict) else None
    topic_day = raw.get("topic_day") if isinstance(raw, dict) else None
    day = ranking_date(target.mode, occurrence_at_ms=slot.occurrence_at,
                       topic_day=topic_day if isinstance(topic_day, str) else None,
                       target_date=target.date, target_ranking_date=target.rankingDate,
                       listed_date=listed if isinstance(listed, str) else None)
    return day if day and re.match(r"^\d{4}-\d{2}-\d{2}$", day) else None


def template_context(slot: Slot, target: TargetSettings, work: Work) -> dict[str, Any]:
    raw = dict(work.raw or {})
    restrict = raw.get("x_restrict")
    if not isinstance(restrict, int) or isinstance(restrict, bool):
        restrict = work.x_restrict or None  # 0 without the source saying so is "unknown"
    views = raw.get("total_view", raw.get("total_views"))
    series = given if isinstance(given := raw.get("series"), dict) else {}
    return {
        "title": work.title,
        "seriesTitle": series.get("title") or None,
        "pixivId": work.work_id,
        "type": work.work_type,
        # An id-less target renders "" as in PixivFlow (its ledger id is derived; config.targets).
        "targetId": target.configured_id,
        "tag": target.filterTag or target.tag,
        "topic": (target.topic or "").strip() or None,  # PixivFlow trims it
        "workTags": list(work.tags),
        "author": work.user_name or None,
        "spoiler": (restrict or 0) > 0,
        "xRestrict": restrict,
        "rankingDate": _ranking_date(raw, target, slot),
        "publishedAt": work.create_date or None,
        "language": raw.get("language") or None,
        "bookmarkCount": work.total_bookmarks if ("total_bookmarks" in raw or work.total_bookmarks) else None,
        "viewCount": views if isinstance(views, int) and not isinstance(views, bool) else None,
        "scheduleId": slot.schedule_id,
        "slotId": slot.slot_id,
        "slotName": slot.slot_name,
        "slotDate": slot.occurrence_date,
        "executionId": slot.slot_id,
        "occurrenceAt": iso_utc_ms(slot.occurrence_at),
        "triggerSource": slot.trigger_source,
        "refetchRequestId": slot.manual_request_id,
    }
