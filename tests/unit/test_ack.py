"""Delivery ACK parsing, settlement table, error classes, backoff and intent keys (spec §10)."""

from __future__ import annotations

import math
import random

import pydantic
import pytest

from pixivflow.domain.ack import (
    AckHints,
    AckKind,
    DeliveryAck,
    ErrorClass,
    Settlement,
    classify_outbox_error,
    idempotency_key,
    parse_delivery_ack,
    parse_idempotency_key,
    retry_delay_ms,
    settlement_for,
)

A = AckKind


def _data(**record):
    return {"ok": True, "data": record}


# ---------------------------------------------------------------------------------------------
# parse_delivery_ack — one row per line of the §10.6 table (and its hint rules)
# ---------------------------------------------------------------------------------------------

LONG = "x" * 500

ACK_CASES = [
    # id, status, body, hints, expected DeliveryAck
    ("429", 429, {"error": "slow down"}, None,
     DeliveryAck(A.RETRYABLE_FAILURE, 429, error="HTTP 429 rate limited by delivery endpoint")),
    ("429-with-data-still-retryable", 429, _data(review_id="r1", status="pending"), None,
     DeliveryAck(A.RETRYABLE_FAILURE, 429, error="HTTP 429 rate limited by delivery endpoint")),
    ("408", 408, "request timeout", None,
     DeliveryAck(A.RETRYABLE_FAILURE, 408, error="delivery endpoint HTTP 408: request timeout")),
    ("500", 500, {"error": "boom"}, None,
     DeliveryAck(A.RETRYABLE_FAILURE, 500, error='delivery endpoint HTTP 500: {"error":"boom"}')),
    ("503-no-body", 503, None, None,
     DeliveryAck(A.RETRYABLE_FAILURE, 503, error="delivery endpoint HTTP 503: ")),
    ("400", 400, "missing field image", None,
     DeliveryAck(A.PERMANENT_FAILURE, 400, error="delivery endpoint HTTP 400: missing field image")),
    ("404-preview-capped-at-200", 404, LONG, None,
     DeliveryAck(A.PERMANENT_FAILURE, 404, error="delivery endpoint HTTP 404: " + "x" * 200)),
    ("302-is-not-success", 302, "", None,
     DeliveryAck(A.PERMANENT_FAILURE, 302, error="delivery endpoint HTTP 302: ")),
    ("2xx-no-body", 200, None, None, DeliveryAck(A.ACCEPTED, 200)),
    ("2xx-plain-text", 201, "ok", None, DeliveryAck(A.ACCEPTED, 201)),
    ("2xx-list-body", 200, [{"review_id": "r1", "status": "failed"}], None, DeliveryAck(A.ACCEPTED, 200)),
    ("2xx-no-data-key", 200, {"review_id": "r1", "status": "failed"}, None, DeliveryAck(A.ACCEPTED, 200)),
    ("2xx-data-is-string", 200, {"data": "failed"}, None, DeliveryAck(A.ACCEPTED, 200)),
    ("2xx-data-is-list", 200, {"data": [{"status": "failed"}]}, None, DeliveryAck(A.ACCEPTED, 200)),
    ("2xx-data-is-null", 200, {"data": None}, None, DeliveryAck(A.ACCEPTED, 200)),
    ("2xx-plain-record", 202, _data(review_id="r1", status="pending"), None,
     DeliveryAck(A.ACCEPTED, 202, remote_id="r1", remote_status="pending")),
    ("terminal-status-trim-case-outranks-reused", 200,
     _data(review_id="r9", status=" FAILED ", reused=True, reuse_reason="historical", matched_idempotency_key="k0"),
     None,
     DeliveryAck(A.REMOTE_FAILED, 200, remote_id="r9", remote_status="failed",
                 error="delivery endpoint reported terminal status failed")),
    ("terminal-failed", 200, _data(review_id="r1", status="failed"), None,
     DeliveryAck(A.REMOTE_FAILED, 200, remote_id="r1", remote_status="failed",
                 error="delivery endpoint reported terminal status failed")),
    ("terminal-rejected", 200, _data(review_id="r1", status="Rejected"), None,
     DeliveryAck(A.REMOTE_FAILED, 200, remote_id="r1", remote_status="rejected",
                 error="delivery endpoint reported terminal status rejected")),
    ("terminal-invalid", 200, _data(review_id="r1", status="invalid"), None,
     DeliveryAck(A.REMOTE_FAILED, 200, remote_id="r1", remote_status="invalid",
                 error="delivery endpoint reported terminal status invalid")),
    ("terminal-expired-no-id", 200, _data(status="EXPIRED"), None,
     DeliveryAck(A.REMOTE_FAILED, 200, remote_status="expired",
                 error="delivery endpoint reported terminal status expired")),
    ("status-containing-failed-is-not-terminal", 200, _data(review_id="r1", status="failed_over"), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="r1", remote_status="failed_over")),
    ("reused-string-true-is-not-reused", 200,
     _data(review_id="r1", status="published", reused="true", reuse_reason="historical"), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="r1", remote_status="published")),
    ("reused-one-is-not-reused", 200, _data(review_id="r1", reused=1, reuse_reason="historical"), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="r1")),
    ("reused-false", 200, _data(review_id="r1", reused=False), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="r1")),
    ("reused-duplicate_existing", 200,
     _data(review_id="r2", status="published", reused=True, reuse_reason="duplicate_existing",
           matched_idempotency_key="pixivflow:old"), None,
     DeliveryAck(A.DUPLICATE_EXISTING, 200, remote_id="r2", remote_status="published",
                 reuse_reason="duplicate_existing", matched_key="pixivflow:old")),
    ("reused-historical", 200,
     _data(review_id="r2", reused=True, reuse_reason="historical", matched_idempotency_key="k1"), None,
     DeliveryAck(A.DUPLICATE_EXISTING, 200, remote_id="r2", reuse_reason="historical", matched_key="k1")),
    ("reused-historical_duplicate", 200,
     _data(review_id="r2", reused=True, reuse_reason=" historical_duplicate ", matched_idempotency_key="k2"), None,
     DeliveryAck(A.DUPLICATE_EXISTING, 200, remote_id="r2", reuse_reason="historical_duplicate", matched_key="k2")),
    ("reused-other-reason-is-replay", 200,
     _data(review_id="r3", status="queued", reused=True, reuse_reason="same_key"), None,
     DeliveryAck(A.IDEMPOTENT_REPLAY, 200, remote_id="r3", remote_status="queued", reuse_reason="same_key")),
    ("reused-absent-reason-is-replay", 200, _data(review_id="r3", reused=True), None,
     DeliveryAck(A.IDEMPOTENT_REPLAY, 200, remote_id="r3")),
    ("reused-blank-reason-is-replay", 200, _data(review_id="r3", reused=True, reuse_reason="   "), None,
     DeliveryAck(A.IDEMPOTENT_REPLAY, 200, remote_id="r3")),
    ("reuse_kind-fallback", 200, _data(review_id="r4", reused=True, reuse_kind="historical"), None,
     DeliveryAck(A.DUPLICATE_EXISTING, 200, remote_id="r4", reuse_reason="historical")),
    ("reuse_reason-wins-over-reuse_kind", 200,
     _data(review_id="r4", reused=True, reuse_reason="same_key", reuse_kind="historical"), None,
     DeliveryAck(A.IDEMPOTENT_REPLAY, 200, remote_id="r4", reuse_reason="same_key")),
    ("message_id-fallback", 200, _data(message_id="m-7", status="sent"), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="m-7", remote_status="sent")),
    ("review_id-wins-over-message_id", 200, _data(review_id="r5", message_id="m-7"), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="r5")),
    ("numeric-review_id-stringified", 200, _data(review_id=12345), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="12345")),
    ("numeric-message_id-stringified", 200, _data(message_id=987), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="987")),
    ("boolean-id-ignored", 200, _data(review_id=True), None, DeliveryAck(A.ACCEPTED, 200)),
    ("empty-strings-ignored", 200,
     _data(review_id="  ", message_id="m-8", status="", reused=True, reuse_reason="",
           reuse_kind="historical", matched_idempotency_key=" "), None,
     DeliveryAck(A.DUPLICATE_EXISTING, 200, remote_id="m-8", reuse_reason="historical")),
    ("string-fields-trimmed", 200, _data(review_id="  r6 ", status=" published "), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="r6", remote_status="published")),
    ("non-string-status-ignored", 200, _data(review_id="r6", status=["failed"]), None,
     DeliveryAck(A.ACCEPTED, 200, remote_id="r6")),
    ("json-text-body-decoded", 200, '{"data": {"review_id": "r7", "status": "rejected"}}', None,
     DeliveryAck(A.REMOTE_FAILED, 200, remote_id="r7", remote_status="rejected",
                 error="delivery endpoint reported terminal status rejected")),
    ("custom-hints-nested-path", 200,
     {"result": {"record": {"id": 42, "state": "Invalid", "again": True}}},
     AckHints(dataPath="result.record", idField="id", statusField="state", reusedField="again"),
     DeliveryAck(A.REMOTE_FAILED, 200, remote_id="42", remote_status="invalid",
                 error="delivery endpoint reported terminal status invalid")),
    ("custom-hints-reuse", 200,
     {"result": {"record": {"id": "x1", "again": True, "why": "historical", "orig": "k-9"}}},
     AckHints(dataPath="result.record", idField="id", reusedField="again", reasonField="why", keyField="orig"),
     DeliveryAck(A.DUPLICATE_EXISTING, 200, remote_id="x1", reuse_reason="historical", matched_key="k-9")),
    ("custom-hints-default-fields-not-read", 200,
     {"result": {"record": {"id": "x2", "reused": True, "reuse_reason": "historical"}}},
     AckHints(dataPath="result.record", idField="id", reusedField="again"),
     DeliveryAck(A.ACCEPTED, 200, remote_id="x2")),
    ("custom-hints-nested-path-missing", 200,
     {"result": {"other": {"status": "failed"}}},
     AckHints(dataPath="result.record"),
     DeliveryAck(A.ACCEPTED, 200)),
    ("custom-hints-intermediate-not-object", 200,
     {"result": "record"},
     AckHints(dataPath="result.record"),
     DeliveryAck(A.ACCEPTED, 200)),
    ("empty-dataPath-is-body-root", 200,
     {"review_id": "r8", "status": "expired"},
     AckHints(dataPath=""),
     DeliveryAck(A.REMOTE_FAILED, 200, remote_id="r8", remote_status="expired",
                 error="delivery endpoint reported terminal status expired")),
]


