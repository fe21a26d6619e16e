"""How the Pixiv source's failures become cell outcomes and terminal reasons (issue 10; spec §6.3,
§8.1, §8.2): the mapping is explicit, not left to error-text guessing."""

import pytest

from pixivflow.domain.apply import decide
from pixivflow.domain.errors import (AuthenticationError, RateLimitedError, SourceConfigurationError, SourceOutage,
                                     WorkRestrictedError)
from pixivflow.domain.reasons import classify_error_text
from pixivflow.domain.scan import classify_candidate_failure
from pixivflow.services.binding import _fatal


def test_a_rejected_token_ends_the_cell_auth_failed_and_is_never_retried():
    outcome = _fatal(AuthenticationError("auth_failed: Pixiv OAuth answered HTTP 400 (invalid_grant; Invalid refresh token)"))
    assert (outcome.kind, outcome.retryable, outcome.scan.outages) == ("failed", False, ["pixiv_auth_failure"])
    effect = decide(outcome, None)
    assert (effect.to_status, effect.retry, effect.reason_code) == ("failed", False, "auth_failed")
    assert effect.reason_message == "Pixiv 登录已失效，需要重新登录"


def test_a_missing_refresh_token_ends_the_cell_configuration_error():
    outcome = _fatal(SourceConfigurationError("configuration_error: the Pixiv refresh token is not configured"))
    effect = decide(outcome, None)
    assert (effect.to_status, effect.reason_code, outcome.scan.outages) == ("failed", "configuration_error", [])


@pytest.mark.parametrize(
    "error,reason",
    [
        (RateLimitedError("rate_limited: Pixiv answered HTTP 429 (Rate Limit) on /v1/search/illust"), "rate_limited"),
        (SourceOutage("remote_http_error: Pixiv App API /v1/illust/detail answered HTTP 503 after 3 attempt(s)", status=503),
         "remote_http_error"),
        (SourceOutage("download_failed: image /img-original/x_p0.png answered HTTP 500 after 3 attempt(s)", status=500,
                      reason="download_failed"), "download_failed"),
    ],
)
def test_outages_are_retryable_and_their_text_names_the_source_reason(error, reason):
    verdict = classify_candidate_failure(error)
    assert verdict.retryable and error.retryable and error.reason == reason
    assert classify_error_text(str(error)) == reason  # what the reason would be if it ended a cell


def test_a_restricted_work_is_an_unavailable_skip():
    verdict = classify_candidate_failure(WorkRestrictedError("restricted: Pixiv shows work 1 only as a placeholder"))
    assert (verdict.outage, verdict.skip_code) == (None, "unavailable")
