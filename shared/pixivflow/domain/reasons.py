"""Terminal reason codes, how an outcome earns one, and how it crosses the protocol boundary.

Three vocabularies meet here (docs/explanation/terminal-reasons.md):

* the *internal* terminal reason a cell stores (``terminal_reason_code``): twenty codes, each
  with a pipeline stage, a default "is a retry worth it" flag and a short business message in
  Chinese that an operator or reviewer reads as is (never raw error text, paths or tokens);
* the rules that turn one terminal :class:`TargetOutcome` into such a code;
* the *closed* Workflow Protocol v1 error enum. Internal codes never leave the service except
  as ``error.detail.internal_code``; the mapping below is the single translation point.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from .outcomes import JobLevelOutage, SkipCode, TargetOutcome
from .patterns import LazyPattern


@dataclass(frozen=True)
class ReasonPolicy:
    code: str
    stage: str  # acquisition | download | delivery | execution | configuration
    retryable: bool
    message: str


def _policies(*rows: tuple[str, str, bool, str]) -> Mapping[str, ReasonPolicy]:
    return MappingProxyType({code: ReasonPolicy(code, stage, retryable, msg) for code, stage, retryable, msg in rows})


TERMINAL_REASONS: Mapping[str, ReasonPolicy] = _policies(
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
    # Liveness verdicts about the ledger itself, not about Pixiv (the stall sweep's).
    ("queued_too_long", "execution", True, "排队超时，未能开始执行"),
    ("stalled_no_heartbeat", "execution", True, "执行中断，长时间没有进展"),
    # The run ended while its delivery intent had nothing left that could converge it.
    ("delivery_abandoned", "delivery", True, "投稿未被处理，已放弃"),
    # A consumer stopped the job on purpose: neither a failure to alert on nor one to retry.
    ("cancelled_by_consumer", "execution", False, "任务已被取消"),
)


# The same reasons in the operator page's language (English). The Chinese messages above are
# PixivFlow's own copy: they stay in the ledger, the notifications and the protocol's detail.
REASON_WORDS: Mapping[str, str] = MappingProxyType({
    "no_candidate": "the source answered and no new work qualified",
    "duplicate_exhausted": "every candidate was delivered before",
    "filter_exhausted": "no new work passed the filters",
    "download_timeout": "downloading the work's files timed out",
    "download_failed": "downloading the work's files failed",
    "metadata_failed": "the work's details could not be read",
    "rate_limited": "Pixiv rate-limited the account",
    "auth_failed": "the Pixiv login no longer works; sign in again",
    "remote_http_error": "Pixiv answered with a server error",
    "delivery_failed": "the delivery failed",
    "telepost_rejected": "the receiver refused the submission",
    "telegram_failed": "sending to Telegram failed",
    "network_error": "the network failed (the source or a route could not be reached)",
    "execution_timeout": "the run exceeded the schedule's timeout",
    "configuration_error": "the configuration is wrong",
    "internal_error": "an internal error",
    "queued_too_long": "queued too long without starting",
    "stalled_no_heartbeat": "the run stopped making progress",
    "delivery_abandoned": "the delivery was abandoned: nothing could complete it",
    "cancelled_by_consumer": "cancelled by the consumer",
})


def reason_words(code: str | None) -> str | None:
    """What a stored code means, in English (None for an absent or unknown code)."""
    return REASON_WORDS.get(code) if code else None


def reason_policy(code: str | None) -> ReasonPolicy | None:
    """The policy row of a stored code; ``None`` for an absent or unrecognised one (never a guess)."""
    if not code:
        return None
    return TERMINAL_REASONS.get(code)


def reason_message(code: str) -> str | None:
    """The business message of a code: what a cell stores when it has no message of its own."""
    policy = reason_policy(code)
    return policy.message if policy else None


# --------------------------------------------------------------------------------------------
# Error text -> reason (the `failed` branch once no scan outage decided it).
#
# The rules are evaluated top to bottom and the first hit wins, so their ORDER is the contract:
# e.g. "429 from telegram" is a rate limit, "401 while posting" is an auth problem, and a bare
# "ETIMEDOUT" is a network error because the timeout rule only matches the words "timeout" /
# "timed out". A two-part rule ("A ... B") requires A to appear before B in the text.
# Only the head of the text is inspected, so a huge stack trace cannot change the verdict.
# --------------------------------------------------------------------------------------------

ERROR_TEXT_SCAN_CHARS = 600


def _rx(pattern: str) -> LazyPattern:
    return LazyPattern(pattern, re.IGNORECASE | re.DOTALL)  # compiled on first use: a shorter cold start


def _status(codes: str) -> str:
    """An HTTP status number that is not part of a longer number."""
    return rf"(?<!\d)(?:{codes})(?!\d)"


_RATE_LIMITED = _rx(_status("429") + r"|rate[\s_-]?limit")
_AUTH = _rx(
    _status("401")
    + r"|unauthori[sz]ed|invalid[\s_-]grant|invalid[\s_-]refresh[\s_-]token|authentication[\s_-]failed|登录"
)
_TIMEOUT = _rx(r"time[\s_-]?out|timed[\s_-]out")
_DOWNLOAD_CONTEXT = _rx(r"download|image|url|fetch")
_DOWNLOAD_FAILED = _rx(
    r"(?:download|image[\s_-]fetch|image[\s_-]write).*?(?:fail|error|unable)"
    r"|(?:failed|unable).*?(?:download|fetch(?:ing)?[\s_-]image|writ(?:e|ing)[\s_-]image)"
)
_REMOTE_HTTP = _rx(_status("502|503|504") + r"|bad[\s_-]gateway|service[\s_-]unavailable|server[\s_-]error|\b5xx\b")
_TELEGRAM = _rx(r"telegram")
_CONFIG_SPECIFIC = _rx(
    r"not[\s_-]configured|missing[\s_-](?:config(?:uration)?|setting)|invalid[\s_-]config"
)
_METADATA = _rx(
    r"metadata.*?(?:fail|error|unable|invalid|parse|serializ|gather)"
    r"|failed[\s_-]to[\s_-](?:gather|parse|fetch|load|save).*?metadata"
)
_TELEPOST_REJECTED = _rx(r"tele[\s_-]?post.*?(?:reject|invalid|" + _status(r"4\d\d") + r"|\b4xx\b)")
_DELIVERY = _rx(r"deliver|submit|publish|post|outbox")
_NETWORK = _rx(
    r"econn[a-z]*|enotfound|etimedout|ehostunreach|enetunreach|socket[\s_-]hang[\s_-]up"
    r"|network[\s_-]is[\s_-]unreachable|getaddrinfo"
)
_CONFIG_GENERIC = _rx(r"config|missing|invalid")


def classify_error_text(text: str) -> str:
    """Map the text of a failure from OUTSIDE (a source's or a route's error message) onto a
    terminal reason (always returns a code). Our own failures carry their code from where they
    are raised (``TargetOutcome.reason_code``, ``SourceError.reason``): rewording one of our
    messages never changes a code a consumer sees."""
    head = (text or "")[:ERROR_TEXT_SCAN_CHARS]
    if _RATE_LIMITED.search(head):
        return "rate_limited"
    if _AUTH.search(head):
        return "auth_failed"
    if _TIMEOUT.search(head):
        return "download_timeout" if _DOWNLOAD_CONTEXT.search(head) else "execution_timeout"
    if _DOWNLOAD_FAILED.search(head):
        return "download_failed"
    if _REMOTE_HTTP.search(head):
        return "remote_http_error"
    if _TELEGRAM.search(head):
        return "telegram_failed"
    if _CONFIG_SPECIFIC.search(head):
        return "configuration_error"
    if _METADATA.search(head):
        return "metadata_failed"
    if _TELEPOST_REJECTED.search(head):
        return "telepost_rejected"
    if _DELIVERY.search(head):
        return "delivery_failed"
    if _NETWORK.search(head):
        return "network_error"
    if _CONFIG_GENERIC.search(head):
        return "configuration_error"
    return "internal_error"


# A job-level outage seen during the scan explains the failure better than any error text.
OUTAGE_REASONS: Mapping[str, str] = MappingProxyType(
    {
        JobLevelOutage.PIXIV_AUTH_FAILURE.value: "auth_failed",
        JobLevelOutage.DELIVERY_UNAVAILABLE.value: "delivery_failed",
        JobLevelOutage.NETWORK_OUTAGE.value: "network_error",
        JobLevelOutage.DATABASE_UNAVAILABLE.value: "network_error",
    }
)


def _no_candidate_reason(outcome: TargetOutcome) -> str:
    skips = list(outcome.scan.skipped) if outcome.scan else []
    if not skips:
        return "no_candidate"
    duplicates = sum(1 for s in skips if s.code == SkipCode.DUPLICATE)
    if duplicates == len(skips):
        return "duplicate_exhausted"
    # Mostly "already had it" or nothing transient: the pool was real but our own rules emptied it.
    if duplicates * 2 >= len(skips) or not any(s.code == SkipCode.UNAVAILABLE for s in skips):
        return "filter_exhausted"
    return "no_candidate"


def terminal_reason_for(outcome: TargetOutcome) -> str | None:
    """The reason code an outcome leaves on its cell; ``None`` for the success-shaped kinds.

    A ``failed`` outcome is classified whatever its ``retryable`` flag: callers only persist the
    code when the failure terminalises the cell (applyOutcome).
    """
    kind = outcome.kind
    if kind in ("submitted", "stored", "delivery_pending"):
        return None
    if kind == "duplicate":
        return "duplicate_exhausted"
    if kind == "no_candidate":
        return _no_candidate_reason(outcome)
    if kind == "failed":
        for outage in outcome.scan.outages if outcome.scan else ():
            mapped = OUTAGE_REASONS.get(str(outage))
            if mapped:
                return mapped
        return outcome.reason_code or classify_error_text(outcome.error or "")
    return None


def reason_of(reason: str | None, outside_text: str) -> str:
    """A failure that wraps an error from outside: the code its raiser gave it, else what the
    outside text says (``classify_error_text``); never the words we wrapped it in."""
    return reason or classify_error_text(outside_text)


def remote_failed_reason(remote_status: str | None) -> str:
    """The reason a downstream's terminal record status (``remote_failed``) leaves on its cell.
    PixivFlow classifies its own message "downstream reported terminal status <s>" by its words,
    which makes ``invalid`` a configuration error and every other status an internal error; the
    codes are kept (an outcome record reads the same as PixivFlow's), decided here from the
    status rather than from our wording."""
    return "configuration_error" if (remote_status or "").strip().lower() == "invalid" else "internal_error"


# --------------------------------------------------------------------------------------------
# Protocol boundary
# --------------------------------------------------------------------------------------------

# The closed protocol enum, each with the `retryable` a producer sends unless it knows better.
PROTOCOL_ERROR_CODES: Mapping[str, bool] = MappingProxyType(
    {
        "no_candidate": True,
        "source_error": True,
        "auth_error": False,
        "quota_exceeded": True,
        "resource_busy": True,  # declared by the protocol; nothing here produces it
        "queued_too_long": True,
        "stalled_no_progress": True,
        "deadline_exceeded": True,
        "cancelled_by_consumer": False,
        "idempotency_conflict": False,
        "unsupported_protocol_version": False,
        "invalid_params": False,
        "delivery_failed": True,
        "delivery_rejected": False,
        "delivery_abandoned": True,
        "internal_error": False,
    }
)

# Every internal code has exactly one protocol code; a new internal code without a row here
# is caught by the unit test that cross-checks TERMINAL_REASONS and tests/contract/error-mapping.json.
INTERNAL_TO_PROTOCOL: Mapping[str, str] = MappingProxyType(
    {
        "no_candidate": "no_candidate",
        "duplicate_exhausted": "no_candidate",
        "filter_exhausted": "no_candidate",
        "download_timeout": "source_error",
        "download_failed": "source_error",
        "metadata_failed": "source_error",
        "remote_http_error": "source_error",
        "network_error": "source_error",
        "rate_limited": "quota_exceeded",
        "auth_failed": "auth_error",
        "delivery_failed": "delivery_failed",
        "telegram_failed": "delivery_failed",
        "telepost_rejected": "delivery_rejected",
        "delivery_abandoned": "delivery_abandoned",
        "queued_too_long": "queued_too_long",
        "stalled_no_heartbeat": "stalled_no_progress",
        "execution_timeout": "deadline_exceeded",
        "configuration_error": "internal_error",
        "internal_error": "internal_error",
        "cancelled_by_consumer": "cancelled_by_consumer",
    }
)

FALLBACK_PROTOCOL_CODE = "internal_error"


def protocol_code_for(internal: str | None) -> str | None:
    """The protocol code of an internal reason; ``None`` when absent or unknown (the facade decides)."""
    if not internal:
        return None
    return INTERNAL_TO_PROTOCOL.get(internal)


def protocol_error(internal: str | None, message: str | None = None) -> dict[str, Any]:
    """A protocol ``Error`` body for a terminal cell.

    ``code`` is always from the closed enum (``internal_error`` when the internal code is absent
    or unknown) and ``retryable`` is always present, from the protocol table. The internal code,
    if any, travels only inside ``detail.internal_code``. ``message`` is the stored business
    message, defaulting to the reason table's message.
    """
    code = protocol_code_for(internal) or FALLBACK_PROTOCOL_CODE
    body: dict[str, Any] = {"code": code}
    text = message or (reason_message(internal) if internal else None)
    if text:
        body["message"] = text
    body["retryable"] = PROTOCOL_ERROR_CODES[code]
    if internal:
        body["detail"] = {"internal_code": internal}
    return body


__all__ = [
    "ERROR_TEXT_SCAN_CHARS",
    "FALLBACK_PROTOCOL_CODE",
    "INTERNAL_TO_PROTOCOL",
    "OUTAGE_REASONS",
    "PROTOCOL_ERROR_CODES",
    "ReasonPolicy",
    "TERMINAL_REASONS",
    "classify_error_text",
    "protocol_code_for",
    "protocol_error",
    "reason_message",
    "reason_of",
    "remote_failed_reason",
    "reason_policy",
    "terminal_reason_for",
]