@pytest.mark.parametrize(
    "status,body,hints,expected", [c[1:] for c in ACK_CASES], ids=[c[0] for c in ACK_CASES]
)
def test_parse_delivery_ack_table(status, body, hints, expected):
    assert parse_delivery_ack(status, body, hints) == expected


def test_ack_kind_wire_values():
    assert {k.value for k in AckKind} == {
        "accepted", "idempotent_replay", "duplicate_existing",
        "remote_failed", "retryable_failure", "permanent_failure",
    }


@pytest.mark.parametrize(
    "kind,confirmed,terminal",
    [
        (A.ACCEPTED, True, True),
        (A.IDEMPOTENT_REPLAY, True, True),
        (A.DUPLICATE_EXISTING, True, True),
        (A.REMOTE_FAILED, False, True),
        (A.PERMANENT_FAILURE, False, True),
        (A.RETRYABLE_FAILURE, False, False),
    ],
)
def test_ack_confirmed_and_terminal(kind, confirmed, terminal):
    ack = DeliveryAck(kind, 200)
    assert ack.confirmed is confirmed
    assert ack.terminal is terminal


def test_ack_hints_defaults_and_validation():
    h = AckHints()
    assert (h.dataPath, h.idField, h.statusField, h.reusedField, h.reasonField, h.keyField) == (
        "data", "review_id", "status", "reused", "reuse_reason", "matched_idempotency_key",
    )
    assert AckHints.model_validate({"idField": "id"}).idField == "id"
    with pytest.raises(pydantic.ValidationError):
        AckHints.model_validate({"id_field": "id"})
    with pytest.raises(pydantic.ValidationError):
        AckHints(idField="")


