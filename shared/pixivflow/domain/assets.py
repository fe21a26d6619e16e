"""Where a bound work's files are stored, and how a delivery describes them.

``artifact_prefix``: the one place that names a bound work's store key, stable per
(slot, target, work); each file adds its page name below it.

``assets_for``: stored files as Workflow Protocol v1 ``Asset`` objects
(protocol.schema.json ``$defs/Asset``).

A delivery payload lists the bound work's stored files so the downstream can fetch them: each
with its ``type``, ``role``, a ``locator`` of kind ``url`` (a presigned GET URL of bounded
lifetime; ``value`` per the schema, ``url`` as a plain alias), ``bytes``, ``mime``, ``hash``
(``sha256:<hex>``) and the size in pixels when known. Pure: the URL comes from the caller.

The list is bounded (``budget_chars`` of JSON) so a delivery body stays a sane size whatever
the page count; files past the budget are left out and counted in the last asset's
``metadata.omitted``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

# ArtifactFile/StoredFile role -> (Asset type, Asset role)
_KINDS = {
    "original": ("image", "primary"),
    "archive": ("image", "primary"),
    "text": ("novel", "primary"),
    "cover": ("cover", "cover"),
    "preview": ("image", "preview"),
    "inline": ("image", "preview"),  # a novel's inline image: part of the rich preview
    "markdown": ("novel", "preview"),  # the novel rendered as Markdown for TelePress
}
DEFAULT_BUDGET_CHARS = 200_000


def artifact_prefix(slot_id: str, target_id: str, work_id: str) -> str:
    return f"{slot_id}/{target_id}/{work_id}"


def file_key(prefix: str, name: str) -> str:
    """One stored file's key under its work's prefix (the store writes it, the intent's record
    rebuilds it from the file's name: the key is not stored twice)."""
    return f"{prefix}/{name}"


def assets_for(files: Iterable[Any], url_for: Callable[[Any], str], *, source: str = "pixiv",
               budget_chars: int = DEFAULT_BUDGET_CHARS) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    files = list(files)
    used = 2
    for index, f in enumerate(files):
        kind, role = _KINDS.get(getattr(f, "role", "original"), ("image", "primary"))
        url = url_for(f)
        asset: dict[str, Any] = {
            "asset_id": f.key,
            "type": kind,
            "role": role,
            "source": source,
            "quality": "unknown",
            "locator": {"kind": "url", "value": url, "url": url},
            "name": f.name,
            "bytes": int(f.size),
            "mime": f.content_type,
            "hash": f"sha256:{f.sha256}",
        }
        if f.width is not None:
            asset["width"] = int(f.width)
        if f.height is not None:
            asset["height"] = int(f.height)
        if f.meta:
            asset["metadata"] = dict(f.meta)
        size = len(json.dumps(asset, ensure_ascii=False)) + 1
        if used + size > budget_chars and out:
            out[-1].setdefault("metadata", {})["omitted"] = len(files) - index
            break
        used += size
        out.append(asset)
    return out


def media_assets(work_id: str, files: Iterable[Any]) -> list[dict[str, Any]]:
    """TelePost's minimal Delivery Asset contract ``[{asset_id, kind, source_url, mime_type?}]``
    (PixivFlow's ``toTelepostMediaAssetsWire``): one entry
    per stored image that came from a Pixiv URL, the pages of an illustration and the inline
    images of a novel, with PixivFlow's stable id ``pixiv:<workId>:<kind>[:<sourceId>]``. TelePost
    refuses unknown keys, so nothing else is sent; files without a source URL (the offline
    catalogue's) make no entry."""
    out: list[dict[str, Any]] = []
    for f in files:
        meta = getattr(f, "meta", None) or {}
        url = meta.get("source_url")
        if not isinstance(url, str) or not url.startswith("http"):
            continue
        role = getattr(f, "role", "original")
        if role == "original":
            kind, source_id = "illust", str(meta.get("page", 0))
        elif role == "inline":
            kind, source_id = str(meta.get("pixiv_kind") or "uploadedimage"), str(meta.get("source_id") or "")
        else:
            continue
        entry = {"asset_id": f"pixiv:{work_id}:{kind}" + (f":{source_id}" if source_id else ""), "kind": "image",
                 "source_url": url}
        if getattr(f, "content_type", None):
            entry["mime_type"] = f.content_type
        out.append(entry)
    return out
