"""The webhook route on the wire (DESIGN §12; spec §10.2, §10.7): what one delivery attempt sends,
and how its transport failures are classified by the outbox worker.

No network: httpx.MockTransport stands in for the downstream.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

from pixivflow.adapters.routes import RouteChannel
from pixivflow.domain.ack import classify_outbox_error, idempotency_key
from pixivflow.domain.route_io import DeliveryRequest
from pixivflow.route_kinds.json_webhook import WebhookRoute

KEY = idempotency_key("review", "illustration", "110023", "morning-tokyo@2026-12-01T0800", "cats")
PAYLOAD = {
    "idempotency_key": KEY,
    "slot_id": "morning-tokyo@2026-12-01T0800",
    "target_id": "cats",
    "work": {"id": "110023", "title": "Cats study 0", "tags": ["cats", "cute"]},
}


class _Channel:
    """The production channel with one ``kind: webhook`` route named ``review``."""

    def __init__(self, route: WebhookRoute | None, handler) -> None:
        self.channel = RouteChannel(lambda name: route if name == "review" else None, lookup=lambda name: None,
                                    route_token=lambda cfg: cfg.token, artifacts=SimpleNamespace(), now_ms=lambda: 0,
                                    transport=httpx.MockTransport(handler))

    def send(self, name: str, payload, key: str):
        return self.channel.deliver(DeliveryRequest(route=name, idempotency_key=key, body=payload, payload={},
                                                    artifact_key=""))


def channel(route: WebhookRoute | None, handler) -> _Channel:
    return _Channel(route, handler)


def capture(answer=(200, {"data": {"review_id": "r-1", "status": "pending_review"}})):
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body = answer
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        return httpx.Response(status, json=body)

    return seen, handler


def test_post_carries_the_key_in_header_and_body_and_the_route_token():
    seen, handler = capture()
    route = WebhookRoute(url="https://review.example/api/review", token="route-secret-1", timeoutMs=1234)
    response = channel(route, handler).send("review", PAYLOAD, KEY)
    (req,) = seen
    assert req.method == "POST" and str(req.url) == "https://review.example/api/review"
    assert req.headers["idempotency-key"] == KEY
    assert req.headers["authorization"] == "Bearer route-secret-1"
    assert req.headers["content-type"] == "application/json"
    body = json.loads(req.content)
    assert body == PAYLOAD and body["idempotency_key"] == req.headers["idempotency-key"]
    assert req.extensions["timeout"]["read"] == pytest.approx(1.234)
    assert response.status == 200 and response.body["data"]["review_id"] == "r-1"


def test_no_authorization_header_without_a_route_token():
    seen, handler = capture()
    channel(WebhookRoute(url="http://127.0.0.1:1/review"), handler).send("review", PAYLOAD, KEY)
    assert "authorization" not in seen[0].headers
    assert seen[0].extensions["timeout"]["read"] == pytest.approx(30.0)  # default timeoutMs 30 000


def test_a_non_json_answer_is_returned_as_text():
    seen, handler = capture((502, "<html>bad gateway</html>"))
    response = channel(WebhookRoute(url="http://127.0.0.1:1/review"), handler).send("review", PAYLOAD, KEY)
    assert (response.status, response.body) == (502, "<html>bad gateway</html>")


def test_an_unknown_route_is_a_non_retryable_configuration_error():
    seen, handler = capture()
    with pytest.raises(LookupError) as err:
        channel(None, handler).send("nowhere", PAYLOAD, KEY)
    assert seen == []
    verdict = classify_outbox_error(f"{type(err.value).__name__}: {err.value}", None, type(err.value).__name__)
    assert (verdict.code, verdict.retryable) == ("configuration_error", False)


@pytest.mark.parametrize("exc", [
    httpx.ReadTimeout("timed out"),
    httpx.ConnectError("[Errno 111] Connection refused"),
    httpx.RemoteProtocolError("Server disconnected without sending a response."),
    httpx.ReadError("[Errno 104] Connection reset by peer"),
])
def test_transport_failures_raise_and_are_classified_retryable(exc):
    def handler(request):
        raise exc

    with pytest.raises(type(exc)) as err:
        channel(WebhookRoute(url="http://127.0.0.1:1/review"), handler).send("review", PAYLOAD, KEY)
    # the outbox worker formats and classifies a transport error exactly like this
    text = f"{type(err.value).__name__}: {err.value}"
    verdict = classify_outbox_error(text, None, type(err.value).__name__)
    assert verdict.retryable, (text, verdict)
