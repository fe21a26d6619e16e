"""Delivery routes: the ``delivery`` block (DESIGN §7, §12; pixivflow-delivery note §1)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Discriminator, Field, Tag, field_validator, model_validator

from ..domain.ack import AckHints
from .base import _ID_RE, ID_PATTERN, _http_url, _Model

# -- delivery routes (DESIGN §7, §12; pixivflow-delivery note §1) -------------------------------
#
# Two families share ``delivery.targets``: the project's own JSON route keyed ``kind: webhook``
# (DESIGN §12, unchanged) and PixivFlow's routes keyed ``type`` (``httpMultipart``, ``webhook``),
# so an existing PixivFlow config loads as it is. A route declares one key or the other. Secrets
# are ``${VAR}`` references resolved at send time, so a URL holding one is checked after
# expansion, not here.

ROUTE_TYPES = ("httpMultipart", "webhook")
# Keys PixivFlow still parses but no longer evaluates (note §1.2): accepted, warned about once.
DEPRECATED_ROUTE_KEYS = ("success", "retryDelayMs")


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
