"""Correlation headers (spec §11.2): log-only, sanitised, bounded, omitted when absent."""

from __future__ import annotations

import pytest

from pixivflow.http.common import attempt_id, provider


@pytest.mark.parametrize("headers,expected", [
    ({"x-schedule-attempt-id": "cron-job-org:1234.5_x"}, "cron-job-org:1234.5_x"),
    ({"X-Schedule-Attempt-Id": "  padded  "}, "padded"),  # header names are case-insensitive; value trimmed
    ({"x-schedule-attempt-id": "a b/c\\d<e>f\"g'h;i\u00e9j"}, "abcdefghij"),  # only [A-Za-z0-9._:-] survive
    ({"x-schedule-attempt-id": "z" * 100}, "z" * 64),  # capped at 64
    ({"x-schedule-attempt-id": "x" * 60 + "!!!!" + "y" * 10}, "x" * 60 + "yyyy"),  # cap applies after cleaning
    ({"x-schedule-attempt-id": "first,second"}, "first"),  # a repeated header: the first value counts
    ({"x-attempt-id": "fallback-1"}, "fallback-1"),
    ({"x-schedule-attempt-id": "primary", "x-attempt-id": "fallback"}, "primary"),
    ({"x-schedule-attempt-id": "!!!"}, None),  # nothing usable: omitted, never synthesised
    ({}, None),
])
def test_attempt_id(headers, expected):
    assert attempt_id(headers) == expected


@pytest.mark.parametrize("headers,expected", [
    ({"X-Schedule-Provider": "cron-job-org"}, "cron-job-org"),
    ({"x-schedule-provider": " cloud flare "}, "cloudflare"),
    ({"x-schedule-provider": "a:b"}, "ab"),  # ':' is allowed in attempt ids, not in providers
    ({"x-schedule-provider": "p" * 50}, "p" * 32),  # capped at 32
    ({"x-schedule-provider": "github.actions_v2"}, "github.actions_v2"),
    ({"x-schedule-provider": "  "}, None),
    ({"x-provider": "not-the-header"}, None),
    ({}, None),
])
def test_provider(headers, expected):
    assert provider(headers) == expected


def test_sanitised_values_are_log_safe():
    nasty = "id\n{\"level\":\"ERROR\"}\r\x00"
    assert attempt_id({"x-schedule-attempt-id": nasty}) == "idlevel:ERROR"
    assert provider({"x-schedule-provider": nasty}) == "idlevelERROR"
