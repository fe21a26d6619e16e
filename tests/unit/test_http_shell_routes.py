"""The shell matches a path to a route exactly as the Powertools router does: the 405 answer's
allowed methods and a request's surface are read from the same routes the router dispatches."""

from __future__ import annotations

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from pixivflow.http.shell import route_regex

RULES = ["/jobs", "/jobs/<jobId>", "/jobs/<jobId>/events", "/jobs/<jobId>/events/ack", "/ui/act/<action>",
         "/openapi.json", "/ui/slots/<slotId>"]
PATHS = ["/jobs", "/jobs/", "/jobs/abc", "/jobs/a%2Fb", "/jobs/a b", "/jobs/<x>", "/jobs/a[1]{2}|^", "/jobs/a\"b",
         "/jobs/a#b", "/jobs/a?b", "/jobs/ジョブ", "/jobs/abc/events", "/jobs/abc/events/ack", "/ui/act/redrive",
         "/openapi.json", "/openapiXjson", "/ui/slots/s@2026-12-01T0800", "/ui/slots/a/b"]


@pytest.mark.parametrize("rule", RULES)
def test_a_rules_pattern_matches_what_the_router_matches(rule: str) -> None:
    ours = route_regex(rule)
    # Powertools' own compiler is private: read here only, to hold ours to it.
    theirs = APIGatewayHttpResolver._compile_regex(rule)
    for path in PATHS:
        mine, router = ours.match(path), theirs.match(path)
        assert (mine is None) == (router is None), (rule, path)
        if mine is not None and router is not None:
            assert mine.groupdict() == router.groupdict(), (rule, path)
