"""What the trigger function logs (spec §11.2, §11.4, §13.26), read from stdout like CloudWatch would.

Powertools' Logger writes one JSON object per line to the stream it was created with; the
``logs`` fixture points that stream at pytest's captured stdout for the test, so the lines
asserted here are exactly what the function prints.
"""

from __future__ import annotations


from conftest import claim, JOBS_TOKEN, TRIGGER_TOKEN

SLOT = "morning-tokyo@2026-12-01T0800"
OCCURRENCE_AT = "2026-11-30T23:00:00.000Z"
RID = "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab"


def call(rt, logs, method, path, body=None, token=None, headers=None):
    logs()  # drop whatever came before this request
    status, answer = rt.http(method, path, body, token=token, headers=headers)
    lines, _ = logs()
    return status, answer, lines


def outcome(lines: list[dict]) -> dict:
    found = [line for line in lines if "http_status" in line]
    assert len(found) == 1, found
    return found[0]


def assert_outcome(status: int, lines: list[dict], event: str, method: str, path: str, **fields) -> dict:
    line = outcome(lines)
    assert line["http_status"] == status
    assert line["event"] == event
    assert (line["method"], line["path"]) == (method, path)
    assert isinstance(line["elapsed_ms"], int) and line["elapsed_ms"] >= 0
    for key, value in fields.items():
        assert line.get(key) == value, (key, line)
    return line


def assert_received_first(lines: list[dict], schedule_id: str) -> None:
    events = [line.get("event") for line in lines]
    assert events.count("schedule.trigger_received") == 1
    received = lines[events.index("schedule.trigger_received")]
    assert "http_status" not in received and received["schedule_id"] == schedule_id
    assert events.index("schedule.trigger_received") < next(i for i, l in enumerate(lines) if "http_status" in l)


RUN = "/internal/schedules/morning-tokyo/run"


def test_every_run_disposition_logs_one_outcome_line_with_the_status_sent(make_runtime, logs, monkeypatch):
    rt = make_runtime()

    monkeypatch.setattr(rt.wiring.queues, "send_execution", lambda messages: list(range(len(messages))))
    status, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN)
    assert status == 503
    assert_received_first(lines, "morning-tokyo")
    assert_outcome(503, lines, "schedule.trigger_rejected", "POST", RUN, slot_id=SLOT, occurrence_at=OCCURRENCE_AT,
                   trigger_source="http", disposition="rejected", schedule_id="morning-tokyo",
                   reason="3 of 3 execution message(s) could not be sent")
    monkeypatch.undo()

    status, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN)
    assert status == 202
    assert_received_first(lines, "morning-tokyo")
    assert_outcome(202, lines, "schedule.trigger_accepted", "POST", RUN, slot_id=SLOT, occurrence_at=OCCURRENCE_AT,
                   trigger_source="http", disposition="accepted")

    now = rt.clock.now_ms()
    for target in ("cats", "landscape", "ranking-daily"):
        claim(rt.wiring.ledger, SLOT, target, "elsewhere", now, 180_000)
    status, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN)
    assert status == 202
    assert_outcome(202, lines, "schedule.trigger_already_running", "POST", RUN, slot_id=SLOT,
                   disposition="already_running", trigger_source="http")
    for target in ("cats", "landscape", "ranking-daily"):
        rt.wiring.ledger.release_cell(SLOT, target, "elsewhere", now)

    rt.settle()
    status, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN)
    assert status == 200
    assert_outcome(200, lines, "schedule.trigger_already_completed", "POST", RUN, slot_id=SLOT,
                   occurrence_at=OCCURRENCE_AT, disposition="already_completed", trigger_source="http")


