"""Configuration: PixivFlow's `schedules`, `targets`, `delivery`, `source`, `pixiv`, `network`,
`download` and `schedulerRuntime` blocks.

Field names keep PixivFlow's camelCase so an existing config loads unchanged. Unknown keys
are tolerated (PixivFlow configs carry many blocks the core does not use). A bad config
fails fast with a ``ConfigError`` naming the field path, e.g. ``schedules[1].cron: ...``.

Location: env ``PIXIVFLOW_CONFIG`` = a file path (YAML or JSON) or ``ssm:<parameter name>``.
Secrets never live here: bearer tokens come from env or SSM (see ``pixivflow.http.auth``); the
Pixiv refresh token is a ``${VAR}`` reference resolved at first use (``adapters/secret_refs.py``).
A `pixiv` block without a `source` block selects the Pixiv source (issue 10).
"""

from __future__ import annotations

import copy
import math
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, ValidationError, field_validator, model_validator

from .domain.ack import AckHints
from .domain.cells import is_single_work_cell
from .domain.cron import to_eventbridge_cron
from .domain.errors import ConfigError
from .domain.occurrence import validate_cron, validate_timezone
from .domain.scan import DEFAULT_SCAN_LIMIT, MAX_SCAN_LIMIT, MIN_SCAN_LIMIT
from .domain.selection import RELATIVE_DAYS, Criteria, is_day, ranking_modes, search_targets

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_ID_RE = re.compile(ID_PATTERN)
MAX_TARGETS_PER_SCHEDULE = 90  # keeps every per-slot transaction under DynamoDB's 100 items
MAX_ROUTES_PER_TARGET = 3
DEFAULT_SCHEDULE_TIMEOUT_MS = 1_800_000
DEFAULT_QUEUED_TIMEOUT_MS = 1_800_000
DEFAULT_STALL_TIMEOUT_MS = 900_000
STALL_MIN_TIMEOUT_MS = 60_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)


class ScheduleConfig(_Model):
    id: str = Field(pattern=ID_PATTERN)
    name: str | None = None
    enabled: bool = True
    cron: str | None = None
    timezone: str = "UTC"
    targetIds: list[str] | None = None
    timeout: int | None = Field(default=None, ge=1000)
    minInterval: int | None = None
    maxExecutions: int | None = None
    maxConsecutiveFailures: int | None = None
    failureRetryDelay: int | None = None

    @field_validator("timezone", mode="before")
    @classmethod
    def _tz(cls, value: Any) -> str:
        tz = (value or "").strip() if isinstance(value, str) or value is None else value
        tz = tz or "UTC"
        try:
            validate_timezone(tz)
        except ValueError as exc:
            raise ValueError(f"unknown IANA time zone {tz!r}") from exc
        return tz

    @model_validator(mode="after")
    def _cron(self) -> "ScheduleConfig":
        if self.cron is not None and self.cron.strip():
            try:
                validate_cron(self.cron)
                to_eventbridge_cron(self.cron)  # the clock must be able to express it
            except ValueError as exc:
                raise ValueError(f"cron: {exc}") from exc
        elif self.enabled:
            raise ValueError("cron: required when the schedule is enabled")
        return self

    @property
    def timeout_ms(self) -> int:
        return self.timeout or DEFAULT_SCHEDULE_TIMEOUT_MS


class TargetDelivery(_Model):
    target: str | None = None
    targets: list[str] | None = None
    fields: dict[str, Any] | None = None

    def routes(self) -> list[str]:
        """Route names, fan-out list first (trimmed, de-duplicated in order; PixivFlow's
        targetRoutes); the first is the primary route, the one notifications go to."""
        listed = [n.strip() for n in (self.targets or []) if isinstance(n, str) and n.strip()]
        names = listed or ([self.target.strip()] if self.target and self.target.strip() else [])
        seen: list[str] = []
        for name in names:
            if name not in seen:
                seen.append(name)
        return seen


