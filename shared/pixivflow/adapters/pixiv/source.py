"""``WorkSource`` over the Pixiv App API.

The source answers ONE paged query at a time, faithfully: ``search_page(request, cursor)``
returns Pixiv's page as ``Work``s and a cursor for the next one; ``pixivflow.domain.pager.collect``
and the domain's selection rules decide how far to page and what to keep. Server-side hints of
the request (``search_target``, ``sort``, dates, ``exclude_ai`` as ``search_ai_type=0``) go into
the query; nothing else is filtered here. ``filter=for_ios`` goes where PixivFlow sends it:
always on illustration rankings and user works, never on novel rankings, and on searches unless
the target includes R-18 (``include_r18``).

Cursors are the ``next_url`` Pixiv returned, re-based onto the configured App API base. Past
Pixiv's 5000-offset cap a ``date_desc`` / ``date_asc`` search continues the way gallery-dl does
it: the next query drops ``offset`` and moves ``end_date`` (``start_date``) to the last work's
day plus (minus) one, and works up to the last one already returned are skipped (the cursor
carries that mark after ``#``, which is never sent). Any other walk stops there, logged.
"""

from __future__ import annotations

from ...domain.text import ascii_digits
import json
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from functools import partial
from typing import Any, Callable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from ...domain.errors import FatalSourceError, RateLimitedError, SourceError, WorkGoneError, WorkRestrictedError
from ...domain.work import ArtifactFile, FileDownload, Page, SearchRequest, Work
from ...ports import SourceGovernor, WorkSource
from .client import ImageNotFound, OffsetCapError, PixivClient
from ...domain.novel_markup import inline_images, render_markdown
from .mapping import is_restricted, master_variant, page_urls, to_work
from .media import extension_for, mime_of_name, sniff

OFFSET_CAP = 5000
PIXIV_ZONE = ZoneInfo("Asia/Tokyo")  # Pixiv's calendar (rankings, create_date, search dates)
_SECTIONS = {"illustration": "illusts", "novel": "novels"}
_WEBVIEW_MARK = "novel: "
NOVEL_ANSWER = ".novel.json"  # the stored text answer's name after the novel's id
TEXT_TYPE = "text/plain; charset=utf-8"


