"""The sender of the ``kind: webhook`` route: POST JSON with an Idempotency-Key header."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..domain.route_io import DeliveryRequest, DeliveryResponse
from .http_pools import OperatorPool

if TYPE_CHECKING:  # imported by the first request: a faster cold start
    import httpx


class WebhookChannel:
    """Sends deliveries to ``kind: webhook`` routes. Transport errors raise httpx errors. Its
    connections come from the operator-routes pool (``adapters.http_pools``), shared with the
    PixivFlow routes of the same channel; without one it makes its own."""

    def __init__(self, token_for: Callable[[Any], str | None], *,
                 transport: httpx.BaseTransport | None = None, pool: OperatorPool | None = None) -> None:
        self._token_for = token_for
        self._pool = pool if pool is not None else OperatorPool(transport)

    def deliver(self, request: DeliveryRequest, config: Any) -> DeliveryResponse:
        return self.send(config, request.body, request.idempotency_key)

    def send(self, config: Any, payload: Mapping[str, Any], idempotency_key: str) -> DeliveryResponse:
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
        token = self._token_for(config)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        response = self._pool.client(config.timeoutMs / 1000).post(config.url, content=json.dumps(payload), headers=headers)
        text = response.text
        try:
            body: Any = response.json()
        except (json.JSONDecodeError, ValueError):
            body = text
        return DeliveryResponse(status=response.status_code, body=body, text=text[:2000])

    def close(self) -> None:
        self._pool.close()
