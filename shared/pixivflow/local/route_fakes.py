"""Loopback fakes of the services PixivFlow's published routes deliver to, for the
end-to-end tests and ``pixivflow dev --demo``. Each is a ThreadingHTTPServer on 127.0.0.1 that
records every request raw and is as strict as the real service on what the routes send:

* :class:`FakeTelegram` — the Bot API at ``/bot<token>/<method>``: sendPhoto, sendDocument,
  sendMediaGroup (2-10 items, documents grouped only with documents, ``attach://`` parts
  present), sendMessage (the control card); captions at most 1,024 UTF-16 code units, photos at
  most 10 MB; answers ``{ok, result}`` with message ids, or the scripted error
  (``error_code``/``description``/``parameters.retry_after``) queued for a method or a chat;
* :class:`FakeControlPlane` — ``GET <base>/reviews/<id>`` (200 or 404 ``unknown review``) and
  ``POST <base>/reviews`` (``review_id``, ``bot_id``, ``chat_id`` required; status ``pending`` or
  ``uncertain``), bearer-authenticated;
* :class:`FakeTelePress` — ``POST /publish/rich-novel``: one ``md`` part, an optional JSON
  ``manifest``, ``images`` parts named ``images/<file>``; answers ``{status, url, assets}``;
* :class:`TelePostReceiver` — TelePost's submission API: at least one ``files`` part,
  ``previews`` one-to-one with ``files`` or absent (else ``invalid_previews``), ``media_assets``
  in TelePost's minimal asset shape, an ``idempotency_key``; a repeated key is a replay
  (``reused: true``); plus health, notifications and the two outcome endpoints with the
  contract's validation.

Multipart bodies are parsed with the standard library's MIME parser, which knows nothing of
the code under test.
"""

from __future__ import annotations

import email.headerregistry
import email.parser
import email.policy
import functools
import hashlib
import itertools
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, cast

