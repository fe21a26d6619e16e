"""`pixivflow dev` (`make dev`): the local dev server.

One process plays the whole stack on the loopback interface:

* moto as a ``ThreadedMotoServer`` on ``127.0.0.1`` (a free port, printed), so the AWS CLI and boto3
  reach the local table and queues with ``--endpoint-url``; the resources are provisioned from
  template.yaml (``local.provision``);
* both HTTP functions on one port (``--port``, default 8000) as API Gateway HTTP API (payload 2.0)
  events: requests are routed by template.yaml's own ``HttpApi`` events (``ANY`` per path), so every
  route of both surfaces answers what it answers deployed -- a wrong method on a known path the
  function's 405 + ``Allow``, whatever the method -- and a request no route matches gets API
  Gateway's own ``404 {"message":"Not Found"}``;
* ``/docs`` (Swagger UI from Powertools' own bundled assets: no CDN) and ``/openapi.json`` for both
  surfaces, generated from the code (``http.openapi``); ``/ui`` is the trigger function's page;
* a background thread that plays what AWS would do around the functions: the SQS event source
  mappings (``QueuePump``), EventBridge Scheduler's fires of every enabled schedule on the wall
  clock (or a virtual clock ``--speed`` times faster), and the sweep every ``--sweep-interval``
  minutes (default: template.yaml's ``SweepIntervalMinutes``).

Like Lambda, each function runs one event at a time (one lock per function); different functions
run side by side. ``--demo`` starts the loopback downstream and the fake Pixiv and points the demo
config at them. Tokens come from ``TRIGGER_TOKEN`` / ``JOBS_TOKEN`` or are generated and printed.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import secrets
import shlex
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, TextIO
from urllib.parse import parse_qsl, urlsplit

HOST = "127.0.0.1"
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
NOT_FOUND = {"message": "Not Found"}  # what API Gateway answers for a request no route matches
DEMO_DIR = Path(__file__).resolve().parents[3] / "events" / "demo"
DEMO_SCHEDULE = "dev-every-5-min"
DEMO_TARGET = "dev-sample"
DEV_FIRE_LABEL = "dev fire"  # the name of a slot POST /dev/schedules/{id}/fire admitted
# The Telegram review route of pixivflow.production.json, on the local fakes: a person
# can watch a review post (media groups, the control card, the control-plane record) in /ui.
TELEGRAM_SCHEDULE, TELEGRAM_TARGET, TELEGRAM_ROUTE = "dev-telegram-every-5-min", "dev-telegram", "dev-review"
DEV_BOT_TOKEN = "1000000001:DEVFAKEtelegramBotTokenForLoopbackOnly"
_FUNCTION_OF_CODE = re.compile(r"functions/([a-z_]+)/?$")


class PortInUse(OSError):
    """The HTTP (or moto) port is taken: another dev server, or another program."""


class ScaledClock:
    """The wall clock, or a virtual one running ``speed`` times faster from the moment it was made."""

    def __init__(self, speed: float = 1.0, *, wall_ms: Callable[[], int] | None = None) -> None:
        if not speed > 0:
            raise ValueError("speed must be a positive number")
        self.speed = float(speed)
        self._wall = wall_ms or (lambda: time.time_ns() // 1_000_000)
        self._origin = self._wall()

    def now_ms(self) -> int:
        wall = self._wall()
        if self.speed == 1.0:
            return wall
        return self._origin + int((wall - self._origin) * self.speed)

    def real_seconds(self, virtual_ms: float) -> float:
        return max(0.0, virtual_ms / self.speed / 1000)


# -- API Gateway: routes from template.yaml, events in payload format 2.0 -----------------------


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str
    regex: re.Pattern[str]


def template_routes(template: dict[str, Any] | None = None) -> list[Route]:
    """Every ``HttpApi`` event of the template's functions, as API Gateway would match it."""
    from .template import load_template

    template = template or load_template()
    routes = []
    for resource in (template.get("Resources") or {}).values():
        props = resource.get("Properties") or {}
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        match = _FUNCTION_OF_CODE.search(str(props.get("CodeUri") or ""))
        if not match:
            continue
        for event in (props.get("Events") or {}).values():
            if event.get("Type") != "HttpApi":
                continue
            method = str(event["Properties"]["Method"]).upper()
            path = str(event["Properties"]["Path"])
            pattern = re.sub(r"\\\{[A-Za-z0-9_]+\\\+\\\}", ".+", re.escape(path))  # {proxy+}
            pattern = re.sub(r"\\\{[A-Za-z0-9_]+\\\}", "[^/]+", pattern)
            routes.append(Route(method, path, match.group(1), re.compile(f"^{pattern}$")))
    return routes