class TargetConfig(_Model):
    """One target (spec §6.1). Every selection key PixivFlow documents means what it means there;
    the rules themselves live in ``pixivflow.domain.selection`` (``criteria()`` hands them over)."""

    id: str = Field(pattern=ID_PATTERN)
    type: Literal["illustration", "novel"] = "illustration"
    mode: Literal["search", "ranking", "topic"] = "search"
    tag: str | None = None
    tagRelation: Literal["and", "or"] = "and"
    searchTarget: str = "partial_match_for_tags"
    sort: Literal["date_desc", "date_asc", "popular_desc"] = "date_desc"
    startDate: str | None = None
    endDate: str | None = None
    minBookmarks: int | None = Field(default=None, ge=0)
    excludeAI: bool = False
    aiMetadataCheck: bool = False
    r18: bool = False
    maxPageCount: int | None = Field(default=None, ge=0)
    random: bool = False
    topic: str | None = None
    date: str | None = None  # mode topic: the one-day window (YYYY-MM-DD, TODAY or YESTERDAY)
    rankingMode: str = "day"
    rankingDate: str | None = None
    filterTag: str | None = None
    illustId: int | str | None = None
    novelId: int | str | None = None
    seriesId: int | str | None = None
    userId: int | str | None = None
    limit: int | None = Field(default=None, ge=1)
    candidateScanLimit: int | None = None
    languageFilter: str | None = None
    storageMode: Literal["persistent", "cache"] = "persistent"
    delivery: TargetDelivery | None = None

    @field_validator("startDate", "endDate")
    @classmethod
    def _day(cls, value: str | None) -> str | None:
        if value is not None and not is_day(value):
            raise ValueError(f"{value!r} is not a date (YYYY-MM-DD)")
        return value

    @field_validator("date", "rankingDate")
    @classmethod
    def _relative_day(cls, value: str | None) -> str | None:
        if value is not None and not (is_day(value) or value in RELATIVE_DAYS):
            raise ValueError(f"{value!r} is not a date (YYYY-MM-DD, TODAY or YESTERDAY)")
        return value

    @field_validator("illustId", "novelId", "userId")
    @classmethod
    def _numeric_id(cls, value: int | str | None) -> int | str | None:
        if value is None:
            return None
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit() or int(text) <= 0:
            raise ValueError(f"{value!r} is not a Pixiv id (a positive integer)")
        return text

    @model_validator(mode="after")
    def _needs_query(self) -> "TargetConfig":
        if self.seriesId is not None:
            raise ValueError("seriesId: novel series targets are not supported (pin one novel with novelId, or search by tag)")
        if self.languageFilter is not None:
            raise ValueError("languageFilter: not supported (novel language detection needs each novel's full text)")
        if self.type == "novel" and self.illustId is not None:
            raise ValueError("illustId: only for illustration targets (a novel target pins novelId)")
        if self.type != "novel" and self.novelId is not None:
            raise ValueError("novelId: only for novel targets (an illustration target pins illustId)")
        if self.searchTarget not in search_targets(self.type):
            raise ValueError(f"searchTarget: must be one of {', '.join(search_targets(self.type))} for a {self.type} target")
        if self.rankingMode not in ranking_modes(self.type) + _NOVEL_RANKING_ALIASES * (self.type == "novel"):
            raise ValueError(f"rankingMode: {self.rankingMode!r} is not a {self.type} ranking ({', '.join(ranking_modes(self.type))})")
        if self.mode == "topic" and not (self.topic or self.tag):
            raise ValueError("topic: required when mode is topic")
        if self.mode == "search" and not (self.tag or self.pinned_id or self.userId):
            raise ValueError("tag: required for mode search unless a work id (illustId/novelId) or userId is given")
        return self

    def routes(self) -> list[str]:
        """The delivery channel: route names when storageMode is cache, else none (download-only)."""
        if self.storageMode != "cache" or self.delivery is None:
            return []
        return self.delivery.routes()

    @property
    def pinned_id(self) -> str | None:
        """The pinned work (spec §5.3 order: novelId for a novel, illustId otherwise)."""
        value = self.novelId if self.type == "novel" else self.illustId
        return None if value is None else str(value)

    @property
    def single_work(self) -> bool:
        return is_single_work_cell(self.model_dump())

    @property
    def effective_limit(self) -> int:
        if self.limit is not None:
            return self.limit
        return 1 if self.mode == "topic" else 10

    def criteria(self) -> Criteria:
        ranking_mode = self.rankingMode
        if self.type == "novel" and ranking_mode in _NOVEL_RANKING_ALIASES:
            ranking_mode = "week"  # PixivFlow maps the illustration-only weekly lists this way
        return Criteria(
            work_type=self.type, mode=self.mode, tag=self.tag, tag_relation=self.tagRelation,
            sort=self.sort, search_target=self.searchTarget, start_date=self.startDate, end_date=self.endDate,
            min_bookmarks=self.minBookmarks, exclude_ai=self.excludeAI, r18=self.r18,
            max_page_count=self.maxPageCount or None, ranking_mode=ranking_mode, ranking_date=self.rankingDate,
            filter_tag=self.filterTag if self.mode == "ranking" else None, topic=self.topic, topic_date=self.date,
            user_id=None if self.userId is None else str(self.userId), pinned_id=self.pinned_id,
            random=self.random, limit=self.effective_limit,
        )


