"""Thumbnails of the delivered works on an occurrence's page (``http/ui.py``): a presigned URL of the
small preview kept with each delivered work's stored files, and the CSP origin it is served from."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .. import runtime
from ..domain.assets import artifact_prefix
from .ui import e

PREVIEW_TTL_S = 300  # a thumbnail's presigned URL: long enough to load the page, short enough to be useless later


def thumbnails(view: dict[str, Any]) -> dict[str, str]:
    """``targetId`` -> a presigned URL of the small preview kept with each delivered work's stored
    files (``ArtifactStore.preview_url``, the one place that finds it); a work without one has none.
    One LIST of the work's prefix (and a HEAD per object up to its preview) a work."""
    wiring = runtime.get().wiring
    slot_id = view["slot"]["slotId"]
    out: dict[str, str] = {}
    for cell in view["cells"]:
        if cell["status"] != "submitted" or not cell["workId"]:
            continue
        try:
            url = wiring.artifacts.preview_url(artifact_prefix(slot_id, cell["targetId"], cell["workId"]), PREVIEW_TTL_S)
        except Exception as exc:  # the store did not answer: the page still renders, without this thumbnail
            wiring.log("warning", "thumbnail lookup failed", event="ui.thumbnail_error", slot_id=slot_id,
                       target_id=cell["targetId"], error=repr(exc)[:200])
            continue
        if url and origin_of(url):
            out[cell["targetId"]] = url
    return out


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL (what a CSP source names), else None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c in parts.netloc for c in " ;,'\""):
        return None
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"


def thumbnail_section(view: dict[str, Any], thumbs: dict[str, str]) -> str:
    if not thumbs:
        return ""
    figures = []
    for c in view["cells"]:
        if c["targetId"] not in thumbs:
            continue
        work = f"{c['workType']} {c['workId']}"
        figures.append(f'<figure class="thumb"><img src="{e(thumbs[c["targetId"]])}" alt="{e("preview of " + work)}" '
                       f'referrerpolicy="no-referrer" loading="lazy"><figcaption>{e(c["targetId"])}: {e(work)}'
                       "</figcaption></figure>")
    return f"<h2>Delivered works</h2><div>{''.join(figures)}</div>"


__all__ = ["PREVIEW_TTL_S", "origin_of", "thumbnail_section", "thumbnails"]
