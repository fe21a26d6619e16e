"""The consumer callbacks' transport (``http_pools``): a connection pool that keeps no
connection alive and whose network backend gives every connect, TLS handshake, read and write at
most the time left before the request's total :func:`http_pools.deadline`.

Its own module so that httpcore, whose classes it extends, is imported by the first callback a
function sends, not by every function that builds the runtime graph (a faster cold start)."""

from __future__ import annotations

import ssl
from typing import Any, Iterable

import httpcore
import httpx

from .http_pools import _left, tls_context


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
    transport = httpx.HTTPTransport(verify=tls_context(), retries=0, limits=httpx.Limits(max_keepalive_connections=0))
    # httpx has no public hook for the network backend; its pool is rebuilt with the same SSL
    # context and limits, and ours (tests/unit/test_http_pools.py pins that it is the one used).
    transport._pool = httpcore.ConnectionPool(  # noqa: SLF001
        ssl_context=transport._pool._ssl_context,  # noqa: SLF001
        max_connections=1, max_keepalive_connections=0, retries=0, network_backend=_DeadlineBackend(),
    )
    return transport
