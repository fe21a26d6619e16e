"""`pixivflow dev` (issue 12; DESIGN §9, §12 "pixivflow dev --port N"): one loopback port serving both HTTP
functions as API Gateway v2 events, moto as a server the AWS CLI can reach, the queue pumps, the
schedules and the sweep on a clock, /docs and /openapi.json; Ctrl-C leaves no thread or port behind.

The server runs in-process on free ports with a virtual clock the test moves by hand (then wakes the
background thread), so nothing here waits for wall-clock minutes: the only waits are short polls for
the background thread to finish what a request queued."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import quote

import botocore.httpsession
import pytest
from conftest import JOBS_TOKEN, TRIGGER_TOKEN, ms, write_config

from pixivflow import aws
from pixivflow.clock import VirtualClock
from pixivflow.local.devserver import NOT_FOUND, DevServer, run_dev

_REAL_SEND = botocore.httpsession.URLLib3Session.send  # before conftest's guard replaces it
T0 = "2026-11-30T23:00:00Z"  # 08:00 in Tokyo: a fire of morning-tokyo


@pytest.fixture
def loopback_aws(monkeypatch):
    """botocore may reach the dev server's moto on 127.0.0.1, and nothing else."""
    def send(self, request):
        if not request.url.startswith("http://127.0.0.1:"):
            raise AssertionError(f"a test sent a real AWS request to {request.url}")
        return _REAL_SEND(self, request)

    monkeypatch.setattr(botocore.httpsession.URLLib3Session, "send", send)


