"""The webhook delivery route: POST JSON with an Idempotency-Key header (DESIGN §12)."""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

import httpx

from ..ports import DeliveryResponse
from .http_pools import operator_client


class WebhookChannel:
    """Sends deliveries to the routes of ``delivery.targets``. Transport errors raise httpx errors."""

    def __init__(self, routes: Callable[[str], Any], token_for: Callable[[Any], str | None], *, transport: httpx.BaseTransport | None = None) -> None:
        self._routes = routes
        self._token_for = token_for
        self._transport = transport

    def _client(self, timeout_s: float) -> httpx.Client:
        return operator_client(timeout_s, self._transport)  # the operator routes' one pool (adapters.http_pools)

    def send(self, route: str, payload: Mapping[str, Any], idempotency_key: str) -> DeliveryResponse:
        config = self._routes(route)
        if config is None:
            raise LookupError(f"unsupported delivery target {route!r}: the config does not configure it")
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
        token = self._token_for(config)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        response = self._client(config.timeoutMs / 1000).post(config.url, content=json.dumps(payload), headers=headers)
        text = response.text
        try:
            body: Any = response.json()
        except (json.JSONDecodeError, ValueError):
            body = text
        return DeliveryResponse(status=response.status_code, body=body, text=text[:2000])

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
