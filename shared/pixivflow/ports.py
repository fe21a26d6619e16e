"""Ports: the interfaces services depend on. Adapters implement them; tests fake them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence


class Clock(Protocol):
    def now_ms(self) -> int: ...


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
    """What to ask a source for: built from the target config (and protocol params)."""

    work_type: str = "illustration"
    mode: str = "search"  # search | ranking | topic
    tag: str | None = None
    ranking_mode: str = "day"
    ranking_date: str | None = None
    topic: str | None = None
    sort: str = "date_desc"


@dataclass(frozen=True)
class Page:
    items: Sequence[Work]
    next_cursor: str | None = None


@dataclass(frozen=True)
class ArtifactFile:
    name: str
    content: bytes
    content_type: str = "application/octet-stream"


class WorkSource(Protocol):
    """A paged source of works (catalogue file or Pixiv App API)."""

    def search_page(self, request: SearchRequest, cursor: str | None) -> Page: ...

    def get_work(self, work_type: str, work_id: str) -> Work:
        """Fetch one work by id. Raises WorkGoneError when it is gone, TransientSourceError when unsure."""
        ...

    def download(self, work: Work) -> list[ArtifactFile]:
        """The work's files. Raises SourceError subclasses on failure."""
        ...


class ArtifactStore(Protocol):
    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        """Store files under ``key``; returns their locations."""
        ...


@dataclass(frozen=True)
class DeliveryResponse:
    status: int
    body: Any  # parsed JSON when the body was JSON, else the text
    text: str = ""


class DeliveryChannel(Protocol):
    def send(self, route: str, payload: Mapping[str, Any], idempotency_key: str) -> DeliveryResponse:
        """POST one delivery. Transport failures raise; any HTTP answer is returned."""
        ...
