"""A novel's rich preview at TelePress, as PixivFlow publishes it.

Before a novel's submission, when its target declares ``delivery.richNovelPreview`` and the
novel has inline images (the source stored them beside a Markdown rendering), one multipart
``POST <url>``: the ``md`` part (``text/markdown``), a JSON ``manifest`` ``[{local, source}]``
and one ``images`` part per image named ``images/<file>``, with the configured headers (their
``${VAR}`` expanded now). The page URL TelePress answers goes into the submission's ``field``.

* no inline images: no call and no field (as PixivFlow);
* 5xx, 408, 429, a network error, a timeout, or a 2xx without a usable URL: the preview is
  retryable, so the whole delivery is (the submission is not sent without it);
* any other answer: permanent for the preview; the submission goes without the field and the
  row says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ...domain.work import StoredFile
from ..secret_refs import Expander
from . import multipart
from .http import Http, RouteTransportError, checked_url, expanded_headers

RETRYABLE_STATUSES = frozenset({408, 429})


@dataclass(frozen=True)
class PreviewResult:
    url: str | None = None  # the published page: put into the submission's field
    retry: str | None = None  # a retryable failure: retry the delivery row
    note: str | None = None  # a permanent failure: submitted without the field, and why


def publish(http: Http, lookup: Callable[[str], str | None], preview: Any, stored: Sequence[StoredFile],
            open_file: Callable[[StoredFile], Iterator[bytes]], *, where: str) -> PreviewResult:
    md = [f for f in stored if f.role == "markdown"]
    images = [f for f in stored if f.role == "inline" and f.size > 0]
    if not md or not images:
        return PreviewResult()  # no_rich_novel_assets: PixivFlow submits without the field too
    expand = Expander(lookup, where=f"{where} richNovelPreview")
    url = checked_url(preview.url, "richNovelPreview.url", where)
    manifest = [{"local": f"images/{f.name}", "source": (f.meta or {}).get("source_url")} for f in images
                if isinstance((f.meta or {}).get("source_url"), str)]
    parts: list[tuple] = [("md", md[0], md[0].name, "text/markdown")]
    parts += [("images", f, f"images/{f.name}", "application/octet-stream") for f in images]
    fields = [("manifest", json.dumps(manifest, ensure_ascii=False))] if manifest else []
    body = multipart.build(parts, fields, open_file, boundary=None, text_types={"manifest": "application/json"})
    headers = {**expanded_headers(preview.headers, expand), "Content-Type": body.content_type,
               "Content-Length": str(body.length)}
    try:
        answer = http.exchange("POST", url, headers=headers, content=body.chunks(), timeout_ms=preview.effective_timeout_ms,
                               scrub=expand.scrub)
    except RouteTransportError as exc:
        kind = "telepress_timeout" if "Timeout" in str(exc).split(":", 1)[0] or "Deadline" in str(exc) else "telepress_network_error"
        return PreviewResult(retry=f"rich novel preview not published ({kind}): {exc}")
    status = answer.status
    page = answer.body.get("url") if isinstance(answer.body, dict) else None
    if 200 <= status <= 299:
        if isinstance(page, str) and page.startswith(("http://", "https://")):
            return PreviewResult(url=page)
        return PreviewResult(retry="rich novel preview not published (telepress_invalid_response): no page URL in the answer")
    if status >= 500 or status in RETRYABLE_STATUSES:
        return PreviewResult(retry=f"rich novel preview not published (telepress_http_{status})")
    return PreviewResult(note=f"rich novel preview not published (telepress_http_{status}); submitted without "
                              f"{preview.field}")


__all__ = ["PreviewResult", "publish"]
