"""Fuzzing that reaches admission (issue 21 item 12), through the real job_events handler.

The old property test drew hypothesis' default alphabet (no surrogates) and Tasks that never
passed validation, so admission was never fuzzed past its first check. Here:

* a generator of VALID Tasks (every one would be admitted as drawn), then mutated field by field:
  one documented field replaced by a hostile value, deleted, or left alone;
* a hostile alphabet: lone surrogates, C0/C1 controls, U+0085, U+2028, plus any code point;
* integers far past what JSON parsers take (5,000 digits, written raw into the body) and
  past 64 bits; the same alphabet in path ids, ``idempotency_key``, ``after`` and ``ack_through``.

Properties: no 5xx for any request; and after the run no raw control character or lone surrogate
in any string of any ledger item (keys included). The counts by status are printed (``-s``) and
some requests must have been admitted (202) -- the generator does reach admission.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from support.raw_http import send
from support.jobs import JOBS_TOKEN, jobs_runtime

from pixivflow import aws

HOSTILE_CHARS = ["\ud800", "\udfff", "\x00", "\x07", "\x1b", "\n", "\r", "\t", "\x7f", "\x85", "\x9b", "\u2028", "é", "猫"]
hostile_text = st.text(alphabet=st.one_of(st.sampled_from(HOSTILE_CHARS), st.characters()), min_size=0,
                       max_size=24)
clean_word = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_"), min_size=1, max_size=12)
HUGE = "__HUGE_INTEGER__"
huge_int = st.integers(4_290, 5_000).map(lambda n: (HUGE, n))
# A clean-looking value with one forbidden character inside: the shape that slips past every
# check but the text rule (weighted: most mutations are these).
BAD_CHARS = ["\ud800", "\udfff", "\x00", "\x07", "\x1b", "\n", "\x7f", "\x85", "\x9b"]
dirty_text = st.tuples(clean_word, st.sampled_from(BAD_CHARS), st.text(alphabet=st.sampled_from("abc-"), max_size=4)) \
    .map("".join)
other_value = st.one_of(
    hostile_text, hostile_text.map(lambda t: " " + t + " "), st.integers(), st.integers(2**63, 2**80), huge_int,
    st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.lists(hostile_text, max_size=3),
    st.dictionaries(hostile_text, hostile_text, max_size=2), st.just(""), st.just("x" * 1_100),
)
hostile_value = st.integers(0, 99).flatmap(lambda n: dirty_text if n < 55 else other_value)

_keys = itertools.count()


@st.composite
def valid_tasks(draw) -> dict[str, Any]:
    """A Task the single-target test deployment admits as drawn (spec §12.3 rules 1-6)."""
    task: dict[str, Any] = {"protocol_version": "1", "job_type": "candidate_search",
                            "idempotency_key": f"fuzz-{next(_keys)}-{draw(clean_word)}",
                            "params": {"query": {"tags": draw(st.lists(clean_word, min_size=1, max_size=3))}}}
    if draw(st.booleans()):
        task["correlation_id"] = draw(clean_word)
    if draw(st.booleans()):
        task["params"]["query"]["expand"] = draw(st.booleans())
    if draw(st.booleans()):
        task["params"]["constraints"] = {
            "exclude": [{"kind": draw(st.sampled_from(["work", "candidate", "tag"])), "id": draw(clean_word)}],
            "limit": draw(st.integers(1, 100)), "scan_limit": draw(st.integers(1, 500))}
    if draw(st.booleans()):
        task["deadline_ms"] = draw(st.integers(1_000, 10**9))
    if draw(st.booleans()):
        task["labels"] = {"from": draw(clean_word)}
    return task


FIELDS = [("protocol_version",), ("job_type",), ("idempotency_key",), ("correlation_id",), ("callback_url",),
          ("deadline_ms",), ("labels",), ("labels", "k"), ("params",), ("params", "target_id"), ("params", "source"),
          ("params", "source", "account"), ("params", "query"), ("params", "query", "tags"),
          ("params", "query", "tags", 0), ("params", "query", "expand"), ("params", "constraints"),
          ("params", "constraints", "exclude"), ("params", "constraints", "exclude", 0, "id"),
          ("params", "constraints", "limit"), ("params", "constraints", "scan_limit"),
          ("params", "constraints", "work_types")]


def _mutate(task: dict[str, Any], path: tuple, value: Any, delete: bool) -> dict[str, Any]:
    out = copy.deepcopy(task)
    node: Any = out
    for step in path[:-1]:
        if isinstance(step, int):
            if not isinstance(node, list) or not node:
                return out
            node = node[0]
        else:
            if not isinstance(node, dict):
                return out
            node = node.setdefault(step, {} if not isinstance(path[path.index(step) + 1], int) else [None])
    last = path[-1]
    if isinstance(last, int):
        if isinstance(node, list):
            node[0] = value
        return out
    if isinstance(node, dict):
        if delete:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def _encode(body: Any) -> str:
    """JSON text, with each (HUGE, n) placeholder written as an n-digit integer literal."""
    digits: list[int] = []

    def placeholder(value: Any) -> Any:
        if isinstance(value, tuple) and len(value) == 2 and value[0] == HUGE:
            digits.append(value[1])
            return HUGE
        if isinstance(value, dict):
            return {k: placeholder(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholder(v) for v in value]
        return value

    text = json.dumps(placeholder(body))
    for n in digits:
        text = text.replace(f'"{HUGE}"', "9" * n, 1)
    return text


@st.composite
def requests(draw) -> tuple[str, str, Any, dict[str, str] | None]:
    kind = draw(st.sampled_from(["task"] * 6 + ["lookup", "job", "events", "ack"]))
    if kind == "task":
        task = draw(valid_tasks())
        if draw(st.integers(0, 99)) < 85:  # most requests carry one hostile field
            task = _mutate(task, draw(st.sampled_from(FIELDS)), draw(hostile_value), draw(st.booleans()))
        return "POST", "/jobs", task, None
    ident = draw(st.one_of(hostile_text.filter(bool), st.just("morning-tokyo@manual-fuzz-0-a")))
    from urllib.parse import quote

    path_id = quote(ident.encode("utf-8", "surrogatepass"), safe="")  # what a client puts in the URL
    if kind == "lookup":
        return "GET", "/jobs", None, {"idempotency_key": draw(hostile_text)}
    if kind == "job":
        return draw(st.sampled_from(["GET", "POST"])), f"/jobs/{path_id}" + ("" if draw(st.booleans()) else "/cancel"), \
            None, None
    if kind == "events":
        return "GET", f"/jobs/{path_id}/events", None, {"after": draw(st.one_of(hostile_text, st.just(
            "evt-" + "9" * 4301 + "-1"))), "unacked": draw(st.sampled_from(["", "1", "true", "x\x00"]))}
    return "POST", f"/jobs/{path_id}/events/ack", {"ack_through": draw(hostile_value)}, None


_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _strings(value: Any):
    """Every string of a raw DynamoDB attribute value (low-level shape), map keys included."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "S":
                yield inner
            elif key == "SS":
                yield from inner
            elif key == "M":
                for name, attr in inner.items():
                    yield name
                    yield from _strings(attr)
            elif key == "L":
                for attr in inner:
                    yield from _strings(attr)


