"""What a work source gives the core: a work, the one paged query it answers, a page of
results, and the files of a work as fetched and as stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterator, Mapping, Sequence


@dataclass(frozen=True)
class Work:
    """One Pixiv work as the core sees it (shaped after Pixiv App API results)."""

    work_id: str
    work_type: str  # "illustration" | "novel"
    title: str = ""
    tags: tuple[str, ...] = ()
    user_id: str = ""
    user_name: str = ""
    create_date: str = ""  # ISO 8601 as the source gave it
    total_bookmarks: int = 0
    page_count: int = 1
    # Selection facts (the targets' filters). ``x_restrict``: 0 general, 1 R-18, 2 R-18G.
    # ``ai_type``: Pixiv's illust_ai_type / novel_ai_type (2 = AI-generated, 1 = not, 0 = unknown).
    # ``restricted``: the source saw a placeholder (``limit_*`` image, ``visible: false``).
    x_restrict: int = 0
    ai_type: int = 0
    restricted: bool = False
    series_id: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The JSON a delivery carries about the work."""
        return {
            "id": self.work_id,
            "type": self.work_type,
            "title": self.title,
            "tags": list(self.tags),
            "user": {"id": self.user_id, "name": self.user_name},
            "create_date": self.create_date,
            "total_bookmarks": self.total_bookmarks,
            "page_count": self.page_count,
        }


@dataclass(frozen=True)
class SearchRequest:
    """ONE paged query a source answers (built by the domain from a target and protocol params).

    A source only answers queries; every selection rule (tag relation, bookmark floor, date
    window, AI/R-18 policy, page count, pinned ids) is applied by the domain, whatever the
    source. The server-side hints (``search_target``, ``sort``, dates, ``exclude_ai``) may be
    used by a source that can filter remotely; a source that cannot ignores them.
    """

    work_type: str = "illustration"
    mode: str = "search"  # search | ranking | topic | user
    tag: str | None = None  # the query words: one tag, or several joined by spaces (and-relation)
    ranking_mode: str = "day"
    ranking_date: str | None = None  # YYYY-MM-DD, already resolved from YESTERDAY/TODAY
    topic: str | None = None
    sort: str = "date_desc"
    search_target: str = "partial_match_for_tags"
    start_date: str | None = None  # YYYY-MM-DD inclusive (hint)
    end_date: str | None = None  # YYYY-MM-DD inclusive (hint)
    exclude_ai: bool = False  # hint: Pixiv's search_ai_type=0
    user_id: str | None = None  # mode "user": the user's works
    duration: str | None = None  # hint: Pixiv's within_last_day|week|month search window
    # The target includes R-18 (search: ``r18``; topic: ``topicDiscovery.includeR18``): a search
    # is then sent without ``filter=for_ios``, as PixivFlow does. Rankings and user works ignore it.
    include_r18: bool = False


@dataclass(frozen=True)
class Page:
    items: Sequence[Work]
    next_cursor: str | None = None


@dataclass(frozen=True)
class ArtifactFile:
    name: str
    content: bytes
    content_type: str = "application/octet-stream"
    role: str = "original"  # original | preview | text | cover | archive (protocol Asset role)
    width: int | None = None
    height: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)  # e.g. ugoira frame delays


@dataclass(frozen=True)
class FileDownload:
    """One file of a work, fetched only when opened (a work is stored file by file, each streamed
    from the source to the store). ``open()`` is a context manager giving the file's
    chunks (each bounded) and the content type the source announced.

    A novel also plans files that are not fetched: its text, an API
    answer the source already holds whole (``content``), and its Markdown, made from the names
    its inline images were stored under (``render``); exactly one of ``open`` / ``content`` /
    ``render`` gives a file's bytes."""

    stem: str  # the stored name without its extension: "<id>_p<n>"
    open: Callable[[], ContextManager[tuple[Iterator[bytes], str]]] | None = None
    role: str = "original"
    meta: Mapping[str, Any] = field(default_factory=dict)
    worst_case_ms: int = 0  # the longest one fetch may take (timeout x (retries + 1))
    # (first bytes, announced content type) -> (stored name, content type, width, height)
    describe: Callable[[bytes, str], tuple[str, str, int | None, int | None]] | None = None
    # A preview: the stem of the page it belongs to. Its stored name is that page's stored name
    # followed by what ``describe`` names (PixivFlow's ``<original>.preview.jpg``), its stem the
    # page's stored name + ``.preview``; it is stored only when every page's preview is.
    pairs_with: str | None = None
    # The bytes of a small file the source holds whole (a novel's text); the content-side rules
    # (the novel language filter) read them before anything is stored.
    content: bytes | None = None
    # A file made from those stored before it in the plan: (stem -> stored name of each file
    # stored so far) -> its bytes, or None when the work has no such file (a novel's Markdown
    # exists only when at least one inline image was stored).
    render: Callable[[Mapping[str, str]], bytes | None] | None = None
    # The work is complete without it (a novel's cover, an inline image): an answer that it is
    # not there (404) leaves it out, logged; a retryable failure still stops the work at it.
    optional: bool = False
    # Kept only so a resumed invocation need not ask the source again for what the plan was made
    # from (a novel's text answer): never one of the work's files; deleted once they all are stored.
    transient: bool = False


@dataclass(frozen=True)
class StoredFile:
    """One stored file of a bound work: what a delivery uploads or links (protocol ``Asset``)."""

    key: str  # the store's own key, stable per (slot, target, work, page)
    name: str
    content_type: str
    size: int
    sha256: str
    role: str = "original"
    width: int | None = None
    height: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
