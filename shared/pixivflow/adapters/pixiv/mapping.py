"""Pixiv App API objects -> ``Work`` (field names: docs/explanation/pixiv-source.md).

The source maps facts; it never decides. Selection rules (bookmark floor, AI, R-18, page count,
dates, restricted works) are the domain's, applied to the fields set here.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...domain.work import Work

PLACEHOLDER_MARK = "/limit_"  # s.pximg.net/common/images/limit_sanity_level_360.png and friends


def _urls(raw: Mapping[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for key in ("image_urls", "meta_single_page", "meta_pages"):
        walk(raw.get(key))
    return found


def is_restricted(raw: Mapping[str, Any]) -> bool:
    """Pixiv's restricted placeholder: ``visible: false`` or any ``limit_*`` placeholder image."""
    if raw.get("visible") is False:
        return True
    return any(PLACEHOLDER_MARK in url for url in _urls(raw))


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def to_work(raw: Mapping[str, Any], work_type: str) -> Work:
    user = author if isinstance(author := raw.get("user"), Mapping) else {}
    series = part_of if isinstance(part_of := raw.get("series"), Mapping) else {}
    tags = tuple(t["name"] for t in raw.get("tags") or () if isinstance(t, Mapping) and t.get("name"))
    ai_key = "novel_ai_type" if work_type == "novel" else "illust_ai_type"
    return Work(
        work_id=str(raw.get("id")),
        work_type=work_type,
        title=str(raw.get("title") or ""),
        tags=tags,
        user_id="" if user.get("id") in (None, "") else str(user.get("id")),
        user_name=str(user.get("name") or ""),
        create_date=str(raw.get("create_date") or ""),
        total_bookmarks=_int(raw.get("total_bookmarks")),
        page_count=max(1, _int(raw.get("page_count"), 1)),
        x_restrict=_int(raw.get("x_restrict")),
        ai_type=_int(raw.get(ai_key)),
        restricted=is_restricted(raw),
        series_id=str(series["id"]) if series.get("id") not in (None, "") else None,
        raw=dict(raw),
    )


def page_urls(raw: Mapping[str, Any]) -> list[tuple[str | None, str | None]]:
    """(original, large preview) per page, in page order (``meta_single_page`` / ``meta_pages``)."""
    pages = raw.get("meta_pages") or []
    if isinstance(pages, list) and pages:
        out = []
        for page in pages:
            urls = page.get("image_urls") if isinstance(page, Mapping) else None
            urls = urls if isinstance(urls, Mapping) else {}
            out.append((urls.get("original"), urls.get("large")))
        return out
    single = meta if isinstance(meta := raw.get("meta_single_page"), Mapping) else {}
    large = (raw.get("image_urls") or {}).get("large") if isinstance(raw.get("image_urls"), Mapping) else None
    return [(single.get("original_image_url"), large)]


def master_variant(original: str) -> str | None:
    """``.../img-original/img/<date>/<id>_p0.png`` -> ``.../img-master/img/<date>/<id>_p0_master1200.jpg``."""
    if "/img-original/" not in original:
        return None
    stem = original.replace("/img-original/", "/img-master/", 1).rsplit(".", 1)[0]
    return f"{stem}_master1200.jpg"
