"""Property-based fuzzing of every route of both HTTP functions (issue 17, issue 13 item 4).

Hypothesis writes API Gateway v2 events a hostile client could send: any method on any route
(or on a path no route has), path segments with odd characters, right, wrong, truncated and
mis-schemed tokens, any Content-Type, bodies from valid to absurd (deep, huge, big integers,
lone surrogates, not JSON, base64 that is not), random extra headers; and, on some requests, an
injected outage of DynamoDB or SQS. For every request, through the real handlers:

* no status >= 500, except the documented backend-failure bodies while an outage is injected;
* every 4xx in its documented shape: legacy ``{"status":"error","error":…}`` on the trigger
  function and for every auth failure, protocol ``{"error": Error}`` on job_events; 405 has
  ``Allow``; 415 only for a non-JSON Content-Type on a body; the operator page's own answers
  (``/ui``, issue 12) are HTML with a documented status, and write nothing whatever the status;
* every 2xx body valid against the route's 2xx schema in the generated OpenAPI document;
* exactly one outcome log line, whose ``http_status`` is the status sent; the run route's
  ``schedule.trigger_received`` comes first;
* no fragment of either token in any response or any log line;
* no ledger write and no queue send for a refused (4xx) request.

The example count is bounded (``PIXIVFLOW_FUZZ_EXAMPLES``, default 1000: about 6 s of CPU, enough
for every kind of answer; each route also gets one well-formed request with its right token, so
every route's code past auth runs whatever the draws) and
derandomized so ``make test`` is repeatable; ``make fuzz`` runs 10,000 (``FUZZ=n``), and
``PIXIVFLOW_FUZZ_SEED=<n>`` explores other examples. The run prints how many requests it sent and the statuses it saw.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from support.raw_http import ABSENT, AwsTally, is_legacy_error, is_protocol_error, openapi_validator, send

from pixivflow.http import jobs_api, trigger_api

# Tokens long and random enough that an 8-character fragment cannot appear by chance.
TOKENS = {"trigger": "Tq8Zr2Lw5Xn7Cv4Bm1Kd9Hs3", "jobs": "Jp6Yf3Gu9Ea1Wt5Rn8Qz2Mc7"}
FRAGMENT = 8
EXAMPLES = int(os.environ.get("PIXIVFLOW_FUZZ_EXAMPLES", "1000"))
SEED = os.environ.get("PIXIVFLOW_FUZZ_SEED")
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
RIDS = ["3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab", "9A1B2C3D-4E5F-4A6B-9C7D-8E9F0A1B2C3D",
        "3f2b8c1e-4d5a-0b7c-8e9f-0123456789ab"]  # the last one is version 0: not a UUID here
SHELLS = {"trigger": trigger_api.shell, "job_events": jobs_api.shell}
ROUTES = [(function, spec) for function, shell in SHELLS.items() for spec in shell.routes]
TOKEN_MISSING = {"status": "error", "error": "endpoint disabled: token not configured"}
INTERNAL_ERROR = {"error": {"code": "internal_error", "message": "internal error", "retryable": False, "detail": {}}}
CONTENT_TYPES = [None, "application/json", "APPLICATION/JSON; charset=utf-8", "application/json;charset=latin-1",
                 "text/plain", "application/xml", "multipart/form-data", "application/vnd.api+json",
                 "application/x-www-form-urlencoded", "", "  "]
ODD_SEGMENTS = ["..", ".", "%2F", "%00", "\ud800", "a b", "<script>", "x" * 300, "é", "@", "a:b", "*", "'", '"', "\\",
                "morning-tokyo ", "CATS", "\u0000", "{scheduleId}"]


def fragments(token: str) -> set[str]:
    return {token[i:i + FRAGMENT] for i in range(len(token) - FRAGMENT + 1)}


ALL_FRAGMENTS = {f for token in TOKENS.values() for f in fragments(token)}
safe_text = st.text(max_size=60).filter(lambda s: not any(f in s for f in ALL_FRAGMENTS))
segment = st.one_of(st.sampled_from(ODD_SEGMENTS),
                    st.text(st.characters(blacklist_characters="/?#"), min_size=1, max_size=30)) \
    .filter(lambda s: not any(f in s for f in ALL_FRAGMENTS))
VALID = {
    "scheduleId": ["morning-tokyo", "evening-berlin", "noon-flaky", "nope"],
    "targetId": ["cats", "landscape", "dogs", "ranking-daily", "nope"],
    "requestId": RIDS,
    "jobId": ["morning-tokyo@manual-" + RIDS[0], "job-1"],
    "slotId": ["morning-tokyo@2026-12-01T0800", "nope"],
    "action": ["run", "refetch", "redrive", "nope"],  # the operator page's actions (issue 26)
}
# The operator page (issue 12) answers HTML for what it decides itself: the page, the login redirect
# (303), a refused login (401, 415, 413, 400), an unknown slot (404), no token configured (503).
PAGE_STATUSES = {200, 303, 400, 401, 404, 413, 415, 503}
PAGE_REDIRECTS = {"/ui", "/ui/login"}


def weighted(draw, percent: int, likely, otherwise):
    """``likely`` in ``percent`` % of the draws (hypothesis' one_of would weigh branches evenly)."""
    # (st.integers leans towards its bounds; sampled_from draws its elements evenly)
    return draw(likely) if draw(st.sampled_from(range(100))) < percent else draw(otherwise)


@st.composite
def paths(draw, rule: str) -> str:
    parts = []
    for piece in rule.split("/"):
        if piece.startswith("<") and piece.endswith(">"):
            parts.append(weighted(draw, 75, st.sampled_from(VALID[piece[1:-1]]), segment))
        else:
            parts.append(piece)
    path = "/".join(parts)
    return weighted(draw, 85, st.just(path), st.sampled_from([path + "/", path + "/extra", path.upper()]))


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), safe_text),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(safe_text, children, max_size=4)),
    max_leaves=12,
)
route_objects = st.one_of(
    st.fixed_dictionaries({}, optional={"label": st.one_of(safe_text, st.integers(), st.none(), st.lists(st.integers()))}),
    st.fixed_dictionaries({"requestId": st.one_of(st.sampled_from(RIDS), safe_text, st.integers())},
                          optional={"correlationId": st.one_of(safe_text, st.integers(), st.none(), st.just("\ud800"),
                                                               st.just("x" * 201))}),
    st.fixed_dictionaries({"protocol_version": st.one_of(st.just("1"), safe_text), "job_type": safe_text,
                           "idempotency_key": safe_text, "params": json_values}),
    st.fixed_dictionaries({"ack_through": json_values}),
)
raw_bodies = st.one_of(
    st.just(ABSENT), st.just(""),
    json_values.map(json.dumps),
    route_objects.map(json.dumps),
    safe_text,
    st.integers(60, 3000).flatmap(lambda n: st.sampled_from(["[" * n, "[" * n + "]" * n, '{"a":' * n + "1" + "}" * n])),
    st.integers(4290, 4320).map(lambda n: '{"label": ' + "7" * n + "}"),
    st.integers(65_000, 67_000).map(lambda n: '{"label": "' + "x" * n + '"}'),
    st.sampled_from(['{"label": "\\ud800"}', '{"label": "a\\u0000b"}', '{"requestId": "\\udfff"}', '{"label": NaN}',
                     '{"label": 1e999}', '{"label": "x"} trailing', "\ufeff{}", '{"label": "ok"}', "null", "[]",
                     '[{"label": "x"}, 7]', '{"requestId": "' + RIDS[0] + '", "correlationId": "c-1"}']),
)


