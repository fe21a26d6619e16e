"""A Failure Center retry's modes (domain/failures.py, docs/explanation/failure-center.md):
``relaxed`` widens a target's soft limits for one occurrence and never its rules; the vectors are
PixivFlow's own (its RecoveryPolicy test: scan 10 -> 30, language window 20 -> 40, look-back 3 -> 7)."""

from __future__ import annotations

from pixivflow.config.targets import TargetConfig
from pixivflow.domain.failures import failure_position, relaxed_target, retry_request_id, retry_target

BASE = dict(id="bot1-illust-botefuku", type="illustration", mode="topic", limit=1, storageMode="cache", topic="ボテ腹",
            date="YESTERDAY", excludeAI=True, aiMetadataCheck=True, maxPageCount=30, candidateScanLimit=10,
            languageCandidateLimit=20, languageFilter="chinese", strictLanguageFilter=True,
            noMatchPolicy={"lookbackDays": 3, "notify": False}, delivery={"target": "bot1-submit"})


def test_relaxed_widens_the_soft_limits_as_pixivflow_does_and_nothing_else():
    target = TargetConfig(**BASE)
    relaxed = relaxed_target(target)
    assert (relaxed.candidateScanLimit, relaxed.languageCandidateLimit, relaxed.noMatchPolicy.lookbackDays) == (30, 40, 7)
    assert relaxed.noMatchPolicy.notify is False
    unchanged = {k: v for k, v in relaxed.model_dump().items()
                 if k not in ("candidateScanLimit", "languageCandidateLimit", "noMatchPolicy")}
    assert unchanged == {k: v for k, v in target.model_dump().items() if k in unchanged}  # rules, tags, delivery
    assert (target.candidateScanLimit, target.languageCandidateLimit, target.noMatchPolicy.lookbackDays) == (10, 20, 3)


def test_relaxed_caps_and_leaves_limits_the_target_does_not_set():
    capped = relaxed_target(TargetConfig(**{**BASE, "candidateScanLimit": 50, "languageCandidateLimit": 80,
                                            "noMatchPolicy": {"lookbackDays": 1}}))
    assert (capped.candidateScanLimit, capped.languageCandidateLimit, capped.noMatchPolicy.lookbackDays) == (100, 100, 3)
    bare = {k: v for k, v in BASE.items() if k not in ("candidateScanLimit", "noMatchPolicy", "languageCandidateLimit")}
    plain = relaxed_target(TargetConfig(**bare))
    assert plain.candidateScanLimit is None  # the deployment-wide bound applies, as configured
    assert plain.noMatchPolicy.lookbackDays == 0 and plain.languageCandidateLimit == 40


def test_normal_is_the_target_as_configured_and_a_retry_id_names_one_failure_and_mode():
    target = TargetConfig(**BASE)
    assert retry_target(target, None) is target and retry_target(target, "normal") is target
    assert retry_target(target, "relaxed").candidateScanLimit == 30
    ids = {retry_request_id(s, t, m) for s in ("a@1", "a@2") for t in ("cats", "dogs") for m in ("normal", "relaxed")}
    assert len(ids) == 8 and retry_request_id("a@1", "cats", "normal") == retry_request_id("a@1", "cats", "normal")


def test_a_failure_cursor_is_read_back_or_refused():
    assert failure_position("1796079600000#morning@2026-12-01T0800#cats") == (1796079600000, "morning@2026-12-01T0800",
                                                                                  "cats")
    for bad in ("", "x", "1#a#b", "179607960000٣#a#b", "1796079600000#a", "1796079600000##b",
                "1796079600000#a#b#c"):
        assert failure_position(bad) is None, bad