PHOTO_MAX_BYTES = 10 * 1024 * 1024
CAPTION_MAX_UTF16 = 1024
MESSAGE_MAX_UTF16 = 4096
_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]{20,}$")


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
    # The parsed multipart body: a fake reads the fields and the files of one request apart, and the
    # email parser was a tenth of a routes seed when every read parsed the body again.
    _parts: list[Part] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def json(self) -> Any:
        return json.loads(self.raw)

    def parts(self) -> list[Part]:
        if self._parts is None:
            self._parts = self._parse_parts()
        return list(self._parts)

    def _parse_parts(self) -> list[Part]:
        ctype = self.headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data; boundary="):
            raise ValueError(f"not multipart/form-data: {ctype!r}")
        message = email.parser.BytesParser(policy=_HTTP).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + self.raw)
        if not message.is_multipart() or message.defects:
            raise ValueError(f"malformed multipart body: {message.defects}")
        # A form-data part names itself with a plain name= (never RFC 2231), and a leaf part decodes to bytes.
        return [Part(cast(str, p.get_param("name", header="content-disposition")), p.get_filename(),
                     p.get_content_type() if p.get("content-type") else "", cast(bytes, p.get_payload(decode=True) or b""))
                for p in message.iter_parts()]

    def fields(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for part in self.parts():
            if part.filename is None:
                out.setdefault(part.name, []).append(part.text)
        return out

    def files(self, name: str | None = "files") -> list[Part]:
        return [p for p in self.parts() if p.filename is not None and (name is None or p.name == name)]


class _Headers(email.headerregistry.HeaderRegistry):
    """The HTTP policy's header registry, remembering the header objects it built. The policy builds a
    header object (a full RFC 5322 parse) at every look at a header, and the parser and a fake look at
    each part's Content-Type and Content-Disposition several times; a header object is an immutable
    ``str``, so one per (name, text) serves every look. This was most of a routes seed's CPU in the fakes."""

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one registry per process (_HTTP), never freed anyway
    def __call__(self, name: str, value: str) -> Any:
        return super().__call__(name, value)


_HTTP = email.policy.HTTP.clone(header_factory=_Headers())


class _Reject(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status, self.body = status, body


class LoopbackServer:
    """``with Fake() as f: f.base`` — records every request; ``handle`` answers (status, body)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.lock = threading.RLock()
        self._connections: set[Any] = set()  # open keep-alive connections, closed on exit
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = -1
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server._connections.add(self.connection)

            def finish(self) -> None:
                with server.lock:
                    server._connections.discard(self.connection)
                super().finish()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = server.read_body(self.headers.get("Content-Type") or "", self.rfile, length) if length else b""
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                with server.lock:
                    server.requests.append(req)
                try:
                    status, payload = server.handle(req)
                except _Reject as rejected:
                    status, payload = rejected.status, rejected.body
                data = payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _serve  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def read_body(self, content_type: str, rfile: Any, length: int) -> bytes:
        """The request body as recorded (a fake that must not hold big uploads whole overrides it)."""
        return cast(bytes, rfile.read(length))

    @property
    def base(self) -> str:
        host, port = cast("tuple[str, int]", self._server.server_address[:2])  # AF_INET: the host is a str
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self.lock:
            open_connections = list(self._connections)
        for connection in open_connections:  # a client's idle keep-alive connection ends its thread
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)

    def handle(self, req: Request) -> tuple[int, Any]:  # pragma: no cover - every fake overrides it
        raise NotImplementedError

    def at(self, path: str, method: str | None = None) -> list[Request]:
        return [r for r in list(self.requests) if r.path == path and (method is None or r.method == method)]


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _bearer(req: Request, token: str | None) -> None:
    if token is not None and req.headers.get("authorization") != f"Bearer {token}":
        raise _Reject(401, {"error": "unauthorized"})


# -- Telegram ------------------------------------------------------------------------------------


@dataclass
class BotCall:
    method: str
    token: str
    fields: dict[str, str]
    files: dict[str, Part]
    ok: bool = True
    message_ids: list[int] = field(default_factory=list)

    @property
    def media(self) -> list[dict[str, Any]]:
        return json.loads(self.fields.get("media") or "[]")


class FakeTelegram(LoopbackServer):
    """The Bot API, strict on what the review route sends. ``script(method, answer)`` queues an
    answer for the next call of ``method`` (a dict ``{error_code, description, parameters}``, or
    ``"ok"``); ``blocked`` / ``missing`` chats answer 403 / 400 as Telegram does."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[BotCall] = []
        self._scripts: dict[str, list[Any]] = {}
        self.blocked: set[str] = set()
        self.missing: set[str] = set()
        self._ids = itertools.count(1001)
        self._groups = itertools.count(9_000_000_001)
        self._files = itertools.count(1)
        self.on_call: Callable[[BotCall], None] | None = None  # a test's hook, run after the answer is decided

    def script(self, method: str, *answers: Any) -> None:
        with self.lock:
            self._scripts.setdefault(method, []).extend(answers)

    def sent(self, method: str | None = None) -> list[BotCall]:
        return [c for c in list(self.calls) if c.ok and (method is None or c.method == method)]

    def handle(self, req: Request) -> tuple[int, Any]:
        match = re.fullmatch(r"/bot([^/]+)/(\w+)", req.path.split("?", 1)[0])
        if not match or req.method != "POST":
            raise _Reject(404, {"ok": False, "error_code": 404, "description": "Not Found"})
        token, method = match.groups()
        if not _TOKEN.match(token):
            raise _Reject(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
        try:
            parts = req.parts()
        except ValueError as exc:
            raise _Reject(400, {"ok": False, "error_code": 400, "description": f"Bad Request: {exc}"}) from None
        fields = {p.name: p.text for p in parts if p.filename is None}
        files = {p.name: p for p in parts if p.filename is not None}
        call = BotCall(method, token, fields, files)
        with self.lock:
            self.calls.append(call)
            queued = self._scripts.get(method)
            scripted = queued.pop(0) if queued else None
        try:
            if isinstance(scripted, dict):
                raise _Reject(int(scripted.get("error_code", 400)), {"ok": False, **scripted})
            result = self._perform(call)
        except _Reject:
            call.ok = False
            raise
        if self.on_call is not None:
            self.on_call(call)
        return 200, {"ok": True, "result": result}

    def _bad(self, text: str) -> _Reject:
        return _Reject(400, {"ok": False, "error_code": 400, "description": f"Bad Request: {text}"})

    def _chat(self, call: BotCall) -> str:
        chat = call.fields.get("chat_id", "").strip()
        if not chat:
            raise self._bad("chat_id is empty")
        if chat in self.blocked:
            raise _Reject(403, {"ok": False, "error_code": 403, "description": "Forbidden: bot was kicked from the supergroup chat"})
        if chat in self.missing:
            raise self._bad("chat not found")
        return chat

    def _caption(self, text: str | None) -> None:
        if text is not None and _utf16(text) > CAPTION_MAX_UTF16:
            raise self._bad("message caption is too long")

    def _message(self, chat: str, kind: str | None, part: Part | None, caption: str | None, group: str | None) -> dict[str, Any]:
        message: dict[str, Any] = {"message_id": next(self._ids), "chat": {"id": chat}, "date": 0}
        if kind == "photo":
            if part is None or len(part.data) > PHOTO_MAX_BYTES:
                raise self._bad("PHOTO_INVALID_DIMENSIONS" if part is not None else "there is no photo in the request")
            message["photo"] = [{"file_id": f"ph{next(self._files)}", "file_unique_id": "u", "width": 90, "height": 90}]
        elif kind == "document":
            if part is None or not part.data:
                raise self._bad("file must be non-empty")
            message["document"] = {"file_id": f"doc{next(self._files)}", "file_unique_id": "u", "file_name": part.filename}
        if caption:
            message["caption"] = caption
        if group:
            message["media_group_id"] = group
        return message

    def _perform(self, call: BotCall) -> Any:
        chat = self._chat(call)
        f = call.fields
        if call.method in ("sendPhoto", "sendDocument"):
            kind = "photo" if call.method == "sendPhoto" else "document"
            self._caption(f.get("caption"))
            msg = self._message(chat, kind, call.files.get(kind), f.get("caption"), None)
            call.message_ids = [msg["message_id"]]
            return msg
        if call.method == "sendMediaGroup":
            try:
                media = json.loads(f.get("media") or "")
            except ValueError:
                raise self._bad("can't parse media JSON object") from None
            if not isinstance(media, list) or not 2 <= len(media) <= 10:
                raise self._bad("media must include 2-10 items")
            kinds = {m.get("type") for m in media}
            if "document" in kinds and kinds != {"document"}:
                raise self._bad("documents can't be mixed with other media types")
            if not kinds <= {"photo", "document", "video", "audio"}:
                raise self._bad("unsupported media type")
            group = str(next(self._groups))
            out = []
            for m in media:
                ref = str(m.get("media") or "")
                if not ref.startswith("attach://") or ref[len("attach://"):] not in call.files:
                    raise self._bad(f"wrong file identifier/HTTP URL specified ({ref})")
                self._caption(m.get("caption"))
                out.append(self._message(chat, m["type"], call.files[ref[len("attach://"):]], m.get("caption"), group))
            call.message_ids = [m["message_id"] for m in out]
            return out
        if call.method == "sendMessage":
            text = f.get("text") or ""
            if not text or _utf16(text) > MESSAGE_MAX_UTF16:
                raise self._bad("message text is empty" if not text else "message is too long")
            if "reply_markup" in f:
                try:
                    markup = json.loads(f["reply_markup"])
                    assert isinstance(markup.get("inline_keyboard"), list)
                except (ValueError, AssertionError, AttributeError):
                    raise self._bad("can't parse reply keyboard markup JSON object") from None
            msg = self._message(chat, None, None, None, None)
            msg["text"] = text
            call.message_ids = [msg["message_id"]]
            return msg
        raise _Reject(404, {"ok": False, "error_code": 404, "description": "Not Found: method not found"})


class FakeControlPlane(LoopbackServer):
    """The review control plane under ``<base><prefix>``: lookup and record."""

    def __init__(self, token: str | None = None, prefix: str = "/control") -> None:
        super().__init__()
        self.token = token
        self.prefix = prefix
        self.reviews: dict[str, dict[str, Any]] = {}
        self.fail_records: list[int] = []  # statuses to answer the next record POSTs with

    @property
    def url(self) -> str:
        return self.base + self.prefix

    def handle(self, req: Request) -> tuple[int, Any]:
        _bearer(req, self.token)
        path = req.path.split("?", 1)[0]
        if req.method == "GET" and path.startswith(f"{self.prefix}/reviews/"):
            rid = path.rsplit("/", 1)[-1]
            with self.lock:
                review = self.reviews.get(rid)
            if review is None:
                return 404, {"error": "unknown review"}
            return 200, {"ok": True, "reviewId": rid, "botId": review.get("bot_id"), "status": review.get("status")}
        if req.method == "POST" and path == f"{self.prefix}/reviews":
            with self.lock:
                if self.fail_records:
                    return self.fail_records.pop(0), {"error": "unavailable"}
            try:
                doc = req.json
            except ValueError:
                return 400, {"error": "invalid json"}
            if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) and doc.get(k) for k in ("review_id", "bot_id", "chat_id")):
                return 400, {"error": "review_id, bot_id and chat_id are required"}
            if doc.get("status") not in ("pending", "uncertain"):
                return 400, {"error": "status must be pending or uncertain"}
            rid = doc["review_id"]
            with self.lock:
                existing = self.reviews.get(rid)
                created = existing is None or existing.get("status") == "uncertain"
                if created:
                    self.reviews[rid] = doc
            return (201 if created else 200), {"ok": True, "reviewId": rid, "created": created,
                                               "status": self.reviews[rid]["status"],
                                               "callbackData": {"approve": f"review:{rid}:approve", "reject": f"review:{rid}:reject"}}
        return 404, {"error": "not found"}


# -- TelePress -------------------------------------------------------------------------------------


def digested_multipart(rfile: Any, length: int, boundary: bytes, field_name: str, piece: int = 1024 * 1024) -> bytes:
    """A multipart body read from ``rfile`` in ``piece``-byte reads, with the payload of every part
    named ``field_name`` replaced by ``sha256:<hex> <size>`` (its headers kept): what a fake
    records of an upload too big to hold. Any other part is kept as sent."""
    delim = b"\r\n--" + boundary
    left, buf, out = length, b"\r\n", bytearray()  # the leading CRLF lets the first delimiter match too

    def more() -> bool:
        nonlocal left, buf
        data = rfile.read(min(piece, left)) if left > 0 else b""
        left -= len(data)
        buf += data
        return bool(data)

    def until(mark: bytes, sink: Any) -> bool:
        """Feed ``sink`` everything before ``mark`` and drop it and ``mark`` from ``buf``."""
        nonlocal buf
        while (at := buf.find(mark)) < 0:
            keep = len(mark) - 1
            if len(buf) > keep:
                sink(buf[:-keep])
                buf = buf[-keep:]
            if not more():
                sink(buf)
                buf = b""
                return False
        sink(buf[:at])
        buf = buf[at + len(mark):]
        return True

    until(delim, lambda data: None)  # the preamble
    while True:
        while len(buf) < 2 and more():
            pass
        if buf[:2] != b"\r\n":  # "--": the closing delimiter, and the epilogue
            out += delim + buf
            while more():
                pass
            return bytes(out)
        buf = buf[2:]
        heads = bytearray()
        until(b"\r\n\r\n", heads.extend)
        out += delim + b"\r\n" + heads + b"\r\n\r\n"
        if f'name="{field_name}"'.encode() in heads:
            digest, size = hashlib.sha256(), [0]

            def hashed(data: bytes, digest: Any = digest, size: list[int] = size) -> None:
                digest.update(data)
                size[0] += len(data)
            until(delim, hashed)
            out += f"sha256:{digest.hexdigest()} {size[0]}".encode()
        else:
            until(delim, out.extend)


class FakeTelePress(LoopbackServer):
    """TelePress's rich-novel publisher: ``md`` + optional ``manifest`` + ``images`` parts.

    ``digest_images``: big uploads (a novel of 30 x 8 MB images) are read in 1 MiB pieces
    and each ``images`` part is kept only as ``sha256:<hex> <size>``, so the fake never holds
    them whole; everything else is recorded and checked as usual."""

    def __init__(self, token: str | None = None, path: str = "/publish/rich-novel", *, digest_images: bool = False) -> None:
        super().__init__()
        self.token = token
        self.path = path
        self.digest_images = digest_images
        self.published: list[dict[str, Any]] = []
        self.answers: list[tuple[int, Any]] = []  # scripted answers, consumed first

    @property
    def url(self) -> str:
        return self.base + self.path

    def read_body(self, content_type: str, rfile: Any, length: int) -> bytes:
        boundary = content_type.partition("boundary=")[2].strip('"').encode()
        if not self.digest_images or not boundary:
            return super().read_body(content_type, rfile, length)
        return digested_multipart(rfile, length, boundary, "images")

    def handle(self, req: Request) -> tuple[int, Any]:
        _bearer(req, self.token)
        if req.method != "POST" or req.path != self.path:
            return 404, {"error": "not found"}
        with self.lock:
            if self.answers:
                return self.answers.pop(0)
        try:
            parts = req.parts()
        except ValueError as exc:
            return 400, {"status": "error", "error": str(exc)}
        md = [p for p in parts if p.name == "md"]
        if len(md) != 1 or md[0].filename is None or not md[0].data:
            return 400, {"status": "error", "error": "exactly one md file part is required"}
        manifest: list[Any] = []
        for p in parts:
            if p.name == "manifest":
                try:
                    manifest = json.loads(p.data)
                    assert isinstance(manifest, list) and all({"local", "source"} <= set(m) for m in manifest)
                except (ValueError, AssertionError, TypeError):
                    return 400, {"status": "error", "error": "manifest must be [{local, source}]"}
        images = [p for p in parts if p.name == "images"]
        for image in images:
            if not (image.filename or "").startswith("images/") or not image.data:
                return 400, {"status": "error", "error": f"bad image part {image.filename!r}"}
        markdown = md[0].text
        for image in images:
            if f"({image.filename})" not in markdown:
                return 400, {"status": "error", "error": f"{image.filename} is not referenced by the markdown"}
        with self.lock:
            n = len(self.published) + 1
            page = {"md": markdown, "md_name": md[0].filename, "manifest": manifest,
                    "images": {p.filename: p.data for p in images}, "url": f"https://telegra.ph/pixivflow-novel-{n}"}
            self.published.append(page)
        return 200, {"status": "success", "url": page["url"],
                     "assets": [{"local": p.filename, "remote": f"https://telegra.ph/file/{i}.jpg", "status": "uploaded"}
                                for i, p in enumerate(images)]}


# -- TelePost --------------------------------------------------------------------------------------

ASSET_KEYS = {"asset_id", "kind", "source_url", "mime_type"}


class TelePostReceiver(LoopbackServer):
    """TelePost's HTTP API as PixivFlow's routes meet it (the contract TelePost publishes). ``submissions``
    holds every accepted submission's fields and files; a rejected one answers 400 with the
    reason TelePost gives (``invalid_files``, ``invalid_previews``, ``invalid_media_assets``,
    ``missing_idempotency_key``)."""

    def __init__(self, token: str | None = None, *, file_field: str = "files", preview_field: str = "previews",
                 max_files: int = 50) -> None:
        super().__init__()
        self.token = token
        self.file_field, self.preview_field, self.max_files = file_field, preview_field, max_files
        self.submissions: dict[str, dict[str, Any]] = {}
        self.rejections: list[tuple[str, str]] = []
        self.notices: list[tuple[str, Any]] = []

    def handle(self, req: Request) -> tuple[int, Any]:
        _bearer(req, self.token)
        path = req.path.split("?", 1)[0]
        if req.method == "GET":
            return 200, {"ok": True}
        if path.endswith("/submissions"):
            try:
                return self._submission(req)
            except _Reject as rejected:
                self.rejections.append((path, str(rejected.body.get("error"))))
                raise
        try:
            body = req.json
        except ValueError:
            return 400, {"error": "invalid_json"}
        if path.endswith("/schedule/outcomes"):
            if not (isinstance(body, dict) and body.get("schedule_id") and body.get("slot_id")
                    and body.get("status") in ("success", "partial", "failed") and isinstance(body.get("targets"), list)):
                return 400, {"error": "invalid_schedule_outcome"}
        elif path.endswith("/refetch/outcomes"):
            if not (isinstance(body, dict) and body.get("request_id") and body.get("disposition") in ("no_alternative", "failed")):
                return 400, {"error": "invalid_refetch_outcome"}
        elif path.endswith("/notifications"):
            if not (isinstance(body, dict) and isinstance(body.get("text"), str) and body.get("text") and body.get("idempotency_key")):
                return 400, {"error": "invalid_notification"}
        else:
            return 404, {"error": "not_found"}
        with self.lock:
            replay = any(p == path and b == body for p, b in self.notices)
            self.notices.append((path, body))
        return 200, {"ok": True, "replayed": replay}

    def _submission(self, req: Request) -> tuple[int, Any]:
        try:
            parts = req.parts()
        except ValueError as exc:
            raise _Reject(400, {"ok": False, "error": "invalid_multipart", "detail": str(exc)}) from None
        files = [p for p in parts if p.name == self.file_field and p.filename is not None]
        previews = [p for p in parts if p.name == self.preview_field and p.filename is not None]
        others = [p for p in parts if p.filename is not None and p.name not in (self.file_field, self.preview_field)]
        if not files or len(files) > self.max_files or others or any(not p.data for p in files):
            raise _Reject(400, {"ok": False, "error": "invalid_files"})
        if previews and len(previews) != len(files):
            raise _Reject(400, {"ok": False, "error": "invalid_previews"})
        fields: dict[str, list[str]] = {}
        for p in parts:
            if p.filename is None:
                fields.setdefault(p.name, []).append(p.text)
        if "media_assets" in fields:
            try:
                assets = json.loads(fields["media_assets"][0])
                assert isinstance(assets, list) and assets
                for a in assets:
                    assert isinstance(a, dict) and set(a) <= ASSET_KEYS and isinstance(a.get("asset_id"), str)
                    assert isinstance(a.get("source_url"), str) and a.get("kind") == "image"
            except (ValueError, AssertionError):
                raise _Reject(400, {"ok": False, "error": "invalid_media_assets"}) from None
        key = (fields.get("idempotency_key") or [""])[0]
        if not key:
            raise _Reject(400, {"ok": False, "error": "missing_idempotency_key"})
        with self.lock:
            existing = self.submissions.get(key)
            if existing is None:
                existing = {"review_id": len(self.submissions) + 1, "fields": fields,
                            "files": [(p.filename, p.data) for p in files], "previews": [(p.filename, p.data) for p in previews]}
                self.submissions[key] = existing
                reused = False
            else:
                reused = True
        data = {"status": "pending_review", "review_id": existing["review_id"], "reused": reused,
                "business_status": "idempotent_replay" if reused else "accepted"}
        if reused:
            data.update(reuse_reason="idempotent_replay", matched_idempotency_key=key)
        return (200 if reused else 201), {"ok": True, "data": data}


__all__ = ["BotCall", "FakeControlPlane", "FakeTelePress", "FakeTelegram", "LoopbackServer", "Part", "Request",
           "TelePostReceiver"]
