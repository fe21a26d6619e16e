"""The two trust classes of outgoing HTTP (issue 21; adapters/http_pools.py), counted on the wire.

* operator routes: ONE pool per route channel, shared by the ``kind: webhook`` family and the
  PixivFlow families, so two routes on one host ride one kept-alive connection; closing the
  channel (``runtime.reset()`` does) closes it;
* consumer callbacks: a transport per request that keeps no connection, so a connection opened
  to an address for one host name never carries a request for another.

The server is a loopback HTTP/1.1 server that counts the TCP connections it accepts and records
each request's Host; the fake resolver maps the test's host names to 127.0.0.1, so no packet
leaves the machine."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from pixivflow.adapters.callback_http import HttpCallbackSender
from pixivflow.adapters.routes import RouteChannel
from pixivflow.domain.route_io import DeliveryRequest
from pixivflow.route_kinds.http_multipart import HttpMultipartRoute
from pixivflow.route_kinds.json_webhook import WebhookRoute


class CountingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.requests: list[tuple[str, str]] = []  # (Host header, path)
        self.lock = threading.Lock()

    def get_request(self) -> Any:
        accepted = super().get_request()
        with self.lock:
            self.connections += 1
        return accepted

    @property
    def port(self) -> int:
        return self.server_address[1]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client that pools its connection reuses it

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        server: CountingServer = self.server  # type: ignore[assignment]
        with server.lock:
            server.requests.append((self.headers.get("Host") or "", self.path))
        body = json.dumps({"ok": True, "id": "r-1"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[CountingServer]:
    srv = CountingServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _channel(port: int) -> RouteChannel:
    """Two operator routes on one host: a ``kind: webhook`` route and a PixivFlow route's notice URL."""
    routes = {
        "review": WebhookRoute(url=f"http://127.0.0.1:{port}/deliveries", timeoutMs=5_000),
        "gateway": HttpMultipartRoute(type="httpMultipart", url=f"http://127.0.0.1:{port}/submissions", timeoutMs=5_000,
                                      notificationUrl=f"http://127.0.0.1:{port}/notices"),
    }
    return RouteChannel(routes.get, lookup=lambda name: None, route_token=lambda route: None,
                        artifacts=SimpleNamespace(), now_ms=lambda: 0)


def _send(channel: RouteChannel, n: int):
    return channel.deliver(DeliveryRequest(route="review", idempotency_key=f"key-{n}", body={"n": n}, payload={},
                                           artifact_key=""))


def test_two_operator_routes_on_one_host_share_one_kept_alive_connection(server: CountingServer) -> None:
    channel = _channel(server.port)
    try:
        assert _send(channel, 1).status == 200
        assert channel.post_json("gateway", "notificationUrl", {"n": 2}, "key-2").status == 200
        assert _send(channel, 3).status == 200
        assert channel.post_json("gateway", "notificationUrl", {"n": 4}, "key-4").status == 200
        assert [path for _host, path in server.requests] == ["/deliveries", "/notices", "/deliveries", "/notices"]
        assert server.connections == 1  # both route families, one pool, one connection
    finally:
        channel.close()
    # a closed channel kept nothing alive: a new channel (the next graph) connects afresh
    again = _channel(server.port)
    try:
        _send(again, 5)
        assert server.connections == 2
    finally:
        again.close()


def test_a_closed_channel_drops_its_connections(server: CountingServer) -> None:
    channel = _channel(server.port)
    _send(channel, 1)
    channel.close()
    channel.post_json("gateway", "notificationUrl", {"n": 2}, "key-2")  # a fresh client, a fresh connection
    channel.close()
    assert server.connections == 2


def test_a_callback_never_rides_a_connection_opened_for_another_host(server: CountingServer) -> None:
    """Two host names on the same vetted address, and the same name twice: every callback opens a
    connection of its own, and each carries only its own Host."""
    names = ["a.callbacks.test", "b.callbacks.test"]
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    sender = HttpCallbackSender(lambda: names, resolver=resolver)
    for host in (names[0], names[1], names[0]):
        answer = sender.post(f"http://{host}:{server.port}/hooks", b"{}", {"Content-Type": "application/json"}, 5.0)
        assert answer.status == 200
    assert lookups == ["a.callbacks.test", "b.callbacks.test", "a.callbacks.test"]
    assert server.requests == [(f"{h}:{server.port}", "/hooks") for h in (names[0], names[1], names[0])]
    assert server.connections == 3  # no connection is ever reused in the consumer trust class


def test_every_client_and_consumer_transport_verifies_with_the_one_tls_context_of_the_process() -> None:
    """A fresh context loads certifi's CA bundle (about 20 ms of CPU): a callback made one per
    request. Sharing it must not loosen what is verified: certificates and host names, always."""
    import ssl

    from pixivflow.adapters.deadline_transport import consumer_transport
    from pixivflow.adapters.http_pools import OperatorPool, tls_context

    context = tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    first, second = consumer_transport(), consumer_transport()
    assert first._pool._ssl_context is second._pool._ssl_context is context  # noqa: SLF001
    pool = OperatorPool()
    try:
        client = pool.client(5.0)
        assert client._transport._pool._ssl_context is context  # noqa: SLF001
    finally:
        pool.close()
