"""Terminal reason codes, their derivation from outcomes, and the protocol error boundary (spec §8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pixivflow.domain.outcomes import CandidateScan, CandidateSkip, TargetOutcome
from pixivflow.domain.reasons import (
    INTERNAL_TO_PROTOCOL,
    PROTOCOL_ERROR_CODES,
    TERMINAL_REASONS,
    ReasonPolicy,
    classify_error_text,
    protocol_code_for,
    protocol_error,
    reason_message,
    reason_policy,
    terminal_reason_for,
)

# The team kit sits beside the repository checkout (same relative place in CI).
PROTOCOL_DIR = Path(__file__).resolve().parents[1] / "contract"  # the project's copy of protocol/v1

# ---------------------------------------------------------------------------------------------
# §8.1: the twenty codes
# ---------------------------------------------------------------------------------------------

REASON_TABLE = [
    ("no_candidate", "acquisition", True, "没有找到合适的新作品"),
    ("duplicate_exhausted", "acquisition", True, "候选作品均已投稿过"),
    ("filter_exhausted", "acquisition", True, "没有符合筛选条件的新作品"),
    ("download_timeout", "download", True, "图片下载超时"),
    ("download_failed", "download", True, "图片下载失败"),
    ("metadata_failed", "acquisition", True, "作品信息获取失败"),
    ("rate_limited", "acquisition", True, "Pixiv 请求频率受限"),
    ("auth_failed", "acquisition", False, "Pixiv 登录已失效，需要重新登录"),
    ("remote_http_error", "acquisition", True, "Pixiv 服务器返回错误"),
    ("delivery_failed", "delivery", True, "投稿投递失败"),
    ("telepost_rejected", "delivery", False, "投稿被接收端拒绝"),
    ("telegram_failed", "delivery", True, "Telegram 发送失败"),
    ("network_error", "execution", True, "网络异常"),
    ("execution_timeout", "execution", True, "执行超时"),
    ("configuration_error", "configuration", False, "配置错误"),
    ("internal_error", "execution", False, "内部错误"),
    ("queued_too_long", "execution", True, "排队超时，未能开始执行"),
    ("stalled_no_heartbeat", "execution", True, "执行中断，长时间没有进展"),
    ("delivery_abandoned", "delivery", True, "投稿未被处理，已放弃"),
    ("cancelled_by_consumer", "execution", False, "任务已被取消"),
]


def test_there_are_exactly_the_twenty_codes_of_the_table():
    assert len(REASON_TABLE) == 20
    assert set(TERMINAL_REASONS) == {row[0] for row in REASON_TABLE}


@pytest.mark.parametrize("code,stage,retryable,message", REASON_TABLE)
def test_reason_policy_row(code, stage, retryable, message):
    assert reason_policy(code) == ReasonPolicy(code, stage, retryable, message)
    assert reason_message(code) == message


@pytest.mark.parametrize("code", [None, "", "no_such_code", "NO_CANDIDATE", "rate limited"])
def test_unknown_or_absent_code_has_no_policy(code):
    assert reason_policy(code) is None
    if code is not None:
        assert reason_message(code) is None


def test_reason_table_is_read_only():
    with pytest.raises(TypeError):
        TERMINAL_REASONS["made_up"] = ReasonPolicy("made_up", "execution", False, "x")  # type: ignore[index]


# ---------------------------------------------------------------------------------------------
# §8.2: error text rules, in the spec's order
# ---------------------------------------------------------------------------------------------

TEXT_CASES = [
    # 1. rate limit
    ("HTTP 429 Too Many Requests", "rate_limited"),
    ("Pixiv rate limit reached", "rate_limited"),
    ("429 from telegram while posting", "rate_limited"),  # beats telegram and delivery
    # 2. authentication
    ("status 401", "auth_failed"),
    ("Unauthorized", "auth_failed"),
    ("OAuth error: invalid_grant", "auth_failed"),
    ("invalid refresh token supplied", "auth_failed"),
    ("authentication failed for account", "auth_failed"),
    ("需要重新登录", "auth_failed"),
    ("401 while delivering to review", "auth_failed"),  # beats delivery
    ("request timed out after 401 retries", "auth_failed"),  # auth is checked before timeout
    # 3. timeouts: the download flavour only when the text is about fetching content
    ("timeout while downloading image", "download_timeout"),
    ("fetch of https://i.pximg.net/x timed out", "download_timeout"),
    ("job timed out", "execution_timeout"),
    ("telegram sendPhoto timeout", "execution_timeout"),  # timeout beats telegram
    ("handler timeout after 503", "execution_timeout"),  # timeout beats 5xx
    # 4. download failures (ordered pairs)
    ("download failed: EACCES", "download_failed"),
    ("image fetch error", "download_failed"),
    ("image write unable to complete", "download_failed"),
    ("failed to download work 123", "download_failed"),
    ("unable to fetch image", "download_failed"),
    ("failed to write image to disk", "download_failed"),
    ("download failed with 502", "download_failed"),  # beats remote http
    # 5. remote HTTP errors
    ("upstream answered 502", "remote_http_error"),
    ("503 Service Unavailable", "remote_http_error"),
    ("status 504", "remote_http_error"),
    ("Bad Gateway", "remote_http_error"),
    ("Internal Server Error", "remote_http_error"),
    ("upstream 5xx", "remote_http_error"),
    ("503 from telegram", "remote_http_error"),  # beats telegram
    # 6. telegram
    ("telegram api said no", "telegram_failed"),
    ("Telegram not configured", "telegram_failed"),  # telegram beats the specific config rule
    # 7. specific configuration phrases
    ("delivery route not configured", "configuration_error"),  # beats delivery
    ("missing configuration for source", "configuration_error"),
    ("missing setting token", "configuration_error"),
    ("invalid config: cron", "configuration_error"),
    # 8. metadata
    ("metadata fetch failed", "metadata_failed"),
    ("metadata could not be serialized", "metadata_failed"),
    ("metadata parse error for post", "metadata_failed"),  # beats delivery ("post")
    ("failed to gather work metadata", "metadata_failed"),
    ("failed to load cached metadata", "metadata_failed"),
    # 9. tele-post rejection
    ("tele-post rejected the payload", "telepost_rejected"),
    ("TelePost answered 422", "telepost_rejected"),
    ("telepost: invalid body", "telepost_rejected"),
    # 10. delivery in general
    ("tele-post is down", "delivery_failed"),  # no rejection word: plain delivery
    ("delivery to review channel failed", "delivery_failed"),
    ("could not submit", "delivery_failed"),
    ("submitted record status expired", "delivery_failed"),
    ("publish refused", "delivery_failed"),
    ("outbox row vanished", "delivery_failed"),
    ("delivery ECONNRESET", "delivery_failed"),  # delivery beats network
    # 11. network
    ("connect ECONNREFUSED 127.0.0.1:443", "network_error"),
    ("read ECONNRESET", "network_error"),
    ("getaddrinfo ENOTFOUND i.pximg.net", "network_error"),
    ("connect ETIMEDOUT 10.0.0.1", "network_error"),  # ETIMEDOUT is not the "timeout" word
    ("EHOSTUNREACH", "network_error"),
    ("ENETUNREACH", "network_error"),
    ("socket hang up", "network_error"),
    ("network is unreachable", "network_error"),
    # 12. generic configuration words
    ("invalid value for limit", "configuration_error"),
    ("missing tag", "configuration_error"),
    ("config reload raced", "configuration_error"),
    # 13. anything else
    ("boom", "internal_error"),
    ("", "internal_error"),
    ("status 14290", "internal_error"),  # a status number only counts on its own
]


@pytest.mark.parametrize("text,expected", TEXT_CASES)
def test_classify_error_text(text, expected):
    assert classify_error_text(text) == expected


def test_only_the_first_600_characters_are_read():
    assert classify_error_text("x" * 599 + " 429") == "internal_error"
    assert classify_error_text("x" * 595 + " 429") == "rate_limited"
    assert classify_error_text("boom " + "y" * 700 + " ECONNRESET") == "internal_error"


def scan(skips=(), outages=()):
    return CandidateScan(
        bound=5,
        attempted=0,
        skipped=[CandidateSkip(code, f"w{i}", f"{code} reason") for i, code in enumerate(skips)],
        outages=list(outages),
    )


OUTCOME_CASES = [
    # non-failures carry no reason
    ("submitted", TargetOutcome.submitted("1", "illustration"), None),
    ("stored", TargetOutcome.stored("1", "illustration"), None),
    ("delivery_pending", TargetOutcome.delivery_pending("1", "illustration"), None),
    # duplicate
    ("duplicate", TargetOutcome.duplicate("1", "already delivered"), "duplicate_exhausted"),
    # no_candidate over the scan's skips
    ("no scan at all", TargetOutcome.no_candidate("empty"), "no_candidate"),
    ("empty skips", TargetOutcome.no_candidate("empty", scan()), "no_candidate"),
    ("all duplicates", TargetOutcome.no_candidate("r", scan(["duplicate", "duplicate"])), "duplicate_exhausted"),
    (
        "duplicates are half",
        TargetOutcome.no_candidate("r", scan(["duplicate", "unavailable"])),
        "filter_exhausted",
    ),
    (
        "no transient skip",
        TargetOutcome.no_candidate("r", scan(["duplicate", "filtered", "deleted"])),
        "filter_exhausted",
    ),
    (
        "mostly transient",
        TargetOutcome.no_candidate("r", scan(["duplicate", "unavailable", "unavailable"])),
        "no_candidate",
    ),
    (
        "transient without duplicates",
        TargetOutcome.no_candidate("r", scan(["filtered", "unavailable"])),
        "no_candidate",
    ),
    # failed: the first outage wins, whatever the text says
    (
        "auth outage",
        TargetOutcome.failed("boom", False, scan(outages=["pixiv_auth_failure"])),
        "auth_failed",
    ),
    (
        "delivery outage",
        TargetOutcome.failed("boom", False, scan(outages=["delivery_unavailable"])),
        "delivery_failed",
    ),
    (
        "network outage",
        TargetOutcome.failed("boom", False, scan(outages=["network_outage"])),
        "network_error",
    ),
    (
        "database outage",
        TargetOutcome.failed("boom", False, scan(outages=["database_unavailable"])),
        "network_error",
    ),
    (
        "first of two outages (network first)",
        TargetOutcome.failed("boom", False, scan(outages=["network_outage", "pixiv_auth_failure"])),
        "network_error",
    ),
    (
        "first of two outages (auth first)",
        TargetOutcome.failed("boom", False, scan(outages=["pixiv_auth_failure", "network_outage"])),
        "auth_failed",
    ),
    (
        "outage beats text",
        TargetOutcome.failed("HTTP 429", False, scan(outages=["delivery_unavailable"])),
        "delivery_failed",
    ),
    # failed without outages: the text rules
    ("text rule", TargetOutcome.failed("HTTP 429", False, scan()), "rate_limited"),
    ("text without scan", TargetOutcome.failed("socket hang up", False), "network_error"),
    ("no text", TargetOutcome("failed", retryable=False), "internal_error"),
    ("retryable failure is still classified", TargetOutcome.failed("job timed out", True), "execution_timeout"),
]


@pytest.mark.parametrize("label,outcome,expected", OUTCOME_CASES, ids=[c[0] for c in OUTCOME_CASES])
def test_terminal_reason_for(label, outcome, expected):
    assert terminal_reason_for(outcome) == expected


def test_every_derived_reason_is_a_known_code():
    derived = {terminal_reason_for(o) for _, o, _ in OUTCOME_CASES} | {classify_error_text(t) for t, _ in TEXT_CASES}
    derived.discard(None)
    assert derived <= set(TERMINAL_REASONS)


# ---------------------------------------------------------------------------------------------
# §8.3 / §8.4: the protocol boundary, checked against the kit's wire contract
# ---------------------------------------------------------------------------------------------


def load_mapping() -> dict:
    return json.loads((PROTOCOL_DIR / "error-mapping.json").read_text(encoding="utf-8"))


def load_schema_enum() -> list[str]:
    schema = json.loads((PROTOCOL_DIR / "protocol.schema.json").read_text(encoding="utf-8"))
    return schema["$defs"]["Error"]["properties"]["code"]["enum"]


def test_every_internal_code_maps_into_the_closed_enum():
    enum = set(load_schema_enum())
    assert set(INTERNAL_TO_PROTOCOL) == set(TERMINAL_REASONS), "an internal code has no protocol mapping"
    outside = {k: v for k, v in INTERNAL_TO_PROTOCOL.items() if v not in enum}
    assert not outside, f"mapped outside the protocol enum: {outside}"


def test_mapping_agrees_with_the_kit_error_mapping_json():
    rows = {k: v for k, v in load_mapping()["producer_internal"].items() if not k.startswith("$")}
    # Every internal code has its row in the published mapping (cancelled_by_consumer included) and
    # every row agrees with ours.
    missing = set(INTERNAL_TO_PROTOCOL) - set(rows)
    assert not missing, f"rows missing from error-mapping.json: {missing}"
    extra = set(rows) - set(INTERNAL_TO_PROTOCOL)
    assert not extra, f"error-mapping.json maps codes we do not know: {extra}"
    disagreements = {k: (v, INTERNAL_TO_PROTOCOL[k]) for k, v in rows.items() if INTERNAL_TO_PROTOCOL[k] != v}
    assert not disagreements, f"json vs code: {disagreements}"
    assert all(target in load_schema_enum() for target in rows.values())


def test_protocol_codes_equal_the_schema_enum_with_the_json_defaults():
    assert list(PROTOCOL_ERROR_CODES) == load_schema_enum()
    defaults = {code: row["retryable"] for code, row in load_mapping()["protocol_codes"].items()}
    assert dict(PROTOCOL_ERROR_CODES) == defaults


def test_protocol_retryable_never_contradicts_the_internal_policy():
    # The job facade sends the protocol default; it must say what the reason table says.
    for code, policy in TERMINAL_REASONS.items():
        assert PROTOCOL_ERROR_CODES[INTERNAL_TO_PROTOCOL[code]] == policy.retryable, code


@pytest.mark.parametrize(
    "internal,expected",
    [
        ("rate_limited", "quota_exceeded"),
        ("stalled_no_heartbeat", "stalled_no_progress"),
        ("execution_timeout", "deadline_exceeded"),
        ("configuration_error", "internal_error"),
        ("cancelled_by_consumer", "cancelled_by_consumer"),
        (None, None),
        ("", None),
        ("made_up_code", None),
    ],
)
def test_protocol_code_for(internal, expected):
    assert protocol_code_for(internal) == expected


def test_protocol_error_for_a_known_reason():
    assert protocol_error("rate_limited") == {
        "code": "quota_exceeded",
        "message": "Pixiv 请求频率受限",
        "retryable": True,
        "detail": {"internal_code": "rate_limited"},
    }


def test_protocol_error_uses_the_stored_message_when_given():
    body = protocol_error("auth_failed", "stored message")
    assert body == {
        "code": "auth_error",
        "message": "stored message",
        "retryable": False,
        "detail": {"internal_code": "auth_failed"},
    }


def test_protocol_error_for_an_unknown_reason_is_internal_error_with_the_code_in_detail():
    assert protocol_error("made_up_code") == {
        "code": "internal_error",
        "retryable": False,
        "detail": {"internal_code": "made_up_code"},
    }


def test_protocol_error_without_a_reason():
    assert protocol_error(None) == {"code": "internal_error", "retryable": False}


def test_no_internal_only_code_leaks_as_a_protocol_code():
    enum = set(load_schema_enum())
    for code in TERMINAL_REASONS:
        body = protocol_error(code)
        assert body["code"] in enum
        assert isinstance(body["retryable"], bool)
        assert body["detail"] == {"internal_code": code}


def test_every_terminal_reason_has_its_english_words():
    from pixivflow.domain.reasons import REASON_WORDS, TERMINAL_REASONS

    assert set(REASON_WORDS) == set(TERMINAL_REASONS)
    assert all(words and words.isascii() for words in REASON_WORDS.values())