def api_event(method: str, target: str, headers: list[tuple[str, str]], body: bytes, *, source_ip: str = HOST,
              now_ms: int | None = None) -> dict[str, Any]:
    """The HTTP API payload 2.0 event API Gateway would hand the function for this request."""
    parts = urlsplit(target)
    raw_path = parts.path or "/"
    joined: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":  # payload 2.0 moves cookies out of the headers
            cookies += [c.strip() for c in value.split(";") if c.strip()]
            continue
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    text: str | None = None
    encoded = False
    if body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode("ascii"), True
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": parts.query,
        "headers": joined,
        "queryStringParameters": query or None,
        "requestContext": {
            "accountId": "123456789012", "apiId": "local", "domainName": joined.get("host", HOST),
            "domainPrefix": "local",
            "http": {"method": method, "path": raw_path, "protocol": "HTTP/1.1", "sourceIp": source_ip,
                     "userAgent": joined.get("user-agent", "")},
            "requestId": secrets.token_hex(8), "routeKey": "$default", "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now / 1000)), "timeEpoch": now,
        },
        "body": text,
        "isBase64Encoded": encoded,
    }
    if cookies:
        event["cookies"] = cookies
    return event


# -- the server ---------------------------------------------------------------------------------


def _reset_moto(endpoint: str) -> None:
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10).close()
    except OSError:
        pass  # the server is gone already: nothing of it is left to reset


def _port_free(port: int) -> bool:
    try:
        _free_port_check(port)
    except PortInUse:
        return False
    return True


_OUT_LOCK = threading.Lock()


def _say(out: TextIO, line: str) -> None:
    """One whole line on ``out``. print() writes a line's text and its newline as two writes, so the
    background threads' activity lines and the main thread's last words interleaved: `make test`
    once read an activity line run into "pixivflow dev: stopping" and then a lone newline."""
    with _OUT_LOCK:
        out.write(line + "\n")
        out.flush()


def _free_port_check(port: int) -> None:
    """Raise PortInUse when ``port`` cannot be bound on 127.0.0.1 (explicit moto ports only)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is free, LISTEN is not
    try:
        probe.bind((HOST, port))
    except OSError as exc:
        raise PortInUse(exc.errno, f"{HOST}:{port} is already in use") from None
    finally:
        probe.close()


def _moto_server(port: int):
    """A ``ThreadedMotoServer`` whose connections close after each answer: a stopped server leaves
    no handler thread waiting on a client's idle keep-alive connection."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class OneShotHandler(MotoRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_request(self, *args: Any, **kwargs: Any) -> None:  # keep the console for the dev server
            pass

    class LoopbackMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = DomainDispatcherApplication(create_backend_app)
            self._server = make_server(self._ip_address, self._port, app, True, request_handler=OneShotHandler)
            self._server_ready_event.set()
            self._server.serve_forever(poll_interval=0.05)

    return LoopbackMotoServer(ip_address=HOST, port=port, verbose=False)


@dataclass
class DevStats:
    fires: list[tuple[str, int]] = field(default_factory=list)  # (schedule id, fire ms)
    sweeps: int = 0
    handled: int = 0
    errors: int = 0
    requests: int = 0


