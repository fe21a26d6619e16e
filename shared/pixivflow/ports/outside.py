"""The ports to the world outside the table: the clock, the log and metrics, the work source and its
account, the artifact store, the route channel, the secrets, the callback sender."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, Sequence

from ..domain.work import Work, SearchRequest, Page, ArtifactFile, FileDownload, StoredFile
from ..domain.accounts import AccountGate, AccountPermit, Admission
from ..domain.route_io import DeliveryResponse, DeliveryRequest



class Clock(Protocol):
    def now_ms(self) -> int: ...


# The one metric of the default alarm profile: the sweep's count of what needs an operator.
HEALTH_METRIC = "Health"


class Log(Protocol):
    """One structured log line: ``log("warning", "text", event="outbox.bad_key", key=...)``.
    A line never changes what the caller does: a logger that fails is ignored."""

    def __call__(self, level: str, message: str, **fields: Any) -> None: ...


class Metrics(Protocol):
    """Counts published as CloudWatch metrics, one series per name and dimensions."""

    def count(self, name: str, value: float = 1, **dimensions: str) -> None: ...


# The milliseconds left in the running invocation (Lambda's context.get_remaining_time_in_millis),
# handed to a service call by the function that runs it: nothing outlives its invocation.
TimeLeft = Callable[[], float]


class WorkSource(Protocol):
    """A paged source of works (catalogue file or Pixiv App API).

    Beyond its three required methods a source has four capabilities, declared here with the
    answer of a source that lacks them; an adapter subclasses this port to take those defaults and
    overrides what it can do. The services ask every source the same way and never probe it."""

    # The outside account's permits (maxConcurrency), held for a cell's whole source work;
    # None: the source works against no shared account (the catalogue).
    governor: SourceGovernor | None = None

    def search_page(self, request: SearchRequest, cursor: str | None) -> Page: ...

    def get_work(self, work_type: str, work_id: str) -> Work:
        """Fetch one work by id. Raises WorkGoneError when it is gone, TransientSourceError when unsure."""
        ...

    def download(self, work: Work) -> list[ArtifactFile]:
        """The work's files. Raises SourceError subclasses on failure."""
        ...

    def plan(self, work: Work, *, previews: bool = False,
             stored: Callable[[str], bytes | None] | None = None) -> list[FileDownload] | None:
        """The work's files as downloads to stream one at a time (with ``previews``, each page's
        preview after it); ``stored(stem)``: the bytes of a file an earlier invocation stored.
        None: the source hands over whole works through ``download``."""
        return None

    def download_previews(self, work: Work, files: list[ArtifactFile]) -> list[ArtifactFile]:
        """One small preview per file of a downloaded illustration, for the routes that send
        previews (a planning source streams them in its plan instead). []: none."""
        return []

    def autocomplete(self, word: str) -> list[str]:
        """Tag suggestions for ``word`` (a topic's first step). []: the source suggests nothing."""
        return []


class ArtifactStore(Protocol):
    """Where a bound work's files live, one object per file (no manifest object: what was stored
    is recorded in the ledger, in the work's delivery intents). A work a source plans is streamed
    in one file at a time (``put_stream``) and resumed after the files an earlier invocation stored
    (``partial``); a work handed over whole is stored with ``put``."""

    def put(self, key: str, files: Sequence[ArtifactFile], *, reuse: bool = False) -> list[StoredFile]:
        """Store files under ``key``, one PUT each; with ``reuse`` (a resumed work), none for a file
        whose object under the same key already has the same checksum. Returns what was stored."""
        ...

    def read(self, file: StoredFile) -> bytes:
        """The bytes of one stored file."""
        ...

    def url(self, file: StoredFile, ttl_s: int) -> str:
        """A GET URL for one stored file, valid for ``ttl_s`` seconds (presigned on S3)."""
        ...

    def delete(self, key: str, files: Sequence[StoredFile] | None = None) -> int:
        """Delete ``files``, or every file under ``key`` (idempotent); returns how many were asked."""
        ...

    def preview_url(self, key: str, expires_s: int) -> str | None:
        """A browser-fetchable GET URL (presigned on S3, valid ``expires_s`` seconds) of the first
        small preview stored under ``key`` (the operator page's thumbnail), or None when
        the work has no preview stored (or the store has no URL a browser could fetch)."""
        ...

    def put_stream(self, key: str, chunks: Any, describe: Any, *, header_type: str = "", role: str = "original",
                   meta: Any = None) -> StoredFile:
        """Store one file from ``chunks``; ``describe(head, header_type)`` names it from its first bytes."""
        ...

    def partial(self, key: str) -> dict[str, StoredFile]:
        """The files stored whole under ``key`` by a run that stopped before its intent was
        recorded, by name without extension (a LIST, a HEAD each: only for a resumed work)."""
        ...


