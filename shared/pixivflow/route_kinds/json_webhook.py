"""``kind: webhook``: this project's own JSON route. POST the intent as JSON with an
``Idempotency-Key``; the answer is the TelePost ACK envelope, read with the route's ``ack`` hints."""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import Field, field_validator

from ..config.base import _http_url
from ..config.routes import RouteModel
from ..domain.ack import AckHints, DeliveryAck, parse_delivery_ack
from ..domain.route_io import DeliveryResponse
from .registry import RouteKind, RouteSender, SenderTools


class WebhookRoute(RouteModel):
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
    def attempt_budget(self) -> int:
        """The outbox row's attempts: this route's own ``maxAttempts``."""
        return self.maxAttempts

    def carries_refetch_id(self, target_fields: Mapping[str, Any]) -> bool:
        return True  # the JSON body always carries ``refetch_request_id``

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, allow_refs=False)


def _ack(route: WebhookRoute, response: DeliveryResponse) -> DeliveryAck:
    return parse_delivery_ack(response.status, response.body, route.ack)


def _sender(tools: SenderTools) -> RouteSender:
    from ..adapters.webhook import WebhookChannel

    return WebhookChannel(tools.route_token, pool=tools.pool)


KIND = RouteKind(name="kind:webhook", key="kind", value="webhook", model=WebhookRoute, parse_ack=_ack, sender=_sender)
