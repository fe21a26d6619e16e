"""``type: webhook``: PixivFlow's messaging gateway. One platform-neutral JSON message document
whose media travel by reference (a time-limited link to the stored file) or inline; the gateway
answers with its own status words. Its ``maxAttempts`` is its rows' budget."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ..config.routes import PixivFlowUrlRoute
from ..domain.ack import DeliveryAck, parse_gateway_ack
from ..domain.route_io import DeliveryResponse
from .registry import RouteKind, RouteSender, SenderTools


class GatewayWebhookRoute(PixivFlowUrlRoute):
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


def _ack(route: GatewayWebhookRoute, response: DeliveryResponse) -> DeliveryAck:
    return parse_gateway_ack(response.status, response.body)


def _sender(tools: SenderTools) -> RouteSender:
    from ..adapters.routes.gateway import GatewaySender

    return GatewaySender(tools)


KIND = RouteKind(name="webhook", key="type", value="webhook", model=GatewayWebhookRoute, parse_ack=_ack,
                 sender=_sender, carries_files=True, renders_templates=True)