class SourceGovernor(Protocol):
    """Bounds the cells working against one outside account at once, across containers
    (``WorkSource.governor``); the execution service holds a permit for a cell's whole source work."""

    def admit(self, holder: str) -> Admission: ...

    def renew(self, holder: str) -> bool:
        """Extend the holder's permit lease; False when it was lost (expired and taken)."""
        ...

    def release(self, holder: str) -> None: ...

    def cooldown_until(self) -> int:
        """When the account's rate-limit cooldown ends (epoch ms; 0 or past: none)."""
        ...


class PixivAccountStore(Protocol):
    """Per-account Pixiv state shared by every container. Every write is conditional."""

    def gate(self, account_id: str) -> AccountGate: ...

    def set_gate(self, account_id: str, seen: AccountGate, cooldown_until: int, penalties: int, now_ms: int, *,
                 cause: str = "rate_limited") -> bool:
        """Replace the gate if it is still ``seen`` (same version); False when another container moved it first."""
        ...

    def token_fingerprint(self, account_id: str) -> str | None:
        """The SHA-256 of the refresh token last persisted for the account (never the token itself)."""
        ...

    def rotate_token(self, account_id: str, old_fingerprint: str, new_fingerprint: str, now_ms: int, *,
                     lost: tuple[str, str] | None = None) -> bool:
        """Record a rotation from ``old`` to ``new``. True for exactly one caller per rotation: the winner persists it.
        ``lost``: the guard as read, (current, previous), naming a rotation that never reached SSM
        (SSM still holds ``previous``); this one may replace it while the guard is still exactly that."""
        ...

    def adopt_token(self, account_id: str, seen_fingerprint: str | None, new_fingerprint: str, now_ms: int) -> bool:
        """Record a token no rotation produced (pasted by hand into SSM) if the guard is still ``seen``."""
        ...

    def token_guard(self, account_id: str) -> tuple[str | None, str | None]:
        """(fingerprint of the token the guard holds current, fingerprint of the one it replaced)."""
        ...

    def token_rotated_at(self, account_id: str) -> int | None:
        """When the guard last moved (epoch ms; None: it never did)."""
        ...

    def permits(self, account_id: str, count: int) -> list[AccountPermit]:
        """The account's first ``count`` permits as stored (absent ones free)."""
        ...

    def take_permit(self, account_id: str, index: int, holder: str, now_ms: int, lease_ms: int) -> bool:
        """Take permit ``index`` if it is free, expired or already ``holder``'s (conditional)."""
        ...

    def renew_permit(self, account_id: str, index: int, holder: str, now_ms: int, lease_ms: int) -> bool: ...

    def release_permit(self, account_id: str, index: int, holder: str) -> bool: ...

    def pace(self, account_id: str, now_ms: int, gap_ms: int) -> int:
        """Take the account's next request turn: 0 when this request may go now (the turn after it
        is then ``now + gap``), else the ms to wait before asking again (conditional on the item)."""
        ...


class DeliveryChannel(Protocol):
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

    def close(self) -> None:
        """Let go of pooled connections: the graph that used the channel is being dropped."""
        ...




# -- secrets -----------------------------------------------------------------------------------------

TRIGGER = "trigger"  # the operator surface's bearer token
JOBS = "jobs"  # the Workflow Protocol surface's bearer token
CALLBACK = "callback"  # the job event callback signing secret (never a bearer token)


class SecretStore(Protocol):
    """Every secret the functions read. One rule for every read: a secret that does not exist is
    ``None``; a store that did not answer raises ``domain.errors.SecretStoreUnavailable``
    (retryable, never cached as "no secret")."""

    def secret(self, kind: str) -> str | None: ...

    def token(self, kind: str) -> str | None:
        """A bearer token, failing closed: ``None`` also when the store did not answer."""
        ...

    def callback_secret(self) -> str | None: ...

    def route_token(self, route: Any) -> str | None: ...

    def lookup(self, name: str) -> str | None:
        """A route's ``${VAR}``."""
        ...


class CallbackSender(Protocol):
    def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> DeliveryResponse:
        """POST to a vetted address of ``url`` within ``timeout_s`` in TOTAL (connect to the last
        byte of the answer). Raises ``CallbackRefused`` when the URL may not be called (nothing is
        sent), other exceptions for transport failures and the deadline; any HTTP answer is returned."""
        ...
