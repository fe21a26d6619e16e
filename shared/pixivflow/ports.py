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
    # Selection facts (spec §6.1 filters). ``x_restrict``: 0 general, 1 R-18, 2 R-18G.
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

    # The methods below are what the Pixiv source and the file-carrying routes build on
    # (issues 10 and 11); an adapter that predates them may raise NotImplementedError.
    def stored(self, key: str) -> list[StoredFile]:
        """The files already stored under ``key`` (a re-run after a crash re-uses them), in page order."""
        ...

    def read(self, file: StoredFile) -> bytes:
        """The bytes of one stored file."""
        ...

    def url(self, file: StoredFile, ttl_s: int) -> str:
        """A GET URL for one stored file, valid for ``ttl_s`` seconds (presigned on S3)."""
        ...

    def delete(self, key: str) -> int:
        """Delete every file under ``key`` (idempotent); returns how many were deleted."""
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


# -- the sweep's own state (DESIGN §4 "one sweep runs at a time"; issue 16 missed fires) ---------


@dataclass(frozen=True)
class SweepLease:
    """The answer to one attempt at the sweep lease: who holds it now, and until when."""

    acquired: bool
    owner: str  # the holder after the attempt (ours when ``acquired``)
    until_ms: int


@dataclass(frozen=True)
class ScheduleWatch:
    """What the sweep remembers about one schedule while it watches it for missed fires.

    A watch starts the first time the sweep sees the schedule enabled with a given cron and zone
    (``fingerprint``); only fires after ``first_seen_ms`` can ever be missed. ``checked_through_ms``
    is the cursor: every fire at or before it has been checked once. A disabled schedule's watch is
    ``paused``; enabling it again starts a new watch, so its disabled stretch is never "missed".
    """

    schedule_id: str
    fingerprint: str
    first_seen_ms: int
    checked_through_ms: int
    paused: bool = False


class SweepState(Protocol):
    """The sweep's items in the ledger: its single-runner lease, schedule watches, missed fires.

    Every write is conditional; a refused condition is an answer (False / not acquired), never an
    exception. Infrastructure failures raise.
    """

    def acquire_lease(self, owner: str, now_ms: int, ttl_ms: int) -> SweepLease:
        """Take the lease when it is free or expired (``until <= now``); otherwise report its holder."""
        ...

    def release_lease(self, owner: str, now_ms: int) -> bool:
        """Expire our own lease now, so the next tick need not wait for the TTL. False if not ours."""
        ...

    def watches(self, schedule_ids: Sequence[str]) -> dict[str, ScheduleWatch]:
        """The stored watches of these schedules (strongly consistent); absent ids are left out."""
        ...

    def start_watch(self, schedule_id: str, fingerprint: str, now_ms: int,
                    replacing: ScheduleWatch | None = None) -> bool:
        """Start watching at ``now_ms``: insert-if-absent, or replace exactly ``replacing``."""
        ...

    def advance_watch(self, watch: ScheduleWatch, checked_through_ms: int) -> bool:
        """Move the cursor forward, on condition the watch is still exactly ``watch``."""
        ...

    def pause_watch(self, watch: ScheduleWatch) -> bool:
        """Mark the watch paused (its schedule is disabled), on condition it is still ``watch``."""
        ...

    def record_missed(self, slot_id: str, schedule_id: str, fire_ms: int, now_ms: int) -> bool:
        """Insert ``MISSED#<slotId>`` once. True only for the call that created it."""
        ...
