"""The two trust classes of outgoing HTTP, one connection policy each.

* **Operator routes** (``delivery.targets`` / PixivFlow routes the operator configured): ONE pool
  per route channel (:class:`OperatorPool`), one ``httpx.Client`` per timeout for the channel's
  life, shared by every route family (``adapters.webhook``'s ``kind: webhook`` and
  ``adapters.routes.http.Http``'s PixivFlow routes), so warm invocations reuse their connections
  to the operator's own endpoints whichever route opened them; a dropped channel closes it
  (``runtime.reset()`` → ``RouteChannel.close``).
* **Consumer callbacks** (a ``callback_url`` a client of the jobs API supplied: untrusted): every
  request gets a transport of its own (:func:`consumer_transport`) that keeps NO connection
  alive. The callback sender connects to the vetted IP address with the URL's host in ``Host``
  and TLS SNI; a pooled connection to that address, opened for another host name, must never
  carry this request, so none is kept.

A consumer request has a TOTAL deadline (connect + TLS + request + headers + body), set with
:func:`deadline` around the request. httpx's timeouts bound each socket operation only: a
receiver that drips one byte of its status line every few seconds never trips them and would
hold the attempt until Lambda kills the invocation. The deadline is enforced
in the network layer itself: every connect, read and write is given at most the time left, and
one that starts with none left fails at once as a timeout.

Both classes verify TLS with ONE context per process (:func:`tls_context`): building one loads
certifi's CA bundle, about 20 ms of CPU, which every fresh consumer transport and every new client
would otherwise pay. A context holds no per-connection state (SNI and the peer are per socket), so
sharing it changes nothing of what is verified.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:  # httpx loads with the first request: a function that never posts never imports it
    import ssl

    import httpx

_tls: list["ssl.SSLContext"] = []
_tls_made = threading.Lock()


def tls_context() -> "ssl.SSLContext":
    """The process's verifying TLS context, made on first use exactly as httpx makes its default
    (certifi's bundle; ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured) and shared from then on."""
    if not _tls:
        with _tls_made:
            if not _tls:
                import httpx

                _tls.append(httpx.create_ssl_context())
    return _tls[0]

class OperatorPool:
    """The operator-routes pool: one ``httpx.Client`` per timeout, made on first use and kept until
    :meth:`close`. Thread-safe (the dev server's deliver thread and a readiness probe may ask at
    once). Redirects are never followed: a route's URL is the operator's, a Location is not."""

    def __init__(self, transport: httpx.BaseTransport | None = None) -> None:
        self._transport = transport
        self._clients: dict[float, httpx.Client] = {}
        self._lock = threading.Lock()

    def client(self, timeout_s: float) -> httpx.Client:
        import httpx

        with self._lock:
            client = self._clients.get(timeout_s)
            if client is None:
                timeout = httpx.Timeout(timeout_s, connect=min(5.0, timeout_s))
                client = httpx.Client(timeout=timeout, transport=self._transport, follow_redirects=False,
                                      verify=tls_context())
                self._clients[timeout_s] = client
            return client

    def close(self) -> None:
        """Close every client and its kept-alive connections; a later request opens new ones."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("pixivflow_http_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float, monotonic: Callable[[], float] = time.monotonic) -> Iterator[float]:
    """Every consumer-transport operation inside ends by ``now + seconds`` (monotonic)."""
    at = monotonic() + max(0.0, seconds)
    token = _deadline.set(at)
    try:
        yield at
    finally:
        _deadline.reset(token)


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    at = _deadline.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the request's total deadline has passed")
    return left if timeout is None else min(timeout, left)


def consumer_transport() -> httpx.BaseTransport:
    """A fresh transport for ONE consumer request: no retries, no kept-alive connection, every
    socket operation bound by the surrounding :func:`deadline` (``deadline_transport``, which
    loads httpcore: only a function that sends a callback imports it)."""
    from .deadline_transport import consumer_transport as fresh

    return fresh()


__all__ = ["OperatorPool", "consumer_transport", "deadline"]
