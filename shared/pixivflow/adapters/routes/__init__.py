"""Delivery routes: the ``DeliveryChannel`` port for every route kind a config can declare.

Each attempt goes to the sender of its route's kind (``pixivflow.route_kinds``), built once per
channel on the kind's first delivery; the senders share this channel's pool of connections, its
``${VAR}`` lookup and its reads of the stored files. The published configs' routes:
docs/explanation/pixivflow-routes.md.

``${VAR}`` references in URLs, headers, ``token`` and ``signingSecret`` are expanded at send
time, through the injected lookup (env, then SSM below RouteSecretsPath). One attempt is exactly
one HTTP exchange; retrying belongs to the outbox.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ...domain.errors import ConfigError
from ...domain.route_io import DeliveryRequest, DeliveryResponse
from ...domain.work import StoredFile
from ...ports import ArtifactStore
from ...route_kinds import RouteSender, SenderTools
from ..http_pools import OperatorPool
from ..secret_refs import Expander
from .http import Http, MissingArtifacts, RouteTransportError, checked_url, expanded_headers

if TYPE_CHECKING:  # httpx itself loads with the first request: a function that never posts never imports it
    import httpx

READINESS_TIMEOUT_MS = 3_000  # PixivFlow's readiness probe budget


class RouteChannel:
    """Sends one delivery attempt, or one notice, on the wire format of its route."""

    def __init__(self, routes: Callable[[str], Any], *, lookup: Callable[[str], str | None],
                 route_token: Callable[[Any], str | None], artifacts: ArtifactStore, now_ms: Callable[[], int],
                 transport: httpx.BaseTransport | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._routes = routes
        self._lookup = lookup
        self._artifacts = artifacts
        # One operator-routes pool for every route kind of this channel (adapters.http_pools):
        # two routes on one host share its kept-alive connections; close() ends them all.
        self._pool = OperatorPool(transport)
        self._http = Http(monotonic=monotonic, pool=self._pool)
        self._tools = SenderTools(http=self._http, pool=self._pool, lookup=lookup, route_token=route_token,
                                  artifacts=artifacts, stored=self._stored, open=self._open, now_ms=now_ms,
                                  monotonic=monotonic)
        self._senders: dict[str, RouteSender] = {}
        self._lock = threading.Lock()

    # -- the port ------------------------------------------------------------------------------
    def ready(self, route: str) -> bool:
        """GET the route's readiness URL (3 s): any 2xx is ready; another answer or no answer defers."""
        config = self._routes(route)
        probe = config.readiness_url if config is not None else None
        if not probe:
            return True
        expand = Expander(self._lookup, where=f"route {route} readinessUrl")
        url = checked_url(expand(probe), "readinessUrl", route)
        headers = expanded_headers(config.headers, expand)
        try:
            answer = self._http.exchange("GET", url, headers=headers, content=None, timeout_ms=READINESS_TIMEOUT_MS,
                                         scrub=expand.scrub)
        except RouteTransportError:
            return False
        return 200 <= answer.status <= 299

    def deliver(self, request: DeliveryRequest) -> DeliveryResponse:
        config = self._config(request.route)
        return self._sender(config.route_kind).deliver(request, config)

    def post_json(self, route: str, url_field: str, body: Mapping[str, Any], idempotency_key: str) -> DeliveryResponse:
        """A notice to one of the route's JSON endpoints, with the route's headers (their auth)."""
        config = self._config(route)
        raw_url = config.notice_url(url_field)
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

    # -- the kinds' senders --------------------------------------------------------------------
    def _sender(self, kind: Any) -> RouteSender:
        sender = self._senders.get(kind.name)
        if sender is None:
            with self._lock:  # two threads of one container build a kind's sender once
                sender = self._senders.get(kind.name)
                if sender is None:
                    sender = self._senders[kind.name] = kind.sender(self._tools)
        return sender

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


__all__ = ["MissingArtifacts", "RouteChannel", "RouteTransportError"]
