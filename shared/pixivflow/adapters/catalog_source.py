"""An offline work source read from a JSON catalogue.

The catalogue is shaped like Pixiv App API results::

    {"illusts": [...], "novels": [...], "ranking": {"day": ["101", "102"]}}

Each work carries at least ``id``, ``title``, ``tags: [{"name"}]``,
``user: {"id", "name"}``, ``create_date``, ``total_bookmarks`` and ``page_count``.
Nothing is ever fetched from the network: a work's files are derived from its id and
page index, so the same catalogue always yields the same bytes: one ``<id>_p<n>.png``
per page for an illustration (a PNG signature and a SHA-256 digest), one
``<id>_p<n>.txt`` per page for a novel.

A work may carry Pixiv's selection facts, read as Pixiv writes them: ``x_restrict``
(0 general, 1 R-18, 2 R-18G), ``illust_ai_type`` / ``novel_ai_type`` (2 = AI-generated),
``visible: false`` or a ``limit_*`` placeholder image (a restricted work), ``series``,
``caption`` and, for novels, ``text``.

**What the catalogue answers** is what a Pixiv search answers server-side, nothing more
(every selection rule lives in ``pixivflow.domain.selection``):

* ``mode: search`` / ``topic``: the works whose fields match EVERY query word (the words of
  ``tag``, or of ``topic``), case-insensitively, per ``search_target``:
  ``partial_match_for_tags`` (the word is part of a tag name or its ``translated_name``),
  ``exact_match_for_tags`` (the word is a whole tag name or translated name), ``title_and_caption``, and for
  novels ``text`` (the body) and ``keyword`` (tags, title or caption); ordered by ``sort``
  (``date_desc``, ``date_asc``, ``popular_desc``; ties keep catalogue order);
* ``mode: ranking``: the ids listed under ``ranking.<ranking_mode>``, in rank order (the lists
  are not dated, so ``ranking_date`` selects nothing here);
* ``mode: user``: the works whose ``user.id`` is ``user_id``, newest first.

The server-side hints of a query (``start_date`` / ``end_date``, ``exclude_ai``) are not
applied: the domain applies those rules itself and counts what they reject, and a catalogue
that pre-filtered would hide those counts from the candidate report.

**Fault hooks**: a work may carry ``"x_fault"``:

* ``"gone"``: listed by searches, but ``get_work`` and ``download`` raise ``WorkGoneError``
  (HTTP 404), as a work deleted after it was listed;
* ``"download_error"``: ``download`` raises a plain, non-retryable-looking ``SourceError``
  ("image download failed"), deterministically;
* ``"transient"``: ``download`` raises ``TransientSourceError`` (a connection reset), which a
  later attempt may not see;
* ``"slow"``: no fault (reserved for the demo).

The source returns single pages; ``pixivflow.domain.pager`` does the paging.
"""

from __future__ import annotations

from ..domain.text import ascii_digits
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pixivflow.domain.errors import SourceError, TransientSourceError, WorkGoneError
from pixivflow.domain.pager import sort_works
from pixivflow.domain.work import ArtifactFile, Page, SearchRequest, Work
from pixivflow.ports import WorkSource

DEFAULT_PAGE_SIZE = 30
FAULTS = frozenset({"gone", "download_error", "transient", "slow"})
_SECTIONS = {"illustration": "illusts", "novel": "novels"}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class _Entry:
    work: Work
    fault: str | None
    # The case-folded texts a search compares, folded once at load: folding every work's tags,
    # title and caption again for every query word was the demo source's whole search cost.
    tags: tuple[str, ...] = ()
    title: str = ""
    caption: str = ""


def _entry_of(work: Work, fault: str | None) -> _Entry:
    return _Entry(work=work, fault=fault,
                  tags=tuple(t.casefold() for t in work.tags + _translated_names(work.raw.get("tags"))),
                  title=work.title.casefold(), caption=str(work.raw.get("caption") or "").casefold())


@dataclass(frozen=True)
class _Catalogue:
    by_type: Mapping[str, tuple[_Entry, ...]]  # catalogue order
    index: Mapping[tuple[str, str], _Entry]
    ranking: Mapping[str, tuple[str, ...]]


def _tag_names(raw: Any) -> tuple[str, ...]:
    names: list[str] = []
    for tag in raw or ():
        name = tag.get("name") if isinstance(tag, Mapping) else tag
        if isinstance(name, str) and name:
            names.append(name)
    return tuple(names)


def _translated_names(raw: Any) -> tuple[str, ...]:
    names: list[str] = []
    for tag in raw or ():
        if isinstance(tag, Mapping) and isinstance(tag.get("translated_name"), str) and tag["translated_name"]:
            names.append(tag["translated_name"])
    return tuple(names)


def _restricted(raw: Mapping[str, Any]) -> bool:
    """Pixiv answers a work it will not show with placeholder data (``visible: false``, every
    image a ``limit_*`` picture), not with an error (docs/explanation/pixiv-source.md)."""
    if raw.get("visible") is False:
        return True
    urls: list[str] = []
    for key in ("image_urls", "meta_single_page"):
        value = raw.get(key)
        if isinstance(value, Mapping):
            urls.extend(str(v) for v in value.values() if isinstance(v, str))
    return any("/limit_" in url for url in urls)


