"""A loopback downstream review endpoint for the demo and the end-to-end tests.

It behaves like a well-mannered PixivFlow route: it records each distinct idempotency key
once and answers a repeated key with ``reused: true`` (an idempotent replay). A test can
script answers per request (status + body, or ``"drop"`` to record then drop the connection
before answering, i.e. a lost ACK).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, cast

Script = Callable[["ReceivedRequest"], Any]


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class DownstreamState:
    requests: list[ReceivedRequest] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # idempotency key -> record
    script: list[Any] = field(default_factory=list)  # queued answers, consumed first
    responder: Script | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class Downstream:
    """``with Downstream() as d: d.url`` — a ThreadingHTTPServer on 127.0.0.1 with a free port."""

    def __init__(self) -> None:
        self.state = DownstreamState()
        state = self.state

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One send per response and no Nagle: headers and body written apart would otherwise
            # meet delayed ACKs on loopback (about 40 ms per request).
            wbufsize = -1
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                req = ReceivedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with state.lock:
                    state.requests.append(req)
                    answer = state.script.pop(0) if state.script else None
                if answer is None and state.responder is not None:
                    answer = state.responder(req)
                if answer is None:
                    answer = _default_answer(state, req)
                if answer == "drop":
                    _record(state, req)  # committed downstream, but the ACK never reaches the caller
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if answer == "commit":
                    answer = _default_answer(state, req)
                status, payload = answer
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = cast("tuple[str, int]", self._server.server_address[:2])  # AF_INET: the host is a str
        return f"http://{host}:{port}/review"

    def __enter__(self) -> "Downstream":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- helpers for tests -------------------------------------------------------
    def queue(self, *answers: Any) -> None:
        with self.state.lock:
            self.state.script.extend(answers)

    @property
    def requests(self) -> list[ReceivedRequest]:
        return list(self.state.requests)

    @property
    def records(self) -> dict[str, dict[str, Any]]:
        return dict(self.state.records)


def _key(req: ReceivedRequest) -> str:
    body = req.body if isinstance(req.body, dict) else {}
    return req.headers.get("idempotency-key") or str(body.get("idempotency_key"))


def _record(state: DownstreamState, req: ReceivedRequest) -> tuple[dict[str, Any], bool]:
    key = _key(req)
    with state.lock:
        existing = state.records.get(key)
        if existing is not None:
            return existing, True
        record = {"review_id": f"r-{len(state.records) + 1}", "status": "pending_review", "key": key,
                  "work_id": (req.body or {}).get("work_id") if isinstance(req.body, dict) else None}
        state.records[key] = record
        return record, False


def _default_answer(state: DownstreamState, req: ReceivedRequest) -> tuple[int, dict[str, Any]]:
    record, reused = _record(state, req)
    data = {"review_id": record["review_id"], "status": record["status"], "reused": reused}
    if reused:
        data["matched_idempotency_key"] = record["key"]
    return 200, {"data": data}