# ---------------------------------------------------------------------------------------------
# settlement_for — the worker handling table of §10.6
# ---------------------------------------------------------------------------------------------

SETTLEMENT_CASES = [
    ("accepted-defaults-status",
     DeliveryAck(A.ACCEPTED, 200, remote_id="r1"),
     Settlement("delivered", "submitted", "done", remote_id="r1", remote_status="accepted",
                delete_cached_files=True)),
    ("accepted-keeps-remote-status",
     DeliveryAck(A.ACCEPTED, 200, remote_id="r1", remote_status="pending"),
     Settlement("delivered", "submitted", "done", remote_id="r1", remote_status="pending",
                delete_cached_files=True)),
    ("idempotent-replay",
     DeliveryAck(A.IDEMPOTENT_REPLAY, 200, remote_id="r2", reuse_reason="same_key"),
     Settlement("delivered", "submitted", "done", remote_id="r2", remote_status="idempotent_replay",
                reuse_reason="same_key", delete_cached_files=True, duplicate_event=True)),
    ("duplicate-existing",
     DeliveryAck(A.DUPLICATE_EXISTING, 200, remote_id="r3", remote_status="published",
                 reuse_reason="historical", matched_key="k"),
     Settlement("duplicate", "duplicate", "done", cell_error="downstream attested historical duplicate",
                remote_id="r3", remote_status="published", reuse_reason="historical_duplicate",
                duplicate_event=True)),
    ("remote-failed",
     DeliveryAck(A.REMOTE_FAILED, 200, remote_id="r4", remote_status="rejected",
                 error="delivery endpoint reported terminal status rejected"),
     Settlement("failed", "failed", "done",
                cell_error="downstream reported terminal status rejected (review r4)", cell_reason="internal_error",
                remote_id="r4", remote_status="rejected",
                ledger_error="delivery endpoint reported terminal status rejected")),
    ("remote-failed-unknown-review",
     DeliveryAck(A.REMOTE_FAILED, 200, remote_status="expired",
                 error="delivery endpoint reported terminal status expired"),
     Settlement("failed", "failed", "done",
                cell_error="downstream reported terminal status expired (review unknown)", cell_reason="internal_error",
                remote_status="expired", ledger_error="delivery endpoint reported terminal status expired")),
    ("permanent-failure",
     DeliveryAck(A.PERMANENT_FAILURE, 400, error="delivery endpoint HTTP 400: bad"),
     Settlement("failed", "failed", "dead", cell_error="delivery endpoint HTTP 400: bad",
                ledger_error="delivery endpoint HTTP 400: bad")),
    ("retryable-failure",
     DeliveryAck(A.RETRYABLE_FAILURE, 503, error="delivery endpoint HTTP 503: "),
     Settlement(None, None, "retry_wait", ledger_error="delivery endpoint HTTP 503: ")),
]


