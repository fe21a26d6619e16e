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


@dataclass(frozen=True)
class DeliveryRequest:
    """One delivery attempt of an intent, as a route needs it (spec §10.5 step 3)."""

    route: str
    idempotency_key: str
    body: Mapping[str, Any]  # the ``kind: webhook`` JSON body: ids + the frozen intent payload
    payload: Mapping[str, Any]  # the frozen intent payload (work, context, per-target fields)
    artifact_key: str  # where the bound work's files are stored (ArtifactStore key)


class DeliveryChannel(Protocol):
    def send(self, route: str, payload: Mapping[str, Any], idempotency_key: str) -> DeliveryResponse:
        """POST one ``kind: webhook`` delivery. Transport failures raise; any HTTP answer is returned."""
        ...

    def ready(self, route: str) -> bool:
        """The route's readiness probe (``readinessUrl``); True for a route without one."""
        ...

    def deliver(self, request: DeliveryRequest) -> DeliveryResponse:
        """One attempt on whatever wire format the route speaks. A ``ConfigError`` (e.g. an
        unresolvable ``${VAR}``) means the route cannot be used as configured."""
        ...

    def post_json(self, route: str, url_field: str, body: Mapping[str, Any], idempotency_key: str) -> DeliveryResponse:
        """POST a JSON notice to the route's ``url_field`` URL (notificationUrl, scheduleOutcomeUrl, ...)."""
        ...


# -- generic outbox rows (DESIGN §4 ``OUTBOX#<kind>#<key>`` / ``META``; spec §10.4) -----------------
#
# Notifications and event callbacks are outbox rows that belong to no delivery intent. They
# follow the intent rows' lifecycle: insert-if-absent on (kind, key), claimed under a lease with
# a conditional write, settled by the lease holder, due rows found through a sparse index.


@dataclass
class OutboxRow:
    kind: str  # notification | event_callback
    key: str  # the idempotency key, unique per kind
    target: str  # the route name (notifications) or the callback URL (event callbacks)
    payload: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"  # pending | processing | retry_wait | done | dead | cancelled
    attempts: int = 0
    max_attempts: int = 12
    next_attempt_at: int = 0
    lease_owner: str | None = None
    lease_until: int | None = None
    last_error: str | None = None
    created_at: int = 0
    updated_at: int = 0
    completed_at: int | None = None

    @property
    def actionable(self) -> bool:
        return self.status in ("pending", "processing", "retry_wait")


class OutboxRows(Protocol):
    def enqueue(self, row: OutboxRow, *, revive: bool = False) -> tuple[OutboxRow, bool]:
        """Insert if absent on (kind, key); the existing row wins. With ``revive`` a ``dead`` or
        ``cancelled`` row goes back to ``pending`` (attempts 0, due now). Returns (row, created)."""
        ...

    def get(self, kind: str, key: str) -> OutboxRow | None: ...

    def claim(self, row: OutboxRow, owner: str, now_ms: int, lease_ms: int) -> OutboxRow | None:
        """pending/retry_wait and due, or processing with an expired lease -> processing under ``owner``."""
        ...

    def settle(self, row: OutboxRow, owner: str, now_ms: int, *, status: str, error: str | None = None,
               next_attempt_at: int | None = None) -> OutboxRow | None:
        """Record one attempt (attempts + 1) as the lease holder: done, dead or retry_wait."""
        ...

    def release(self, row: OutboxRow, owner: str, now_ms: int, next_attempt_at: int) -> OutboxRow | None:
        """Give the row back without consuming an attempt (a readiness deferral)."""
        ...

    def due(self, before_ms: int, limit_per_shard: int = 100) -> list[tuple[str, str]]:
        """(kind, key) of actionable rows due at or before ``before_ms`` (eventually consistent)."""
        ...