def _to_work(raw: Mapping[str, Any], work_type: str) -> Work:
    user = raw.get("user") or {}
    if not isinstance(user, Mapping):
        user = {}
    series = raw.get("series")
    series_id = series.get("id") if isinstance(series, Mapping) else None
    ai_key = "novel_ai_type" if work_type == "novel" else "illust_ai_type"
    return Work(
        work_id=str(raw["id"]),
        work_type=work_type,
        title=str(raw.get("title") or ""),
        tags=_tag_names(raw.get("tags")),
        user_id="" if user.get("id") is None else str(user.get("id")),
        user_name=str(user.get("name") or ""),
        create_date=str(raw.get("create_date") or ""),
        total_bookmarks=int(raw.get("total_bookmarks") or 0),
        page_count=max(1, int(raw.get("page_count") or 1)),
        x_restrict=int(raw.get("x_restrict") or 0),
        ai_type=int(raw.get(ai_key) or 0),
        restricted=_restricted(raw),
        series_id=None if series_id in (None, "") else str(series_id),
        raw=dict(raw),
    )


def _parse(data: Any, origin: str) -> _Catalogue:
    if not isinstance(data, Mapping):
        raise SourceError(f"catalogue {origin}: the top level must be an object", retryable=False)
    by_type: dict[str, tuple[_Entry, ...]] = {}
    index: dict[tuple[str, str], _Entry] = {}
    for work_type, section in _SECTIONS.items():
        raw_items = data.get(section) or []
        if not isinstance(raw_items, list):
            raise SourceError(f"catalogue {origin}: {section!r} must be a list", retryable=False)
        entries: list[_Entry] = []
        for position, raw in enumerate(raw_items):
            where = f"catalogue {origin}: {section}[{position}]"
            if not isinstance(raw, Mapping) or raw.get("id") in (None, ""):
                raise SourceError(f"{where} must be an object with an id", retryable=False)
            fault = raw.get("x_fault")
            if fault is not None and fault not in FAULTS:
                raise SourceError(f"{where}: unknown x_fault {fault!r}", retryable=False)
            try:
                work = _to_work(raw, work_type)
            except (TypeError, ValueError) as exc:
                raise SourceError(f"{where}: {exc}", retryable=False) from exc
            key = (work_type, work.work_id)
            if key in index:
                raise SourceError(f"{where}: duplicate id {work.work_id}", retryable=False)
            entry = _entry_of(work, fault)
            index[key] = entry
            entries.append(entry)
        by_type[work_type] = tuple(entries)
    ranking_raw = data.get("ranking") or {}
    if not isinstance(ranking_raw, Mapping):
        raise SourceError(f"catalogue {origin}: 'ranking' must be an object", retryable=False)
    ranking: dict[str, tuple[str, ...]] = {}
    for mode, ids in ranking_raw.items():
        if not isinstance(ids, list):
            raise SourceError(f"catalogue {origin}: ranking.{mode} must be a list of ids", retryable=False)
        ranking[str(mode)] = tuple(str(i) for i in ids)
    return _Catalogue(by_type=by_type, index=index, ranking=ranking)


def artifact_bytes(work_id: str, page: int) -> bytes:
    """The deterministic content of one page: a PNG signature, then a digest of (id, page)."""
    digest = hashlib.sha256(f"pixivflow-catalog:{work_id}:{page}".encode()).digest()
    return _PNG_SIGNATURE + digest


def preview_bytes(work_id: str, page: int) -> bytes:
    """The deterministic content of one page's preview: a JPEG start marker, then a digest."""
    return b"\xff\xd8\xff\xe0" + hashlib.sha256(f"pixivflow-catalog:{work_id}:{page}:preview".encode()).digest()


def novel_text(work: Work, page: int) -> bytes:
    """The deterministic text of one novel page: the title, then a digest of (id, page)."""
    digest = hashlib.sha256(f"pixivflow-catalog:{work.work_id}:{page}".encode()).hexdigest()
    return f"{work.title}\n\npage {page + 1}\n{digest}\n".encode("utf-8")


