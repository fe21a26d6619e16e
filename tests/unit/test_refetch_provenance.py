"""{{refetchRequestId}} as a route receives it (domain/templates.canonical_refetch_request_id): PixivFlow
3.4.3's own vectors (its refetchProvenance test), which mirror what Python's uuid.UUID reads."""

from __future__ import annotations

import uuid

import pytest

from pixivflow.domain.templates import canonical_refetch_request_id, template_variables as variables

CANONICAL = "1e22b55c-b33e-4728-9f30-c62e8ee1e11f"


@pytest.mark.parametrize("spelling", [
    CANONICAL, "1e22b55cb33e47289f30c62e8ee1e11f", CANONICAL.upper(), "{" + CANONICAL + "}", "urn:uuid:" + CANONICAL,
    "  " + CANONICAL + "  ", "1e22b55cb33e4728-9f30-c62e8ee1e11f",
])
def test_every_spelling_of_a_uuid_becomes_the_canonical_one(spelling):
    assert canonical_refetch_request_id(spelling) == CANONICAL
    assert str(uuid.UUID(spelling.strip())) == CANONICAL  # what TelePost's own check reads


@pytest.mark.parametrize("value", ["", "   ", None, 7, "api:110:0f9a1b", "not-a-uuid", "1e22b55cb33e47289f30c62e8ee1e11",
                                   "1e22b55cb33e47289f30c62e8ee1e11ff", "1e22b55cb33e47289f30c62e8ee1e11g",
                                   "１e22b55cb33e47289f30c62e8ee1e11f"])
def test_anything_else_is_empty_never_the_raw_value(value):
    assert canonical_refetch_request_id(value) == ""


def test_the_template_variable_is_canonical_and_a_scheduled_run_has_none():
    assert variables({"refetchRequestId": "1e22b55cb33e47289f30c62e8ee1e11f"})["refetchRequestId"] == CANONICAL
    assert variables({"refetchRequestId": "abc"})["refetchRequestId"] == ""
    assert variables({})["refetchRequestId"] == ""