def test_every_run_refusal_logs_one_outcome_line_with_the_status_sent(make_runtime, logs, monkeypatch):
    from pixivflow.http import trigger_api
    from pixivflow.services import trigger

    rt = make_runtime()
    cases = [
        (None, None, 401, "schedule.trigger_unauthorized", {"reason": "missing_bearer"}),
        ("wrong", None, 401, "schedule.trigger_unauthorized", {"reason": "bad_token"}),
        (TRIGGER_TOKEN, {"label": 7}, 400, "schedule.trigger_rejected", {"reason": "label: Input should be a valid string"}),
    ]
    for token, body, status, event, fields in cases:
        got, _, lines = call(rt, logs, "POST", RUN, body, token=token)
        assert got == status
        assert_received_first(lines, "morning-tokyo")
        assert_outcome(status, lines, event, "POST", RUN, **fields)

    path = "/internal/schedules/nope/run"
    got, _, lines = call(rt, logs, "POST", path, token=TRIGGER_TOKEN)
    assert got == 404
    assert_received_first(lines, "nope")
    assert_outcome(404, lines, "schedule.trigger_not_found", "POST", path, schedule_id="nope")

    real = trigger.resolve_occurrence
    monkeypatch.setattr(trigger, "resolve_occurrence", lambda sid, cron, tz, at: real(sid, cron, tz, at + 30 * 60_000))
    rt.clock.set(rt.clock.now_ms() - 29 * 60_000)  # 22:30Z: the patched resolver names 23:00Z, 30 min ahead
    got, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN)
    assert got == 425
    assert_outcome(425, lines, "schedule.trigger_rejected", "POST", RUN, disposition="rejected",
                   reason=f"occurrence {SLOT} is not due yet")
    monkeypatch.undo()

    rt.clock.set(rt.clock.now_ms() + 4 * 3_600_000)  # 02:30Z: 3.5 h after the fire, grace is 90 min
    got, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN)
    assert got == 410
    assert_outcome(410, lines, "schedule.trigger_rejected", "POST", RUN, reason=f"occurrence {SLOT} has expired (grace 90m)")

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(trigger_api, "run_now", explode)
    got, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN)
    assert got == 500
    assert_outcome(500, lines, "schedule.trigger_error", "POST", RUN, reason="RuntimeError")
    detail = [line for line in lines if line.get("event") == "schedule.trigger_error_detail"]
    assert len(detail) == 1 and "http_status" not in detail[0]


def test_token_missing_is_logged_as_503_after_the_received_line(make_runtime, logs):
    rt = make_runtime(tokens={"trigger": "", "jobs": ""})
    got, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN)
    assert got == 503
    assert_received_first(lines, "morning-tokyo")
    assert_outcome(503, lines, "schedule.trigger_unauthorized", "POST", RUN, reason="token_not_configured")


def test_other_routes_log_one_outcome_line_each(make_runtime, logs, monkeypatch):
    def mutate(cfg):
        cfg["schedules"][1]["targetIds"].append("landscape")  # landscape is in two plans

    rt = make_runtime(mutate=mutate)
    refetch = "/internal/targets/cats/refetch"
    status_path = f"/internal/targets/cats/refetch/{RID}"
    cases = [
        ("GET", "/health", None, None, 200, "http.health", {}),
        ("GET", "/internal/schedules", None, TRIGGER_TOKEN, 200, "schedule.listed", {"count": 3}),
        ("POST", "/internal/outbox/drain", None, TRIGGER_TOKEN, 200, "outbox.drained", {"queued": 0, "unsent": 0}),
        ("GET", "/internal/nowhere", None, TRIGGER_TOKEN, 404, "http.not_found", {}),
        ("GET", status_path, None, JOBS_TOKEN, 404, "schedule.refetch_not_found", {"trigger_source": "manual"}),
        ("POST", refetch, {"requestId": "bad"}, JOBS_TOKEN, 400, "schedule.refetch_rejected", {}),
        ("POST", refetch, {"requestId": RID, "correlationId": "x" * 201}, JOBS_TOKEN, 400, "schedule.refetch_rejected", {}),
        ("POST", "/internal/targets/nope/refetch", {"requestId": RID}, JOBS_TOKEN, 404, "schedule.refetch_rejected",
         {"reason": "unknown target"}),
        ("POST", "/internal/targets/landscape/refetch", {"requestId": RID}, JOBS_TOKEN, 409, "schedule.refetch_rejected",
         {"reason": "ambiguous target"}),
        ("POST", refetch, {"requestId": RID}, TRIGGER_TOKEN, 401, "schedule.trigger_unauthorized", {"reason": "bad_token"}),
        ("POST", refetch, {"requestId": RID}, JOBS_TOKEN, 202, "schedule.refetch_accepted",
         {"slot_id": f"morning-tokyo@manual-{RID}", "disposition": "accepted", "trigger_source": "manual",
          "occurrence_at": "2026-11-30T22:59:00.000Z", "request_id": RID}),
        ("GET", status_path, None, JOBS_TOKEN, 200, "schedule.refetch_status",
         {"slot_id": f"morning-tokyo@manual-{RID}", "state": "pending"}),
        ("GET", "/internal/targets/cats/refetch/bad", None, JOBS_TOKEN, 400, "schedule.refetch_rejected", {}),
    ]
    for method, path, body, token, status, event, fields in cases:
        got, _, lines = call(rt, logs, method, path, body, token=token)
        assert got == status, (method, path)
        assert_outcome(status, lines, event, method, path, **fields)
        assert not any(line.get("event") == "schedule.trigger_received" for line in lines)  # run route only

    from pixivflow.services import manual

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(manual, "admit", explode)
    other = "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ac"
    got, _, lines = call(rt, logs, "POST", refetch, {"requestId": other}, token=JOBS_TOKEN)
    assert got == 500
    assert_outcome(500, lines, "schedule.refetch_error", "POST", refetch, reason="RuntimeError")


