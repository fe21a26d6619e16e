"""PixivFlow's wire rules without a network (pixivflow-delivery note §1.7, §2.2, §2.5):
template rendering, the gateway's ACK words, and what the route channel puts on the wire
(httpx.MockTransport), secrets kept out of every text it hands back."""

from __future__ import annotations

import hashlib
import hmac
import json

import httpx
import pytest

from pixivflow.adapters.routes import MissingArtifacts, RouteChannel, RouteTransportError
from pixivflow.adapters.s3_artifacts import MemoryArtifacts
from pixivflow.config import parse_config
from pixivflow.domain.ack import AckKind, parse_delivery_ack, parse_gateway_ack
from pixivflow.domain.errors import ConfigError
from pixivflow.domain.templates import TemplateError, compact_count, form_fields, render, template_variables
from pixivflow.domain.route_io import DeliveryRequest
from pixivflow.domain.work import ArtifactFile

KEY = "pixivflow:r:illustration:1:s@2026-12-01T0800:t"


# -- templates ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value,text", [(None, ""), (0, "0"), (999, "999"), (1000, "1k"), (1285, "1.3k"), (9999, "10k"),
                                        (10_000, "1w"), (12_345, "1.2w"), (35_000, "3.5w"), (True, ""), ("n/a", "")])
def test_compact_counts(value, text):
    assert compact_count(value) == text


def test_unknown_names_stay_literal_and_known_empty_ones_render_empty():
    variables = template_variables({"title": "T", "pixivId": "9", "type": "novel"})
    assert render("{{title}}/{{nope}}/{{language}}/{{link}}/{{ title }}", variables) == (
        "T/{{nope}}//https://www.pixiv.net/novel/show.php?id=9/{{ title }}")
    assert variables["spoiler"] == "false" and variables["xRestrictLabel"] == "unknown" and variables["xRestrictTag"] == ""


def test_restriction_labels():
    labels = [(template_variables({"xRestrict": n})["xRestrictLabel"], template_variables({"xRestrict": n})["xRestrictTag"])
              for n in (0, 1, 2, 5)]
    assert labels == [("all-ages", "AllAges"), ("R-18", "R18"), ("R-18G", "R18G"), ("unknown(5)", "XRestrict5")]


def test_series_novels_get_a_display_title():
    v = template_variables({"title": "第3話", "seriesTitle": "長編"})
    assert (v["displayTitle"], v["seriesTitle"]) == ("《長編》 第3話", "長編")


def test_form_fields_merge_override_and_add_the_key_once():
    variables = {"idempotencyKey": KEY, "title": "T"}
    parts = form_fields({"title": "{{title}}", "n": 3, "flag": True}, {"title": "override {{title}}"}, variables)
    assert parts == [("title", "override T"), ("n", "3"), ("flag", "true"), ("idempotency_key", KEY)]
    assert form_fields({"idempotencyKey": "{{idempotencyKey}}"}, None, variables) == [("idempotencyKey", KEY)]
    assert form_fields({}, None, variables, auto_idempotency_key=False) == []


def test_an_unresolved_refetch_request_id_template_is_refused():
    with pytest.raises(TemplateError):
        form_fields({"refetch_request_id": "{{refetchRequestId}}{{typo}}"}, None, template_variables({}))


# -- the gateway's ACK words (type: webhook only) ------------------------------------------------------


