"""Candidate scan rules: bound, failure classification, verdict, merge, report size (spec §6.1, §6.3)."""

from __future__ import annotations

import json

import pytest

from pixivflow.domain.errors import (
    LedgerUnavailable,
    PaginationError,
    SourceError,
    TransientSourceError,
    WorkGoneError,
)
from pixivflow.domain.outcomes import CandidateScan, CandidateSkip, CandidateSupply
from pixivflow.domain.scan import (
    DEFAULT_SCAN_LIMIT,
    FailureVerdict,
    bounded_report,
    classify_candidate_failure,
    effective_scan_bound,
    merge_scans,
    no_candidate_reason,
    scan_verdict,
)


# Error classes named by the spec; only their names matter to the classifier.
class DatabaseError(Exception):
    pass


class AuthenticationError(Exception):
    pass


class PixivNotFoundError(Exception):
    pass


class PixivRateLimitError(Exception):
    pass


class SqliteBusy(Exception):
    code = "SQLITE_BUSY"


class HttpFailure(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


# ----------------------------------------------------------------------- bound


@pytest.mark.parametrize(
    ("limit", "target_scan", "global_scan", "expected"),
    [
        (None, None, None, DEFAULT_SCAN_LIMIT),
        (1, None, None, 5),
        (1, 12, None, 12),
        (1, None, 20, 20),
        (1, 7, 20, 7),  # the target's own setting wins over the global one
        (1, 0, None, 1),  # zero clamps to 1
        (1, -4, 50, 1),  # negative clamps to 1, and still wins over the global
        (1, 250, None, 100),  # clamped to 100
        (1, None, 0, 1),
        (1, None, 999, 100),
        (8, 3, None, 8),  # never below the limit
        (150, 40, None, 150),  # the limit floor may exceed 100
        (0, 3, None, 3),  # a non-positive limit adds no floor
    ],
)
def test_effective_scan_bound(limit, target_scan, global_scan, expected):
    assert effective_scan_bound(limit, target_scan, global_scan) == expected


# -------------------------------------------------------------- classification


def outage(kind: str) -> FailureVerdict:
    return FailureVerdict(outage=kind, skip_code=None, retryable=True)


def skip(code: str, retryable: bool = False) -> FailureVerdict:
    return FailureVerdict(outage=None, skip_code=code, retryable=retryable)


@pytest.mark.parametrize(
    ("error", "status", "expected"),
    [
        # 1. database
        (DatabaseError("write failed"), None, outage("database_unavailable")),
        (SqliteBusy("busy"), None, outage("database_unavailable")),
        ("SQLITE_CANTOPEN: unable to open database file", None, outage("database_unavailable")),
        ("database is locked", None, outage("database_unavailable")),
        ("no such table: deliveries", None, outage("database_unavailable")),
        ("disk I/O error", None, outage("database_unavailable")),
        (LedgerUnavailable("ProvisionedThroughputExceeded"), None, outage("database_unavailable")),
        # 2. authentication
        (AuthenticationError("token rejected"), None, outage("pixiv_auth_failure")),
        ("request failed", 401, outage("pixiv_auth_failure")),
        ("oauth: invalid_grant", None, outage("pixiv_auth_failure")),
        ("Invalid refresh token", None, outage("pixiv_auth_failure")),
        ("Authentication failed for user", None, outage("pixiv_auth_failure")),
        # 3. delivery provider
        ("Telegram is unreachable", None, outage("delivery_unavailable")),
        ("delivery target review not configured", None, outage("delivery_unavailable")),
        ("delivery provider answered 503", None, outage("delivery_unavailable")),
        ("delivery target timed out (ETIMEDOUT)", None, outage("delivery_unavailable")),
        # 4. gateway statuses
        ("upstream error", 502, outage("network_outage")),
        (HttpFailure("bad gateway", 503), None, outage("network_outage")),
        (TransientSourceError("upstream overloaded", status=504), None, outage("network_outage")),
        # 5. network failure of one attempt
        ("connect ECONNREFUSED 127.0.0.1:443", None, skip("unavailable", True)),
        ("socket hang up", None, skip("unavailable", True)),
        ("getaddrinfo ENOTFOUND i.pximg.net", None, skip("unavailable", True)),
        (ConnectionResetError(104, "Connection reset by peer"), None, skip("unavailable", True)),
        (TimeoutError("read"), None, skip("unavailable", True)),
        # 6. duplicate
        ("work 42 already delivered to review", None, skip("duplicate")),
        ("idempotent_replay", None, skip("duplicate")),
        # 7. gone
        (PixivNotFoundError("nope"), None, skip("deleted")),
        (WorkGoneError("work 9 is gone"), None, skip("deleted")),
        ("illust request failed", 404, skip("deleted")),
        ("Work has been deleted", None, skip("deleted")),
        # 8. rate limited
        (PixivRateLimitError("slow down"), None, skip("unavailable", True)),
        ("too many requests", 429, skip("unavailable", True)),
        ("Rate limit exceeded", None, skip("unavailable", True)),
        # 9. access denied
        ("request failed", 403, skip("access_denied")),
        ("this work is private", None, skip("access_denied")),
        ("Access denied by author settings", None, skip("access_denied")),
        # 10. unsupported media
        ("ugoira works are not downloadable", None, skip("unsupported_media")),
        ("unsupported media: series", None, skip("unsupported_media")),
        ("cannot process this work", None, skip("unsupported_media")),
        # 11. filtered
        ("rejected by language filter", None, skip("filtered")),
        ("excluded by AI filter", None, skip("filtered")),
        # 12. invalid metadata
        ("invalid illustId", None, skip("invalid_metadata")),
        ("missing image url", None, skip("invalid_metadata")),
        ("no files produced", None, skip("invalid_metadata")),
        # 13. anything else
        (SourceError("image download failed"), None, skip("unavailable", True)),
        ("something odd happened", None, skip("unavailable", True)),
    ],
)
def test_classification_rules(error, status, expected):
    assert classify_candidate_failure(error, status) == expected


@pytest.mark.parametrize(
    ("error", "status", "expected"),
    [
        # job-level outages win over candidate rules further down the list
        ("sqlite error: work 3 not found", None, outage("database_unavailable")),
        ("unauthorized: rate limit", None, outage("pixiv_auth_failure")),
        ("telegram down while posting deleted work", None, outage("delivery_unavailable")),
        (WorkGoneError("gone"), 503, outage("network_outage")),
        # a delivery message that reports a duplicate is not an outage
        ("telegram unavailable: already published", None, skip("duplicate")),
        # network text wins over "not found" further down
        ("ENOTFOUND api.example: not found", None, skip("unavailable", True)),
        # duplicate wins over deleted
        ("already processed (the work was deleted since)", None, skip("duplicate")),
        # deleted wins over rate limit and access denied
        ("404 private work", None, skip("deleted")),
        # rate limit wins over access denied
        ("429 forbidden", None, skip("unavailable", True)),
        # access denied wins over unsupported media
        ("permission needed to handle ugoira", None, skip("access_denied")),
        # unsupported media wins over filtered, filtered over invalid metadata
        ("ugoira filtered out", None, skip("unsupported_media")),
        ("filtered out: missing metadata", None, skip("filtered")),
    ],
)
def test_classification_order(error, status, expected):
    assert classify_candidate_failure(error, status) == expected


def test_transient_source_error_is_never_a_permanent_skip():
    verdict = classify_candidate_failure(TransientSourceError("work 5 deleted? upstream unsure"))
    assert verdict == skip("unavailable", True)


def test_status_is_read_from_the_error_when_not_given():
    assert classify_candidate_failure(SourceError("boom", status=404)).skip_code == "deleted"
    assert classify_candidate_failure(SourceError("boom", status=502)).outage == "network_outage"
    # an explicit status argument wins over the attribute
    assert classify_candidate_failure(SourceError("boom", status=404), status=403).skip_code == "access_denied"


def test_pagination_error_is_not_mistaken_for_a_known_skip():
    verdict = classify_candidate_failure(PaginationError("search pager did not advance"))
    assert verdict == skip("unavailable", True)


def test_verdict_to_skip():
    verdict = classify_candidate_failure(WorkGoneError("work 7 not found"))
    assert verdict.to_skip(7, "work 7 not found") == CandidateSkip("deleted", "7", "work 7 not found", False)
    with pytest.raises(ValueError):
        outage("network_outage").to_skip("7", "x")


# ----------------------------------------------------------------- verdicts


def test_no_candidate_reason_prefix_and_breakdown():
    scan = CandidateScan(
        bound=5,
        attempted=2,
        skipped=[
            CandidateSkip("duplicate", "1", "already delivered"),
            CandidateSkip("deleted", "2", "gone"),
            CandidateSkip("duplicate", "3", "already delivered"),
            CandidateSkip("access_denied", "4", "private"),
        ],
    )
    reason = no_candidate_reason(scan)
    assert reason.startswith("no eligible candidate found after scanning ")
    assert reason == (
        "no eligible candidate found after scanning 4 candidate(s): 2 duplicate, 1 deleted, 1 access_denied"
    )


def test_no_candidate_reason_for_an_empty_source():
    reason = no_candidate_reason(CandidateScan(bound=5, supply=CandidateSupply(fetched=0)))
    assert reason == "no eligible candidate found after scanning 0 candidate(s): the source returned no works"


def test_no_candidate_reason_names_the_selection_rules_that_emptied_the_pool():
    supply = CandidateSupply(fetched=12, selected=0, reasons={"date_out_of_range": 3, "below_min_bookmarks": 9})
    reason = no_candidate_reason(CandidateScan(bound=5, supply=supply))
    assert reason == (
        "no eligible candidate found after scanning 0 candidate(s): "
        "12 fetched, 12 rejected by the selection rules (9 below_min_bookmarks, 3 date_out_of_range)"
    )


def test_no_candidate_reason_puts_a_note_first():
    reason = no_candidate_reason(CandidateScan(bound=5, supply=CandidateSupply()), note="the date window is empty")
    assert reason == "no eligible candidate found after scanning 0 candidate(s): the date window is empty"


def test_no_candidate_reason_counts_attempts_and_names_outages():
    scan = CandidateScan(bound=5, attempted=3, skipped=[CandidateSkip("unavailable", "9", "x", True)],
                         outages=["network_outage"])
    reason = no_candidate_reason(scan)
    assert reason.startswith("no eligible candidate found after scanning 3 candidate(s)")
    assert reason.endswith("outages: network_outage")


@pytest.mark.parametrize(
    ("scan", "expected"),
    [
        (CandidateScan(bound=5), "no_candidate"),
        (CandidateScan(bound=5, skipped=[CandidateSkip("duplicate", "1", "dup")]), "no_candidate"),
        (
            CandidateScan(
                bound=5,
                attempted=2,
                skipped=[CandidateSkip("deleted", "1", "gone"), CandidateSkip("filtered", "2", "lang")],
            ),
            "no_candidate",
        ),
        (
            CandidateScan(
                bound=5,
                attempted=2,
                skipped=[CandidateSkip("deleted", "1", "gone"), CandidateSkip("unavailable", "2", "reset", True)],
            ),
            "retryable_failure",
        ),
        (CandidateScan(bound=5, attempted=1, outages=["pixiv_auth_failure"]), "retryable_failure"),
    ],
)
def test_scan_verdict(scan, expected):
    assert scan_verdict(scan) == expected


def test_merge_scans():
    a = CandidateScan(
        bound=5, attempted=2, skipped=[CandidateSkip("deleted", "1", "gone")], outages=["network_outage"],
        supply=CandidateSupply(fetched=7, selected=2, reasons={"r18": 5}),
    )
    b = CandidateScan(
        bound=10,
        attempted=3,
        skipped=[CandidateSkip("duplicate", "2", "dup")],
        outages=["database_unavailable", "network_outage"],
        supply=CandidateSupply(fetched=3, selected=1, reasons={"r18": 1, "ai_generated": 1}),
    )
    merged = merge_scans(a, b)
    assert merged.bound == 15
    assert merged.attempted == 5
    assert [s.work_id for s in merged.skipped] == ["1", "2"]
    assert merged.outages == ["network_outage", "database_unavailable"]
    # supply merged by summing (spec §6.3)
    assert merged.fetched == 10
    assert merged.supply.to_dict() == {
        "fetched": 10, "selected": 3, "rejected": 7,
        "reasons": [{"code": "r18", "count": 6}, {"code": "ai_generated", "count": 1}],
    }
    # inputs are left untouched
    assert a.skipped == [CandidateSkip("deleted", "1", "gone")]
    assert a.supply.reasons == {"r18": 5}
    assert merge_scans(CandidateScan(), CandidateScan()).fetched is None
    assert merge_scans(a, CandidateScan()).supply is a.supply  # a pass without a search adds nothing


# ------------------------------------------------------------- bounded report


def many_skips(n: int, reason: str = "download failed with a long explanation") -> CandidateScan:
    return CandidateScan(
        bound=n,
        attempted=n,
        skipped=[CandidateSkip("unavailable", str(100000 + i), f"{reason} #{i}", True) for i in range(n)],
        outages=["network_outage"],
        supply=CandidateSupply(fetched=n, selected=n),
    )


def test_bounded_report_keeps_a_small_report_whole():
    scan = many_skips(3)
    assert bounded_report(scan) == scan.to_dict()


@pytest.mark.parametrize("max_chars", [256, 1000, 4000])
def test_bounded_report_trims_trailing_skips(max_chars):
    scan = many_skips(500)
    report = bounded_report(scan, max_chars=max_chars)
    assert len(json.dumps(report)) <= max_chars
    kept = len(report["skipped"])
    assert kept < 500
    assert report["truncated"] == 500 - kept
    # the first skips survive, in order
    assert [s["workId"] for s in report["skipped"]] == [str(100000 + i) for i in range(kept)]
    # as many as fit: one more would not
    bigger = dict(report, skipped=scan.to_dict()["skipped"][: kept + 1], truncated=500 - kept - 1)
    assert len(json.dumps(bigger)) > max_chars
    assert report["outages"] == ["network_outage"]
    assert report["supply"] == {"fetched": 500, "selected": 500, "rejected": 0, "reasons": []}


def test_bounded_report_cuts_huge_reasons():
    scan = CandidateScan(bound=1, attempted=1, skipped=[CandidateSkip("unavailable", "1", "x" * 10000, True)])
    report = bounded_report(scan, max_chars=4000)
    assert len(json.dumps(report)) <= 4000
    assert len(report["skipped"]) == 1
    assert len(report["skipped"][0]["reason"]) == 400
    assert "truncated" not in report


def test_bounded_report_refuses_a_too_small_budget():
    with pytest.raises(ValueError):
        bounded_report(CandidateScan(), max_chars=100)
