"""What every PixivFlow route shares on the wire: one bounded HTTP exchange, secrets kept out of
every text that leaves the adapter, the URL checked after its ``${VAR}`` references expand."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from ...domain.errors import ConfigError
from ...domain.route_io import DeliveryResponse
from ..http_pools import OperatorPool
from ..secret_refs import Expander

if TYPE_CHECKING:  # imported by the first request: a faster cold start
    import httpx

MAX_RESPONSE_BYTES = 64 * 1024  # an ACK is small; a huge answer is cut, never buffered whole
_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$")


class MissingArtifacts(RuntimeError):
    """The bound work has no stored file to send: a retry would find none either."""


class RouteTransportError(RuntimeError):
    """A transport failure, its text scrubbed of secrets. The message starts with the httpx
    exception's class name (``ReadTimeout: ...``), which is what the outbox classifies on.
    ``unsent`` is True when no byte of the request can have reached the server (the connection
    was never made): a route that must not post twice may then simply try again."""

    unsent: bool = False


class RouteDeadline(RouteTransportError):
    """The exchange ran past the route's ``timeoutMs``."""


def checked_url(url: str, field: str, route: str) -> str:
    """A route URL AFTER expansion: http(s), a host, no whitespace (a bad URL is a configuration
    error, never a retry)."""
    if not _URL.match(url or ""):
        raise ConfigError(f"route {route}: {field} is not an http(s) URL once its ${{VAR}} references are expanded "
                          "(configuration error)")
    return url


def expanded_headers(headers: Mapping[str, str] | None, expand: Expander) -> dict[str, str]:
    out = {}
    for name, value in (headers or {}).items():
        out[str(name)] = expand(str(value))
        if "\r" in out[name] or "\n" in out[name]:
            raise ConfigError(f"header {name!r} holds a line break once expanded (configuration error)")
    return out


class Http:
    """One bounded exchange on the operator-routes pool (``adapters.http_pools.OperatorPool``: one
    httpx client per timeout, connection reuse across warm invocations), shared with the
    channel's ``kind: webhook`` routes."""

    def __init__(self, transport: httpx.BaseTransport | None = None, monotonic: Callable[[], float] = time.monotonic,
                 *, pool: OperatorPool | None = None) -> None:
        self._pool = pool if pool is not None else OperatorPool(transport)
        self._monotonic = monotonic

    def exchange(self, method: str, url: str, *, headers: Mapping[str, str], content: bytes | Iterable[bytes] | None,
                 timeout_ms: int, scrub: Callable[[str], str]) -> DeliveryResponse:
        """One request, bounded by ``timeout_ms`` in TOTAL (checked between body chunks on the way
        out and on the way back) besides httpx's per-operation timeouts, so a slow-drip server
        cannot hold an outbox claim past its lease. Transport errors raise RouteTransportError."""
        timeout_s = max(0.1, timeout_ms / 1000)
        deadline = self._monotonic() + timeout_s

        def guarded(chunks: Iterable[bytes]) -> Iterator[bytes]:
            for chunk in chunks:
                if self._monotonic() > deadline:
                    raise RouteDeadline(f"RouteDeadline: request body still uploading after {timeout_ms} ms (timeout)")
                yield chunk

        body: Any = content
        if content is not None and not isinstance(content, (bytes, bytearray)):
            body = guarded(content)
        import httpx  # loaded once the function really posts: a faster cold start

        try:
            with self._pool.client(timeout_s).stream(method, url, headers=dict(headers), content=body) as response:
                raw = bytearray()
                for chunk in response.iter_bytes():
                    if len(raw) < MAX_RESPONSE_BYTES:
                        raw.extend(chunk[: MAX_RESPONSE_BYTES - len(raw)])
                    if self._monotonic() > deadline:
                        raise RouteDeadline(f"RouteDeadline: response still arriving after {timeout_ms} ms (timeout)")
                status = response.status_code
        except RouteTransportError:
            raise
        except httpx.HTTPError as exc:
            error = RouteTransportError(scrub(f"{type(exc).__name__}: {exc}")[:500])
            error.unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
            raise error from None
        text = scrub(bytes(raw).decode("utf-8", errors="replace"))
        try:
            parsed: Any = json.loads(text) if text.strip() else None
        except ValueError:
            parsed = text
        return DeliveryResponse(status=status, body=parsed, text=text[:2000])

    def close(self) -> None:
        self._pool.close()