_NOVEL_RANKING_ALIASES = ("week_original", "week_rookie")


# -- delivery routes (DESIGN §7, §12; pixivflow-delivery note §1) -------------------------------
#
# Two families share ``delivery.targets``: the project's own JSON route keyed ``kind: webhook``
# (DESIGN §12, unchanged) and PixivFlow's routes keyed ``type`` (``httpMultipart``, ``webhook``),
# so an existing PixivFlow config loads as it is. A route declares one key or the other. Secrets
# are ``${VAR}`` references resolved at send time, so a URL holding one is checked after
# expansion, not here.

ROUTE_TYPES = ("httpMultipart", "webhook")
_SECRET_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
# Keys PixivFlow still parses but no longer evaluates (note §1.2): accepted, warned about once.
DEPRECATED_ROUTE_KEYS = ("success", "retryDelayMs")


def _http_url(value: str, *, allow_refs: bool) -> str:
    if allow_refs and _SECRET_REF.search(value or ""):
        return value  # validated once expanded, at send time
    if not re.match(r"^https?://[^\s]+$", value or ""):
        raise ValueError("must be an http(s) URL" + (" or contain a ${VAR} reference" if allow_refs else ""))
    return value


class WebhookRoute(_Model):
    """Our own JSON route (``kind: webhook``): POST JSON + ``Idempotency-Key`` (DESIGN §12)."""

    kind: Literal["webhook"] = "webhook"
    url: str
    token: str | None = None  # local runs only; deployed routes use tokenParameter
    tokenParameter: str | None = None
    ack: AckHints | None = None
    # Below the deliver function's 60 s timeout and the 120 s outbox lease, so one row can never
    # be sent by two workers at once because a request outlived its claim.
    timeoutMs: int = Field(default=30_000, ge=100, le=60_000)
    maxAttempts: int = Field(default=12, ge=1, le=100)

    @property
    def route_type(self) -> str:
        return "kind:webhook"

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, allow_refs=False)


FieldValue = str | int | float | bool | list[str | int | float | bool]


class _PixivFlowRoute(_Model):
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    # PixivFlow's fixed 5-minute abort would outlive the 120 s outbox claim: cap it at 60 s.
    timeoutMs: int = Field(default=30_000, ge=100, le=60_000)
    maxAttempts: int = Field(default=12, ge=1, le=100)  # the outbox row's attempt budget
    capabilities: dict[str, Any] | None = None
    # Deprecated by PixivFlow (note §1.2): parsed, never evaluated.
    success: Any = None
    retryDelayMs: int | None = Field(default=None, ge=0)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, allow_refs=True)

    def deprecated_keys(self) -> list[str]:
        return [k for k in DEPRECATED_ROUTE_KEYS if k in self.model_fields_set]


