"""Delivery routes: the ``DeliveryChannel`` port for every route kind a config can declare.

* ``kind: webhook`` — this project's JSON route, unchanged (``adapters.webhook``);
* ``type: httpMultipart`` — PixivFlow's submission route (``multipart``);
* ``type: webhook`` — PixivFlow's messaging gateway (``gateway``);
* ``type: telegram`` — PixivFlow's Telegram review route (``telegram``).

The published configs' routes: docs/explanation/pixivflow-routes.md.

``${VAR}`` references in URLs, headers, ``token`` and ``signingSecret`` are expanded here, at
send time, through the injected lookup (env, then SSM below RouteSecretsPath). One attempt is
exactly one HTTP exchange; retrying belongs to the outbox.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ...domain.assets import media_assets
from ...domain.errors import ConfigError
from ...domain.templates import form_fields, template_variables
from ...ports import ArtifactStore
from ...domain.route_io import DeliveryRequest, DeliveryResponse
from ...domain.work import StoredFile
from ..secret_refs import Expander
from ..http_pools import OperatorPool
from ..webhook import WebhookChannel
from . import gateway, multipart, telepress
from .telegram import TelegramReview
from .http import Http, RouteTransportError, checked_url, expanded_headers

if TYPE_CHECKING:  # httpx itself loads with the first request: a function that never posts never imports it
    import httpx

READINESS_TIMEOUT_MS = 3_000  # PixivFlow's readiness probe budget
NOTICE_URL_FIELDS = ("notificationUrl", "refetchOutcomeUrl", "scheduleOutcomeUrl")


class MissingArtifacts(RuntimeError):
    """The bound work has no stored file to send: a retry would find none either."""


class RouteChannel:
    """Sends one delivery attempt, or one notice, on the wire format of its route."""

    def __init__(self, routes: Callable[[str], Any], *, lookup: Callable[[str], str | None],
                 route_token: Callable[[Any], str | None], artifacts: ArtifactStore, now_ms: Callable[[], int],
                 transport: httpx.BaseTransport | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._routes = routes
        self._lookup = lookup
        self._artifacts = artifacts
        self._now_ms = now_ms
        # One operator-routes pool for every route family of this channel (adapters.http_pools):
        # two routes on one host share its kept-alive connections; close() ends them all.
        self._pool = OperatorPool(transport)
        self._legacy = WebhookChannel(routes, route_token, pool=self._pool)
        self._http = Http(monotonic=monotonic, pool=self._pool)
        self._telegram = TelegramReview(self._http, lookup, self._stored, self._open, monotonic=monotonic)

    # -- the port ------------------------------------------------------------------------------
    def send(self, route: str, payload: Mapping[str, Any], idempotency_key: str) -> DeliveryResponse:
        return self._legacy.send(route, payload, idempotency_key)

    def ready(self, route: str) -> bool:
        """GET ``readinessUrl`` (3 s): any 2xx is ready; another answer or no answer defers."""
        config = self._routes(route)
        probe = getattr(config, "readinessUrl", None) if config is not None else None
        if not probe:
            return True
        expand = Expander(self._lookup, where=f"route {route} readinessUrl")
        url = checked_url(expand(probe), "readinessUrl", route)
        headers = expanded_headers(getattr(config, "headers", None), expand)
        try:
            answer = self._http.exchange("GET", url, headers=headers, content=None, timeout_ms=READINESS_TIMEOUT_MS,
                                         scrub=expand.scrub)
        except RouteTransportError:
            return False
        return 200 <= answer.status <= 299

    def deliver(self, request: DeliveryRequest) -> DeliveryResponse:
        config = self._config(request.route)
        kind = getattr(config, "route_type", "kind:webhook")
        if kind == "httpMultipart":
            return self._multipart(request, config)
        if kind == "webhook":
            return self._gateway(request, config)
        if kind == "telegram":
            return self._telegram.deliver(request, config)
        return self._legacy.send(request.route, request.body, request.idempotency_key)

    def post_json(self, route: str, url_field: str, body: Mapping[str, Any], idempotency_key: str) -> DeliveryResponse:
        """A notice to one of the route's JSON endpoints, with the route's headers (their auth)."""
        config = self._config(route)
        if url_field not in NOTICE_URL_FIELDS:
            raise ValueError(f"not a notice URL field: {url_field}")
        raw_url = getattr(config, url_field, None)
        if not raw_url:
            raise ConfigError(f"route {route} does not configure {url_field}")
        expand = Expander(self._lookup, where=f"route {route} {url_field}")
        url = checked_url(expand(raw_url), url_field, route)
        headers = {**expanded_headers(config.headers, expand), "Content-Type": "application/json"}
        raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return self._http.exchange("POST", url, headers=headers, content=raw, timeout_ms=config.timeoutMs,
                                   scrub=expand.scrub)

    def close(self) -> None:
        self._pool.close()

    # -- route kinds ---------------------------------------------------------------------------
    def _config(self, route: str) -> Any:
        config = self._routes(route)
        if config is None:
            raise LookupError(f"unsupported delivery target {route!r}: the config does not configure it")
        return config

    def _stored(self, request: DeliveryRequest) -> list[StoredFile]:
        files = list(request.files)
        if not files:
            raise MissingArtifacts(f"no stored files under {request.artifact_key}: nothing to deliver (invalid payload)")
        return files

    def _open(self, file: StoredFile) -> Iterator[bytes]:
        chunks = getattr(self._artifacts, "chunks", None)
        if chunks is not None:
            return chunks(file)
        return iter([self._artifacts.read(file)])

    def _multipart(self, request: DeliveryRequest, config: Any) -> DeliveryResponse:
        expand = Expander(self._lookup, where=f"route {request.route}")
        url = checked_url(expand(config.url), "url", request.route)
        headers = expanded_headers(config.headers, expand)
        context = {**dict(request.payload.get("context") or {}), "idempotencyKey": request.idempotency_key}
        fields = form_fields(config.fields, request.payload.get("fields"), template_variables(context),
                             array_format=config.arrayFormat, auto_idempotency_key=config.autoIdempotencyKey)
        stored = self._stored(request)
        files, previews = multipart.split_files(stored)
        if not files:
            raise MissingArtifacts(f"no deliverable file under {request.artifact_key} (invalid payload)")
        assets = media_assets(str(context.get("pixivId") or ""), stored)
        if assets:
            fields.append(("media_assets", json.dumps(assets, ensure_ascii=False, separators=(",", ":"))))
        note = None
        if request.preview is not None and context.get("type") == "novel":
            preview = telepress.publish(self._http, self._lookup, request.preview, stored, self._open, where=f"route {request.route}")
            if preview.retry:
                # The submission waits for its preview: the row is retried (5xx, 408, 429, network, timeout).
                return DeliveryResponse(status=503, body={"error": preview.retry}, text=preview.retry)
            if preview.url:
                fields = [(n, v) for n, v in fields if n != request.preview.field] + [(request.preview.field, preview.url)]
            note = preview.note
        parts = [(config.fileField, f) for f in files] + [(config.previewFileField, f) for f in previews]
        body = multipart.build(parts, fields, self._open)
        headers = {**headers, "Content-Type": body.content_type, "Content-Length": str(body.length)}
        answer = self._http.exchange(config.method, url, headers=headers, content=body.chunks(), timeout_ms=config.timeoutMs,
                                     scrub=expand.scrub)
        return replace(answer, note=note) if note else answer

    def _gateway(self, request: DeliveryRequest, config: Any) -> DeliveryResponse:
        expand = Expander(self._lookup, where=f"route {request.route}")
        url = checked_url(expand(config.url), "url", request.route)
        document = gateway.message_document(
            route=request.route, key=request.idempotency_key, context=request.payload.get("context") or {},
            work=request.payload.get("work") or {}, files=self._stored(request), transport=config.mediaTransport,
            read=self._artifacts.read, link=lambda f: self._artifacts.url(f, gateway.REFERENCE_TTL_S),
            max_inline_bytes=config.maxInlineBytes,
        )
        raw = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"Content-Type": "application/json", "X-PixivFlow-Delivery": request.route,
                   "X-Idempotency-Key": request.idempotency_key, **expanded_headers(config.headers, expand)}
        if config.token:
            headers["Authorization"] = f"Bearer {expand(config.token)}"
        if config.signingSecret:
            timestamp = self._now_ms() // 1000
            headers["X-Webhook-Timestamp"] = str(timestamp)
            headers["X-Webhook-Signature"] = gateway.signature(expand(config.signingSecret), timestamp, raw)
        return self._http.exchange("POST", url, headers=headers, content=raw, timeout_ms=config.timeoutMs,
                                   scrub=expand.scrub)


__all__ = ["MissingArtifacts", "RouteChannel", "RouteTransportError"]