class DevServer:
    """``with DevServer(config) as dev: dev.url`` (or ``start()`` / ``stop()``).

    ``port=0`` takes a free port (tests). ``clock`` replaces the (scaled) wall clock (tests move it
    by hand, then call :meth:`wake`)."""

    def __init__(self, config_path: str | os.PathLike[str] | None = None, *, port: int = 8000, speed: float = 1.0,
                 tokens: dict[str, str] | None = None, moto_port: int = 0, demo: bool = False, source: str = "fake-pixiv",
                 clock: Any = None, out: TextIO | None = None, idle_s: float = 0.5, log_activity: bool = False,
                 state_dir: str | os.PathLike[str] | None = None, allow_egress: bool = False,
                 sweep_interval_minutes: int | None = None) -> None:
        from .template import sweep_interval

        if config_path is None and not demo:
            raise ValueError("a config path (or demo=True) is required")
        # checked here, before anything starts: only the intervals the template can deploy
        self.sweep_interval = sweep_interval(sweep_interval_minutes)
        self.config_path = str(config_path) if config_path is not None else None
        self.requested_port = port
        self.speed = speed
        self.moto_port = moto_port
        self.demo = demo
        self.source = source
        self.clock = clock or ScaledClock(speed)
        self.out = out or sys.stdout
        self.idle_s = idle_s
        self.allow_egress = allow_egress  # False: the egress guard (local/egress.py) is on while it runs
        self._guarded = False
        self.tokens, self.generated = self._tokens(tokens)
        self.stats = DevStats()
        self.rt: Any = None
        self.downstream: Any = None
        self.fake_pixiv: Any = None
        self.fake_telegram: Any = None
        self.control_plane: Any = None
        self.aws_endpoint = ""
        self._stack = ExitStack()
        self._http: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._locks = {name: threading.Lock() for name in ("trigger", "execute", "deliver", "stall_sweep", "job_events")}
        self._routes: list[Route] = []
        self._saved_env: dict[str, str | None] = {}
        self._openapi: bytes | None = None
        self._started = False
        self.config_in_use: str | None = None
        self.env_file: str | None = None  # set by run_dev once written
        self.log_activity = log_activity
        self.state_dir = str(state_dir) if state_dir else None
        self.restored: dict[str, int] | None = None

    # -- configuration -------------------------------------------------------------------------
    @staticmethod
    def _tokens(given: dict[str, str] | None) -> tuple[dict[str, str], set[str]]:
        tokens = dict(given or {})
        generated: set[str] = set()
        for kind, var in (("trigger", "TRIGGER_TOKEN"), ("jobs", "JOBS_TOKEN"), ("callback", "CALLBACK_SIGNING_SECRET")):
            if tokens.get(kind):
                continue
            value = (os.environ.get(var) or "").strip()
            if not value:
                value = secrets.token_urlsafe(24) if kind != "callback" else "whsec_" + base64.b64encode(
                    secrets.token_bytes(24)).decode("ascii")
                generated.add(kind)
            tokens[kind] = value
        return tokens, generated

    def _demo_config(self) -> str:
        import yaml

        from .downstream import Downstream

        self.downstream = self._stack.enter_context(Downstream())
        cfg = yaml.safe_load((DEMO_DIR / "config.yaml").read_text(encoding="utf-8"))
        for route in cfg["delivery"]["targets"].values():
            route["url"] = self.downstream.url
        cfg["source"]["path"] = str((DEMO_DIR / cfg["source"]["path"]).resolve())
        if self.source == "fake-pixiv":
            from .fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv

            self.fake_pixiv = self._stack.enter_context(FakePixiv())
            cfg["source"] = {"kind": "pixiv", "baseUrls": self.fake_pixiv.base_urls}
            cfg["pixiv"] = {"refreshToken": "${PIXIVFLOW_DEV_REFRESH_TOKEN}"}
            self._set_env({"PIXIVFLOW_DEV_REFRESH_TOKEN": DEFAULT_REFRESH_TOKEN})
        # A schedule that is always due within the run route's window (15 min lead), so `curl .../run`
        # works whatever the time of day; on the wall clock it also fires by itself every 5 minutes.
        cfg["schedules"].append({"id": DEMO_SCHEDULE, "name": "Every 5 minutes (dev)", "cron": "*/5 * * * *",
                                 "timezone": "UTC", "targetIds": [DEMO_TARGET]})
        cfg["targets"].append({"id": DEMO_TARGET, "type": "illustration", "mode": "search", "tag": "cats", "limit": 1,
                               "storageMode": "cache", "delivery": {"target": "review"}})
        self._demo_telegram(cfg)
        cfg.setdefault("jobs", {})["callbackAllowHosts"] = ["127.0.0.1", "localhost"]  # local callback receivers
        tmp = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="pixivflow-dev-"))
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
        return str(path)

    def _demo_telegram(self, cfg: dict[str, Any]) -> None:
        """A ``type: telegram`` route on the fake Bot API and the fake control plane, its secrets
        as ``${VAR}``s in the environment as in a deployment."""
        from .route_fakes import FakeControlPlane, FakeTelegram

        self.fake_telegram = self._stack.enter_context(FakeTelegram())
        self.control_plane = self._stack.enter_context(FakeControlPlane(token="dev-control-plane-secret"))
        self._set_env({"TELEGRAM_API_BASE": self.fake_telegram.base, "PIXIVFLOW_DEV_BOT_TOKEN": DEV_BOT_TOKEN,
                       "PIXIVFLOW_DEV_CONTROL_PLANE": self.control_plane.url,
                       "PIXIVFLOW_DEV_CONTROL_PLANE_TOKEN": "dev-control-plane-secret"})
        cfg["delivery"]["targets"][TELEGRAM_ROUTE] = {
            "type": "telegram", "botId": "dev-bot", "botToken": "${PIXIVFLOW_DEV_BOT_TOKEN}", "chatId": "-1000000000001",
            "publishChatId": "@pixivflowDev", "controlPlaneUrl": "${PIXIVFLOW_DEV_CONTROL_PLANE}",
            "controlPlaneToken": "${PIXIVFLOW_DEV_CONTROL_PLANE_TOKEN}",
            "caption": "{{title}}\n⭐ {{bookmarkCount}} · 👁 {{viewCount}}\n🔗 {{link}}"}
        cfg["schedules"].append({"id": TELEGRAM_SCHEDULE, "name": "Telegram review every 5 minutes (dev)",
                                 "cron": "*/5 * * * *", "timezone": "UTC", "targetIds": [TELEGRAM_TARGET]})
        cfg["targets"].append({"id": TELEGRAM_TARGET, "type": "illustration", "mode": "search", "tag": "cats", "limit": 1,
                               "storageMode": "cache", "delivery": {"target": TELEGRAM_ROUTE}})

    def _set_env(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._http is not None
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> "DevServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> "DevServer":
        """Bind the HTTP port first (a busy port fails before anything else starts), then moto,
        the provisioned resources and the runtime, then the HTTP and background threads. Unless
        ``allow_egress``, the egress guard goes on first: nothing it runs reaches beyond loopback."""
        try:
            # bound now (a busy port fails before anything starts) but not listening: a client that
            # comes during start-up is refused, never accepted and then left hanging
            self._http = ThreadingHTTPServer((HOST, self.requested_port), self._handler_class(), bind_and_activate=False)
            self._http.allow_reuse_address = True
            self._http.server_bind()
        except OSError as exc:
            if self._http is not None:
                self._http.server_close()
                self._http = None
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                raise PortInUse(exc.errno, f"{HOST}:{self.requested_port} is already in use") from None
            raise
        self._http.daemon_threads = False  # server_close() joins every request thread
        if not self.allow_egress and not self._guarded:  # lifted by _teardown, whatever fails below
            from . import egress

            egress.install()
            self._guarded = True
        try:
            self._start_backend()
            self._http.server_activate()  # listen: the backend is ready
        except BaseException:
            self._http.server_close()
            self._http = None
            self._teardown()
            raise
        self._threads = [threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
                                          name="pixivflow-dev-http", daemon=True),
                         threading.Thread(target=self._loop, name="pixivflow-dev-clock", daemon=True)]
        for thread in self._threads:
            thread.start()
        self._started = True
        return self

    def _start_backend(self) -> None:
        from .harness import EmbeddedRuntime

        if not self.moto_port and self.state_dir:
            from .dev_state import remembered_moto_port

            remembered = remembered_moto_port(self.state_dir)  # the second shell's export line stays valid
            if remembered and _port_free(remembered):
                self.moto_port = remembered
        if self.moto_port:
            _free_port_check(self.moto_port)
        moto = _moto_server(self.moto_port)
        moto.start()
        self._stack.callback(moto.stop)
        host, moto_port = moto.get_host_and_port()
        # moto's backends live in this process, whichever server serves them: empty them at stop so a
        # later dev server in the same process (tests) starts from nothing, as a new process would
        self._stack.callback(_reset_moto, f"http://{host}:{moto_port}")
        self.aws_endpoint = f"http://{host}:{moto_port}"
        self._set_env({"AWS_ENDPOINT_URL": self.aws_endpoint, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"})
        config = self._demo_config() if self.demo else self.config_path
        self.config_in_use = str(Path(config).resolve()) if config and not config.startswith("ssm:") else config
        assert config is not None  # __init__ refuses a dev server with neither a config nor the demo
        # A wall-paced ScaledClock, not a VirtualClock: the dev server never calls settle(), the one user of advance().
        self.rt = EmbeddedRuntime(config, self.clock, tokens=self.tokens, start_moto=False, backend="moto",  # type: ignore[arg-type]
                                  seed=secrets.randbits(32), sweep_interval_minutes=self.sweep_interval.minutes)
        self.rt.__enter__()
        self._stack.callback(self.rt.__exit__, None, None, None)
        for name, pump in self.rt.pumps.items():
            pump._handler = self._locked(name, pump._handler)  # one execute / deliver invocation at a time
        if self.state_dir:
            from .dev_state import restore

            self.restored = restore(self.state_dir, self.rt.env)
        self.rt.wiring  # build the object graph now: a config error fails the start, not the first request
        self._routes = template_routes()

    def _locked(self, name: str, handler: Callable[[dict, Any], Any]) -> Callable[[dict, Any], Any]:
        lock = self._locks[name]

        def invoke(event: dict, context: Any) -> Any:
            with lock:
                began = time.monotonic()
                result = handler(event, context)
            records = len(event.get("Records") or []) if isinstance(event, dict) else 0
            failed = len((result or {}).get("batchItemFailures") or []) if isinstance(result, dict) else 0
            self.activity(f"{name} {records} record(s)" + (f", {failed} failed" if failed else "")
                          + f" {(time.monotonic() - began) * 1000:.0f} ms")
            return result

        return invoke

    def stop(self) -> None:
        """Stop the clock thread, the HTTP server (waiting for requests in flight), the runtime and
        moto, and restore the environment. Safe to call twice."""
        self._stop.set()
        self._wake.set()
        if self._http is not None:
            self._http.shutdown()
        for thread in self._threads:
            thread.join(timeout=30)
        if self._http is not None:
            self._http.server_close()
            self._http = None
        self._threads = []
        if self.state_dir and self.rt is not None:
            from .dev_state import save

            try:
                saved = save(self.state_dir, self.rt.env, int(self.aws_endpoint.rsplit(":", 1)[1]))
                self.activity(f"state kept in {self.state_dir}: {saved['items']} items, {saved['messages']} messages, "
                              f"{saved['objects']} objects")
            except Exception:  # the stop still completes; say what was not kept
                print("pixivflow dev: the state could not be saved:\n" + traceback.format_exc(), file=sys.stderr)
        self._teardown()

    def _teardown(self) -> None:
        try:
            self._stack.close()
        finally:
            self._stack = ExitStack()
            self.rt = None
            self._restore_env()
            if self._guarded:
                from . import egress

                egress.uninstall()
                self._guarded = False

    def wake(self) -> None:
        """Make the background thread look at the clock, the queues and the schedules now."""
        self._wake.set()

    # -- invoking the functions -----------------------------------------------------------------
    def invoke(self, function: str, event: dict[str, Any]) -> dict[str, Any]:
        from .lambda_context import context_for

        with self._locks[function]:
            response = self.rt.handlers[function](event, context_for(function))
        self._wake.set()  # whatever the request queued is pumped at once
        return response

    def route(self, method: str, path: str) -> Route | None:
        """The template route API Gateway would pick: an exact method first, then ``ANY`` (the
        template's choice for every path, so a wrong method reaches the shell's 405)."""
        for wanted in (method, "ANY"):
            for route in self._routes:
                if route.method == wanted and route.regex.match(path):
                    return route
        return None

    # -- the background thread: event source mappings, schedules, the sweep -----------------------
    def _loop(self) -> None:
        start = self.clock.now_ms()
        checked = start
        every = self.sweep_interval.ms
        next_sweep = start + every
        while not self._stop.is_set():
            self._wake.clear()
            try:
                now = self.clock.now_ms()
                self._fire_due(checked, now)
                checked = now
                if now >= next_sweep:
                    with self._locks["stall_sweep"]:
                        self.rt.sweep()
                    self.stats.sweeps += 1
                    while next_sweep <= now:
                        next_sweep += every
                self.stats.handled += self.rt.pump()
            except Exception:  # the dev server keeps running; the error is the developer's to read
                self.stats.errors += 1
                print("pixivflow dev: background step failed:\n" + traceback.format_exc(), file=sys.stderr)
            self._wake.wait(self._idle_wait(checked, next_sweep))

    def _fire_due(self, after: int, now: int) -> None:
        from ..domain.occurrence import fires_between

        due: list[tuple[int, str]] = []
        for schedule in self.rt.wiring.config.schedules:
            if schedule.enabled and schedule.cron:
                due += [(at, schedule.id) for at in fires_between(schedule.cron, schedule.timezone, after, now)]
        for at, schedule_id in sorted(due):
            with self._locks["trigger"]:
                result = self.rt.fire(schedule_id, at)  # EventBridge Scheduler's input: scheduleId + scheduledTime
            self.stats.fires.append((schedule_id, at))
            self.activity(f"fire {schedule_id} -> {result.get('slot_id') or result.get('reason')}")

    def _idle_wait(self, now: int, next_sweep: int) -> float:
        from ..domain.occurrence import next_fire

        due = [next_sweep]
        release = self.rt.next_release()
        if release is not None:
            due.append(release)
        for schedule in self.rt.wiring.config.schedules:
            if schedule.enabled and schedule.cron:
                try:
                    due.append(next_fire(schedule.cron, schedule.timezone, now))
                except ValueError:
                    pass
        real = self.clock.real_seconds(min(due) - now) if hasattr(self.clock, "real_seconds") else self.idle_s
        return min(self.idle_s, max(0.01, real))

    # -- HTTP ------------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "pixivflow-dev"
            timeout = 30

            def log_message(self, *args: Any) -> None:
                pass  # one line per request is written by _send (method, path, status, ms)

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._handle("PUT")

            def do_PATCH(self) -> None:  # noqa: N802
                self._handle("PATCH")

            def do_DELETE(self) -> None:  # noqa: N802
                self._handle("DELETE")

            def do_OPTIONS(self) -> None:  # noqa: N802
                self._handle("OPTIONS")

            def do_HEAD(self) -> None:  # noqa: N802
                self._handle("HEAD")

            def __getattr__(self, name: str) -> Any:
                # Any other method (TRACE, CONNECT, an invented one) goes to the route like the
                # rest -- the function answers 405 + Allow on a known path -- never the stdlib's
                # 501 HTML page.
                if name.startswith("do_") and name[3:].isupper():
                    return lambda: self._handle(name[3:])
                raise AttributeError(name)

            def _handle(self, method: str) -> None:
                self._began = time.monotonic()
                server.stats.requests += 1
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    length = -1
                if length < 0 or length > MAX_BODY_BYTES:
                    self._send(413 if length > 0 else 400, {"Content-Type": "application/json"},
                               json.dumps({"message": "Request Entity Too Large" if length > 0 else "Bad Request"}).encode())
                    return
                body = self.rfile.read(length) if length else b""
                path = urlsplit(self.path).path
                local = server.local_answer(method, path, urlsplit(self.path).query) or \
                    server.dev_action(method, path, self.headers.get("Authorization"))
                if local is not None:
                    self._send(*local)
                    return
                route = server.route(method, path)
                if route is None:
                    self._send(404, {"Content-Type": "application/json"}, json.dumps(NOT_FOUND).encode())
                    return
                event = api_event(method, self.path, list(self.headers.items()), body, source_ip=self.client_address[0],
                                  now_ms=server.clock.now_ms())
                try:
                    response = server.invoke(route.function, event)
                except Exception:
                    # API Gateway's answer when the integration fails (the handler raised)
                    print("pixivflow dev: handler raised:\n" + traceback.format_exc(), file=sys.stderr)
                    self._send(500, {"Content-Type": "application/json"}, b'{"message":"Internal Server Error"}')
                    return
                self._reply(response)

            def _reply(self, response: dict[str, Any]) -> None:
                raw = response.get("body") or ""
                data = base64.b64decode(raw) if response.get("isBase64Encoded") else str(raw).encode("utf-8")
                headers = dict(response.get("headers") or {})
                headers.setdefault("Content-Type", "application/json")
                self._send(int(response.get("statusCode", 200)), headers, data, cookies=response.get("cookies") or [])

            def _send(self, status: int, headers: dict[str, str], data: bytes, cookies: list[str] | None = None) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in ("content-length", "connection"):
                        self.send_header(name, str(value))
                for cookie in cookies or []:
                    self.send_header("Set-Cookie", cookie)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")  # no idle keep-alive holds a thread at shutdown
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                self.close_connection = True
                began = getattr(self, "_began", None)
                server.activity(f"{self.command} {urlsplit(self.path).path} {status}"
                                + (f" {(time.monotonic() - began) * 1000:.0f} ms" if began is not None else ""))

        return Handler

    def local_answer(self, method: str, path: str, query: str) -> tuple[int, dict[str, str], bytes] | None:
        """The dev server's own pages: ``/openapi.json`` and ``/docs`` (Swagger UI and its two assets)."""
        if method not in ("GET", "HEAD"):
            return None
        if path == "/openapi.json" or (path == "/docs" and "format=json" in query):
            return 200, {"Content-Type": "application/json"}, self.openapi_json()
        if path in ("/docs", "/docs/"):
            return 200, {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}, self.docs_html()
        assets = {"/docs/swagger-ui-bundle.min.js": "application/javascript", "/docs/swagger-ui.min.css": "text/css"}
        if path in assets:
            return 200, {"Content-Type": assets[path], "Cache-Control": "max-age=3600"}, _swagger_asset(path.rsplit("/", 1)[1])
        return None

    def dev_action(self, method: str, path: str, authorization: str | None) -> tuple[int, dict[str, str], bytes] | None:
        """``POST /dev/schedules/{id}/fire`` (dev server only; no such route is deployed): the trigger
        function gets EventBridge Scheduler's input for the schedule's most recent fire, whatever the
        grace window, so a user trying their own config need not wait for the cron. The slot is
        named ``dev fire`` so it is never mistaken for a real fire. Trigger token required."""
        match = re.fullmatch(r"/dev/schedules/([^/]+)/fire", path)
        if match is None:
            return None
        json_type = {"Content-Type": "application/json"}
        if method != "POST":
            return 405, {**json_type, "Allow": "POST"}, json.dumps({"message": "Method Not Allowed"}).encode()
        import hmac

        given = (authorization or "").removeprefix("Bearer ").strip()
        if not given or not hmac.compare_digest(given.encode(), self.tokens["trigger"].encode()):
            return 401, json_type, json.dumps({"error": "unauthorized"}).encode()
        from urllib.parse import unquote

        from ..domain.occurrence import previous_fire

        schedule = self.rt.wiring.config.schedule(unquote(match.group(1)))
        if schedule is None or not schedule.enabled or not schedule.cron:
            return 404, json_type, json.dumps({"error": "unknown or disabled schedule"}).encode()
        at = previous_fire(schedule.cron, schedule.timezone, self.clock.now_ms() + 1)
        with self._locks["trigger"]:
            result = self.rt.fire(schedule.id, at, label=DEV_FIRE_LABEL)
        self.stats.fires.append((schedule.id, at))
        self.activity(f"dev fire {schedule.id} -> {result.get('slot_id')}")
        self._wake.set()
        return 202, json_type, json.dumps(result).encode()

    def activity(self, line: str) -> None:
        """One short line of what happened (a request, a fire, an execution, a delivery), unless quiet."""
        if self.log_activity:
            _say(self.out, f"  {line}")

    def openapi_json(self) -> bytes:
        if self._openapi is None:
            from ..http.openapi import openapi_document

            self._openapi = json.dumps(openapi_document(), indent=2).encode("utf-8")
        return self._openapi

    def docs_html(self) -> bytes:
        """Powertools' own Swagger UI page, its assets served from Powertools' package (offline)."""
        from aws_lambda_powertools.event_handler.openapi.swagger_ui import generate_swagger_html

        spec = self.openapi_json().decode("utf-8").replace("</", "<\\/")
        return generate_swagger_html(spec, "/docs/swagger-ui-bundle.min.js", "/docs/swagger-ui.min.css", "/docs",
                                     None).encode("utf-8")

    # -- the second shell ------------------------------------------------------------------------
    def shell_env(self) -> dict[str, str]:
        """What a second shell needs to use the CLI and the AWS CLI against this server: the moto
        endpoint with test credentials, the table and queues, the config in use, both tokens and
        the URL (``source``-able through :func:`write_env_file`)."""
        env = self.rt.env
        values = {"PIXIVFLOW_URL": self.url, "AWS_ENDPOINT_URL": self.aws_endpoint, "AWS_ACCESS_KEY_ID": "testing",
                  "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                  "LEDGER_TABLE": env["LEDGER_TABLE"], "EXECUTION_QUEUE_URL": env["EXECUTION_QUEUE_URL"],
                  "OUTBOX_QUEUE_URL": env["OUTBOX_QUEUE_URL"], "TRIGGER_TOKEN": self.tokens["trigger"],
                  "JOBS_TOKEN": self.tokens["jobs"]}
        if self.config_in_use:
            values["PIXIVFLOW_CONFIG"] = self.config_in_use
        return values

    # -- the banner ------------------------------------------------------------------------------
    def _sweep_cadence(self) -> str:
        n = self.sweep_interval.minutes
        return ("every minute" if n == 1 else f"every {n} minutes") + " (--sweep-interval)"

    def banner(self) -> list[str]:
        env = self.rt.env
        clock = "wall clock" if getattr(self.clock, "speed", 1.0) == 1.0 else \
            f"virtual, {self.clock.speed:g}x the wall clock"
        lines = [
            "PixivFlow dev server",
            f"  HTTP API (both functions)  {self.url}      e.g. curl {self.url}/health",
            f"  API docs (Swagger UI)      {self.url}/docs  (OpenAPI: {self.url}/openapi.json)",
            f"  operator page              {self.url}/ui    (log in with the trigger token)",
            f"  AWS endpoint (moto)        {self.aws_endpoint}",
            f"  ledger table               {env['LEDGER_TABLE']}",
            f"  execution / outbox queues  {env['EXECUTION_QUEUE_URL']}",
            f"                             {env['OUTBOX_QUEUE_URL']}",
            f"  clock                      {clock}; schedules fire on it, the sweep runs {self._sweep_cadence()}",
            "  egress                     " + ("unrestricted (--allow-egress)" if self.allow_egress else
                                               "loopback only: 127.0.0.0/8 and ::1 (--allow-egress lifts it)"),
        ]
        for kind, var in (("trigger", "TRIGGER_TOKEN"), ("jobs", "JOBS_TOKEN")):
            source = "generated: set " + var + " to choose it" if kind in self.generated else "from " + var
            shown = self.tokens[kind] if kind in self.generated else "(not shown)"
            lines.append(f"  {kind + ' token':<26} {shown}  ({source})")
        if "callback" in self.generated:
            lines.append(f"  callback signing secret    {self.tokens['callback']}  (generated: set CALLBACK_SIGNING_SECRET "
                         "to choose it)")
        if self.downstream is not None:
            lines.append(f"  demo downstream            {self.downstream.url}")
        if self.fake_pixiv is not None:
            lines.append(f"  fake Pixiv                 {self.fake_pixiv.url}")
        if self.fake_telegram is not None:
            lines.append(f"  fake Telegram Bot API      {self.fake_telegram.base}  (control plane {self.control_plane.url})")
        from ..domain.occurrence import next_fire

        now = self.clock.now_ms()
        for schedule in self.rt.wiring.config.schedules:
            if schedule.enabled and schedule.cron:
                from ..services.inspection import iso

                lines.append(f"  schedule {schedule.id:<17} {schedule.cron} {schedule.timezone}: next fire "
                             f"{iso(next_fire(schedule.cron, schedule.timezone, now))}")
        if self.env_file is not None:
            lines += [f"  in a second shell:         source {self.env_file}",
                      "                             (puts pixivflow on PATH; the CLI, the AWS CLI and curl's $TRIGGER_TOKEN "
                      "/ $JOBS_TOKEN / $PIXIVFLOW_URL then point here)"]
        lines += [
            "  the operator CLI and the AWS CLI against it:",
            f"    export AWS_ENDPOINT_URL={self.aws_endpoint} AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
            f"AWS_DEFAULT_REGION=us-east-1 LEDGER_TABLE={env['LEDGER_TABLE']} OUTBOX_QUEUE_URL={env['OUTBOX_QUEUE_URL']}",
            "    pixivflow slots list;  aws dynamodb scan --table-name " + env["LEDGER_TABLE"],
            "Ctrl-C stops everything.",
        ]
        return lines


_ASSETS: dict[str, bytes] = {}


def _swagger_asset(name: str) -> bytes:
    if name not in _ASSETS:
        import aws_lambda_powertools.event_handler.openapi.swagger_ui as bundle

        _ASSETS[name] = (Path(bundle.__file__).parent / name).read_bytes()
    return _ASSETS[name]


def write_env_file(server: DevServer, path: Path) -> str:
    """Write ``export`` lines for a second shell (owner-only: it holds the dev tokens); the venv's
    bin directory first on PATH, so ``pixivflow`` is the command of the interpreter running this."""
    bindir = str(Path(sys.executable).parent)
    lines = ["# written by `pixivflow dev`; removed when it stops. Use it in another shell: source " + str(path),
             f'export PATH="{bindir}:$PATH"']
    lines += [f"export {key}={shlex.quote(value)}" for key, value in server.shell_env().items()]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return str(path)


SIGNAL_POLL_S = 0.2  # how soon `pixivflow dev` sees a Ctrl-C that reached another of its threads


def run_dev(*, config: str | None, port: int = 8000, speed: float = 1.0, demo: bool = False, source: str = "fake-pixiv",
            moto_port: int = 0, out: TextIO | None = None, stop: threading.Event | None = None,
            env_file: str | os.PathLike[str] | None = None, state_dir: str | os.PathLike[str] | None = None,
            allow_egress: bool = False, sweep_interval: int | None = None) -> int:
    """`pixivflow dev`: start, print the URLs, serve until Ctrl-C (SIGINT) or SIGTERM, stop cleanly."""
    out = out or sys.stdout
    if demo and config:
        print("pixivflow dev: --demo brings its own config; drop --config (or drop --demo)", file=sys.stderr)
        return 2
    config = config or (None if demo else os.environ.get("PIXIVFLOW_CONFIG"))
    if not demo and not config:
        print("pixivflow dev: no config: pass --config (or set PIXIVFLOW_CONFIG), or --demo", file=sys.stderr)
        return 2
    if not speed > 0:
        print("pixivflow dev: --speed must be a positive number", file=sys.stderr)
        return 2
    from .template import sweep_interval as template_interval

    try:
        template_interval(sweep_interval)
    except ValueError as exc:
        print(f"pixivflow dev: --sweep-interval: {exc}", file=sys.stderr)
        return 2
    if config and not config.startswith("ssm:"):
        from ..config import load_config

        load_config(config)  # a bad config is named field by field before anything starts (a ConfigError)
    server = DevServer(None if demo else config, port=port, speed=speed, moto_port=moto_port, demo=demo, source=source,
                       out=out, log_activity=True, state_dir=state_dir, allow_egress=allow_egress,
                       sweep_interval_minutes=sweep_interval)
    try:
        server.start()
    except PortInUse as exc:
        print(f"pixivflow dev: {exc.strerror}: another dev server (or another program) listens there; "
              "choose another port with --port (or --moto-port)", file=sys.stderr)
        return 1
    except ImportError as exc:  # moto's server needs flask and werkzeug: the dev extra
        print(f"pixivflow dev: {exc.name or exc} is missing; install the dev extra: pip install -e '.[dev]'", file=sys.stderr)
        return 2
    stop = stop or threading.Event()
    # A signal only sets a flag, and the main thread looks at it every SIGNAL_POLL_S. The kernel hands
    # a process's SIGINT to any of its threads; Python runs the handler in the main thread only once
    # that thread runs again, and one blocked in Event.wait() without a timeout never does: `make
    # test`'s Ctrl-C test waited 90 s for a server that had stopped listening to it (once a run under
    # load; reproduced by sending the signal to another thread). Nor may the handler call stop.set():
    # it runs on the main thread, which may hold that Event's (non-reentrant) lock at that moment.
    signalled: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda signum, _frame: signalled.append(signum))
    if env_file:
        server.env_file = write_env_file(server, Path(env_file))
    try:
        for line in server.banner():
            _say(out, line)
        while not (signalled or stop.wait(SIGNAL_POLL_S)):
            pass
        _say(out, "pixivflow dev: stopping")
    finally:
        server.stop()
        if server.env_file:
            Path(server.env_file).unlink(missing_ok=True)  # its endpoint and tokens are gone with the server
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _say(out, "pixivflow dev: stopped")
    return 0


__all__ = ["DevServer", "PortInUse", "ScaledClock", "api_event", "run_dev", "template_routes"]
