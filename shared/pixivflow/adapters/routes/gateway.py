"""PixivFlow's messaging-gateway route, ``type: webhook``.

PixivFlow is the gateway's CLIENT: it posts one platform-neutral message document and leaves
login, pairing and platform quirks to the gateway. The document is

    {schemaVersion: 1, idempotencyKey, deliveryTarget,
     work: {id, type, title, sourceUrl, spoiler, tags},
     message: {text, mediaTransport, parts[], media[], dropped[]},
     delivery: {idempotencyKey, slotId, targetId, executionId, triggerSource}}

Media travel as ``reference`` (a time-limited URL of the stored file) or ``base64`` (inline, at
most ``maxInlineBytes`` of base64 text in total). With a ``signingSecret`` the raw body is signed:
``X-Webhook-Signature: sha256=<hex HMAC-SHA256(secret, "<X-Webhook-Timestamp>.<body>")>``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ...domain.route_io import DeliveryRequest, DeliveryResponse
from ...domain.templates import pixiv_link
from ...domain.work import StoredFile
from ..secret_refs import Expander
from .http import checked_url, expanded_headers
from .multipart import split_files

if TYPE_CHECKING:
    from ...route_kinds import SenderTools

SCHEMA_VERSION = 1
IMAGE_EXT = (".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".avif", ".tif", ".tiff")
VIDEO_EXT = (".mp4", ".mov", ".webm", ".mkv", ".avi", ".m4v")
REFERENCE_TTL_S = 6 * 3600


class InlineTooLarge(ValueError):
    """base64 media above the route's maxInlineBytes: the same bytes would fail on every retry."""


def media_kind(file: StoredFile) -> str:
    name = file.name.lower()
    if file.content_type.startswith("image/") or name.endswith(IMAGE_EXT):
        return "image"
    if file.content_type.startswith("video/") or name.endswith(VIDEO_EXT):
        return "video"
    return "file"


def signature(secret: str, timestamp_s: int, raw_body: bytes) -> str:
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp_s}.".encode("utf-8") + raw_body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def message_document(*, route: str, key: str, context: Mapping[str, Any], work: Mapping[str, Any],
                     files: Sequence[StoredFile], transport: str, read: Callable[[StoredFile], bytes],
                     link: Callable[[StoredFile], str], max_inline_bytes: int | None) -> dict[str, Any]:
    work_id = str(context.get("pixivId") or work.get("id") or "")
    work_type = "novel" if (context.get("type") or work.get("type")) == "novel" else "illustration"
    title = str(context.get("title") or work.get("title") or "")
    source_url = pixiv_link(work_type, work_id)
    main, _ = split_files(files)

    inline = 0

    def wire(file: StoredFile) -> dict[str, Any]:
        nonlocal inline
        item: dict[str, Any] = {"kind": media_kind(file), "name": file.name, "mime": file.content_type, "size": file.size}
        if transport == "base64":
            data = base64.b64encode(read(file)).decode("ascii")
            inline += len(data)
            if max_inline_bytes is not None and inline > max_inline_bytes:
                raise InlineTooLarge(f"inline media is above maxInlineBytes={max_inline_bytes}; use mediaTransport "
                                     "reference or raise the limit (invalid payload)")
            item["dataBase64"] = data
        else:
            item["url"] = link(file)
        if file.sha256:
            item["sha256"] = file.sha256
        return item

    text = f"{title.strip()}\n{source_url}" if title.strip() else source_url
    parts: list[dict[str, Any]] = [{"kind": "text"}]
    media: list[dict[str, Any]] = []
    visual = [f for f in main if media_kind(f) in ("image", "video")]
    others = [f for f in main if f not in visual]
    # Files first, then the gallery: a caption shown on an album's first image describes the album.
    for file in others:
        one = wire(file)
        media.append(one)
        parts.append({"kind": "file", "media": one})
    if len(visual) == 1:
        one = wire(visual[0])
        media.append(one)
        parts.append({"kind": one["kind"], "media": one})
    else:
        for file in visual:
            one = wire(file)
            media.append(one)
            parts.append({"kind": "album", "media": one})
    return {
        "schemaVersion": SCHEMA_VERSION,
        "idempotencyKey": key,
        "deliveryTarget": route,
        "work": {
            "id": work_id,
            "type": work_type,
            "title": title,
            "sourceUrl": source_url,
            "spoiler": context.get("spoiler") is True,
            "tags": [str(t) for t in (context.get("workTags") or work.get("tags") or [])],
        },
        "message": {"text": text, "mediaTransport": transport, "parts": parts, "media": media, "dropped": []},
        "delivery": {
            "idempotencyKey": key,
            "slotId": context.get("slotId"),
            "targetId": context.get("targetId"),
            "executionId": context.get("executionId") or context.get("slotId"),
            "triggerSource": context.get("triggerSource"),
        },
    }


class GatewaySender:
    """One attempt of a ``type: webhook`` route: the message document, signed when the route has a
    ``signingSecret``."""

    def __init__(self, tools: SenderTools) -> None:
        self._tools = tools

    def deliver(self, request: DeliveryRequest, config: Any) -> DeliveryResponse:
        expand = Expander(self._tools.lookup, where=f"route {request.route}")
        url = checked_url(expand(config.url), "url", request.route)
        document = message_document(
            route=request.route, key=request.idempotency_key, context=request.payload.get("context") or {},
            work=request.payload.get("work") or {}, files=self._tools.stored(request), transport=config.mediaTransport,
            read=self._tools.artifacts.read, link=lambda f: self._tools.artifacts.url(f, REFERENCE_TTL_S),
            max_inline_bytes=config.maxInlineBytes,
        )
        raw = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"Content-Type": "application/json", "X-PixivFlow-Delivery": request.route,
                   "X-Idempotency-Key": request.idempotency_key, **expanded_headers(config.headers, expand)}
        if config.token:
            headers["Authorization"] = f"Bearer {expand(config.token)}"
        if config.signingSecret:
            timestamp = self._tools.now_ms() // 1000
            headers["X-Webhook-Timestamp"] = str(timestamp)
            headers["X-Webhook-Signature"] = signature(expand(config.signingSecret), timestamp, raw)
        return self._tools.http.exchange("POST", url, headers=headers, content=raw, timeout_ms=config.timeoutMs,
                                   scrub=expand.scrub)
