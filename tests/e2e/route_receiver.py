"""A loopback receiver for PixivFlow's routes: a TelePost-like submission API (multipart), a
messaging gateway (JSON) and the outcome endpoints, on one 127.0.0.1 server.

Every request is recorded raw (method, path, headers, body bytes). Multipart bodies are parsed
with the standard library's MIME parser (``email.parser``), a real multipart parser that knows
nothing of the code under test. Answers are scripted per path (a queue, consumed first), else a
default: the submission API records each ``idempotency_key`` field once and answers a repeat
with ``reused: true`` (TelePost's envelope), the gateway answers ``{"status": "accepted"}``, a
health path answers 200, anything else ``{"ok": true}``.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Part:
    name: str
    filename: str | None
    content_type: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw)

    def parts(self) -> list[Part]:
        ctype = self.headers.get("content-type", "")
        assert ctype.startswith("multipart/form-data; boundary="), ctype
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + self.raw)
        assert message.is_multipart() and not message.defects, message.defects
        out = []
        for part in message.iter_parts():
            out.append(Part(part.get_param("name", header="content-disposition"), part.get_filename(),
                            part.get_content_type() if part.get("content-type") else "", part.get_payload(decode=True)))
        return out

    def fields(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for part in self.parts():
            if part.filename is None:
                out.setdefault(part.name, []).append(part.text)
        return out

    def files(self, name: str = "files") -> list[Part]:
        return [p for p in self.parts() if p.filename is not None and p.name == name]


@dataclass
class _State:
    requests: list[Request] = field(default_factory=list)
    script: dict[str, list[Any]] = field(default_factory=dict)
    records: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Receiver:
    def __init__(self) -> None:
        state = self.state = _State()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                with state.lock:
                    state.requests.append(req)
                    queued = state.script.get(self.path)
                    answer = queued.pop(0) if queued else None
                if answer is None:
                    answer = _default(state, req)
                status, payload = answer
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _serve  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "Receiver":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def queue(self, path: str, *answers: Any) -> None:
        with self.state.lock:
            self.state.script.setdefault(path, []).extend(answers)

    def at(self, path: str, method: str | None = None) -> list[Request]:
        return [r for r in self.state.requests if r.path == path and (method is None or r.method == method)]

    @property
    def requests(self) -> list[Request]:
        return list(self.state.requests)


def _default(state: _State, req: Request) -> tuple[int, Any]:
    if req.method == "GET":
        return 200, {"ok": True}
    if req.path.endswith("/submissions"):
        key = next((v[0] for k, v in req.fields().items() if k == "idempotency_key"), None)
        with state.lock:
            reused = key in state.records
            review = state.records.setdefault(key, f"rv-{len(state.records) + 1}")
        data = {"review_id": review, "status": "pending_review", "reused": reused}
        if reused:
            data.update(reuse_reason="idempotent_replay", matched_idempotency_key=key)
        return 200, {"ok": True, "data": data}
    if req.path.endswith("/deliver"):
        return 200, {"status": "accepted", "id": f"msg-{len(state.requests)}"}
    return 200, {"ok": True}