def test_correlation_fields_are_sanitised_and_omitted_when_absent(make_runtime, logs):
    rt = make_runtime()
    headers = {"x-schedule-attempt-id": "  run:42/ab c\u00e9" + "9" * 80, "X-Schedule-Provider": " cron job.org!<x> "}
    _, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN, headers=headers)
    expected_attempt = ("run:42abc" + "9" * 80)[:64]
    request_lines = [line for line in lines if "path" in line]
    assert [line["event"] for line in request_lines] == ["schedule.trigger_received", "schedule.trigger_accepted"]
    for line in request_lines:
        assert line["attempt_id"] == expected_attempt
        assert line["provider"] == "cronjob.orgx"

    _, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN, headers={"x-attempt-id": "fallback-7"})
    assert {line["attempt_id"] for line in lines if "path" in line} == {"fallback-7"}
    assert not any("provider" in line for line in lines if "path" in line)

    _, _, lines = call(rt, logs, "POST", RUN, token=TRIGGER_TOKEN, headers={"x-schedule-attempt-id": "///", "x-schedule-provider": "   "})
    request_lines = [line for line in lines if "path" in line]
    assert len(request_lines) == 2  # received + outcome
    assert not any("attempt_id" in line or "provider" in line for line in request_lines)

    _, _, lines = call(rt, logs, "GET", "/health", headers={"x-schedule-attempt-id": "probe-1"})
    assert outcome(lines)["attempt_id"] == "probe-1"


def test_a_failing_logger_never_changes_a_response(make_runtime, monkeypatch):
    from pixivflow.observability import logger

    def broken(*args, **kwargs):
        raise OSError("log pipe closed")

    rt = make_runtime()
    for level in ("info", "warning", "error", "exception", "debug"):
        monkeypatch.setattr(logger, level, broken)
    assert rt.http("POST", RUN, token=TRIGGER_TOKEN)[0] == 202
    assert rt.http("POST", RUN, token="nope") == (401, {"status": "error", "error": "unauthorized"})
    assert rt.http("POST", "/internal/targets/cats/refetch", {"requestId": RID}, token=JOBS_TOKEN)[0] == 202


# -- no token material, ever -----------------------------------------------------------------------

SCAN_TRIGGER = "Zq7Lm2Xv9Rt4Wp8Kd3Hs6Nf"
SCAN_JOBS = "Yb5Tc1Gu8Jw3Ei6Oa9Sx2Qr"


def fragments(token: str, size: int = 8) -> set[str]:
    return {token[i:i + size] for i in range(len(token) - size + 1)}


def near_misses(token: str) -> list[str]:
    return [token[:8], token[:-1], token + "x", token[:-1] + chr(ord(token[-1]) ^ 1), token.lower(), token[::-1],
            token[4:], " " + token[:12]]


def test_no_log_line_ever_contains_a_token_or_a_fragment_of_one(make_runtime, logs):
    rt = make_runtime(tokens={"trigger": SCAN_TRIGGER, "jobs": SCAN_JOBS})
    routes = [
        ("GET", "/health", None),
        ("GET", "/internal/schedules", None),
        ("POST", RUN, None),
        ("POST", RUN, {"label": 5}),
        ("POST", "/internal/schedules/nope/run", None),
        ("POST", "/internal/outbox/drain", None),
        ("POST", "/internal/targets/cats/refetch", {"requestId": RID, "correlationId": "c-1"}),
        ("POST", "/internal/targets/cats/refetch", {"requestId": "bad"}),
        ("GET", f"/internal/targets/cats/refetch/{RID}", None),
        ("GET", "/internal/targets/cats/refetch/bad", None),
        ("GET", "/nowhere", None),
    ]
    presented = [None, SCAN_TRIGGER, SCAN_JOBS] + near_misses(SCAN_TRIGGER) + near_misses(SCAN_JOBS)
    seen_statuses = set()
    everything = []
    logs()
    for method, path, body in routes:
        for token in presented:
            status, _ = rt.http(method, path, body, token=token, headers={"x-schedule-attempt-id": "scan-1"})
            seen_statuses.add(status)
        for scheme in ("Basic", "Token", "bearer"):
            rt.http(method, path, body, headers={"Authorization": f"{scheme} {SCAN_TRIGGER}"})
    lines, raw = logs()
    everything.append(raw)
    rt.settle()
    lines_after, raw_after = logs()
    everything.append(raw_after)

    text = "\n".join(everything)
    assert {200, 202, 400, 401, 404} <= seen_statuses
    assert sum(1 for line in lines if line.get("http_status") == 401) >= 100  # the near misses were all refused
    for token in (SCAN_TRIGGER, SCAN_JOBS):
        leaked = sorted(f for f in fragments(token) if f in text or f.lower() in text.lower())
        assert leaked == [], leaked
