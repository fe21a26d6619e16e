"""Bounded candidate scan rules (``candidateScanLimit``; docs/explanation/selection.md).

A fresh cell walks its candidates one at a time and stops at the first usable one.
This module holds the pure parts of that walk:

* how many candidates one pass may attempt (``effective_scan_bound``);
* what one failed candidate means (``classify_candidate_failure``): either the
  whole job is hitting an outage, or only this candidate is skipped with a code;
* what a scan that found nothing usable turns into (``scan_verdict``,
  ``no_candidate_reason``), how two passes combine (``merge_scans``) and how the
  report is kept small enough to store on a cell (``bounded_report``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from .outcomes import CandidateScan, CandidateSkip, JobLevelOutage, SkipCode
from .patterns import LazyPattern

DEFAULT_SCAN_LIMIT = 5
MIN_SCAN_LIMIT = 1
MAX_SCAN_LIMIT = 100

NO_CANDIDATE_PREFIX = "no eligible candidate found after scanning "


# --------------------------------------------------------------------------- bound


def _clamp_scan_limit(value: int | None) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    value = int(value)
    if value < MIN_SCAN_LIMIT:
        return MIN_SCAN_LIMIT
    return min(value, MAX_SCAN_LIMIT)


def effective_scan_bound(
    target_limit: int | None,
    target_scan_limit: int | None,
    global_scan_limit: int | None = None,
) -> int:
    """How many candidates one selection pass may attempt.

    The configured scan limit is the target's ``candidateScanLimit`` when set, else the
    global one, else ``DEFAULT_SCAN_LIMIT``; either is clamped to 1..100 (zero and
    negative values become 1). The bound is then raised to the target's ``limit`` when
    that is larger, because a cell asked for N works must be allowed to try N
    candidates. That floor is applied after the clamp, so the bound exceeds 100 only
    when the limit itself does. A missing or non-positive limit adds no floor.
    """
    configured = _clamp_scan_limit(target_scan_limit)
    if configured is None:
        configured = _clamp_scan_limit(global_scan_limit)
    if configured is None:
        configured = DEFAULT_SCAN_LIMIT
    if target_limit is not None and not isinstance(target_limit, bool) and int(target_limit) > configured:
        return int(target_limit)
    return configured


# ------------------------------------------------------------------ classification


@dataclass(frozen=True)
class FailureVerdict:
    """What one failed candidate attempt means.

    Exactly one of ``outage`` (a ``JobLevelOutage`` value: the job, not the candidate,
    is in trouble) and ``skip_code`` (a ``SkipCode`` value: pass over this candidate)
    is set. ``retryable`` is true for every outage and for ``unavailable`` skips.
    """

    outage: str | None
    skip_code: str | None
    retryable: bool

    @property
    def is_outage(self) -> bool:
        return self.outage is not None

    def to_skip(self, work_id: str, reason: str) -> CandidateSkip:
        """The skip entry for this verdict (only meaningful when it is not an outage)."""
        if self.skip_code is None:
            raise ValueError("a job-level outage is not a candidate skip")
        return CandidateSkip(code=self.skip_code, work_id=str(work_id), reason=reason, retryable=self.retryable)


def _outage(kind: JobLevelOutage) -> FailureVerdict:
    return FailureVerdict(outage=kind.value, skip_code=None, retryable=True)


def _skip(code: SkipCode) -> FailureVerdict:
    return FailureVerdict(outage=None, skip_code=code.value, retryable=code is SkipCode.UNAVAILABLE)


def _rx(pattern: str) -> LazyPattern:
    return LazyPattern(pattern, re.IGNORECASE)  # compiled on first use: a shorter cold start


# Rule 1: the job's own database is failing. Our ledger is DynamoDB, so the domain's
# LedgerUnavailable counts too; the sqlite wording is kept for errors relayed verbatim.
_DATABASE_CLASSES = frozenset({"DatabaseError", "LedgerUnavailable"})
_DATABASE_TEXT = _rx(r"sqlite|database (?:table )?is locked|unable to open|no such table|disk i/?o")
# Rule 2: the Pixiv credentials are not accepted.
_AUTH_CLASSES = frozenset({"AuthenticationError"})
_AUTH_TEXT = _rx(r"\b401\b|unauthori[sz]ed|invalid_grant|invalid refresh token|authentication failed")
# Rule 3: the downstream delivery provider is down (unless it reports a duplicate).
_DELIVERY_SUBJECT = _rx(r"telegram|delivery (?:target|provider)")
_DELIVERY_DOWN = _rx(
    r"unavailable|unreachable|\bdown\b|not configured|time[ds]? ?out|\beconn\w*|etimedout|enotfound"
    r"|\b(?:401|403|502|503|504)\b"
)
_DELIVERY_DONE = _rx(r"already (?:delivered|published)|duplicate")
# Rule 4: the upstream gateway is failing for everyone.
_OUTAGE_STATUSES = frozenset({502, 503, 504})
# Rule 5: the network failed for this attempt. Python's own exception classes and
# messages are accepted next to the Node error codes PixivFlow checks.
_NETWORK_CLASSES = frozenset(
    {"ConnectionError", "TimeoutError", "gaierror", "ConnectError", "NetworkError", "TimeoutException"}
)
_NETWORK_TEXT = _rx(
    r"econnrefused|econnreset|enotfound|etimedout|ehostunreach|enetunreach|socket hang up"
    r"|network (?:is )?unreachable|getaddrinfo|connection (?:reset|refused|aborted)|timed out"
)
# Rule 6: the work already went out.
_DUPLICATE_TEXT = _rx(r"already (?:delivered|processed|published)|idempotent_replay")
# Rule 7: the work is gone.
_GONE_CLASSES = frozenset({"PixivNotFoundError", "WorkGoneError"})
_GONE_TEXT = _rx(r"\b404\b|not found|deleted")
# Rule 8: throttled.
_RATE_CLASSES = frozenset({"PixivRateLimitError"})
_RATE_TEXT = _rx(r"\b429\b|rate[ -]?limit")
# Rule 9: not visible to us.
_DENIED_TEXT = _rx(r"\b403\b|forbidden|private|access denied|permission")
# Rule 10: a kind of work we cannot turn into files.
_MEDIA_TEXT = _rx(r"ugoira|unsupported (?:media|type|format)|cannot (?:process|handle)")
# Rule 11: a filter rejected it.
_FILTER_TEXT = _rx(r"language filter|filtered out|excluded (?:by|from)")
# Rule 12: the work's data is unusable.
_METADATA_TEXT = _rx(
    r"invalid (?:metadata|id|illustid|novelid)|missing (?:metadata|page|image)|no files produced"
)


def _class_names(error: BaseException | str) -> frozenset[str]:
    if isinstance(error, BaseException):
        return frozenset(cls.__name__ for cls in type(error).__mro__)
    return frozenset()


def _status_of(error: BaseException | str, status: int | None) -> int | None:
    if status is not None:
        return status
    for attr in ("status", "status_code"):
        value = getattr(error, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _text_of(error: BaseException | str) -> str:
    if isinstance(error, str):
        return error
    text = str(error)
    code = getattr(error, "code", None)
    if isinstance(code, str) and code and code not in text:
        text = f"{code}: {text}"
    return text


def classify_candidate_failure(error: BaseException | str, status: int | None = None) -> FailureVerdict:
    """Classify one failed candidate attempt (rules applied in order).

    ``error`` is the exception (or just its message); ``status`` is the upstream HTTP
    status when the caller knows it, else it is read from the error's ``status`` /
    ``status_code`` attribute. Class names are matched anywhere in the error's MRO, so
    a subclass of ``DatabaseError`` counts as one.

    Job-level outages come first (rules 1–4). A ``TransientSourceError`` that is not an
    outage is always a retryable ``unavailable`` skip: the source itself said a later
    attempt may succeed, so its wording never turns it into a permanent skip.
    """
    names = _class_names(error)
    code = getattr(error, "code", None) if isinstance(error, BaseException) else None
    text = _text_of(error)
    status = _status_of(error, status)

    # 1. database
    sqlite_code = isinstance(code, str) and code.upper().startswith("SQLITE_")
    if names & _DATABASE_CLASSES or sqlite_code or _DATABASE_TEXT.search(text):
        return _outage(JobLevelOutage.DATABASE_UNAVAILABLE)
    # 2. Pixiv authentication
    if names & _AUTH_CLASSES or status == 401 or _AUTH_TEXT.search(text):
        return _outage(JobLevelOutage.PIXIV_AUTH_FAILURE)
    # 3. delivery provider
    if _DELIVERY_SUBJECT.search(text) and _DELIVERY_DOWN.search(text) and not _DELIVERY_DONE.search(text):
        return _outage(JobLevelOutage.DELIVERY_UNAVAILABLE)
    # 4. upstream gateway
    if status in _OUTAGE_STATUSES:
        return _outage(JobLevelOutage.NETWORK_OUTAGE)
    if "TransientSourceError" in names:
        return _skip(SkipCode.UNAVAILABLE)
    # 5. network failure of this attempt
    if names & _NETWORK_CLASSES or _NETWORK_TEXT.search(text):
        return _skip(SkipCode.UNAVAILABLE)
    # 6. already delivered
    if _DUPLICATE_TEXT.search(text):
        return _skip(SkipCode.DUPLICATE)
    # 7. gone
    if names & _GONE_CLASSES or status == 404 or _GONE_TEXT.search(text):
        return _skip(SkipCode.DELETED)
    # 8. rate limited
    if names & _RATE_CLASSES or status == 429 or _RATE_TEXT.search(text):
        return _skip(SkipCode.UNAVAILABLE)
    # 9. access denied
    if status == 403 or _DENIED_TEXT.search(text):
        return _skip(SkipCode.ACCESS_DENIED)
    # 10. unsupported media
    if _MEDIA_TEXT.search(text):
        return _skip(SkipCode.UNSUPPORTED_MEDIA)
    # 11. filtered
    if _FILTER_TEXT.search(text):
        return _skip(SkipCode.FILTERED)
    # 12. invalid metadata
    if _METADATA_TEXT.search(text):
        return _skip(SkipCode.INVALID_METADATA)
    # 13. anything else: assume a later attempt may work
    return _skip(SkipCode.UNAVAILABLE)


# --------------------------------------------------------------------- verdicts


def scanned_count(scan: CandidateScan) -> int:
    """How many candidates the scan looked at.

    Candidates passed over before any attempt (duplicates, filtered works) only leave
    a skip, while every failed attempt leaves both an attempt and a skip; the larger of
    the two counts is therefore the number of candidates examined.
    """
    return max(scan.attempted, len(scan.skipped))


def no_candidate_reason(scan: CandidateScan, note: str | None = None) -> str:
    """The ``no_candidate`` reason: the fixed prefix, the count, then a short breakdown.

    When the selection rules passed works over before any was tried, the breakdown says how
    many the source returned and which rules rejected them (the supply report), so
    an operator reads "12 fetched, 12 rejected by the selection rules (9 below_min_bookmarks,
    3 date_out_of_range)" instead of a bare zero. ``note`` (e.g. "the date window is empty")
    comes first when given.
    """
    n = scanned_count(scan)
    reason = f"{NO_CANDIDATE_PREFIX}{n} candidate(s)"
    counts: dict[str, int] = {}
    for skip in scan.skipped:
        counts[skip.code] = counts.get(skip.code, 0) + 1
    details: list[str] = [note] if note else []
    supply = scan.supply
    if counts:
        details.append(", ".join(f"{count} {code}" for code, count in counts.items()))
    elif n == 0 and not note:
        if supply is not None and supply.fetched and supply.rejected:
            rows = ", ".join(f"{r['count']} {r['code']}" for r in supply.sorted_reasons())
            details.append(f"{supply.fetched} fetched, {supply.rejected} rejected by the selection rules ({rows})")
        else:
            details.append("the source returned no works" if scan.fetched in (None, 0) else "none was tried")
    if scan.outages:
        details.append("outages: " + ", ".join(scan.outages))
    if details:
        reason += ": " + "; ".join(details)
    return reason


def scan_verdict(scan: CandidateScan) -> Literal["no_candidate", "retryable_failure"]:
    """A scan that found nothing usable: retry later, or report ``no_candidate``.

    Any job-level outage, or any candidate skipped for a reason a later attempt may not
    see (a retryable skip), makes the run a retryable failure: a transient problem must
    not be reported as "nothing to post".
    """
    if scan.outages or any(skip.retryable for skip in scan.skipped):
        return "retryable_failure"
    return "no_candidate"


def merge_scans(a: CandidateScan, b: CandidateScan) -> CandidateScan:
    """Combine two passes: bounds and attempts add, skips concatenate, outages union, supply sums."""
    outages = list(a.outages)
    for outage in b.outages:
        if outage not in outages:
            outages.append(outage)
    if a.supply is None or b.supply is None:
        supply = a.supply or b.supply
    else:
        supply = a.supply.merged(b.supply)
    return CandidateScan(
        bound=a.bound + b.bound,
        attempted=a.attempted + b.attempted,
        skipped=list(a.skipped) + list(b.skipped),
        outages=outages,
        supply=supply,
    )


# ------------------------------------------------------------------ size bound

MAX_SKIP_REASON_CHARS = 400
_MIN_REPORT_CHARS = 256


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded_report(scan: CandidateScan, max_chars: int = 4000) -> dict[str, Any]:
    """``scan.to_dict()`` guaranteed to serialise (``json.dumps``) to ≤ ``max_chars``.

    Each skip reason is cut to 400 characters; then trailing skips are dropped until the
    report fits, and ``"truncated"`` says how many were dropped. The size is measured
    with ``json.dumps`` defaults, the longest common encoding (compact separators or
    ``ensure_ascii=False`` only make it shorter). ``max_chars`` below 256 cannot hold the
    fixed part of a report and is refused.
    """
    if max_chars < _MIN_REPORT_CHARS:
        raise ValueError(f"max_chars must be at least {_MIN_REPORT_CHARS}")
    report = scan.to_dict()
    skips: list[dict[str, Any]] = report["skipped"]
    for skip in skips:
        skip["reason"] = _short(str(skip["reason"]), MAX_SKIP_REASON_CHARS)
    if len(json.dumps(report)) <= max_chars:
        return report

    total = len(skips)

    def trimmed(keep: int) -> dict[str, Any]:
        out = dict(report)
        out["skipped"] = skips[:keep]
        out["truncated"] = total - keep
        return out

    # The size grows with the number of kept skips, so the largest fitting prefix is
    # found by bisection.
    lo, hi = 0, total - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(json.dumps(trimmed(mid))) <= max_chars:
            lo = mid
        else:
            hi = mid - 1
    return trimmed(lo)