def call(url: str, method: str = "GET", body=None, *, token: str | None = None, headers: dict | None = None,
         form: str | None = None):
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    if form is not None:
        data = form.encode()
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=hdrs)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def until(predicate, timeout_s: float = 20.0):
    """Poll (20 ms steps) until the background thread has done it (it returns as soon as it has: the
    bound is for a loaded machine, where one delivery through moto can take seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("the dev server did not get there in time")


def port_is_free(port: int) -> bool:
    """Nothing listens there any more, and a new server (SO_REUSEADDR, as every server sets it) can bind it."""
    with socket.socket() as client:
        if client.connect_ex(("127.0.0.1", port)) == 0:
            return False
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("127.0.0.1", port))
        probe.listen()
        return True
    except OSError:
        return False
    finally:
        probe.close()


def test_the_dev_server_serves_both_functions_moto_the_clock_and_docs(tmp_path, downstream, loopback_aws):
    config = write_config(tmp_path, downstream.url)
    clock = VirtualClock(ms(T0))
    threads_before = set(threading.enumerate())
    import os

    env_before = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "LEDGER_TABLE", "EXECUTION_QUEUE_URL", "PIXIVFLOW_CONFIG")}
    dev = DevServer(config, port=0, clock=clock, tokens={"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN})
    dev.start()
    try:
        url = dev.url
        status, _, body = call(f"{url}/health")
        assert status == 200 and json.loads(body)["status"] == "ok"

        # a run request: the same answer as deployed, then the pumps take the cells to success
        status, _, body = call(f"{url}/internal/schedules/morning-tokyo/run", "POST", {"label": "curl"}, token=TRIGGER_TOKEN)
        assert status == 202, body
        run = json.loads(body)
        assert (run["status"], run["schedule"]["slotId"]) == ("accepted", "morning-tokyo@2026-12-01T0800")
        until(lambda: dev.rt.wiring.ledger.get_slot("morning-tokyo@2026-12-01T0800").status == "success")
        assert len(downstream.records) == 3
        assert call(f"{url}/internal/schedules/morning-tokyo/run", "POST", token="wrong")[0] == 401

        # a job submission on the job_events function
        task = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": "dev-key-1",
                "params": {"query": {"tags": ["dogs"]}, "target_id": "dogs"}}
        status, _, body = call(f"{url}/jobs", "POST", task, token=JOBS_TOKEN)
        assert status == 202, body
        job_id = json.loads(body)["job"]["job_id"]
        assert job_id == "evening-berlin@manual-dev-key-1"
        until(lambda: json.loads(call(f"{url}/jobs/{quote(job_id, safe='')}", token=JOBS_TOKEN)[2])["status"] == "succeeded")
        assert call(f"{url}/capabilities")[0] == 401

        # the OpenAPI document of both surfaces, and Swagger UI with its assets served locally
        status, headers, body = call(f"{url}/openapi.json")
        from pixivflow.http.openapi import openapi_document

        assert status == 200 and json.loads(body) == openapi_document()
        status, headers, page = call(f"{url}/docs")
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert b"<script src='/docs/swagger-ui-bundle.min.js'></script>" in page and b'"/jobs/{jobId}/cancel"' in page
        assert b"https://" not in page.split(b"<script>", 1)[0]  # no CDN: every asset is local
        status, headers, asset = call(f"{url}/docs/swagger-ui-bundle.min.js")
        assert status == 200 and len(asset) > 100_000 and headers["Content-Type"] == "application/javascript"
        assert call(f"{url}/docs/swagger-ui.min.css")[0] == 200

        # /ui: the login form answers the session cookie through the dev server's HTTP
        status, headers, _ = call(f"{url}/ui")
        assert (status, headers["Location"]) == (303, "/ui/login")
        status, headers, _ = call(f"{url}/ui/login", "POST", form=f"token={TRIGGER_TOKEN}")
        assert status == 303 and headers["Set-Cookie"].startswith("pixivflow_ui=v2.")
        cookie = headers["Set-Cookie"].split(";", 1)[0]
        status, _, page = call(f"{url}/ui", headers={"Cookie": cookie})
        assert status == 200 and b"morning-tokyo@2026-12-01T0800" in page and b"st-success" in page

        # what API Gateway answers for a route the template does not declare
        status, headers, body = call(f"{url}/nowhere")
        assert (status, headers["Content-Type"], body) == (404, "application/json", json.dumps(NOT_FOUND).encode())
        status, headers, _ = call(f"{url}/health", "DELETE")  # a known path: ANY routes it to the shell's 405
        assert (status, headers["Allow"]) == (405, "GET")

        # the AWS CLI's view: `aws --endpoint-url <moto> dynamodb list-tables` / `scan`
        ddb = aws.client("dynamodb", endpoint_url=dev.aws_endpoint)
        assert dev.rt.env["LEDGER_TABLE"] in ddb.list_tables()["TableNames"]
        slots = ddb.scan(TableName=dev.rt.env["LEDGER_TABLE"], FilterExpression="sk = :m AND begins_with(pk, :s)",
                         ExpressionAttributeValues={":m": {"S": "META"}, ":s": {"S": "SLOT#"}})["Items"]
        assert sorted(i["slotId"]["S"] for i in slots) == [job_id, "morning-tokyo@2026-12-01T0800"]

        # the clock: a fire of evening-berlin (19:30 Berlin = 18:30Z) and the minute sweeps
        clock.set(ms("2026-12-01T18:30:00Z"))
        dev.wake()
        until(lambda: ("evening-berlin", ms("2026-12-01T18:30:00Z")) in dev.stats.fires)
        until(lambda: dev.rt.wiring.ledger.get_slot("evening-berlin@2026-12-01T1930") is not None)
        until(lambda: dev.stats.sweeps >= 1)
        assert dev.stats.errors == 0
        assert [s for s, _ in dev.stats.fires].count("noon-flaky") == 1  # 12:00 UTC fell inside the jump: fired once
        port, moto_port = dev.port, int(dev.aws_endpoint.rsplit(":", 1)[1])
    finally:
        dev.stop()
    # nothing left behind: no thread, no port, no environment
    until(lambda: not (set(threading.enumerate()) - threads_before), timeout_s=3)
    assert port_is_free(port) and port_is_free(moto_port)
    assert {k: os.environ.get(k) for k in env_before} == env_before  # the environment is as it was


def test_a_second_instance_on_a_busy_port_says_so_and_exits_non_zero(tmp_path, downstream, capsys):
    config = write_config(tmp_path, downstream.url)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    threads_before = set(threading.enumerate())
    try:
        started = time.monotonic()
        assert run_dev(config=str(config), port=port) == 1
        assert time.monotonic() - started < 2  # it fails before starting moto or anything else
    finally:
        busy.close()
    err = capsys.readouterr().err
    assert err == (f"pixivflow dev: 127.0.0.1:{port} is already in use: another dev server (or another program) listens "
                   "there; choose another port with --port (or --moto-port)\n")
    assert set(threading.enumerate()) == threads_before


def test_without_a_config_or_with_both_config_and_demo_it_says_so(capsys, monkeypatch):
    monkeypatch.delenv("PIXIVFLOW_CONFIG", raising=False)
    assert run_dev(config=None) == 2
    assert run_dev(config="x.yaml", demo=True) == 2
    assert run_dev(config="x.yaml", speed=0) == 2
    assert capsys.readouterr().err.splitlines() == [
        "pixivflow dev: no config: pass --config (or set PIXIVFLOW_CONFIG), or --demo",
        "pixivflow dev: --demo brings its own config; drop --config (or drop --demo)",
        "pixivflow dev: --speed must be a positive number"]


@pytest.mark.size("large")  # make dev in a subprocess (tests/README.md, test sizes)
def test_make_dev_starts_prints_the_urls_and_stops_on_ctrl_c(tmp_path):
    """`pixivflow dev --demo` as a developer runs it: a process, stopped with SIGINT."""
    import os
    import re
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PYTHONPATH=str(root / "shared"), TRIGGER_TOKEN=TRIGGER_TOKEN, POWERTOOLS_LOG_LEVEL="ERROR")
    env.pop("JOBS_TOKEN", None)
    # --port 0: the server binds a free port itself and prints it. A port picked here and handed over
    # could be taken by a parallel test's server in between (make test runs three workers).
    proc = subprocess.Popen([sys.executable, "-m", "pixivflow.cli", "dev", "--demo", "--source", "catalog", "--port", "0"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in proc.stdout), daemon=True)
    reader.start()
    try:
        until(lambda: "Ctrl-C stops everything." in lines or proc.poll() is not None, timeout_s=30)
        assert proc.poll() is None, proc.stderr.read()
        text = "\n".join(lines)
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/docs", text).group(1))
        assert port != 0 and f"http://127.0.0.1:{port}/ui" in text
        assert "trigger token              (not shown)  (from TRIGGER_TOKEN)" in text
        jobs = re.search(r"jobs token\s+(\S+)\s+\(generated", text)
        assert jobs and TRIGGER_TOKEN not in text  # a generated token is printed, one from the environment never
        endpoint = re.search(r"AWS endpoint \(moto\)\s+(http://127\.0\.0\.1:\d+)", text).group(1)
        assert call(f"http://127.0.0.1:{port}/health")[0] == 200
        status, _, body = call(f"http://127.0.0.1:{port}/internal/schedules/dev-every-5-min/run", "POST", token=TRIGGER_TOKEN)
        assert status == 202 and json.loads(body)["status"] == "accepted"
        assert call(f"http://127.0.0.1:{port}/capabilities", token=jobs.group(1))[0] == 200
        proc.send_signal(signal.SIGINT)
        # Generous: at a load average of 8 the stop once took over 20 s; a dev server that never
        # stops still fails here, only later.
        assert proc.wait(timeout=90) == 0, proc.stderr.read()
        reader.join(timeout=5)
        # the last words, after the indented activity lines (requests, fires, executions, deliveries)
        assert [line for line in lines if not line.startswith("  ")][-2:] == ["pixivflow dev: stopping", "pixivflow dev: stopped"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert port_is_free(port) and port_is_free(int(endpoint.rsplit(":", 1)[1]))


def test_every_route_of_both_surfaces_reaches_its_function_as_deployed():
    from pixivflow.http import jobs_api, trigger_api
    from pixivflow.local.devserver import template_routes

    routes = template_routes()
    for function, shell in (("trigger", trigger_api.shell), ("job_events", jobs_api.shell)):
        for spec in shell.routes:
            path = spec.rule.replace("<scheduleId>", "morning-tokyo").replace("<targetId>", "cats") \
                .replace("<requestId>", "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab").replace("<jobId>", "p%40manual-k") \
                .replace("<slotId>", "morning-tokyo@2026-12-01T0800")
            matched = [r.function for r in routes if r.method in (spec.method, "ANY") and r.regex.match(path)]
            assert matched == [function], (spec.method, spec.rule, matched)
    assert not [r for r in routes if r.regex.match("/jobs/a/b")]  # {jobId} is one segment


def test_requests_become_payload_2_0_events():
    from pixivflow.local.devserver import api_event

    event = api_event("POST", "/jobs?after=evt-1&a=1&a=2", [("Host", "127.0.0.1:8000"), ("X-Thing", "one"),
                                                            ("x-thing", "two"), ("Cookie", "pixivflow_ui=v1.1.x; other=2")],
                      b'{"k": "\xc3\xa9"}', now_ms=1_796_079_600_000)
    assert (event["version"], event["rawPath"], event["rawQueryString"]) == ("2.0", "/jobs", "after=evt-1&a=1&a=2")
    assert event["queryStringParameters"] == {"after": "evt-1", "a": "1,2"}
    assert event["headers"] == {"host": "127.0.0.1:8000", "x-thing": "one,two"}  # cookies moved out, repeats joined
    assert event["cookies"] == ["pixivflow_ui=v1.1.x", "other=2"]
    assert (event["body"], event["isBase64Encoded"]) == ('{"k": "é"}', False)
    assert event["requestContext"]["http"]["method"] == "POST" and event["requestContext"]["timeEpoch"] == 1_796_079_600_000
    binary = api_event("POST", "/x", [], b"\xff\x00", now_ms=0)
    assert (binary["body"], binary["isBase64Encoded"], binary["queryStringParameters"]) == ("/wA=", True, None)
    assert "cookies" not in binary


def test_speed_runs_a_virtual_clock_faster_than_the_wall():
    from pixivflow.local.devserver import ScaledClock

    wall = [1_000_000]
    fast = ScaledClock(60, wall_ms=lambda: wall[0])
    plain = ScaledClock(1, wall_ms=lambda: wall[0])
    wall[0] += 1_000  # one real second
    assert fast.now_ms() == 1_000_000 + 60_000 and plain.now_ms() == 1_001_000
    assert fast.real_seconds(60_000) == 1.0  # a virtual minute (the sweep) every real second
    with pytest.raises(ValueError):
        ScaledClock(0)


def _raw(url: str, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """One request with any method (http.client: urllib refuses CONNECT to a path)."""
    import http.client

    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        conn.putheader("Content-Length", "0")
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_a_wrong_method_on_every_known_path_is_405_with_allow_through_the_dev_server(tmp_path, downstream, loopback_aws):
    """Issue 21 item 4: routed like API Gateway (template.yaml: ANY per path), every known path
    answers a method it does not serve with 405 + Allow in its surface's shape -- TRACE and CONNECT
    too, never the stdlib's 501 -- and an unknown path keeps API Gateway's 404."""
    from pixivflow.http import jobs_api, trigger_api

    config = write_config(tmp_path, downstream.url)
    with DevServer(config, port=0, clock=VirtualClock(ms(T0)), tokens={"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN}) as dev:
        checked = 0
        for shell in (trigger_api.shell, jobs_api.shell):
            rules: dict[str, set[str]] = {}
            for spec in shell.routes:
                rules.setdefault(spec.rule, set()).add(spec.method)
            for rule, served in rules.items():
                path = rule.replace("<scheduleId>", "morning-tokyo").replace("<targetId>", "cats") \
                    .replace("<requestId>", "3f2b8c1e-4d5a-4b7c-8e9f-0123456789ab").replace("<jobId>", "p%40manual-k") \
                    .replace("<slotId>", "morning-tokyo@2026-12-01T0800")
                allow = ", ".join(sorted(served))
                for method in sorted({"GET", "POST", "PUT", "PATCH", "DELETE", "TRACE", "CONNECT"} - served):
                    status, headers, body = _raw(dev.url, method, path)
                    assert (status, headers.get("allow")) == (405, allow), (method, path, status, body)
                    if shell is jobs_api.shell:
                        assert json.loads(body) == {"error": {
                            "code": "invalid_params", "message": "method not allowed", "retryable": False,
                            "detail": {"reason": "method_not_allowed", "allow": sorted(served)}}}, (method, path)
                    else:
                        assert json.loads(body) == {"status": "error", "error": "method not allowed"}, (method, path)
                    checked += 1
        assert checked >= 18 * 5
        assert _raw(dev.url, "DELETE", "/health")[0] == 405
        assert _raw(dev.url, "GET", "/internal/outbox/drain")[:2][0] == 405
        status, _, body = _raw(dev.url, "TRACE", "/no/such/path")
        assert (status, json.loads(body)) == (404, NOT_FOUND)


def test_the_dev_server_refuses_egress_beyond_loopback_unless_allowed(tmp_path, downstream, loopback_aws):
    """Issue 21 item 8: while `pixivflow dev` runs, this process connects to 127.0.0.0/8 and ::1
    only and looks up no outside name; the refusal happens before the socket's real connect, so no
    packet leaves. The guard lifts when the server stops; ``allow_egress`` never installs it."""
    from pixivflow.local import egress

    original = socket.socket.connect
    config = write_config(tmp_path, downstream.url)
    with DevServer(config, port=0, clock=VirtualClock(ms(T0)), tokens={"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN}) as dev:
        assert egress.active()
        for address in (("10.255.255.1", 9), ("8.8.8.8", 53), ("::ffff:127.0.0.1", 9)):
            family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as sock, pytest.raises(egress.EgressRefused):
                sock.connect(address)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, pytest.raises(egress.EgressRefused):
            sock.sendto(b"x", ("192.0.2.1", 53))
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo("consumer.example", 443)
        assert socket.getaddrinfo("127.0.0.1", 9)  # literals and localhost still resolve
        # a request that would make the server call out: the callback host cannot even be looked up
        task = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": "egress-1",
                "callback_url": "https://consumer.example/cb", "params": {"query": {"tags": ["dogs"]}, "target_id": "dogs"}}
        status, _, body = call(f"{dev.url}/jobs", "POST", task, token=JOBS_TOKEN)
        assert (status, json.loads(body)["error"]["detail"]) == (400, {"field": "callback_url", "reason": "unresolvable_host"})
        assert call(f"{dev.url}/health")[0] == 200  # loopback still works
    assert not egress.active() and socket.socket.connect is original
    with DevServer(config, port=0, clock=VirtualClock(ms(T0)), tokens={"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN},
                   allow_egress=True) as dev:
        assert not egress.active() and socket.socket.connect is original
        assert "  egress                     unrestricted (--allow-egress)" in dev.banner()