class CatalogSource(WorkSource):
    """``WorkSource`` over a catalogue file, loaded on first use and then kept."""

    def __init__(self, path: str | Path, page_size: int = DEFAULT_PAGE_SIZE) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self._path = Path(path)
        self._page_size = page_size
        self._catalogue: _Catalogue | None = None
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- loading

    def _load(self) -> _Catalogue:
        catalogue = self._catalogue
        if catalogue is not None:
            return catalogue
        with self._lock:
            if self._catalogue is None:
                try:
                    data = json.loads(self._path.read_text(encoding="utf-8"))
                except OSError as exc:
                    raise SourceError(f"catalogue {self._path} cannot be read: {exc}", retryable=False) from exc
                except ValueError as exc:
                    raise SourceError(f"catalogue {self._path} is not valid JSON: {exc}", retryable=False) from exc
                self._catalogue = _parse(data, str(self._path))
            return self._catalogue

    def _section(self, work_type: str) -> tuple[_Entry, ...]:
        if work_type not in _SECTIONS:
            raise SourceError(f"unsupported work type {work_type!r}", retryable=False)
        return self._load().by_type[work_type]

    def _entry(self, work_type: str, work_id: str) -> _Entry:
        self._section(work_type)
        entry = self._load().index.get((work_type, str(work_id)))
        if entry is None:
            raise WorkGoneError(f"work {work_id} not found", status=404)
        return entry

    # ------------------------------------------------------------------ port

    def search_page(self, request: SearchRequest, cursor: str | None) -> Page:
        works = self._matching(request)
        offset = self._offset(cursor)
        end = offset + self._page_size
        return Page(items=tuple(works[offset:end]), next_cursor=str(end) if end < len(works) else None)

    def get_work(self, work_type: str, work_id: str) -> Work:
        entry = self._entry(work_type, work_id)
        if entry.fault == "gone":
            raise WorkGoneError(f"work {work_id} not found", status=404)
        return entry.work

    def download(self, work: Work) -> list[ArtifactFile]:
        entry = self._entry(work.work_type, work.work_id)
        if entry.fault == "gone":
            raise WorkGoneError(f"work {work.work_id} not found", status=404)
        if entry.fault == "download_error":
            raise SourceError("image download failed")
        if entry.fault == "transient":
            raise TransientSourceError("ECONNRESET while downloading")
        work_id = entry.work.work_id
        if entry.work.work_type == "novel":
            return [
                ArtifactFile(
                    name=f"{work_id}_p{page}.txt",
                    content=novel_text(entry.work, page),
                    content_type="text/plain; charset=utf-8",
                )
                for page in range(entry.work.page_count)
            ]
        return [
            ArtifactFile(
                name=f"{work_id}_p{page}.png",
                content=artifact_bytes(work_id, page),
                content_type="image/png",
            )
            for page in range(entry.work.page_count)
        ]

    def download_previews(self, work: Work, files: list[ArtifactFile]) -> list[ArtifactFile]:
        """One small preview per page (the ``large`` image Pixiv serves beside each original),
        deterministic like the pages; only asked for when a route sends previews."""
        if work.work_type == "novel":
            return []
        return [ArtifactFile(name=f"{f.name}.preview.jpg", content=preview_bytes(work.work_id, page),
                             content_type="image/jpeg", role="preview") for page, f in enumerate(files)]

    # --------------------------------------------------------------- helpers

    @staticmethod
    def _offset(cursor: str | None) -> int:
        if cursor is None:
            return 0
        if not isinstance(cursor, str) or not ascii_digits(cursor):
            raise SourceError(f"invalid catalogue cursor {cursor!r}", retryable=False)
        return int(cursor)

    def _matching(self, request: SearchRequest) -> list[Work]:
        entries = self._section(request.work_type)
        if request.mode == "ranking":
            index = self._load().index
            ids = self._load().ranking.get(request.ranking_mode, ())
            # Ids of the other work type (or unknown ids) are not part of this ranking.
            return [index[(request.work_type, i)].work for i in ids if (request.work_type, i) in index]
        if request.mode == "user":
            wanted_user = str(request.user_id or "")
            works = [e.work for e in entries if wanted_user and e.work.user_id == wanted_user]
            return sort_works(works, "date_desc")
        if request.mode == "topic":
            words = (request.topic or request.tag or "").split()
        elif request.mode == "search":
            words = (request.tag or "").split()
        else:
            raise SourceError(f"unsupported search mode {request.mode!r}", retryable=False)
        target = request.search_target or "partial_match_for_tags"
        if target not in _SEARCH_TARGETS[request.work_type]:
            raise SourceError(f"unsupported search_target {target!r} for {request.work_type} search", retryable=False)
        wanted = [w.casefold() for w in words]
        if not wanted:
            return []  # Pixiv refuses an empty word; nothing matches it
        matched = [e.work for e in entries if all(_matches(e, w, target) for w in wanted)]
        sort = request.sort if request.sort in ("date_asc", "popular_desc") else "date_desc"
        return sort_works(matched, sort)


_SEARCH_TARGETS = {
    "illustration": ("partial_match_for_tags", "exact_match_for_tags", "title_and_caption"),
    "novel": ("partial_match_for_tags", "exact_match_for_tags", "title_and_caption", "text", "keyword"),
}


def _matches(entry: _Entry, word: str, search_target: str) -> bool:
    """Does one (case-folded) query word match the work, the way Pixiv's search_target reads it?"""
    work, tags, title, caption = entry.work, entry.tags, entry.title, entry.caption
    if search_target == "exact_match_for_tags":
        return word in tags
    if search_target == "partial_match_for_tags":
        return any(word in tag for tag in tags)
    if search_target == "title_and_caption":
        return word in title or word in caption
    if search_target == "text":
        return word in str(work.raw.get("text") or "").casefold()
    # keyword: tags, title or caption
    return any(word in tag for tag in tags) or word in title or word in caption