class HttpMultipartRoute(_PixivFlowRoute):
    """PixivFlow's submission route (note §1.2, §2.2): multipart files + templated form fields."""

    type: Literal["httpMultipart"]
    method: Literal["POST", "PUT"] = "POST"
    fileField: str = Field(default="files", min_length=1)
    previewFileField: str = Field(default="previews", min_length=1)
    fields: dict[str, FieldValue] = Field(default_factory=dict)
    arrayFormat: Literal["comma", "repeat", "json"] = "comma"
    autoIdempotencyKey: bool = True
    notificationUrl: str | None = None
    refetchOutcomeUrl: str | None = None
    scheduleOutcomeUrl: str | None = None
    readinessUrl: str | None = None
    ack: AckHints | None = None

    @property
    def route_type(self) -> str:
        return "httpMultipart"

    @field_validator("notificationUrl", "refetchOutcomeUrl", "scheduleOutcomeUrl", "readinessUrl")
    @classmethod
    def _optional_url(cls, value: str | None) -> str | None:
        return None if value is None or not value.strip() else _http_url(value.strip(), allow_refs=True)


class GatewayWebhookRoute(_PixivFlowRoute):
    """PixivFlow's generic messaging-gateway route (``type: webhook``; note §1.3, §2.5)."""

    type: Literal["webhook"]
    token: str | None = None
    signingSecret: str | None = None
    mediaTransport: Literal["reference", "base64"] = "reference"
    maxInlineBytes: int | None = Field(default=None, ge=1)
    pairingUrl: str | None = None
    pairingAllowRedirects: bool = False

    @property
    def route_type(self) -> str:
        return "webhook"


def _route_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        return "type:" + value["type"] if "type" in value else "kind"
    if isinstance(value, BaseModel):
        return "type:" + value.type if hasattr(value, "type") else "kind"
    return None


Route = Annotated[
    Union[
        Annotated[WebhookRoute, Tag("kind")],
        Annotated[HttpMultipartRoute, Tag("type:httpMultipart")],
        Annotated[GatewayWebhookRoute, Tag("type:webhook")],
    ],
    Discriminator(_route_tag),
]
_ROUTE_TAGS = frozenset({"kind", "type:httpMultipart", "type:webhook"})