@st.composite
def requests(draw):
    function, spec = draw(st.sampled_from(ROUTES))
    if draw(st.sampled_from(range(100))) < 8:  # a path no route has
        path = draw(st.one_of(st.just("/"), segment.map(lambda s: "/" + s), segment.map(lambda s: "/internal/" + s),
                              segment.map(lambda s: "/jobs/a/b/" + s)))
    else:
        path = draw(paths(spec.rule))
    method = weighted(draw, 80, st.just(spec.method), st.sampled_from(METHODS))
    kind = spec.token or "trigger"
    other = "jobs" if kind == "trigger" else "trigger"
    right = TOKENS[kind]
    token = weighted(draw, 70, st.just(right), st.one_of(
        st.none(), st.just(TOKENS[other]),
        st.sampled_from([right[:-1], right + "x", right.lower(), right[::-1], right[:FRAGMENT], " " + right[:12],
                         right[:-1] + chr(ord(right[-1]) ^ 1)]),
        safe_text,
    ))
    scheme = weighted(draw, 85, st.sampled_from(["Bearer", "bearer", "BEARER"]), st.sampled_from(["Basic", "Token", ""]))
    headers = draw(st.dictionaries(
        st.one_of(st.sampled_from(["x-schedule-attempt-id", "x-attempt-id", "x-schedule-provider", "x-forwarded-for",
                                   "cookie", "content-length", "accept"]),
                  st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20)),
        safe_text, max_size=4))
    headers = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "content-type")}
    if token is not None:
        headers["authorization"] = f"{scheme} {token}".strip() if scheme else token
    return {
        "function": function, "spec": spec, "method": method, "path": path, "headers": headers,
        "content_type": weighted(draw, 60, st.sampled_from(CONTENT_TYPES[:4]), st.one_of(st.sampled_from(CONTENT_TYPES), safe_text)),
        "body": draw(raw_bodies),
        "encoding": weighted(draw, 90, st.just("plain"), st.sampled_from(["base64", "bad-base64"])),
        "fault": weighted(draw, 60, st.just("none"), st.sampled_from(["dynamodb", "sqs"])),
    }


