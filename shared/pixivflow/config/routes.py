"""Delivery routes: the ``delivery`` block (``docs/explanation/delivery.md``).

Each route under ``delivery.targets`` is validated by the model of its kind, and the kinds are
declared in ``pixivflow.route_kinds``; this module holds what the kinds' models share and the
block around them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from pydantic import Field, SerializeAsAny, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails

from .base import _ID_RE, ID_PATTERN, _http_url, _Model

if TYPE_CHECKING:
    from ..domain.ack import DeliveryAck
    from ..domain.route_io import DeliveryResponse
    from ..route_kinds import RouteKind

# Two families share ``delivery.targets``: the project's own JSON route keyed ``kind: webhook``
# and PixivFlow's routes keyed ``type`` (``httpMultipart``, ``webhook``, ``telegram``), so an
# existing PixivFlow config loads as it is. A route declares one key or the other. Secrets
# are ``${VAR}`` references resolved at send time, so a URL holding one is checked after
# expansion, not here.

# Keys PixivFlow still parses but no longer evaluates: accepted, warned about once.
# On httpMultipart and telegram routes ``maxAttempts`` is one of them: PixivFlow's outbox owns the
# retries (12 attempts, outboxRetryBaseMs/outboxRetryMaxMs), and honouring a published config's
# ``maxAttempts: 3`` would dead-letter a submission after about 1.5 minutes of a 5xx outage.
# Our own ``kind: webhook`` route keeps its maxAttempts meaning.
DEPRECATED_ROUTE_KEYS = ("success", "maxAttempts", "retryDelayMs")
PREVIEW_MAX_TIMEOUT_MS = 30_000
OUTBOX_ATTEMPTS = 12  # PixivFlow's outbox budget: every PixivFlow route's rows get it


class RouteModel(_Model):
    """What every route is asked, whatever its kind (``ports.RouteSettings``): what it can do comes
    from its kind, narrowed by the route's own ``capabilities`` block where it has one."""

    @property
    def route_kind(self) -> RouteKind:
        from ..route_kinds import kind_of

        return kind_of(self)

    @property
    def route_type(self) -> str:
        return self.route_kind.name

    @property
    def attempt_budget(self) -> int:
        return OUTBOX_ATTEMPTS

    def capable(self, name: str) -> bool:
        """False only where the route's ``capabilities`` block says ``name: false``: a route may
        narrow what its kind can do, never widen it."""
        return True

    @property
    def carries_files(self) -> bool:
        return self.route_kind.carries_files and self.capable("file")

    @property
    def takes_previews(self) -> bool:
        return self.route_kind.takes_previews and self.capable("image")

    @property
    def renders_templates(self) -> bool:
        return self.route_kind.renders_templates

    @property
    def guarded_send(self) -> bool:
        return self.route_kind.review

    def parse_ack(self, response: DeliveryResponse) -> DeliveryAck:
        return self.route_kind.parse_ack(self, response)

    @property
    def readiness_url(self) -> str | None:
        """The URL whose 2xx says the route is ready (none: always ready)."""
        return None

    def notice_url(self, field: str) -> str | None:
        """The JSON endpoint named ``field`` (notificationUrl, refetchOutcomeUrl, scheduleOutcomeUrl)."""
        return None

    def carries_refetch_id(self, target_fields: Mapping[str, Any]) -> bool:
        """Does a manual job's submission reach the consumer with its request id, so its outcome can
        be correlated downstream?"""
        return False

    def deprecated_keys(self) -> list[str]:
        return []


FieldValue = str | int | float | bool | list[str | int | float | bool]


class PixivFlowRouteBase(RouteModel):
    """What PixivFlow's route types share."""

    headers: dict[str, str] = Field(default_factory=dict)
    # PixivFlow's fixed 5-minute abort would outlive the 120 s outbox claim: cap it at 60 s.
    timeoutMs: int = Field(default=30_000, ge=100, le=60_000)
    maxAttempts: int = Field(default=OUTBOX_ATTEMPTS, ge=1, le=100)
    capabilities: dict[str, Any] | None = None
    # Deprecated by PixivFlow: parsed, never evaluated.
    success: Any = None
    retryDelayMs: int | None = Field(default=None, ge=0)
    # Which of DEPRECATED_ROUTE_KEYS this family ignores (maxAttempts only where the outbox owns it).
    IGNORED_KEYS: ClassVar[tuple[str, ...]] = ("success", "maxAttempts", "retryDelayMs")

    @property
    def attempt_budget(self) -> int:
        """httpMultipart and telegram rows always get the outbox's own budget."""
        return self.maxAttempts if "maxAttempts" not in self.IGNORED_KEYS else OUTBOX_ATTEMPTS

    def deprecated_keys(self) -> list[str]:
        return [k for k in DEPRECATED_ROUTE_KEYS if k in self.model_fields_set and k in self.IGNORED_KEYS]

    def capable(self, name: str) -> bool:
        return (self.capabilities or {}).get(name) is not False


class PixivFlowUrlRoute(PixivFlowRouteBase):
    """A PixivFlow route posting to one ``url`` (``${VAR}`` references allowed)."""

    url: str

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, allow_refs=True)


class RichNovelPreview(_Model):
    """A novel target's TelePress preview (``targets[].delivery.richNovelPreview``): a novel
    with inline images is published to TelePress first and the page URL rides in ``field``."""

    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    timeoutMs: int = Field(default=60_000, ge=100, le=300_000)  # PixivFlow's default and its bound
    field: str = Field(default="novel_preview_url", min_length=1)

    @property
    def effective_timeout_ms(self) -> int:
        """The preview and the submission share one deliver invocation (60 s) and one 120 s outbox
        claim, so the TelePress call may take at most 30 s here; a longer value is warned about."""
        return min(self.timeoutMs, PREVIEW_MAX_TIMEOUT_MS)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, allow_refs=False)  # PixivFlow: no ${VAR} exemption for this URL


class DeliveryConfig(_Model):
    targets: dict[str, SerializeAsAny[RouteModel]] = Field(default_factory=dict)
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
            types = route_kinds().values_of("type")
            if "type" in route and route["type"] not in types:
                raise ValueError(f"targets.{name}.type: unsupported route type {route['type']!r}; "
                                 f"expected one of {', '.join(types)}")
        return data

    @field_validator("targets", mode="before")
    @classmethod
    def _by_kind(cls, value: Any) -> Any:
        """Each route by its kind's model; every route's findings at once, under its name."""
        if not isinstance(value, dict):
            return value
        routes, found = {}, []
        for name, block in value.items():
            try:
                routes[name] = route_kinds().validate(block)
            except ValidationError as exc:
                found += [InitErrorDetails(type=e["type"], loc=(name, *e["loc"]), input=e["input"], ctx=e.get("ctx") or {})
                          for e in exc.errors(include_url=False)]
        if found:
            raise ValidationError.from_exception_data(cls.__name__, found)
        return routes

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


def route_kinds() -> Any:
    """The kinds' registry, imported when a route is first validated (it imports this module)."""
    from .. import route_kinds as registry

    return registry
