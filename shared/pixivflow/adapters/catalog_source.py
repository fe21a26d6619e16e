"""An offline work source read from a JSON catalogue (DESIGN §12).

The catalogue is shaped like Pixiv App API results::

    {"illusts": [...], "novels": [...], "ranking": {"day": ["101", "102"]}}

Each work carries at least ``id``, ``title``, ``tags: [{"name"}]``,
``user: {"id", "name"}``, ``create_date``, ``total_bookmarks`` and ``page_count``.
Nothing is ever fetched from the network: a work's files are derived from its id and
page index, so the same catalogue always yields the same bytes: one ``<id>_p<n>.png``
per page for an illustration (a PNG signature and a SHA-256 digest), one
``<id>_p<n>.txt`` per page for a novel.

For tests and the demo a work may carry ``"x_fault"``:

* ``"gone"``: listed by searches, but ``get_work`` and ``download`` raise ``WorkGoneError``;
* ``"download_error"``: ``download`` raises a plain ``SourceError``;
* ``"transient"``: ``download`` raises ``TransientSourceError`` (a connection reset);
* ``"slow"``: no fault (reserved for the demo).

The source returns single pages; ``pixivflow.domain.pager.collect`` does the paging.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pixivflow.domain.errors import SourceError, TransientSourceError, WorkGoneError
from pixivflow.domain.pager import sort_works
from pixivflow.ports import ArtifactFile, Page, SearchRequest, Work

DEFAULT_PAGE_SIZE = 30
FAULTS = frozenset({"gone", "download_error", "transient", "slow"})
_SECTIONS = {"illustration": "illusts", "novel": "novels"}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class _Entry:
    work: Work
    fault: str | None


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


def _to_work(raw: Mapping[str, Any], work_type: str) -> Work:
    user = raw.get("user") or {}
    if not isinstance(user, Mapping):
        user = {}
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
            entry = _Entry(work=work, fault=fault)
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


def novel_text(work: Work, page: int) -> bytes:
    """The deterministic text of one novel page: the title, then a digest of (id, page)."""
    digest = hashlib.sha256(f"pixivflow-catalog:{work.work_id}:{page}".encode()).hexdigest()
    return f"{work.title}\n\npage {page + 1}\n{digest}\n".encode("utf-8")


class CatalogSource:
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

    # --------------------------------------------------------------- helpers

    @staticmethod
    def _offset(cursor: str | None) -> int:
        if cursor is None:
            return 0
        if not isinstance(cursor, str) or not cursor.isdigit():
            raise SourceError(f"invalid catalogue cursor {cursor!r}", retryable=False)
        return int(cursor)

    def _matching(self, request: SearchRequest) -> list[Work]:
        entries = self._section(request.work_type)
        if request.mode == "ranking":
            index = self._load().index
            ids = self._load().ranking.get(request.ranking_mode, ())
            # Ids of the other work type (or unknown ids) are not part of this ranking.
            return [index[(request.work_type, i)].work for i in ids if (request.work_type, i) in index]
        if request.mode == "topic":
            words = (request.topic or request.tag or "").split()
        elif request.mode == "search":
            words = (request.tag or "").split()
        else:
            raise SourceError(f"unsupported search mode {request.mode!r}", retryable=False)
        wanted = [w.casefold() for w in words]
        matched = [e.work for e in entries if set(wanted) <= {t.casefold() for t in e.work.tags}]
        sort = request.sort if request.sort in ("date_asc", "popular_desc") else "date_desc"
        return sort_works(matched, sort)