class DeliveryConfig(_Model):
    targets: dict[str, Route] = Field(default_factory=dict)
    deleteAfterDelivery: bool = True
    outboxRetryBaseMs: int = Field(default=30_000, ge=0)
    outboxRetryMaxMs: int = Field(default=21_600_000, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _route_keys(cls, data: Any) -> Any:
        """``type`` (PixivFlow's) or ``kind`` (ours), never both; an unknown type is refused."""
        routes = data.get("targets") if isinstance(data, dict) else None
        if not isinstance(routes, dict):
            return data
        for name, route in routes.items():
            if not isinstance(route, dict):
                continue
            if "type" in route and "kind" in route:
                raise ValueError(f"targets.{name}: declares both type ({route['type']!r}) and kind "
                                 f"({route['kind']!r}); a route is either PixivFlow's (type) or this project's (kind)")
            if "type" in route and route["type"] not in ROUTE_TYPES:
                raise ValueError(f"targets.{name}.type: unsupported route type {route['type']!r}; "
                                 f"expected one of {', '.join(ROUTE_TYPES)}")
        return data

    @field_validator("targets")
    @classmethod
    def _names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not _ID_RE.match(name):
                raise ValueError(f"route name {name!r} must match {ID_PATTERN}")
        return value

    @model_validator(mode="after")
    def _backoff(self) -> "DeliveryConfig":
        if self.outboxRetryMaxMs < self.outboxRetryBaseMs:
            raise ValueError("outboxRetryMaxMs: must be >= outboxRetryBaseMs")
        return self


def _base_url(value: str | None) -> str | None:
    if value is None:
        return None
    if not re.match(r"^https?://[^/?#\s]+(/[^?#\s]*)?$", value):
        raise ValueError("must be an http(s) base URL without query or fragment")
    return value.rstrip("/")


class SourceBaseUrls(_Model):
    """Where the Pixiv source sends its requests (DESIGN §12): each key optional, the real host by default."""

    oauth: str | None = None
    api: str | None = None
    image: str | None = None

    @field_validator("oauth", "api", "image")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        return _base_url(value)


class SourceConfig(_Model):
    kind: Literal["catalog", "pixiv"] = "catalog"
    path: str | None = None
    pageSize: int = Field(default=30, ge=1, le=500)
    baseUrls: SourceBaseUrls | None = None  # pixiv only: the local fake, or a test's loopback server

    @model_validator(mode="after")
    def _path(self) -> "SourceConfig":
        if self.kind == "catalog" and not self.path:
            raise ValueError("path: required for a catalog source")
        return self


class PixivConfig(_Model):
    """PixivFlow's own ``pixiv`` block (../shared/notes/pixiv-app-api.md §5).

    ``refreshToken`` is a secret: write it as a ``${VAR}`` reference (environment, then SSM below
    ``RouteSecretsPath``; DESIGN §7), or set ``PIXIV_REFRESH_TOKEN``. It is resolved when the
    first Pixiv request needs it, never at load time, and never logged.
    """

    refreshToken: str | None = Field(default=None, repr=False)
    accountId: str = Field(default="default", pattern=ID_PATTERN)
    clientId: str | None = None
    clientSecret: str | None = Field(default=None, repr=False)
    userAgent: str | None = None
    deviceToken: str | None = None  # PixivFlow sends "pixiv"; the refresh grant does not need it


class ProxyConfig(_Model):
    enabled: bool = False
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    protocol: Literal["http", "https", "socks4", "socks5"] = "http"
    username: str | None = None
    password: str | None = Field(default=None, repr=False)  # may be a ${VAR} reference

    @model_validator(mode="after")
    def _host(self) -> "ProxyConfig":
        if self.enabled and not (self.host and self.port):
            raise ValueError("host: host and port are required when the proxy is enabled")
        return self


class NetworkConfig(_Model):
    """PixivFlow's ``network`` block, as the Pixiv source honours it.

    ``retries`` is the number of quick retries of a 5xx answer or a timeout (after 1 s, 2 s, ...);
    ``requestPacingMs`` the least time between two App API requests of one container (plus up
    to 25 % jitter). ``retryDelay`` is accepted for compatibility; the quick-retry steps are fixed.
    """

    timeoutMs: int = Field(default=30_000, ge=1000, le=120_000)
    retries: int = Field(default=2, ge=0, le=5)
    retryDelay: int | None = None
    requestPacingMs: int = Field(default=1000, ge=0, le=60_000)
    proxy: ProxyConfig | None = None


class TriggerConfig(_Model):
    graceMinutes: int = Field(default=90, ge=1)


class SchedulerRuntimeConfig(_Model):
    mode: Literal["internal", "external"] = "external"
    # Malformed budgets never reach here: ``_soften`` warns and drops them (spec §1.1, §7.2).
    queuedTimeoutMs: float | int | None = None
    stallTimeoutMs: float | int | None = None
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)

    @property
    def queued_timeout_ms(self) -> int:
        return _budget(self.queuedTimeoutMs, DEFAULT_QUEUED_TIMEOUT_MS)

    @property
    def stall_timeout_ms(self) -> int:
        return _budget(self.stallTimeoutMs, DEFAULT_STALL_TIMEOUT_MS)


