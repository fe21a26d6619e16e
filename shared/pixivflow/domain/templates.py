"""PixivFlow's delivery templates: pure rules, no I/O.

A route's ``fields`` are templates with ``{{name}}`` placeholders. The values come from the
delivery context frozen on the intent when it was enqueued (the work, its target and its slot),
so every retry renders the same bytes. Rules that downstream services rely on:

* an unknown name stays literal (a typo shows in the delivered message instead of vanishing);
* a known name without a value renders as ``""``; every value is a string (``true`` -> ``"true"``);
* counts are compact: ``1.2k`` from 1 000, ``3.5w`` from 10 000 (a trailing ``.0`` is dropped).
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta, timezone
from typing import Any, Mapping, Sequence
from zoneinfo import ZoneInfo

from .errors import ConfigError

PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
ARRAY_FORMATS = ("comma", "repeat", "json")


def compact_count(value: Any) -> str:
    """``""`` when absent; ``n`` below 1 000; ``1.2k`` below 10 000; ``3.5w`` (万) above."""
    if value is None or isinstance(value, bool):
        return ""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return ""
    if n != n:
        return ""
    if n >= 10_000:
        text, unit = f"{n / 10_000:.1f}", "w"
    elif n >= 1_000:
        text, unit = f"{n / 1_000:.1f}", "k"
    else:
        return str(int(n)) if n.is_integer() else str(n)
    return text.removesuffix(".0") + unit


def pixiv_link(work_type: str, work_id: str) -> str:
    if work_type == "novel":
        return f"https://www.pixiv.net/novel/show.php?id={work_id}"
    return f"https://www.pixiv.net/artworks/{work_id}"


def x_restrict_label(value: Any) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        return "unknown"
    return {0: "all-ages", 1: "R-18", 2: "R-18G"}.get(value, f"unknown({value})")


def x_restrict_tag(value: Any) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        return ""
    return {0: "AllAges", 1: "R18", 2: "R18G"}.get(value, f"XRestrict{value}")


PIXIV_ZONE = ZoneInfo("Asia/Tokyo")  # Pixiv's calendar: create_date, rankings, topic days


def _date(value: Any) -> str:
    """``{{publishedDate}}``: the Japan date of an ISO date/time. Pixiv writes
    ``create_date`` in +09:00 already; another offset (or ``Z``) is converted, a naive time or a
    bare date is taken as written."""
    text = str(value or "").strip()
    if not re.match(r"^\d{4}-\d{2}-\d{2}", text):
        return ""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text[:10]
    return moment.astimezone(PIXIV_ZONE).date().isoformat() if moment.tzinfo else text[:10]


def japan_day(value: str | None, occurrence_at_ms: int | None) -> str | None:
    """``YESTERDAY`` (also absent or empty) / ``TODAY`` as a Japan calendar day of the occurrence
    instant; a ``YYYY-MM-DD`` as written; anything else (or no instant for a relative day) None."""
    text = (value or "").strip().upper()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return date.fromisoformat(text).isoformat()
        except ValueError:
            return None
    if text not in ("", "YESTERDAY", "TODAY") or occurrence_at_ms is None:
        return None
    today = datetime.fromtimestamp(occurrence_at_ms / 1000, tz=timezone.utc).astimezone(PIXIV_ZONE).date()
    return (today if text == "TODAY" else today - timedelta(days=1)).isoformat()


def ranking_date(mode: str | None, *, occurrence_at_ms: int | None, topic_day: str | None = None,
                 target_date: str | None = None, target_ranking_date: str | None = None,
                 listed_date: str | None = None) -> str | None:
    """``{{rankingDate}}`` as the published configs' note templates were written for it
    (PixivFlow's older outbox resolved ``date ‖ rankingDate ‖ YESTERDAY`` in
    Japan time; today's PixivFlow renders it empty, which leaves every note with a bare 📅):

    * topic targets: the day the work was found on (the lookback day when a fallback day
      delivered), else the target's ``date``;
    * ranking targets: the list's own date, else the target's ``rankingDate``;
    * every other target: yesterday in Japan."""
    if mode == "topic":
        return topic_day or japan_day(target_date, occurrence_at_ms)
    if mode == "ranking":
        return listed_date or japan_day(target_ranking_date, occurrence_at_ms)
    return japan_day("YESTERDAY", occurrence_at_ms)


def _s(value: Any) -> str:
    return "" if value is None else str(value)


def template_variables(context: Mapping[str, Any]) -> dict[str, str]:
    """Every template placeholder, rendered from a frozen delivery context."""
    c = context
    work_type = _s(c.get("type"))
    work_id = _s(c.get("pixivId"))
    x_restrict = c.get("xRestrict")
    tags = c.get("workTags") or []
    return {
        "title": _s(c.get("title")),
        "displayTitle": _s(c.get("displayTitle") or (f"《{c['seriesTitle']}》 {_s(c.get('title'))}" if c.get("seriesTitle")
                                                      else c.get("title"))),
        "seriesTitle": _s(c.get("seriesTitle")),
        "pixivId": work_id,
        "workId": work_id,  # PixivFlow's newer alias of pixivId
        "type": work_type,
        "targetId": _s(c.get("targetId")),
        "tag": _s(c.get("tag")),
        "topic": _s(c.get("topic")),
        "topicTag": _s(c.get("topic") or c.get("tag")),
        "workTags": ",".join(str(t) for t in tags) if isinstance(tags, (list, tuple)) else _s(tags),
        "author": _s(c.get("author")),
        "link": pixiv_link(work_type, work_id) if work_id else "",
        "spoiler": "true" if c.get("spoiler") is True else "false",
        "xRestrict": "" if not isinstance(x_restrict, int) or isinstance(x_restrict, bool) else str(x_restrict),
        "xRestrictLabel": x_restrict_label(x_restrict),
        "xRestrictTag": x_restrict_tag(x_restrict),
        "rankingDate": _s(c.get("rankingDate")),
        "publishedDate": _date(c.get("publishedAt")),
        "language": _s(c.get("language")),
        "bookmarkCount": compact_count(c.get("bookmarkCount")),
        "viewCount": compact_count(c.get("viewCount")),
        "scheduleId": _s(c.get("scheduleId")),
        "slotId": _s(c.get("slotId")),
        "slotName": _s(c.get("slotName")),
        "slotDate": _s(c.get("slotDate")),
        "executionId": _s(c.get("executionId") or c.get("slotId")),
        "occurrenceAt": _s(c.get("occurrenceAt")),
        "triggerSource": _s(c.get("triggerSource")),
        "idempotencyKey": _s(c.get("idempotencyKey")),
        "refetchRequestId": canonical_refetch_request_id(c.get("refetchRequestId")),
    }


_HEX32 = re.compile(r"[0-9a-f]{32}")


def canonical_refetch_request_id(value: Any) -> str:
    """``{{refetchRequestId}}`` as a route receives it: a UUID in any spelling Python's ``uuid.UUID``
    reads (hyphens anywhere or none, any case, braces, ``urn:uuid:``, spaces around) as its canonical
    hyphenated lower-case form; anything else empty, never the raw key. TelePost refuses a
    submission whose ``refetch_request_id`` is not a canonical UUID, permanently, so a protocol job
    whose key is not a UUID is delivered with no provenance rather than not at all (as PixivFlow
    3.4.3 does; the slot keeps the key as given)."""
    if not isinstance(value, str):
        return ""
    candidate = value.strip().lower()
    if candidate.startswith("urn:uuid:"):
        candidate = candidate[len("urn:uuid:"):]
    if candidate.startswith("{") and candidate.endswith("}"):
        candidate = candidate[1:-1]
    digits = candidate.replace("-", "")
    if not _HEX32.fullmatch(digits):
        return ""
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def render(template: str, variables: Mapping[str, str]) -> str:
    """``{{name}}`` -> its value; an unknown name is left exactly as written."""
    return PLACEHOLDER.sub(lambda m: variables.get(m.group(1), m.group(0)), template)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class TemplateError(ConfigError, ValueError):
    """A rendered field would carry an unresolved placeholder where that is never acceptable: the
    route's fields are wrong, a configuration error (dead at once), never a retry."""


def form_fields(route_fields: Mapping[str, Any], target_fields: Mapping[str, Any] | None, variables: Mapping[str, str],
                *, array_format: str = "comma", auto_idempotency_key: bool = True) -> list[tuple[str, str]]:
    """The text parts of one multipart submission, in order, as PixivFlow builds it.

    The target's fields are a shallow override of the route's. Unless disabled, an
    ``idempotency_key`` field is added when neither spelling is declared: without it an
    ACK-loss retry reaches the receiver as a brand-new post."""
    merged: dict[str, Any] = {**dict(route_fields or {}), **dict(target_fields or {})}
    if auto_idempotency_key and "idempotency_key" not in merged and "idempotencyKey" not in merged:
        merged["idempotency_key"] = "{{idempotencyKey}}"
    if array_format not in ARRAY_FORMATS:
        raise TemplateError(f"arrayFormat must be one of {', '.join(ARRAY_FORMATS)}")
    parts: list[tuple[str, str]] = []
    for name, value in merged.items():
        values: Sequence[Any] = value if isinstance(value, (list, tuple)) else [value]
        rendered = [render(_text(v), variables) for v in values]
        if name == "refetch_request_id" and any(PLACEHOLDER.search(r) for r in rendered):
            raise TemplateError("refetch_request_id still holds an unresolved {{...}} template (invalid payload)")
        if array_format == "repeat":
            parts.extend((name, r) for r in rendered)
        elif array_format == "json":
            parts.append((name, json.dumps(rendered, ensure_ascii=False)))
        else:
            parts.append((name, ",".join(rendered)))
    return parts


__all__ = [
    "PIXIV_ZONE",
    "PLACEHOLDER",
    "TemplateError",
    "compact_count",
    "form_fields",
    "japan_day",
    "pixiv_link",
    "ranking_date",
    "render",
    "template_variables",
    "x_restrict_label",
    "x_restrict_tag",
]
