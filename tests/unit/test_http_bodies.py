"""The body reader's limits (issue 17): every hostile body is a BodyProblem naming it, never another error."""

from __future__ import annotations

import base64

import pytest

from pixivflow.http.bodies import MAX_BODY_BYTES, BodyProblem, decode_text, is_json_media_type, parse_json
from pixivflow.http.text import ID, PROSE, TEXT, TextRules


@pytest.mark.parametrize("content_type,json", [
    ("application/json", True), ("APPLICATION/JSON", True), ("application/json; charset=utf-8", True),
    (" Application/Json ;charset=UTF-8", True), (None, True), ("", True),
    ("text/plain", False), ("application/xml", False), ("application/vnd.api+json", False),
    ("multipart/form-data", False), ("application/jsonx", False), ("json", False), ("application/json-seq", False),
])
def test_only_application_json_is_json(content_type, json):
    assert is_json_media_type(content_type) is json


@pytest.mark.parametrize("text,reason", [
    ("[" * 65 + "]" * 65, "body_too_deep"),
    ('{"a":' * 65 + "1" + "}" * 65, "body_too_deep"),
    ("[" * 10_000, "body_too_deep"),  # past the C parser's recursion limit, and unterminated
    ("1" * 4301, "integer_too_large"),
    ("-" + "1" * 4301, "integer_too_large"),
    ("1e400", "number_out_of_range"),
    ("-1e400", "number_out_of_range"),
    ("NaN", "invalid_json"),
    ("Infinity", "invalid_json"),
    ("{'a': 1}", "invalid_json"),
    ('{"a": 1} x', "invalid_json"),
    ("x" * (MAX_BODY_BYTES + 1), "body_too_large"),
    ('"' + "é" * (MAX_BODY_BYTES // 2) + '"', "body_too_large"),
])
def test_hostile_json_is_a_named_problem(text, reason):
    with pytest.raises(BodyProblem) as refused:
        parse_json(text)
    assert (refused.value.status, refused.value.reason) == (400, reason)


def test_what_is_inside_the_limits_parses():
    assert parse_json("[" * 64 + "]" * 64) is not None
    assert parse_json("1" * 4300) == int("1" * 4300)
    assert parse_json('{"label": "\\ud800"}') == {"label": "\ud800"}  # the field rule refuses it, not the parser


def test_base64_bodies_are_decoded_or_refused():
    assert decode_text(base64.b64encode(b'{"a": 1}').decode(), True) == '{"a": 1}'
    for bad, reason in [("@@@", "invalid_encoding"), (base64.b64encode(b"\xff\xfe").decode(), "invalid_encoding"),
                        ("é", "invalid_encoding"),
                        (base64.b64encode(b"x" * (MAX_BODY_BYTES + 1)).decode(), "body_too_large")]:
        with pytest.raises(BodyProblem) as refused:
            decode_text(bad, True)
        assert refused.value.reason == reason, bad
    assert decode_text(None, True) is None and decode_text("", False) is None


@pytest.mark.parametrize("value,clean", [("review-42", True), ("早上好 ✓", True), ("a b", True), ("\ud800", False),
                                         ("\udfff", False), ("a\x00", False), ("\t", False), ("\n", False),
                                         ("\x7f", False), ("\x85", False), ("😀", True)])
def test_text_fields_refuse_controls_and_lone_surrogates(value, clean):
    problem = TEXT.problem(value, "label")
    assert (problem is None) is clean
    if not clean:
        assert (problem.status, problem.reason, problem.field, problem.message) == (
            400, "invalid_text", "label", "label must not contain control characters or unpaired surrogates")


def test_a_prose_field_allows_a_newline_and_nothing_else():
    assert PROSE.problem("two\nlines", "note") is None and TEXT.problem("two\nlines", "note") is not None
    assert PROSE.problem("cr\r", "note").reason == "invalid_text"
    assert PROSE.problem("nel\x85", "note").reason == "invalid_text"


def test_an_id_is_capped_in_utf8_bytes_not_characters():
    assert ID.problem("a" * 1024, "jobId") is None
    too_long = ID.problem("é" * 513, "jobId")  # 513 characters, 1,026 bytes
    assert (too_long.reason, too_long.message) == ("text_too_long", "jobId is longer than 1024 bytes")


def test_a_document_is_checked_at_every_depth_and_names_the_field():
    rules = TextRules({"params.query.tags[]": ID})
    doc = {"params": {"query": {"tags": ["ok", "x" * 1025]}}}
    with pytest.raises(BodyProblem) as refused:
        rules.check_document(doc)
    assert refused.value.field == "params.query.tags[1]"
    with pytest.raises(BodyProblem) as refused:
        rules.check_document({"params": {"constraints": {"exclude": [{"kind": "work", "id": "\ud800"}]}}})
    assert refused.value.message == "params.constraints.exclude[0].id must not contain control characters or unpaired surrogates"
    with pytest.raises(BodyProblem) as refused:
        rules.check_document({"labels": {"bad\x1bkey": "v"}})
    assert refused.value.message == "labels (an object key) must not contain control characters or unpaired surrogates"
    rules.check_document({"params": {"query": {"tags": ["早上好", "😀"]}}, "n": 1, "b": None})


@pytest.mark.parametrize("text", ["[" * 65, "[" * 100 + "x", '{"a":' * 65, "[" * 1000])
def test_a_body_nested_past_the_limit_is_too_deep_whole_or_cut_short(text: str) -> None:
    """Decided on the text before it is parsed: the same answer on every Python, whether the body
    ends or not (the C parser of 3.11 and of 3.13 give up at different depths)."""
    with pytest.raises(BodyProblem) as raised:
        parse_json(text)
    assert raised.value.reason == "body_too_deep"


def test_brackets_inside_strings_do_not_count_toward_the_depth() -> None:
    deep_text = '{"a": "' + "[" * 200 + '\\" [[[", "b": [[1]]}'
    assert parse_json(deep_text)["b"] == [[1]]