def _budget(value: Any, default: int) -> int:
    """A liveness budget is used only when finite and >= 60 s (truncated); otherwise the default."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if value != value or value in (float("inf"), float("-inf")) or value < STALL_MIN_TIMEOUT_MS:
        return default
    return int(value)


class DownloadConfig(_Model):
    candidateScanLimit: int | None = None
    requestDelay: int = Field(default=500, ge=0, le=60_000)  # ms between two search pages (PixivFlow)
    # Lifetime of the presigned GET URL a delivery payload carries per stored file. Bounded by
    # SigV4 (7 days) and, in Lambda, by the role session that signs it (a few hours).
    assetUrlTtlSeconds: int = Field(default=43_200, ge=60, le=604_800)


class JobsConfig(_Model):
    """Workflow Protocol v1 (spec §12). ``callbackAllowHosts`` lists callback hosts exempt from the
    HTTPS-only and public-address rules (local development only: a loopback receiver)."""

    callbackAllowHosts: list[str] = Field(default_factory=list)

    @field_validator("callbackAllowHosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        hosts = []
        for host in value:
            if not isinstance(host, str) or not host.strip() or "/" in host:
                raise ValueError(f"{host!r} is not a host name")
            hosts.append(host.strip().lower().rstrip("."))
        return hosts


class PixivFlowConfig(_Model):
    _warnings: tuple[str, ...] = PrivateAttr(default=())
    schedules: list[ScheduleConfig] = Field(default_factory=list)
    targets: list[TargetConfig] = Field(default_factory=list)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    # Absent source + a `pixiv` block = the Pixiv source (a PixivFlow config moves over unchanged).
    source: SourceConfig
    pixiv: PixivConfig | None = None
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    schedulerRuntime: SchedulerRuntimeConfig = Field(default_factory=SchedulerRuntimeConfig)
    download: DownloadConfig = Field(default_factory=DownloadConfig)
    jobs: JobsConfig = Field(default_factory=JobsConfig)

    @model_validator(mode="before")
    @classmethod
    def _pixiv_source(cls, data: Any) -> Any:
        """A PixivFlow config has a ``pixiv`` block and no ``source``: that IS the Pixiv source."""
        if isinstance(data, dict) and data.get("source") is None and isinstance(data.get("pixiv"), dict):
            return {**data, "source": {"kind": "pixiv"}}
        return data

    @model_validator(mode="after")
    def _references(self) -> "PixivFlowConfig":
        _unique("schedules", [s.id for s in self.schedules])
        _unique("targets", [t.id for t in self.targets])
        target_ids = {t.id for t in self.targets}
        for i, schedule in enumerate(self.schedules):
            for ref in schedule.targetIds or []:
                if ref not in target_ids:
                    raise ValueError(f"schedules[{i}].targetIds: unknown target {ref!r}")
            count = len(schedule.targetIds) if schedule.targetIds else len(self.targets)
            if count > MAX_TARGETS_PER_SCHEDULE:
                raise ValueError(
                    f"schedules[{i}].targetIds: {count} targets; at most {MAX_TARGETS_PER_SCHEDULE} per schedule"
                )
        for i, target in enumerate(self.targets):
            routes = target.delivery.routes() if target.delivery else []
            if target.storageMode == "cache" and not routes:
                raise ValueError(f"targets[{i}].delivery: storageMode cache needs a delivery route")
            if len(routes) > MAX_ROUTES_PER_TARGET:
                raise ValueError(f"targets[{i}].delivery: at most {MAX_ROUTES_PER_TARGET} routes per target")
            for name in routes:
                if name not in self.delivery.targets:
                    raise ValueError(f"targets[{i}].delivery: unknown route {name!r}")
        return self

    @property
    def warnings(self) -> tuple[str, ...]:
        """What loading warned about (``<field path>: <what was used instead>``), in document order."""
        return self._warnings

    # -- lookups ---------------------------------------------------------------
    def schedule(self, schedule_id: str) -> ScheduleConfig | None:
        return next((s for s in self.schedules if s.id == schedule_id), None)

    def target(self, target_id: str) -> TargetConfig | None:
        return next((t for t in self.targets if t.id == target_id), None)

    def targets_for(self, schedule: ScheduleConfig) -> list[TargetConfig]:
        if schedule.targetIds:
            return [t for t in (self.target(i) for i in schedule.targetIds) if t is not None]
        return list(self.targets)

    def route(self, name: str) -> WebhookRoute | HttpMultipartRoute | GatewayWebhookRoute | None:
        return self.delivery.targets.get(name)

    def _ignored_keys(self) -> list[str]:
        """What the load accepted but will not act on (deprecated PixivFlow route keys, TelePress)."""
        out = []
        for name, route in self.delivery.targets.items():
            for key in getattr(route, "deprecated_keys", lambda: [])():
                out.append(f"delivery.targets.{name}.{key}: deprecated by PixivFlow; accepted and ignored"
                           + (" (maxAttempts is the outbox attempt budget)" if key == "retryDelayMs" else ""))
        for i, target in enumerate(self.targets):
            extra = target.delivery.model_extra if target.delivery is not None else None
            if extra and "richNovelPreview" in extra:
                out.append(f"targets[{i}].delivery.richNovelPreview: TelePress publishing is not supported; ignored")
        return out


def _unique(block: str, ids: list[str]) -> None:
    seen: set[str] = set()
    for i, value in enumerate(ids):
        if value in seen:
            raise ValueError(f"{block}[{i}].id: duplicate id {value!r}")
        seen.add(value)


def _format_error(exc: ValidationError) -> str:
    return "invalid configuration: " + "; ".join(_error_lines(exc))


def _error_lines(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        path = ""
        loc = tuple(err.get("loc", ()))
        if len(loc) > 3 and loc[:2] == ("delivery", "targets") and loc[3] in _ROUTE_TAGS:
            loc = loc[:3] + loc[4:]  # the union member's tag is not a field of the document
        for part in loc:
            if isinstance(part, int):
                path += f"[{part}]"
            else:
                path += ("." if path else "") + str(part)
        msg = err.get("msg", "invalid")
        msg = msg.removeprefix("Value error, ")
        # A model-level rule names its field first ("cron: required ..."): fold it into the path.
        match = re.match(r"^([A-Za-z_][\w\[\]-]*(?:\.[A-Za-z_][\w\[\]-]*)*): (.*)$", msg, re.S)
        if match and path:
            path, msg = f"{path}.{match.group(1)}", match.group(2)
        lines.append(f"{path}: {msg}" if path else msg)
    return lines


# -- warn and default -----------------------------------------------------------------------------
#
# Exactly these values are repaired with a warning instead of failing the whole config (spec §1.1,
# §6.1, §7.2): the two liveness budgets (a non-integer or sub-minute budget falls back to its
# default) and the candidate scan limits (clamped to 1..100; a non-integer one is ignored). Any
# other bad value is a fatal ConfigError naming its field (DESIGN §7).

_BUDGETS = (("queuedTimeoutMs", DEFAULT_QUEUED_TIMEOUT_MS), ("stallTimeoutMs", DEFAULT_STALL_TIMEOUT_MS))
LIMIT_WARN_ABOVE = 1000
# PixivFlow target keys this deployment does not act on; they change no selection, so they are
# accepted with a warning (seriesId and languageFilter do change what is selected: fatal).
IGNORED_TARGET_KEYS = ("noMatchPolicy", "topicDiscovery", "candidateCollection", "languageCandidateLimit",
                       "strictLanguageFilter", "detectLanguage", "restrict")


def _integral(value: Any) -> int | None:
    """The value as an int when it is a finite whole number (``3`` or ``3.0``), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        return None
    return int(value)