def well_formed(function: str, spec) -> dict:
    """The plainest request to one route, with its right token: where the generated ones start. Each
    route gets one, so every route's code past auth runs whatever the generator draws (1,000 draws
    reach them all in a run of this file alone, yet not always after other tests in one worker)."""
    path = "/".join(VALID[p[1:-1]][0] if p.startswith("<") and p.endswith(">") else p for p in spec.rule.split("/"))
    return {"function": function, "spec": spec, "method": spec.method, "path": path,
            "headers": {"authorization": f"Bearer {TOKENS[spec.token or 'trigger']}"}, "content_type": "application/json",
            "body": ABSENT, "encoding": "plain", "fault": "none"}


def matched(function: str, method: str, path: str):
    for spec in SHELLS[function].routes:
        if spec.method == method and spec.regex.match(path):
            return spec
    return None


def documented_failure(function: str, spec, status: int, body) -> bool:
    """The 5xx bodies the API documents for an outage of its backend (spec §11.3)."""
    if spec is None:
        return False
    if spec.surface.protocol:
        return status == 500 and body == INTERNAL_ERROR
    if status == 500:
        return body == {"status": "error", "error": spec.failure.message}
    # the run route's dispatch failure: the slot is durable, the sweep retries (spec §4.4)
    return status == 503 and spec.rule.endswith("/run") and isinstance(body, dict) and body.get("status") == "rejected" \
        and body.get("note") == "rejected"


@pytest.fixture
def fuzz_runtime(make_runtime, monkeypatch):
    tally = AwsTally().install(monkeypatch)
    return make_runtime(tokens=TOKENS), tally