@pytest.mark.parametrize("ack,expected", [c[1:] for c in SETTLEMENT_CASES], ids=[c[0] for c in SETTLEMENT_CASES])
def test_settlement_for_every_kind(ack, expected):
    assert settlement_for(ack) == expected


def test_settlement_covers_every_kind_and_only_confirmed_acks_submit():
    seen = set()
    for _, ack, _ in SETTLEMENT_CASES:
        seen.add(ack.kind)
        s = settlement_for(ack)
        # Invariant §13.9: only a confirmed, non-duplicate ACK makes a cell submitted.
        assert (s.cell_outcome == "submitted") == (ack.kind in (A.ACCEPTED, A.IDEMPOTENT_REPLAY))
        assert (s.outbox_status == "retry_wait") == (not ack.terminal)
    assert seen == set(AckKind)


def test_http_2xx_with_broken_record_never_settles_as_submitted():
    ack = parse_delivery_ack(200, _data(review_id=77, status="Failed", reused=True, reuse_reason="historical"))
    s = settlement_for(ack)
    assert (s.ledger_status, s.cell_outcome, s.outbox_status) == ("failed", "failed", "done")
    assert s.cell_error == "downstream reported terminal status failed (review 77)"


# ---------------------------------------------------------------------------------------------
# classify_outbox_error — §10.7 in order
# ---------------------------------------------------------------------------------------------