def _soften_scan_limit(block: dict, path: str, fallback: str, warnings: list[str]) -> None:
    if block.get("candidateScanLimit") is None:
        return
    raw = block["candidateScanLimit"]
    value = _integral(raw)
    if value is None:
        warnings.append(f"{path}.candidateScanLimit: {raw!r} is not an integer; ignored ({fallback} is used)")
        block.pop("candidateScanLimit")
    elif value < MIN_SCAN_LIMIT:
        warnings.append(f"{path}.candidateScanLimit: {raw!r} is below {MIN_SCAN_LIMIT}; {MIN_SCAN_LIMIT} is used")
        block["candidateScanLimit"] = MIN_SCAN_LIMIT
    elif value > MAX_SCAN_LIMIT:
        warnings.append(f"{path}.candidateScanLimit: {raw!r} is above {MAX_SCAN_LIMIT}; {MAX_SCAN_LIMIT} is used")
        block["candidateScanLimit"] = MAX_SCAN_LIMIT
    else:
        block["candidateScanLimit"] = value


def _soften(data: dict) -> tuple[dict, list[str]]:
    """A copy of ``data`` with the warn-and-default values repaired, and the warnings."""
    data = copy.deepcopy(data)
    warnings: list[str] = []
    runtime = data.get("schedulerRuntime")
    if isinstance(runtime, dict):
        for name, default in _BUDGETS:
            raw = runtime.get(name)
            if raw is None:
                continue
            value = _integral(raw)
            if value is None or value < STALL_MIN_TIMEOUT_MS:
                why = "is below the 60000 ms floor" if value is not None else "is not an integer number of milliseconds"
                warnings.append(f"schedulerRuntime.{name}: {raw!r} {why}; the default {default} is used")
                runtime.pop(name)
            else:
                runtime[name] = value
    download = data.get("download")
    if isinstance(download, dict):
        _soften_scan_limit(download, "download", f"the default {DEFAULT_SCAN_LIMIT}", warnings)
    targets = data.get("targets")
    if isinstance(targets, list):
        for i, target in enumerate(targets):
            if not isinstance(target, dict):
                continue
            _soften_scan_limit(target, f"targets[{i}]", "download.candidateScanLimit or the default", warnings)
            limit = _integral(target.get("limit"))
            if limit is not None and limit > LIMIT_WARN_ABOVE:
                warnings.append(f"targets[{i}].limit: {limit} is above {LIMIT_WARN_ABOVE}; one run may page and scan for a long time")
            for key in IGNORED_TARGET_KEYS:
                if key in target:
                    warnings.append(f"targets[{i}].{key}: not supported by this deployment; ignored")
    return data, warnings



