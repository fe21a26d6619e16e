"""The ``httpMultipart`` wire format, as PixivFlow sends it.

Part order: one part per stored file under ``fileField``, the previews under
``previewFileField``, then the text fields, then the closing boundary. File parts carry the
file's base name (``"`` -> ``%22``, CR/LF -> space) and ``application/octet-stream``. The body
is streamed file by file from the artifact store with a ``Content-Length`` computed up front
from the stored sizes; a file whose bytes do not match its stored size aborts the request
rather than send a body whose length lies.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from ...domain.assets import media_assets
from ...domain.route_io import DeliveryRequest, DeliveryResponse
from ...domain.templates import form_fields, template_variables
from ...domain.work import StoredFile
from ..secret_refs import Expander
from . import telepress
from .http import MissingArtifacts, checked_url, expanded_headers

if TYPE_CHECKING:
    from ...route_kinds import SenderTools

FILE_ROLES = ("original", "text", "archive")  # what a submission uploads; previews ride separately
PREVIEW_ROLE = "preview"


def disposition_value(value: str) -> str:
    return value.replace("\r", " ").replace("\n", " ").replace('"', "%22")


def split_files(files: Sequence[StoredFile]) -> tuple[list[StoredFile], list[StoredFile]]:
    """(files, previews). Previews are sent only when they align one-to-one with the files: a
    receiver rejects any other shape (TelePost: ``invalid_previews``)."""
    main = [f for f in files if f.role in FILE_ROLES]
    previews = [f for f in files if f.role == PREVIEW_ROLE]
    return main, (previews if len(previews) == len(main) else [])


@dataclass
class MultipartBody:
    boundary: str
    length: int
    chunks: Callable[[], Iterator[bytes]]

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"


def build(files: Sequence[tuple], fields: Sequence[tuple[str, str]],
          open_file: Callable[[StoredFile], Iterator[bytes]], *, boundary: str | None = None,
          text_types: Mapping[str, str] | None = None) -> MultipartBody:
    """``files``: ``(field, stored)``, or ``(field, stored, filename, content_type)`` where a part
    needs another name or type (TelePress's ``images/<file>``, its ``text/markdown``);
    ``text_types`` gives a text part a Content-Type (TelePress's JSON ``manifest``)."""
    boundary = boundary or f"pixivflow-{uuid.uuid4()}"
    heads: list[tuple[bytes, StoredFile]] = []
    length = 0
    for field, stored, *named in files:
        filename = named[0] if named else stored.name.rsplit("/", 1)[-1]
        ctype = named[1] if len(named) > 1 else "application/octet-stream"
        head = (f"--{boundary}\r\n"
                f'Content-Disposition: form-data; name="{disposition_value(field)}"; '
                f'filename="{disposition_value(filename)}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n").encode("utf-8")
        heads.append((head, stored))
        length += len(head) + stored.size + 2
    text_parts = []
    for name, value in fields:
        ctype = (text_types or {}).get(name)
        part = (f"--{boundary}\r\n"
                f'Content-Disposition: form-data; name="{disposition_value(name)}"\r\n'
                + (f"Content-Type: {ctype}\r\n" if ctype else "") + "\r\n"
                f"{value}\r\n").encode("utf-8")
        text_parts.append(part)
        length += len(part)
    closing = f"--{boundary}--\r\n".encode("utf-8")
    length += len(closing)

    def chunks() -> Iterator[bytes]:
        for head, stored in heads:
            yield head
            sent = 0
            for chunk in open_file(stored):
                sent += len(chunk)
                if sent > stored.size:
                    break
                yield chunk
            if sent != stored.size:
                raise RuntimeError(f"stored file {stored.name} has {sent} bytes, expected {stored.size}; upload aborted")
            yield b"\r\n"
        yield from text_parts
        yield closing

    return MultipartBody(boundary, length, chunks)


class MultipartSender:
    """One attempt of an ``httpMultipart`` route: its form fields rendered from the frozen template
    context, the stored files streamed as parts, a novel's TelePress preview published first."""

    def __init__(self, tools: SenderTools) -> None:
        self._tools = tools

    def deliver(self, request: DeliveryRequest, config: Any) -> DeliveryResponse:
        expand = Expander(self._tools.lookup, where=f"route {request.route}")
        url = checked_url(expand(config.url), "url", request.route)
        headers = expanded_headers(config.headers, expand)
        context = {**dict(request.payload.get("context") or {}), "idempotencyKey": request.idempotency_key}
        fields = form_fields(config.fields, request.payload.get("fields"), template_variables(context),
                             array_format=config.arrayFormat, auto_idempotency_key=config.autoIdempotencyKey)
        stored = self._tools.stored(request)
        files, previews = split_files(stored)
        if not config.takes_previews:
            previews = []
        if not files:
            raise MissingArtifacts(f"no deliverable file under {request.artifact_key} (invalid payload)")
        assets = media_assets(str(context.get("pixivId") or ""), stored)
        if assets:
            fields.append(("media_assets", json.dumps(assets, ensure_ascii=False, separators=(",", ":"))))
        note = None
        if request.preview is not None and context.get("type") == "novel":
            preview = telepress.publish(self._tools.http, self._tools.lookup, request.preview, stored, self._tools.open, where=f"route {request.route}")
            if preview.retry:
                # The submission waits for its preview: the row is retried (5xx, 408, 429, network, timeout).
                return DeliveryResponse(status=503, body={"error": preview.retry}, text=preview.retry)
            if preview.url:
                fields = [(n, v) for n, v in fields if n != request.preview.field] + [(request.preview.field, preview.url)]
            note = preview.note
        parts = [(config.fileField, f) for f in files] + [(config.previewFileField, f) for f in previews]
        body = build(parts, fields, self._tools.open)
        headers = {**headers, "Content-Type": body.content_type, "Content-Length": str(body.length)}
        answer = self._tools.http.exchange(config.method, url, headers=headers, content=body.chunks(), timeout_ms=config.timeoutMs,
                                     scrub=expand.scrub)
        return replace(answer, note=note) if note else answer