CLASSIFY_CASES = [
    # id, message, status, error_name, code, retryable
    ("config-by-name", "anything", None, "ConfigError", "configuration_error", False),
    ("config-does-not-configure", "target t1 does not configure a route", None, None, "configuration_error", False),
    ("config-unsupported-target", "Unsupported delivery target: ftp", None, None, "configuration_error", False),
    ("config-beats-status", "route does not configure url", 503, None, "configuration_error", False),
    ("status-429", "whatever", 429, None, "rate_limited", True),
    ("status-500", "internal", 500, None, "remote_5xx", True),
    ("status-503", "x", 503, None, "remote_5xx", True),
    ("status-409", "x", 409, None, "duplicate", False),
    ("status-400", "x", 400, None, "remote_4xx", False),
    ("status-404", "x", 404, None, "remote_4xx", False),
    ("status-5xx-beats-timeout-text", "request timed out", 502, None, "remote_5xx", True),
    ("status-4xx-beats-text", "connection refused", 403, None, "remote_4xx", False),
    ("status-409-beats-rate-limit-text", "rate limit", 409, None, "duplicate", False),
    ("status-429-beats-invalid-text", "invalid payload", 429, None, "rate_limited", True),
    ("status-2xx-falls-through", "payload too large", 200, None, "invalid_payload", False),
    ("timeout", "Request Timeout after 30000ms", None, None, "network_timeout", True),
    ("timed-out", "socket timed out", None, None, "network_timeout", True),
    ("aborted", "The operation was aborted", None, None, "network_timeout", True),
    ("abort-error-by-name", "", None, "AbortError", "network_timeout", True),
    ("timeout-exception-name", "", None, "ReadTimeout", "network_timeout", True),
    ("timeout-beats-429", "timeout after HTTP 429", None, None, "network_timeout", True),
    ("text-429", "got 429 from upstream", None, None, "rate_limited", True),
    ("text-rate-limit", "Rate limit exceeded", None, None, "rate_limited", True),
    ("rate-limit-beats-duplicate", "rate limited: duplicate request", None, None, "rate_limited", True),
    ("text-duplicate", "Duplicate submission", None, None, "duplicate", False),
    ("text-idempotent", "idempotent request already seen", None, None, "duplicate", False),
    ("text-replay", "replay detected", None, None, "duplicate", False),
    ("text-409", "HTTP 409 conflict", None, None, "duplicate", False),
    ("duplicate-beats-invalid", "invalid duplicate", None, None, "duplicate", False),
    ("text-invalid", "Invalid image", None, None, "invalid_payload", False),
    ("text-validation", "schema validation error", None, None, "invalid_payload", False),
    ("text-bad-request", "Bad Request", None, None, "invalid_payload", False),
    ("text-payload", "payload too large", None, None, "invalid_payload", False),
    ("text-http-4xx", "delivery endpoint HTTP 404: not here", None, None, "invalid_payload", False),
    ("invalid-beats-telegram", "telegram: invalid chat", None, None, "invalid_payload", False),
    ("text-telegram", "Telegram sendPhoto failed", None, None, "telegram_send_failed", False),
    ("telegram-beats-network", "telegram network down", None, None, "telegram_send_failed", False),
    ("not-ready", "route not ready", None, None, "network_timeout", True),
    ("refused", "connect ECONNREFUSED 127.0.0.1:80", None, None, "network_timeout", True),
    ("unavailable", "service unavailable", None, None, "network_timeout", True),
    ("connection", "Connection reset by peer", None, None, "network_timeout", True),
    ("network", "network is unreachable", None, None, "network_timeout", True),
    ("fetch", "fetch failed", None, None, "network_timeout", True),
    ("econn", "read ECONNRESET", None, None, "network_timeout", True),
    ("http-5xx-text-without-status", "delivery endpoint HTTP 503: ", None, None, "internal_error", True),
    ("fallback", "something odd happened", None, None, "internal_error", True),
    ("empty-message", "", None, None, "internal_error", True),
    ("other-name-is-not-config", "boom", None, "TypeError", "internal_error", True),
]


