"""Delivery routes: the ``delivery`` block (``docs/explanation/delivery.md``)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, Discriminator, Field, Tag, field_validator, model_validator

from ..domain.ack import AckHints
from .base import _ID_RE, _SECRET_REF, ID_PATTERN, _http_url, _Model

# -- delivery routes ------------------------------------------------------------------------------
#
# Two families share ``delivery.targets``: the project's own JSON route keyed ``kind: webhook``
# and PixivFlow's routes keyed ``type`` (``httpMultipart``, ``webhook``, ``telegram``), so an
# existing PixivFlow config loads as it is. A route declares one key or the other. Secrets
# are ``${VAR}`` references resolved at send time, so a URL holding one is checked after
# expansion, not here.

ROUTE_TYPES = ("httpMultipart", "webhook", "telegram")
# Keys PixivFlow still parses but no longer evaluates: accepted, warned about once.
# On httpMultipart and telegram routes ``maxAttempts`` is one of them: PixivFlow's outbox owns the
# retries (12 attempts, outboxRetryBaseMs/outboxRetryMaxMs), and honouring a published config's
# ``maxAttempts: 3`` would dead-letter a submission after about 1.5 minutes of a 5xx outage.
# Our own ``kind: webhook`` route keeps its maxAttempts meaning.
DEPRECATED_ROUTE_KEYS = ("success", "maxAttempts", "retryDelayMs")
PREVIEW_MAX_TIMEOUT_MS = 30_000
OUTBOX_ATTEMPTS = 12  # PixivFlow's outbox budget: every PixivFlow route's rows get it
_BOT_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]{20,}$")  # PixivFlow's validator


class WebhookRoute(_Model):
    """Our own JSON route (``kind: webhook``): POST JSON + ``Idempotency-Key``."""

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

    @property
    def attempt_budget(self) -> int:
        """The outbox row's attempts: this route's own ``maxAttempts``."""
        return self.maxAttempts

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, allow_refs=False)


FieldValue = str | int | float | bool | list[str | int | float | bool]


class _PixivFlowBase(_Model):
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


class _PixivFlowRoute(_PixivFlowBase):
    url: str

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, allow_refs=True)


class HttpMultipartRoute(_PixivFlowRoute):
    """PixivFlow's submission route: multipart files + templated form fields."""

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
    """PixivFlow's generic messaging-gateway route (``type: webhook``)."""

    type: Literal["webhook"]
    token: str | None = None
    signingSecret: str | None = None
    mediaTransport: Literal["reference", "base64"] = "reference"
    maxInlineBytes: int | None = Field(default=None, ge=1)
    pairingUrl: str | None = None
    pairingAllowRedirects: bool = False

    # The gateway route has no maxAttempts of its own in PixivFlow; ours is its budget.
    IGNORED_KEYS: ClassVar[tuple[str, ...]] = ("success", "retryDelayMs")

    @property
    def route_type(self) -> str:
        return "webhook"


class TelegramRoute(_PixivFlowBase):
    """PixivFlow's Telegram review route (``type: telegram``).

    Posts each work to a review chat through the Bot API, with an approve/reject control card,
    and records the review at a control plane, which publishes on approval. ``botToken``,
    ``controlPlaneUrl`` and ``controlPlaneToken`` may hold ``${VAR}`` references, expanded at
    send time; a literal bot token must look like one (PixivFlow's rule)."""

    type: Literal["telegram"]
    botId: str = Field(min_length=1)
    botToken: str = Field(min_length=1)
    chatId: str | int
    publishChatId: str | int
    publishThreadId: int | None = Field(default=None, ge=0)
    controlPlaneUrl: str
    controlPlaneToken: str = Field(min_length=1)
    caption: str | None = None
    reviewIdPrefix: str = Field(default="rv", pattern=r"^[A-Za-z0-9_-]{1,16}$")
    album: bool = True  # the oldest layout's switch; the block layout always groups

    @property
    def route_type(self) -> str:
        return "telegram"

    @field_validator("botToken")
    @classmethod
    def _token(cls, value: str) -> str:
        if _SECRET_REF.search(value) or _BOT_TOKEN.match(value):
            return value
        # Never echo the value: it may be a real token with a typo.
        raise ValueError("must be a Telegram bot token (<digits>:<20+ characters>) or contain a ${VAR} reference")

    @field_validator("chatId", "publishChatId")
    @classmethod
    def _chat(cls, value: str | int) -> str:
        text = str(value).strip()
        if isinstance(value, bool) or not text:
            raise ValueError("must be a chat id (a number or @channelname)")
        return text

    @field_validator("controlPlaneUrl")
    @classmethod
    def _control_plane(cls, value: str) -> str:
        return _http_url(value.rstrip("/"), allow_refs=True)


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
        Annotated[TelegramRoute, Tag("type:telegram")],
    ],
    Discriminator(_route_tag),
]
_ROUTE_TAGS = frozenset({"kind", "type:httpMultipart", "type:webhook", "type:telegram"})


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
