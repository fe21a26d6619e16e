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

import threading
from dataclasses import dataclass, field
from typing import Any

from pixivflow.local.route_fakes import LoopbackServer, Part, Request  # one multipart reading for every fake

__all__ = ["Part", "Receiver", "Request"]


@dataclass
class _State:
    requests: list[Request] = field(default_factory=list)
    script: dict[str, list[Any]] = field(default_factory=dict)
    records: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Receiver(LoopbackServer):
    """The loopback server of ``pixivflow.local.route_fakes``, answering from a per-path script."""

    def __init__(self) -> None:
        super().__init__()
        self.state = _State()

    def handle(self, req: Request) -> tuple[int, Any]:
        state = self.state
        with state.lock:
            state.requests.append(req)
            queued = state.script.get(req.path)
            answer = queued.pop(0) if queued else None
        return answer if answer is not None else _default(state, req)

    def queue(self, path: str, *answers: Any) -> None:
        with self.state.lock:
            self.state.script.setdefault(path, []).extend(answers)

    def at(self, path: str, method: str | None = None) -> list[Request]:
        return [r for r in self.state.requests if r.path == path and (method is None or r.method == method)]

    @property
    def requests(self) -> list[Request]:  # type: ignore[override]
        return list(self.state.requests)

    @requests.setter
    def requests(self, value: list[Request]) -> None:
        pass  # the base class's own list; this receiver keeps its requests in ``state``


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