@pytest.mark.parametrize(
    "message,status,name,code,retryable", [c[1:] for c in CLASSIFY_CASES], ids=[c[0] for c in CLASSIFY_CASES]
)
def test_classify_outbox_error_rules_in_order(message, status, name, code, retryable):
    assert classify_outbox_error(message, status, name) == ErrorClass(code, retryable)


def test_parsed_failure_messages_classify_consistently():
    retry = parse_delivery_ack(429, None)
    assert classify_outbox_error(retry.error, retry.http_status) == ErrorClass("rate_limited", True)
    perm = parse_delivery_ack(422, {"error": "bad"})
    assert classify_outbox_error(perm.error) == ErrorClass("invalid_payload", False)
    assert classify_outbox_error(perm.error, perm.http_status) == ErrorClass("remote_4xx", False)


# ---------------------------------------------------------------------------------------------
# retry_delay_ms — §10.5
# ---------------------------------------------------------------------------------------------

# Upper bound (jitter factor 1.0) for n = 1..20 with the defaults: 30 s doubling, 6 h cap from n = 11.
FULL_DELAYS = [
    30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_840_000, 7_680_000, 15_360_000,
] + [21_600_000] * 10
HALF_DELAYS = [
    15_000, 30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_840_000, 7_680_000,
] + [10_800_000] * 10
JUST_BELOW_ONE = math.nextafter(1.0, 0.0)


@pytest.mark.parametrize("n", range(1, 21))
def test_retry_delay_exact_bounds_with_defaults(n):
    assert retry_delay_ms(n, 0.0) == HALF_DELAYS[n - 1]
    assert retry_delay_ms(n, JUST_BELOW_ONE) == FULL_DELAYS[n - 1]
    assert retry_delay_ms(n, 1.0) == FULL_DELAYS[n - 1]


def test_retry_delay_midpoint_and_non_positive_attempts():
    assert retry_delay_ms(3, 0.5) == 90_000  # 120 s × 0.75
    assert retry_delay_ms(0, 0.0) == 15_000
    assert retry_delay_ms(-4, JUST_BELOW_ONE) == 30_000


@pytest.mark.parametrize("n", range(1, 21))
def test_retry_delay_exponent_capped_at_2_pow_18(n):
    expected = 2 ** min(n - 1, 18)
    assert retry_delay_ms(n, 1.0, base_ms=1, max_ms=10**12) == expected
    assert retry_delay_ms(n, 0.0, base_ms=2, max_ms=10**12) == expected


def test_retry_delay_exponent_cap_visible_beyond_18():
    assert retry_delay_ms(19, 1.0, base_ms=1, max_ms=10**12) == 262_144
    assert retry_delay_ms(20, 1.0, base_ms=1, max_ms=10**12) == 262_144
    assert retry_delay_ms(40, 1.0, base_ms=1, max_ms=10**12) == 262_144


