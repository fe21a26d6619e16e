"""Event callbacks over HTTPS, connected to the vetted address only.

Every send vets the URL again (``domain.callbacks.vet_callback_url``) with a fresh resolution and
then connects to exactly the address that passed: the request goes to ``https://<address>:<port>``
with ``Host`` set to the URL's host and TLS SNI / certificate verification against that host name
(httpcore's ``sni_hostname`` extension). A name that re-resolves somewhere else between two
lookups (DNS rebinding) therefore cannot redirect the connection, and a refused URL never opens a
socket. Redirects are never followed (a 3xx is a permanent failure of the callback).

``timeout_s`` is the attempt's TOTAL deadline (connect + TLS + request + headers + body; the
outbox worker has already cut it to the invocation's remaining time): it is enforced in the
network layer of the consumer transport (``adapters.http_pools``), so a receiver that drips
its answer a byte at a time cannot stretch an attempt past it. Each request gets a transport of
its own that keeps no connection alive (the consumer trust class: a connection opened to this
address for another host name is never reused).

``resolver`` and ``transport`` are injected: tests give a fake resolver and an ``httpx``
transport (a loopback server or ``httpx.MockTransport``), so no real DNS lookup happens.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ..domain.callbacks import Resolver, vet_callback_url
from ..domain.route_io import DeliveryResponse
from .http_pools import consumer_transport, deadline

if TYPE_CHECKING:  # imported by the first callback sent: a faster cold start
    import httpx

MAX_RESPONSE_BYTES = 64 * 1024


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class HttpCallbackSender:
    def __init__(self, allow_hosts: Callable[[], Iterable[str]], *, resolver: Resolver | None = None,
                 transport: Callable[[], httpx.BaseTransport] | None = None) -> None:
        self._allow_hosts = allow_hosts
        self._resolver = resolver or system_resolver
        self._transport = transport

    def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> DeliveryResponse:
        vetted = vet_callback_url(url, list(self._allow_hosts()), self._resolver)  # raises CallbackRefused
        extensions: dict[str, Any] = {}
        if vetted.scheme == "https":
            extensions["sni_hostname"] = vetted.host
        request_headers = {**headers, "Host": vetted.host_header}
        transport = self._transport() if self._transport else consumer_transport()
        import httpx  # loaded by the first callback: a faster cold start

        with deadline(timeout_s), httpx.Client(transport=transport, timeout=timeout_s, follow_redirects=False,
                                               trust_env=False) as client:
            request = client.build_request("POST", vetted.connect_url, content=body, headers=request_headers,
                                           extensions=extensions)
            response = client.send(request, stream=True)
            try:
                raw = b""
                for chunk in response.iter_bytes():
                    raw += chunk
                    if len(raw) >= MAX_RESPONSE_BYTES:  # a consumer's answer is never read without bound
                        break
            finally:
                response.close()
        text = raw[:MAX_RESPONSE_BYTES].decode("utf-8", "replace")
        try:
            parsed: Any = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return DeliveryResponse(response.status_code, parsed, text[:2000])


__all__ = ["HttpCallbackSender", "system_resolver"]