def resolve_day(value: str | None, now_ms: int) -> str | None:
    """``YESTERDAY`` / ``TODAY`` (PixivFlow's ranking keywords) as a date in Japan; a date passes through."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    today = datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc).astimezone(PIXIV_ZONE).date()
    if text.upper() == "TODAY":
        return today.isoformat()
    if text.upper() == "YESTERDAY":
        return (today - timedelta(days=1)).isoformat()
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise SourceError(f"configuration_error: invalid ranking date {text!r} (YYYY-MM-DD, YESTERDAY or TODAY)",
                          retryable=False) from None


def _created(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=PIXIV_ZONE)


def _int_id(work_id: str) -> int:
    return int(work_id) if ascii_digits(str(work_id)) else 0


class PixivSource(WorkSource):
    def __init__(self, client: PixivClient, *, now_ms: Callable[[], int], sleep: Callable[[float], None],
                 request_delay_ms: int = 500, log: Callable[..., None] | None = None, governor: SourceGovernor | None = None,
                 fetch_worst_case_ms: int = 0) -> None:
        self._fetch_worst_case_ms = fetch_worst_case_ms
        self._client = client
        self.governor = governor  # the account's permits; None: unbounded (unit tests)
        self._now = now_ms
        self._sleep = sleep
        self._request_delay_ms = max(0, int(request_delay_ms))
        self._log = log or (lambda *a, **k: None)

    @property
    def client(self) -> PixivClient:
        return self._client

    # -- search ----------------------------------------------------------------------------
    def first_url(self, request: SearchRequest) -> str:
        kind = request.work_type
        if kind not in _SECTIONS:
            raise SourceError(f"unsupported work type {kind!r}", retryable=False)
        novel = kind == "novel"
        if request.mode == "ranking":
            params: dict[str, Any] = {"mode": request.ranking_mode or "day",
                                      "date": resolve_day(request.ranking_date, self._now())}
            if not novel:
                params["filter"] = "for_ios"
            return self._client.api_url("/v1/novel/ranking" if novel else "/v1/illust/ranking", params)
        if request.mode == "user":
            if not request.user_id:
                raise SourceError("configuration_error: a user feed needs a user id", retryable=False)
            if novel:
                return self._client.api_url("/v1/user/novels", {"user_id": request.user_id, "filter": "for_ios"})
            return self._client.api_url("/v1/user/illusts", {"user_id": request.user_id, "type": "illust",
                                                             "filter": "for_ios"})
        if request.mode not in ("search", "topic"):
            raise SourceError(f"unsupported search mode {request.mode!r}", retryable=False)
        if request.mode == "topic":
            return self._topic_url(request)
        words = request.tag
        if not words or not words.strip():
            raise SourceError("configuration_error: a search needs query words (tag)", retryable=False)
        params = {"word": words.strip(), "search_target": request.search_target, "sort": request.sort}
        if novel:
            params["merge_plain_keyword_results"] = "true"
        params["include_translated_tag_results"] = "true"
        params["start_date"] = request.start_date
        params["end_date"] = request.end_date
        params["duration"] = request.duration  # None: not sent (urlencode drops None)
        if not request.include_r18:
            # PixivFlow's R-18 switch: a search of a target without R-18 asks Pixiv to
            # leave R-18 out; the domain's r18 rule still rejects any that come back.
            params["filter"] = "for_ios"
        if request.exclude_ai:
            params["search_ai_type"] = 0  # 0 hides AI-generated works (pixivpy never sends 0: we do)
        return self._client.api_url("/v1/search/novel" if novel else "/v1/search/illust", params)

    def _topic_url(self, request: SearchRequest) -> str:
        """A topic search as PixivFlow sends it: one tag, ``partial_match_for_tags``,
        newest first, ``filter=for_ios`` unless ``topicDiscovery.includeR18``. A day search also
        names the day (Pixiv's dates are Japan days), so the whole day comes back, its morning too."""
        word = (request.tag or request.topic or "").strip()
        if not word:
            raise SourceError("configuration_error: a topic search needs a tag", retryable=False)
        novel = request.work_type == "novel"
        params: dict[str, Any] = {"word": word, "search_target": "partial_match_for_tags"}
        if not novel:
            params["include_translated_tag_results"] = "true"
        params["sort"] = request.sort
        params["start_date"] = request.start_date
        params["end_date"] = request.end_date
        if not request.include_r18:
            params["filter"] = "for_ios"
        return self._client.api_url("/v1/search/novel" if novel else "/v1/search/illust", params)

    def autocomplete(self, word: str) -> list[str]:
        """Pixiv's tag suggestions for ``word`` (a topic's first step): ``tags[].name``, else the older
        ``search_auto_complete_keywords``."""
        data = self._client.get("/v2/search/autocomplete", {"word": word, "merge_plain_keyword_results": "true"})
        tags = data.get("tags") if isinstance(data, Mapping) else None
        if isinstance(tags, list) and tags:
            return [str(t["name"]) for t in tags if isinstance(t, Mapping) and t.get("name")]
        words = data.get("search_auto_complete_keywords") if isinstance(data, Mapping) else None
        return [str(w) for w in words if isinstance(w, str) and w] if isinstance(words, list) else []

    def search_page(self, request: SearchRequest, cursor: str | None) -> Page:
        if cursor is None:
            url, mark = self.first_url(request), None
        else:
            url, _, mark = cursor.partition("#")
            url = self._client.follow(url)
            if self._request_delay_ms:
                self._sleep(self._request_delay_ms / 1000)  # download.requestDelay between pages
        try:
            data = self._client.get_url(url)
        except OffsetCapError:
            self._log("warning", "Pixiv refused an offset above 5000; the search stops here", event="pixiv.offset_cap",
                      mode=request.mode, sort=request.sort, continued=False)
            return Page(items=(), next_cursor=None)
        section = _SECTIONS.get(request.work_type, "illusts")
        raw_items = data.get(section) if isinstance(data, Mapping) else None
        if not isinstance(raw_items, list):
            raise SourceError(f"metadata_failed: Pixiv search answer has no {section!r} list", retryable=True)
        works = [to_work(item, request.work_type) for item in raw_items if isinstance(item, Mapping) and item.get("id")]
        if mark:
            works = [w for w in works if self._past(w, mark, request.sort)]
        return Page(items=tuple(works), next_cursor=self._next_cursor(request, data.get("next_url"), raw_items, url, mark))

    def _next_cursor(self, request: SearchRequest, next_url: Any, raw_items: list, url: str, mark: str | None) -> str | None:
        if not isinstance(next_url, str) or not next_url:
            return None
        rebased = self._client.follow(next_url)
        parts = urlsplit(rebased)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        offset = int(query.get("offset", "0") or 0) if ascii_digits(str(query.get("offset", "0"))) else 0
        if offset < OFFSET_CAP:
            return rebased + (f"#{mark}" if mark else "")
        continuable = request.mode in ("search", "topic") and request.sort in ("date_desc", "date_asc")
        last = end if raw_items and isinstance(end := raw_items[-1], Mapping) else None
        created = _created(last.get("create_date")) if last else None
        if not continuable or created is None:
            self._log("warning", "Pixiv's 5000-offset cap reached; this walk cannot continue past it",
                      event="pixiv.offset_cap", mode=request.mode, sort=request.sort, continued=False)
            return None
        key, step = ("end_date", 1) if request.sort == "date_desc" else ("start_date", -1)
        day = (created.astimezone(PIXIV_ZONE).date() + timedelta(days=step)).isoformat()
        current = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True)).get(key)
        if current == day:
            # A single day holds more than 5000 works: moving the date would re-read the same pages.
            self._log("warning", "Pixiv's 5000-offset cap reached within one day; the search stops here",
                      event="pixiv.offset_cap", mode=request.mode, sort=request.sort, continued=False)
            return None
        query.pop("offset", None)
        query[key] = day
        continued = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))
        self._log("info", "Pixiv's 5000-offset cap reached; continuing by date", event="pixiv.offset_cap",
                  mode=request.mode, sort=request.sort, continued=True, date_key=key, date=day)
        assert last is not None  # created came from it
        return f"{continued}#{json.dumps([str(last.get('create_date')), str(last.get('id'))], separators=(',', ':'))}"

    @staticmethod
    def _past(work: Work, mark: str, sort: str) -> bool:
        """True when ``work`` comes after the last one returned before a date continuation."""
        try:
            created_text, last_id = json.loads(mark)
        except ValueError:
            return True
        last_created, created = _created(created_text), _created(work.create_date)
        if last_created is None or created is None:
            return True
        mine, theirs = (created, _int_id(work.work_id)), (last_created, _int_id(last_id))
        return mine < theirs if sort == "date_desc" else mine > theirs

    # -- one work --------------------------------------------------------------------------
    def get_work(self, work_type: str, work_id: str) -> Work:
        if not ascii_digits(str(work_id)):
            raise SourceError(f"invalid id {work_id!r}", retryable=False)
        if work_type == "novel":
            data = self._client.get("/v2/novel/detail", {"novel_id": work_id})
            raw = data.get("novel") if isinstance(data, Mapping) else None
        elif work_type == "illustration":
            data = self._client.get("/v1/illust/detail", {"illust_id": work_id})
            raw = data.get("illust") if isinstance(data, Mapping) else None
        else:
            raise SourceError(f"unsupported work type {work_type!r}", retryable=False)
        if not isinstance(raw, Mapping) or not raw.get("id"):
            raise WorkGoneError(f"work {work_id} not found (Pixiv answered without it)", status=404)
        return to_work(raw, work_type)

    # -- files -----------------------------------------------------------------------------
    def download(self, work: Work) -> list[ArtifactFile]:
        raw: Mapping[str, Any] = work.raw or {}
        if not raw.get("id"):
            raw = self.get_work(work.work_type, work.work_id).raw
        if work.restricted or is_restricted(raw):
            raise WorkRestrictedError(
                f"restricted: Pixiv shows work {work.work_id} to this account only as a placeholder "
                "(limit_* image or visible=false)")
        if work.work_type == "novel":
            return self._held(work.work_id, self._novel_plan(work.work_id, raw, None))
        if raw.get("type") == "ugoira":
            return [self._ugoira(work.work_id, raw)]
        return self._pages(work.work_id, raw)

    def plan(self, work: Work, *, previews: bool = False,
             stored: Callable[[str], bytes | None] | None = None) -> list[FileDownload] | None:
        """A work's files fetched one at a time, streamed: an illustration's pages, then
        with ``previews`` each page's preview; a ugoira's zip; a novel's text, inline images,
        Markdown and cover (``_novel_plan``). ``stored(stem)``: the bytes of a file an earlier
        invocation stored for this work (a resumed novel's text answer), else None."""
        raw: Mapping[str, Any] = work.raw or {}
        if not raw.get("id"):
            raw = self.get_work(work.work_type, work.work_id).raw
        if work.restricted or is_restricted(raw):
            raise WorkRestrictedError(
                f"restricted: Pixiv shows work {work.work_id} to this account only as a placeholder "
                "(limit_* image or visible=false)")
        if work.work_type == "novel":
            return self._novel_plan(work.work_id, raw, stored)
        if work.work_type != "illustration":
            return None
        if raw.get("type") == "ugoira":
            return [self._ugoira_download(work.work_id, raw)]
        pages = page_urls(raw)
        single = (raw.get("width"), raw.get("height")) if len(pages) == 1 else (None, None)
        files = []
        for n, (original, large) in enumerate(pages):
            candidates = [u for u in (original, master_variant(original) if original else None, large) if u]
            if not candidates:
                raise SourceError(f"missing image: page {n} of work {work.work_id} has no URL", retryable=False)
            meta: dict[str, Any] = {"page": n}
            files.append(FileDownload(
                stem=f"{work.work_id}_p{n}", role="original", meta=meta, worst_case_ms=self._fetch_worst_case_ms,
                open=partial(self._open_first, candidates, work.work_id, n, meta),
                # mypy cannot type a lambda whose defaults bind the loop's values; meta is read when called
                describe=lambda head, header_type, stem=f"{work.work_id}_p{n}", meta=meta: _describe(  # type: ignore[misc]
                    stem, head, header_type, meta.get("source_url") or "", single)))
        return files + (self._preview_downloads(work.work_id, raw) if previews else [])

    def _preview_downloads(self, work_id: str, raw: Mapping[str, Any]) -> list[FileDownload]:
        """Each page's ``large`` image (``medium`` for a single page without it), streamed like the
        pages: all pages or none, as PixivFlow sends them.
        A preview ``pairs_with`` its page: its name is the page's stored name + ``.preview<ext>``."""
        pages = page_urls(raw)
        urls = found if isinstance(found := raw.get("image_urls"), Mapping) else {}
        if len(pages) == 1 and not pages[0][1] and urls.get("medium"):
            pages = [(pages[0][0], urls["medium"])]
        larges = [large for _, large in pages if large]
        if len(larges) != len(pages):
            return []
        return [FileDownload(stem=f"{work_id}_p{n}.preview", role="preview", meta={"page": n, "source_url": large},
                             worst_case_ms=self._fetch_worst_case_ms, pairs_with=f"{work_id}_p{n}",
                             open=partial(self._client.image_stream, large), describe=partial(_describe_preview, large))
                for n, large in enumerate(larges)]

    def _ugoira_download(self, work_id: str, raw: Mapping[str, Any]) -> FileDownload:
        """The ugoira's zip (1920x1080, the 600x600 one as fallback), streamed like a page; its frame
        delays (from /v1/ugoira/metadata, read now) ride in its meta."""
        frames, urls = self._ugoira_metadata(work_id)
        meta: dict[str, Any] = {"frames": frames}
        size = (raw.get("width"), raw.get("height"))
        return FileDownload(
            stem=f"{work_id}_ugoira", role="archive", meta=meta, worst_case_ms=self._fetch_worst_case_ms,
            open=lambda: self._open_first(urls, work_id, 0, meta),
            describe=lambda head, header_type: (f"{work_id}_ugoira.zip", "application/zip", size[0], size[1]))

    @contextmanager
    def _open_first(self, urls: list[str], work_id: str, page: int, meta: dict[str, Any]):
        last: ImageNotFound | None = None
        for url in urls:
            try:
                with self._client.image_stream(url) as (chunks, header_type):
                    meta["source_url"] = url
                    yield chunks, header_type
                    return
            except ImageNotFound as exc:
                last = exc
                self._log("info", "Pixiv image not found; trying the next variant", event="pixiv.image_fallback",
                          work_id=work_id, page=page)
        assert last is not None
        raise last

    def _novel_plan(self, work_id: str, raw: Mapping[str, Any],
                    stored: Callable[[str], bytes | None] | None) -> list[FileDownload]:
        """A novel as files stored one at a time: the text answer it was planned
        from (kept only for a resumed invocation: ``NOVEL_ANSWER``), the text, each inline image
        and the cover streamed like a page (each guarded by its worst case; one Pixiv no longer
        has is left out, its marker kept in the Markdown), then the Markdown naming the images as
        they were stored (only when one was: no image, no rich preview, as before). The text is an
        API answer held whole, bounded by the client (``MAX_ANSWER_BYTES``)."""
        novel = _stored_novel(stored, work_id) if stored is not None else None
        if novel is None:
            novel = self._novel_object(work_id)
        text, title = novel["text"], str(raw.get("title") or "")
        answer = json.dumps({k: novel[k] for k in ("text", "images", "illusts") if k in novel},
                            ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        body = text.encode("utf-8")
        files = [
            FileDownload(stem=f"{work_id}{NOVEL_ANSWER}", role="source", content=answer, transient=True,
                         describe=_named(f"{work_id}{NOVEL_ANSWER}", "application/json")),
            FileDownload(stem=f"{work_id}.txt", role="text", content=body, describe=_named(f"{work_id}.txt", TEXT_TYPE),
                         meta={"pages": max(1, int(raw.get("page_count") or 1)), "characters": len(text)}),
        ]
        images = [image for image in inline_images(text, novel) if image.url is not None]
        for image in images:
            assert image.url is not None
            stem = f"{work_id}_{image.kind}_{image.key}"
            files.append(FileDownload(
                stem=stem, role="inline", optional=True, worst_case_ms=self._fetch_worst_case_ms,
                meta={"pixiv_kind": image.kind, "source_id": image.key, "source_url": image.url},
                open=partial(self._client.image_stream, image.url),
                describe=partial(_describe, stem, url=image.url, single=(None, None))))

        def markdown(names: Mapping[str, str]) -> bytes | None:
            found = {image.marker: names[stem] for image in images
                     if (stem := f"{work_id}_{image.kind}_{image.key}") in names}
            return render_markdown(text, title, found).encode("utf-8") if found else None

        files.append(FileDownload(stem=f"{work_id}.md", role="markdown", render=markdown,
                                  describe=_named(f"{work_id}.md", "text/markdown; charset=utf-8")))
        urls = found if isinstance(found := raw.get("image_urls"), Mapping) else {}
        cover = urls.get("large") or urls.get("medium")
        if isinstance(cover, str) and cover and urlsplit(cover).hostname != "s.pximg.net":
            files.append(FileDownload(
                stem=f"{work_id}_cover", role="cover", optional=True, worst_case_ms=self._fetch_worst_case_ms,
                meta={"source_url": cover}, open=partial(self._client.image_stream, cover),
                describe=partial(_describe, f"{work_id}_cover", url=cover, single=(None, None))))
        return files

    def _novel_object(self, work_id: str) -> dict[str, Any]:
        """The webview page's text; when that page fails (an error answer, or no parsable novel
        object), the App API's ``/v1/novel/text`` (PixivFlow tries both in this order).
        A rate limit or an auth failure is the account's, not the page's: it stops here."""
        try:
            page = self._client.get("/webview/v2/novel", {"id": work_id, "viewer_version": "20221031_ai"}, text=True)
            return _webview_novel(page, work_id)
        except (RateLimitedError, FatalSourceError):
            raise
        except SourceError as exc:
            self._log("info", "novel webview page failed; reading the text endpoint", event="pixiv.novel_text_fallback",
                      work_id=work_id, error=str(exc)[:120])
        # The text endpoint carries the body alone: no markup for a rich preview.
        return {"text": _text_of(self._client.get("/v1/novel/text", {"novel_id": work_id}), work_id)}

    def _pages(self, work_id: str, raw: Mapping[str, Any]) -> list[ArtifactFile]:
        files = []
        pages = page_urls(raw)
        for n, (original, large) in enumerate(pages):
            candidates = [u for u in (original, master_variant(original) if original else None, large) if u]
            if not candidates:
                raise SourceError(f"missing image: page {n} of work {work_id} has no URL", retryable=False)
            content, name_hint, header_type = self._first_found(candidates, work_id, n)
            mime, width, height = sniff(content)
            mime = mime or mime_of_name(name_hint) or (header_type.split(";")[0].strip() or "application/octet-stream")
            if width is None and len(pages) == 1:
                width, height = raw.get("width"), raw.get("height")
            files.append(ArtifactFile(name=f"{work_id}_p{n}{extension_for(mime)}", content=content, content_type=mime,
                                      role="original", width=width, height=height,
                                      meta={"page": n, "source_url": name_hint}))
        return files

    def _first_found(self, urls: list[str], work_id: str, page: int) -> tuple[bytes, str, str]:
        last: ImageNotFound | None = None
        for url in urls:
            try:
                content, header_type = self._client.image(url)
                return content, url, header_type
            except ImageNotFound as exc:
                last = exc
                self._log("info", "Pixiv image not found; trying the next variant", event="pixiv.image_fallback",
                          work_id=work_id, page=page)
        assert last is not None
        raise last

    def _ugoira_metadata(self, work_id: str) -> tuple[list[dict[str, Any]], list[str]]:
        """(frames, zip URLs to try in order) from /v1/ugoira/metadata."""
        data = self._client.get("/v1/ugoira/metadata", {"illust_id": work_id})
        meta = data.get("ugoira_metadata") if isinstance(data, Mapping) else None
        medium = ((meta or {}).get("zip_urls") or {}).get("medium") if isinstance(meta, Mapping) else None
        if not isinstance(medium, str) or not medium:
            raise SourceError(f"missing metadata: ugoira {work_id} has no zip URL", retryable=False)
        assert isinstance(meta, Mapping)  # the zip URL came from it
        large = medium.replace("_ugoira600x600", "_ugoira1920x1080")
        frames = [{"file": str(f.get("file")), "delay": int(f.get("delay") or 0)}
                  for f in (meta.get("frames") or []) if isinstance(f, Mapping)]
        return frames, list(dict.fromkeys([large, medium]))

    def _ugoira(self, work_id: str, raw: Mapping[str, Any]) -> ArtifactFile:
        frames, urls = self._ugoira_metadata(work_id)
        content, used, _ = self._first_found(urls, work_id, 0)
        return ArtifactFile(name=f"{work_id}_ugoira.zip", content=content, content_type="application/zip",
                            role="archive", width=raw.get("width"), height=raw.get("height"),
                            meta={"frames": frames, "source_url": used})

    def _held(self, work_id: str, plan: list[FileDownload]) -> list[ArtifactFile]:
        """A planned work read whole, in memory, in plan order (a store that cannot take a stream:
        no bucket). What the streamed path leaves out is left out here too: the transient text
        answer, an optional file Pixiv does not have, a rendered file the work has no use for."""
        files: list[ArtifactFile] = []
        names: dict[str, str] = {}
        for planned in plan:
            if planned.transient:
                continue
            content = planned.render(names) if planned.render is not None else planned.content
            header_type = ""
            if content is None and planned.open is not None:
                try:
                    with planned.open() as (chunks, header_type):
                        content = b"".join(chunks)
                except ImageNotFound:
                    if not planned.optional:
                        raise
                    self._log("info", "novel image not found; its marker stays in the text", event="pixiv.image_fallback",
                              work_id=work_id, file=planned.stem)
            if content is None or planned.describe is None:
                continue
            name, content_type, width, height = planned.describe(content, header_type)
            names[planned.stem] = name
            files.append(ArtifactFile(name=name, content=content, content_type=content_type, role=planned.role,
                                      width=width, height=height, meta=dict(planned.meta)))
        return files


def _stored_novel(stored: Callable[[str], bytes | None], work_id: str) -> dict[str, Any] | None:
    """The text answer an earlier invocation stored (a resumed novel asks Pixiv for its text
    once); None when there is none, or it does not read back as one (asked again)."""
    content = stored(f"{work_id}{NOVEL_ANSWER}")
    if content is None:
        return None
    try:
        novel = json.loads(content.decode("utf-8"))
    except ValueError:
        return None
    return novel if isinstance(novel, dict) and isinstance(novel.get("text"), str) else None


def _named(name: str, content_type: str) -> Callable[[bytes, str], tuple[str, str, int | None, int | None]]:
    """The describe of a file whose name and type are known before its bytes (a novel's text)."""
    return lambda head, header_type: (name, content_type, None, None)


def _text_of(answer: Any, work_id: str) -> str:
    text = answer.get("novel_text") if isinstance(answer, Mapping) else None
    if not isinstance(text, str):
        raise SourceError(f"metadata_failed: novel {work_id}: the text endpoint answered without novel_text", retryable=True)
    return text


def _describe(stem: str, head: bytes, header_type: str, url: str, single: tuple[Any, Any], *,
              default: str = "application/octet-stream") -> tuple[str, str, int | None, int | None]:
    """A streamed page's name, type and size in pixels, from its first bytes (as ``_pages`` does)."""
    mime, width, height = sniff(head)
    mime = mime or mime_of_name(url) or (header_type.split(";")[0].strip() or default)
    if width is None:
        width, height = single
    return f"{stem}{extension_for(mime)}", mime, width, height


def _describe_preview(url: str, head: bytes, header_type: str) -> tuple[str, str, int | None, int | None]:
    """A streamed preview's name suffix (``.preview<ext>``, after its page's stored name), type and size."""
    return _describe(".preview", head, header_type, url, (None, None), default="image/jpeg")


def _webview_novel(page: Any, work_id: str) -> dict[str, Any]:
    """The ``novel: {...}`` object embedded in the webview page (its ``text`` a string)."""

    html = page if isinstance(page, str) else ""
    at = html.find(_WEBVIEW_MARK)
    if at < 0:
        raise SourceError(f"metadata_failed: novel {work_id}: the webview page carries no novel object", retryable=True)
    try:
        novel, _ = json.JSONDecoder().raw_decode(html, at + len(_WEBVIEW_MARK))
    except ValueError:
        raise SourceError(f"metadata_failed: novel {work_id}: cannot parse the webview novel object", retryable=True) from None
    text = novel.get("text") if isinstance(novel, Mapping) else None
    if not isinstance(text, str):
        raise SourceError(f"metadata_failed: novel {work_id}: the webview novel object has no text", retryable=True)
    return dict(novel)