@pytest.mark.parametrize("status,body,kind", [
    (200, {"status": "accepted", "id": "m1"}, AckKind.ACCEPTED),
    (200, {"status": "Published"}, AckKind.ACCEPTED),
    (200, None, AckKind.ACCEPTED),
    (202, "", AckKind.ACCEPTED),
    (200, {"status": "pending"}, AckKind.RETRYABLE_FAILURE),
    (200, {"status": "queued"}, AckKind.RETRYABLE_FAILURE),
    (200, {"status": "submitted"}, AckKind.RETRYABLE_FAILURE),
    (200, {"status": "processing"}, AckKind.RETRYABLE_FAILURE),
    (200, {"status": "mystery"}, AckKind.RETRYABLE_FAILURE),
    (200, {"status": "failed"}, AckKind.REMOTE_FAILED),
    (200, {"status": "rejected"}, AckKind.REMOTE_FAILED),
    (200, {"status": "invalid"}, AckKind.REMOTE_FAILED),
    (200, {"status": "expired"}, AckKind.REMOTE_FAILED),
    (500, {"status": "blocked"}, AckKind.REMOTE_FAILED),  # the receiver's verdict outranks its HTTP status
    (409, {"error": "exists"}, AckKind.DUPLICATE_EXISTING),
    (200, {"status": "duplicate"}, AckKind.DUPLICATE_EXISTING),
    (200, {"status": "already_exists"}, AckKind.DUPLICATE_EXISTING),
    (429, None, AckKind.RETRYABLE_FAILURE),
    (503, "down", AckKind.RETRYABLE_FAILURE),
    (400, {"error": "bad"}, AckKind.PERMANENT_FAILURE),
    (401, None, AckKind.PERMANENT_FAILURE),
    (302, None, AckKind.PERMANENT_FAILURE),  # redirects are never followed: no evidence of delivery
])
def test_gateway_ack_words(status, body, kind):
    assert parse_gateway_ack(status, body).kind is kind


def test_gateway_words_do_not_leak_into_the_telepost_parser():
    assert parse_delivery_ack(200, {"status": "blocked"}).kind is AckKind.ACCEPTED  # no `data` envelope: accepted
    assert parse_delivery_ack(409, None).kind is AckKind.PERMANENT_FAILURE
    ack = parse_gateway_ack(200, {"status": "blocked", "reason": "spam filter", "id": 5})
    assert (ack.remote_id, ack.remote_status, ack.error) == ("5", "blocked", "spam filter")


# -- the channel on the wire ------------------------------------------------------------------------------

ROUTES = {
    "submit": {"type": "httpMultipart", "url": "${BASE}/submissions", "readinessUrl": "${BASE}/health",
               "headers": {"Authorization": "Bearer ${TOKEN}"}, "fields": {"title": "{{title}}"},
               "notificationUrl": "${BASE}/notify"},
    "gw": {"type": "webhook", "url": "${BASE}/deliver", "token": "${GW_TOKEN}", "signingSecret": "${SIGN}",
           "headers": {"X-Tenant": "t1"}},
}
SECRETS = {"BASE": "https://api.example", "TOKEN": "tok-12345", "GW_TOKEN": "gw-67890", "SIGN": "sign-secret"}


def channel(handler, secrets=None, store=None):
    config = parse_config({"source": {"kind": "pixiv"}, "delivery": {"targets": ROUTES}})
    store = store or MemoryArtifacts()
    return RouteChannel(config.route, lookup=(secrets or SECRETS).get, route_token=lambda r: None, artifacts=store,
                        now_ms=lambda: 1_796_000_000_123, transport=httpx.MockTransport(handler)), store


def request(route, store, files=True):
    stored = store.put("s/t/1", [ArtifactFile("1_p0.png", b"\x89PNG-0", "image/png"),
                                 ArtifactFile("1_p0_preview.jpg", b"prev", "image/jpeg", role="preview")]) if files else []
    payload = {"work": {"id": "1", "type": "illustration", "title": "T", "tags": ["a"]},
               "context": {"title": "T", "pixivId": "1", "type": "illustration", "slotId": "s", "targetId": "t"}}
    return DeliveryRequest(route=route, idempotency_key=KEY, body={}, payload=payload, artifact_key="s/t/1", files=stored)


def test_gateway_request_is_signed_over_the_exact_bytes_sent():
    seen = []
    rc, store = channel(lambda r: seen.append(r) or httpx.Response(200, json={"status": "accepted"}))
    answer = rc.deliver(request("gw", store))
    (req,) = seen
    assert answer.status == 200 and str(req.url) == "https://api.example/deliver"
    assert req.headers["authorization"] == "Bearer gw-67890" and req.headers["x-tenant"] == "t1"
    assert req.headers["x-webhook-timestamp"] == "1796000000"
    expected = hmac.new(b"sign-secret", b"1796000000." + req.content, hashlib.sha256).hexdigest()
    assert req.headers["x-webhook-signature"] == f"sha256={expected}"
    doc = json.loads(req.content)
    assert [m["name"] for m in doc["message"]["media"]] == ["1_p0.png"]  # previews are not media
    assert doc["message"]["parts"] == [{"kind": "text"}, {"kind": "image", "media": doc["message"]["media"][0]}]