def _ledger_strings(rt) -> list[str]:
    client = aws.client("dynamodb")
    found: list[str] = []
    kwargs: dict[str, Any] = {"TableName": rt.env["LEDGER_TABLE"]}
    while True:
        page = client.scan(**kwargs)
        for item in page.get("Items", []):
            for name, attr in item.items():
                found.append(name)
                found.extend(_strings(attr))
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@pytest.mark.size("large")  # every field of every valid task mutated (tests/README.md, test sizes)
def test_valid_tasks_mutated_field_by_field_never_answer_5xx_nor_store_raw_controls(make_runtime, capsys):
    rt = jobs_runtime(make_runtime)
    counts: Counter[int] = Counter()
    by_route: Counter[tuple[str, int]] = Counter()

    @seed(21)
    @settings(max_examples=600, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(requests())
    def one(request):
        method, path, body, query = request
        from support.raw_http import ABSENT

        answer = send(rt, method, path, ABSENT if body is None else _encode(body), raw=body is not None,
                      token=JOBS_TOKEN, function="job_events", query=query)
        counts[answer.status] += 1
        by_route[(path.split("/")[1] + ("/" + path.rsplit("/", 1)[1] if path.count("/") > 2 else ""), answer.status)] += 1
        assert answer.status < 500, (method, path, body, query, answer.body)

    one()
    stored = _ledger_strings(rt)
    dirty = [s for s in stored if _FORBIDDEN.search(s)]
    assert not dirty, dirty[:5]
    with capsys.disabled():
        print(f"\nadmission fuzz: {sum(counts.values())} requests, by status {dict(sorted(counts.items()))}; "
              f"{len(stored)} ledger strings clean")
    assert counts[202] >= 20 and counts[400] >= 100, counts  # the generator reaches admission, and past it


def test_the_openapi_declares_every_query_parameter_and_the_tasks_required_fields():
    """What an outside fuzzer (schemathesis on /openapi.json) needs to draw valid requests."""
    from pixivflow.http.openapi import openapi_document

    doc = openapi_document()

    def query_params(path: str) -> set[str]:
        return {p["name"] for p in doc["paths"][path]["get"].get("parameters", []) if p["in"] == "query"}

    assert query_params("/jobs") == {"idempotency_key"}
    assert query_params("/jobs/{jobId}/events") == {"after", "unacked"}
    body = doc["paths"]["/jobs"]["post"]["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/CandidateSearchTask"}
    schemas = doc["components"]["schemas"]
    task_schema = schemas["CandidateSearchTask"]
    assert set(task_schema["required"]) == {"protocol_version", "job_type", "idempotency_key", "params"}
    assert not _task_validator().is_valid({"protocol_version": "1", "job_type": "candidate_search", "params": {}})


def _task_validator():
    from jsonschema import Draft202012Validator

    from pixivflow.http.openapi import openapi_document

    # the document's refs resolve against a root that carries the components, as in the document
    return Draft202012Validator({"$ref": "#/components/schemas/CandidateSearchTask",
                                 "components": {"schemas": openapi_document()["components"]["schemas"]}})


@settings(max_examples=40, deadline=None, database=None)
@given(valid_tasks())
def test_every_generated_task_is_valid_by_the_published_request_schema(task):
    _task_validator().validate(task)
