"""``type: telegram``: PixivFlow's Telegram review route. Posts each work to a review chat through
the Bot API in several calls, with an approve/reject card, and records the review at a control
plane; the ledger guards every call so nothing is posted twice silently. Its rows get the outbox's
own attempt budget."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from ..config.base import _SECRET_REF, _http_url
from ..config.routes import PixivFlowRouteBase
from ..domain.ack import DeliveryAck
from ..domain.review import parse_review_ack
from ..domain.route_io import DeliveryResponse
from .registry import RouteKind, RouteSender, SenderTools

_BOT_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]{20,}$")  # PixivFlow's validator


class TelegramRoute(PixivFlowRouteBase):
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


def _ack(route: TelegramRoute, response: DeliveryResponse) -> DeliveryAck:
    return parse_review_ack(response.body)


def _sender(tools: SenderTools) -> RouteSender:
    from ..adapters.routes.telegram import TelegramReview

    return TelegramReview(tools.http, tools.lookup, tools.stored, tools.open, monotonic=tools.monotonic)


KIND = RouteKind(name="telegram", key="type", value="telegram", model=TelegramRoute, parse_ack=_ack, sender=_sender,
                 carries_files=True, takes_previews=True, renders_templates=True, review=True)