def test_retry_delay_custom_base_and_max():
    assert retry_delay_ms(1, 1.0, base_ms=300_000, max_ms=600_000) == 300_000
    assert retry_delay_ms(2, 1.0, base_ms=300_000, max_ms=600_000) == 600_000
    assert retry_delay_ms(5, 0.0, base_ms=300_000, max_ms=600_000) == 300_000


def test_retry_delay_rounds_halves_up():
    assert retry_delay_ms(1, 0.0, base_ms=5) == 3  # 2.5 → 3 (banker's rounding would give 2)
    assert retry_delay_ms(1, 0.0, base_ms=9) == 5  # 4.5 → 5


def test_retry_delay_always_within_jitter_band():
    rng = random.Random(1234)
    samples = [0.0, 0.25, 0.5, 0.75, JUST_BELOW_ONE] + [rng.random() for _ in range(200)]
    for n in range(1, 26):
        cap = min(21_600_000, 30_000 * 2 ** min(n - 1, 18))
        for u in samples:
            d = retry_delay_ms(n, u)
            assert isinstance(d, int)
            assert 0.5 * cap <= d <= cap


@pytest.mark.parametrize("u", [-0.01, 1.01, float("nan")])
def test_retry_delay_rejects_u_outside_unit_interval(u):
    with pytest.raises(ValueError):
        retry_delay_ms(1, u)


# ---------------------------------------------------------------------------------------------
# idempotency keys — §10.2
# ---------------------------------------------------------------------------------------------


def test_idempotency_key_formats():
    assert idempotency_key("review", "illustration", "12345", "daily@2024-05-01T0900", "t1") == (
        "pixivflow:review:illustration:12345:daily@2024-05-01T0900:t1"
    )
    assert idempotency_key("review", "novel", "777") == "pixivflow:review:novel:777:adhoc"


@pytest.mark.parametrize(
    "parts",
    [
        ("review", "illustration", "12345", "daily@2024-05-01T0900", "t1"),
        ("tg", "novel", "9", None, None),
        ("review", "illustration", "1", "plan@manual-req:with:colons", "t-2"),
        ("review", "illustration", "1", "adhoc", "t"),
        ("r", "illustration", "1", "s", "adhoc"),
    ],
)
def test_idempotency_key_round_trip(parts):
    key = idempotency_key(*parts)
    assert parse_idempotency_key(key) == parts
    assert idempotency_key(*parse_idempotency_key(key)) == key


def test_idempotency_key_accepts_int_work_id():
    assert idempotency_key("r", "illustration", 42, "s", "t") == "pixivflow:r:illustration:42:s:t"


@pytest.mark.parametrize(
    "args",
    [
        ("", "illustration", "1"),
        ("a:b", "illustration", "1"),
        ("r", "ill:ust", "1"),
        ("r", "illustration", "1:2"),
        ("r", "illustration", ""),
        ("r", "illustration", "1", "slot", None),
        ("r", "illustration", "1", None, "t"),
        ("r", "illustration", "1", "", "t"),
        ("r", "illustration", "1", "s", "t:x"),
    ],
)
def test_idempotency_key_rejects_bad_parts(args):
    with pytest.raises(ValueError):
        idempotency_key(*args)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "pixivflow",
        "pixivflow:r:illustration:1",
        "outbox:pixivflow:r:illustration:1:adhoc",
        "reconcile:r:illustration:1",
        "pixivflow::illustration:1:adhoc",
        "pixivflow:r::1:adhoc",
        "pixivflow:r:illustration::adhoc",
        "pixivflow:r:illustration:1:slot-without-target",
        "pixivflow:r:illustration:1::t",
        "pixivflow:r:illustration:1:s:",
    ],
)
def test_parse_idempotency_key_rejects_malformed(key):
    with pytest.raises(ValueError):
        parse_idempotency_key(key)