@pytest.mark.size("large")  # 1 000 generated requests through both HTTP functions (tests/README.md, test sizes)
def test_no_hostile_request_gets_a_500_a_shapeless_error_a_leak_or_a_write(fuzz_runtime, logs):
    from pixivflow.http.openapi import openapi_document

    rt, tally = fuzz_runtime
    operations = openapi_document()["paths"]
    validators: dict = {}
    statuses: Counter = Counter()
    routes_authorised: Counter = Counter()
    faults: Counter = Counter()

    def ok_validator(spec, status):
        key = (spec.rule, spec.method, status)
        if key not in validators:
            path = spec.rule.replace("<", "{").replace(">", "}")
            schema = operations[path][spec.method.lower()]["responses"][str(status)]["content"]["application/json"]["schema"]
            validators[key] = openapi_validator(schema)
        return validators[key]

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=SEED is None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                     HealthCheck.large_base_example])
    @given(requests())
    def one_request(req):
        body, encoding = req["body"], req["encoding"]
        if body is not ABSENT and encoding == "bad-base64":
            options = {"raw": True, "b64_flag_only": True}
        else:
            options = {"raw": True, "b64": encoding == "base64"}
        logs()  # drop what came before
        before = tally.snapshot()
        tally.down = set() if req["fault"] == "none" else {req["fault"]}
        try:
            answer = send(rt, req["method"], req["path"], body, function=req["function"], headers=req["headers"],
                          content_type=req["content_type"], **options)
        finally:
            tally.down = set()
        lines, printed = logs()
        writes = (tally.writes - before[0], tally.sends - before[1])
        status, reply = answer.status, answer.body
        spec = matched(req["function"], req["method"].upper(), req["path"])
        statuses[status] += 1
        faults[req["fault"]] += 1
        context = (req["method"], req["path"][:80], status, reply)

        if (answer.headers.get("content-type") or "").startswith("text/html"):
            # an operator page's own answer: only /ui routes give one, and the page is read-only
            assert spec is not None and not spec.in_schema, context
            assert status in PAGE_STATUSES, context
            assert writes == (0, 0), (context, writes)
            if status == 303:
                location = answer.headers.get("location", "")
                assert location in PAGE_REDIRECTS or location.startswith("/ui/slots/"), context
            outcomes = [line for line in lines if "http_status" in line]
            assert [line["http_status"] for line in outcomes] == [status], (context, outcomes)
            text = answer.raw + json.dumps(answer.headers) + printed
            assert not [f for f in ALL_FRAGMENTS if f in text], context
            if status != 401:
                routes_authorised[(spec.method, spec.rule)] += 1
            return
        # a JSON body, always
        assert isinstance(reply, dict), context
        # one outcome line per request, carrying the status the caller got
        outcomes = [line for line in lines if "http_status" in line]
        assert [line["http_status"] for line in outcomes] == [status], (context, outcomes)
        if spec is not None and spec.received:
            assert lines[0].get("event") == "schedule.trigger_received", context
        # nothing of a token in what went out or what was logged
        text = answer.raw + json.dumps(answer.headers) + printed
        assert not [f for f in ALL_FRAGMENTS if f in text], context
        if spec is not None and status != 401 and reply != TOKEN_MISSING:
            routes_authorised[(spec.method, spec.rule)] += 1

        if status >= 500:
            assert req["fault"] != "none" and documented_failure(req["function"], spec, status, reply), context
        elif status >= 400:
            assert writes == (0, 0), (context, writes)
            if status == 401:
                assert reply == {"status": "error", "error": "unauthorized"}, context
            elif req["function"] == "trigger":
                assert is_legacy_error(reply), context
            else:
                assert is_protocol_error(reply), context
            if status == 405:
                assert answer.headers.get("allow"), context
                assert req["method"].upper() not in answer.headers["allow"].split(", "), context
            if status == 415:
                assert body not in (ABSENT, "") and req["content_type"] and \
                    req["content_type"].split(";")[0].strip().lower() != "application/json", context
        else:
            assert spec is not None, context
            errors = sorted(ok_validator(spec, status).iter_errors(reply), key=str)
            assert not errors, (context, [e.message for e in errors[:3]])

    for function, spec in ROUTES:
        one_request = example(well_formed(function, spec))(one_request)
    one_request = seed(int(SEED))(one_request) if SEED is not None else one_request
    one_request()

    sent = sum(statuses.values())
    print(f"\nhttp fuzz: {sent} requests; statuses {dict(sorted(statuses.items()))}; faults {dict(faults)}")
    # every route was reached past auth (each has its well-formed example), and every kind of answer
    assert sent >= min(EXAMPLES, 100)
    if EXAMPLES >= 1000:  # fewer reach only some of the answers
        assert {(spec.method, spec.rule) for _, spec in ROUTES} <= set(routes_authorised), routes_authorised
        assert {200, 202, 400, 401, 404, 405, 415, 500} <= set(statuses), statuses
