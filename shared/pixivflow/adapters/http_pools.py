"""The two trust classes of outgoing HTTP, one connection policy each (issue 21; DESIGN §11).

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
hold the attempt until Lambda kills the invocation (issue 21 item 5). The deadline is enforced
in the network layer itself: every connect, read and write is given at most the time left, and
one that starts with none left fails at once as a timeout.
"""

from __future__ import annotations

import contextlib
import contextvars
import ssl
import threading
import time
from typing import Any, Callable, Iterable, Iterator

import httpcore
import httpx

class OperatorPool:
    """The operator-routes pool: one ``httpx.Client`` per timeout, made on first use and kept until
    :meth:`close`. Thread-safe (the dev server's deliver thread and a readiness probe may ask at
    once). Redirects are never followed: a route's URL is the operator's, a Location is not."""

    def __init__(self, transport: httpx.BaseTransport | None = None) -> None:
        self._transport = transport
        self._clients: dict[float, httpx.Client] = {}
        self._lock = threading.Lock()

    def client(self, timeout_s: float) -> httpx.Client:
        with self._lock:
            client = self._clients.get(timeout_s)
            if client is None:
                timeout = httpx.Timeout(timeout_s, connect=min(5.0, timeout_s))
                client = httpx.Client(timeout=timeout, transport=self._transport, follow_redirects=False)
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


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout), local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not a callback destination")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def consumer_transport() -> httpx.BaseTransport:
    """A fresh transport for ONE consumer request: no retries, no kept-alive connection, every
    socket operation bound by the surrounding :func:`deadline`."""
    transport = httpx.HTTPTransport(retries=0, limits=httpx.Limits(max_keepalive_connections=0))
    # httpx has no public hook for the network backend; its pool is rebuilt with the same SSL
    # context and limits, and ours (tests/unit/test_http_pools.py pins that it is the one used).
    transport._pool = httpcore.ConnectionPool(  # noqa: SLF001
        ssl_context=transport._pool._ssl_context,  # noqa: SLF001
        max_connections=1, max_keepalive_connections=0, retries=0, network_backend=_DeadlineBackend(),
    )
    return transport


__all__ = ["OperatorPool", "consumer_transport", "deadline"]