def test_multipart_previews_ride_under_their_field_when_aligned():
    seen = []
    rc, store = channel(lambda r: seen.append(r) or httpx.Response(200, json={"data": {"review_id": 1}}))
    rc.deliver(request("submit", store))
    body = seen[0].content
    assert b'name="files"; filename="1_p0.png"' in body and b'name="previews"; filename="1_p0_preview.jpg"' in body
    assert body.index(b'name="files"') < body.index(b'name="previews"') < body.index(b'name="title"')
    assert int(seen[0].headers["content-length"]) == len(body)


def test_nothing_stored_is_a_non_retryable_failure_before_any_request():
    rc, store = channel(lambda r: pytest.fail("no request without files"))
    with pytest.raises(MissingArtifacts, match="invalid payload"):
        rc.deliver(request("submit", store, files=False))


def test_a_missing_secret_stops_before_the_request_naming_only_the_variable():
    rc, store = channel(lambda r: pytest.fail("no request without credentials"), secrets={"BASE": "https://api.example"})
    with pytest.raises(ConfigError) as info:
        rc.deliver(request("submit", store))
    assert "${TOKEN}" in str(info.value) and "api.example" not in str(info.value)


def test_secret_values_are_scrubbed_from_answers_and_transport_errors():
    rc, store = channel(lambda r: httpx.Response(401, text="bad token tok-12345"))
    answer = rc.deliver(request("submit", store))
    assert "tok-12345" not in answer.text and "${TOKEN}" in answer.text

    def boom(r):
        raise httpx.ConnectError("cannot reach https://api.example with tok-12345")

    rc, store = channel(boom)
    with pytest.raises(RouteTransportError) as info:
        rc.deliver(request("submit", store))
    assert str(info.value).startswith("ConnectError:") and "tok-12345" not in str(info.value)


def test_readiness_is_any_2xx_and_a_transport_error_is_not_ready():
    answers = iter([httpx.Response(204), httpx.Response(503)])
    rc, _ = channel(lambda r: next(answers))
    assert rc.ready("submit") is True and rc.ready("submit") is False
    assert rc.ready("gw") is True  # a gateway declares no probe

    def down(r):
        raise httpx.ConnectError("refused")

    rc, _ = channel(down)
    assert rc.ready("submit") is False


def test_notices_go_to_the_named_url_with_the_route_headers():
    seen = []
    rc, _ = channel(lambda r: seen.append(r) or httpx.Response(200, json={"ok": True}))
    rc.post_json("submit", "notificationUrl", {"text": "hi", "idempotency_key": "k"}, "k")
    assert str(seen[0].url) == "https://api.example/notify" and seen[0].headers["authorization"] == "Bearer tok-12345"
    assert json.loads(seen[0].content) == {"text": "hi", "idempotency_key": "k"}
    with pytest.raises(ConfigError, match="does not configure scheduleOutcomeUrl"):
        rc.post_json("submit", "scheduleOutcomeUrl", {}, "k")


def test_a_request_is_bounded_by_timeout_ms_in_total_and_classified_retryable():
    from pixivflow.adapters.routes.http import Http, RouteDeadline
    from pixivflow.domain.ack import classify_outbox_error

    ticks = iter([0.0, 0.5, 31.0, 31.0])  # start, after the first upload chunk, after the answer arrived
    http = Http(httpx.MockTransport(lambda r: httpx.Response(200, content=b'{"ok":true}')), monotonic=lambda: next(ticks))
    with pytest.raises(RouteDeadline) as info:
        http.exchange("POST", "https://api.example/x", headers={"Content-Length": "2"}, content=iter([b"a", b"b"]),
                      timeout_ms=30_000, scrub=str)
    verdict = classify_outbox_error(str(info.value), None, type(info.value).__name__)
    assert (verdict.code, verdict.retryable) == ("network_timeout", True)