def _semantic_warnings(config: PixivFlowConfig) -> list[str]:
    """Valid values that can never select anything: worth a warning, not a refusal."""
    warnings: list[str] = []
    for i, target in enumerate(config.targets):
        if target.startDate and target.endDate and target.startDate > target.endDate:
            warnings.append(f"targets[{i}].startDate: {target.startDate} is after endDate {target.endDate}; "
                            "the target can never select a work")
    return warnings


def strip_comments(data: Any) -> Any:
    """Drop every ``_``-prefixed key at any depth: PixivFlow configs use them as comments."""
    if isinstance(data, dict):
        return {k: strip_comments(v) for k, v in data.items() if not (isinstance(k, str) and k.startswith("_"))}
    if isinstance(data, list):
        return [strip_comments(v) for v in data]
    return data


def parse_config(data: Any, *, base_dir: Path | None = None) -> PixivFlowConfig:
    """Validate a config document. Relative catalogue paths resolve against ``base_dir``.

    The warn-and-default findings are on ``config.warnings`` (and on a raised ConfigError's
    ``warnings``, so ``pixivflow config check`` shows both)."""
    if not isinstance(data, dict):
        raise ConfigError("invalid configuration: the document must be a mapping")
    data, warnings = _soften(data)
    try:
        config = PixivFlowConfig.model_validate(strip_comments(data))
    except ValidationError as exc:
        raise ConfigError(_format_error(exc), warnings=tuple(warnings), errors=tuple(_error_lines(exc))) from None
    if base_dir is not None and config.source.path and not os.path.isabs(config.source.path):
        source = config.source.model_copy(update={"path": str((base_dir / config.source.path).resolve())})
        config = config.model_copy(update={"source": source})
    config._warnings = tuple(warnings + _semantic_warnings(config) + config._ignored_keys())
    return config


def parse_text(text: str, *, base_dir: Path | None = None) -> PixivFlowConfig:
    try:
        data = yaml.safe_load(text)  # JSON is YAML too
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid configuration: not YAML/JSON ({exc})") from None
    return parse_config(data, base_dir=base_dir)


def load_config(location: str | None = None, *, ssm_reader=None) -> PixivFlowConfig:
    """Load from a path or ``ssm:<name>`` (``ssm_reader(name) -> str`` is injected by the runtime)."""
    location = location or os.environ.get("PIXIVFLOW_CONFIG")
    if not location:
        raise ConfigError("PIXIVFLOW_CONFIG is not set (a file path or ssm:<parameter name>)")
    if location.startswith("ssm:"):
        if ssm_reader is None:
            raise ConfigError("PIXIVFLOW_CONFIG names an SSM parameter but no SSM reader is available")
        return parse_text(ssm_reader(location[4:]))
    path = Path(location)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read PIXIVFLOW_CONFIG {location!r}: {exc.strerror}") from None
    return parse_text(text, base_dir=path.resolve().parent)
