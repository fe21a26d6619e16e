"""Shared helpers for the Workflow Protocol v1 tests: the small catalogue (``builders.cats_catalogue``),
a config with one eligible target, Task bodies, the job_events HTTP calls, a delivery channel that
loses answers (``LosingChannel``) and a loopback callback receiver."""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from conftest import JOBS_TOKEN
from pixivflow.domain.route_io import DeliveryResponse
from support.builders import cats_catalogue

CALLBACK_SECRET = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
PLAN = "morning-tokyo"
TARGET = "cats"
START = "2026-11-30T22:59:00Z"

# 501 is the newest "cats" work: a job with no constraints delivers it.
CATALOG = cats_catalogue()


def single_target(cfg: dict, *, allow_hosts: tuple[str, ...] = ("127.0.0.1",)) -> None:
    """One enabled plan selecting one target: the deployment's single eligible job target."""
    cfg["schedules"] = [s for s in cfg["schedules"] if s["id"] == PLAN]
    cfg["schedules"][0]["targetIds"] = [TARGET]
    cfg["jobs"] = {"callbackAllowHosts": list(allow_hosts)}


def task(key: str = "job-key-1", **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "protocol_version": "1", "job_type": "candidate_search", "idempotency_key": key,
        "correlation_id": "review-chain:1", "params": {"query": {"tags": ["cats"]}},
    }
    for name, value in changes.items():
        body[name] = value
    return copy.deepcopy(body)


def jobs_runtime(make_runtime, *, mutate=None, catalog=CATALOG, tokens=None, overrides=None, backend=None):
    from conftest import TRIGGER_TOKEN

    tokens = tokens or {"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN, "callback": CALLBACK_SECRET}
    return make_runtime(START, mutate=mutate or single_target, catalog=catalog, tokens=tokens, overrides=overrides,
                        backend=backend)


def call(rt, method: str, path: str, body: Any = None, query: dict | None = None) -> tuple[int, Any]:
    return rt.http(method, path, body, token=JOBS_TOKEN, function="job_events", query=query)


def post_job(rt, body: Any) -> tuple[int, Any]:
    return call(rt, "POST", "/jobs", body)


def job_path(job_id: str, suffix: str = "") -> str:
    from urllib.parse import quote

    return f"/jobs/{quote(job_id, safe='')}{suffix}"


def events(rt, job_id: str, **query: str) -> tuple[int, Any]:
    return call(rt, "GET", job_path(job_id, "/events"), query=query or None)


def ack(rt, job_id: str, body: Any) -> tuple[int, Any]:
    return call(rt, "POST", job_path(job_id, "/events/ack"), body)


def cancel(rt, job_id: str) -> tuple[int, Any]:
    return call(rt, "POST", job_path(job_id, "/cancel"))


def get_job(rt, job_id: str) -> tuple[int, Any]:
    return call(rt, "GET", job_path(job_id))


def event_types(rt, job_id: str) -> list[str]:
    status, page = events(rt, job_id)
    assert status == 200, page
    return [e["type"] for e in page["events"]]


def manual_slots(rt) -> list[str]:
    return [s for s in rt.wiring.ledger.slot_ids() if "@manual-" in s]


# -- a route that loses answers ----------------------------------------------------------------


class LosingChannel:
    """A route that takes every post (the downstream records it) and, for the first ``lose``
    posts, loses its answer on the way back (the connection resets after the request was read)."""

    def __init__(self, lose: int = 1) -> None:
        self.lose = lose
        self.posts: list[tuple[str, str]] = []  # (work id, slot id)

    def send(self, route, payload, idempotency_key):
        self.posts.append((str(payload["work_id"]), idempotency_key.split(":")[4]))
        if self.lose > 0:
            self.lose -= 1
            raise httpx.ReadError("connection reset by peer after the request was sent")
        return DeliveryResponse(200, {"data": {"review_id": f"r-{len(self.posts)}", "status": "pending_review"}})

    def ready(self, route):
        return True

    def deliver(self, request):
        return self.send(request.route, request.body, request.idempotency_key)

    def close(self):
        pass  # holds no connection


# -- a loopback callback receiver --------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


@dataclass
class Receiver:
    """``with Receiver() as r: r.url`` — records every POST (raw bytes) and answers ``statuses``
    in order, then ``default``."""

    statuses: list[int] = field(default_factory=list)
    default: int = 200
    received: list[Received] = field(default_factory=list)

    def __enter__(self) -> "Receiver":
        state = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    state.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
                    status = state.statuses.pop(0) if state.statuses else state.default
                payload = b'{"ok":true}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},  # a quick shutdown
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hooks/jobs"

    def event_types(self) -> list[str]:
        return [r.body["type"] for r in self.received]
