"""Pixiv's novel markup, for the rich preview: pure.

A novel's text carries Pixiv's markers: ``[newpage]``, ``[chapter:Title]``, ``[jump:N]``,
``[[rb:base > reading]]``, ``[[jumpuri:label > URL]]``, ``[pixivimage:ID]`` / ``[pixivimage:ID-N]``
(a page of an illustration) and ``[uploadedimage:ID]`` (an image the author uploaded). The
scanner follows PixivFlow's own (a single pass where ``[[...]]`` closes only on ``]]``), so a URL
inside a marker is never cut short.

:func:`inline_images` lists the images the text refers to, with the URL the webview payload
gives for each (``images`` for uploaded images, ``illusts`` for Pixiv works); :func:`render_markdown`
turns the text into Markdown: chapters become headings, a new page a rule, ruby ``base（reading）``,
links ``[label](URL)``, and each downloaded image ``![](images/<file>)``; an image that could
not be downloaded keeps its marker, so nothing disappears silently (as PixivFlow does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

_LINK = re.compile(r"https?://\S+")
_ESCAPE = re.compile(r"([\\`*_\[\]<>#|~])")


@dataclass(frozen=True)
class Marker:
    kind: str  # text | newpage | chapter | jump | ruby | jumpuri | pixivimage | uploadedimage
    raw: str
    value: str = ""  # the text, the chapter title, the image key, the page number, the ruby body


@dataclass(frozen=True)
class InlineImage:
    kind: str  # pixivimage | uploadedimage
    key: str  # "123" or "123-2" (a pixivimage page), the uploaded image's id
    marker: str
    url: str | None  # None when the payload has no image for it (deleted, no permission)


def _marker(span: str) -> Marker:
    for prefix, kind in (("[newpage]", "newpage"),):
        if span == prefix:
            return Marker(kind, span)
    for prefix, kind in (("[chapter:", "chapter"), ("[pixivimage:", "pixivimage"), ("[uploadedimage:", "uploadedimage"),
                         ("[jump:", "jump")):
        if span.startswith(prefix) and span.endswith("]") and not span.startswith("[["):
            return Marker(kind, span, span[len(prefix):-1].strip())
    for prefix, kind in (("[[rb:", "ruby"), ("[[jumpuri:", "jumpuri")):
        if span.startswith(prefix) and span.endswith("]]"):
            return Marker(kind, span, span[len(prefix):-2])
    return Marker("text", span, span)


def scan(text: str) -> Iterator[Marker]:
    """The text as markers and plain runs, in order (joining every ``raw`` gives the text back)."""
    now = ""
    for ch in text:
        if ch == "[":
            if not now or now == "[":
                now += ch
            else:
                yield _marker(now)
                now = ch
        elif ch == "]":
            now += ch
            if now.startswith("[["):
                if now.endswith("]]"):
                    yield _marker(now)
                    now = ""
            else:
                yield _marker(now)
                now = ""
        else:
            now += ch
    if now:
        yield _marker(now)


def _first_url(urls: Any, keys: tuple[str, ...]) -> str | None:
    if not isinstance(urls, Mapping):
        return None
    for key in keys:
        value = urls.get(key)
        if isinstance(value, str) and value.startswith("http"):
            return value
    return None


def inline_images(text: str, webview: Mapping[str, Any]) -> list[InlineImage]:
    """Every image marker of ``text`` (each once, in order), with its URL from the webview novel
    object: ``images[<id>].urls`` (original first) and ``illusts[<id>[-n]].illust.images``."""
    images = found if isinstance(found := webview.get("images"), Mapping) else {}
    illusts = given if isinstance(given := webview.get("illusts"), Mapping) else {}
    out: list[InlineImage] = []
    seen: set[str] = set()
    for m in scan(text):
        if m.kind not in ("pixivimage", "uploadedimage") or m.raw in seen:
            continue
        seen.add(m.raw)
        if m.kind == "uploadedimage":
            url = _first_url((images.get(m.value) or {}).get("urls"), ("original", "1200x1200", "480mw", "240mw", "128x128"))
        else:
            ref = illusts.get(m.value) or {}
            url = _first_url((ref.get("illust") or {}).get("images") if isinstance(ref, Mapping) else None,
                             ("original", "medium", "small"))
        out.append(InlineImage(m.kind, m.value, m.raw, url))
    return out


def _escape(text: str) -> str:
    """Plain text that Markdown shows as written (line-leading list/quote marks included)."""
    escaped = _ESCAPE.sub(r"\\\1", text)
    return re.sub(r"(?m)^(\s*)([-+]|\d+\.)(\s)", r"\1\\\2\3", escaped)


def _split(body: str) -> tuple[str, str]:
    left, _, right = body.partition(">")
    return left.strip(), right.strip()


def render_markdown(text: str, title: str, files: Mapping[str, str]) -> str:
    """The novel as Markdown. ``files`` maps an image marker to its stored file name; the image
    is then ``![](images/<name>)`` (TelePress uploads ``images/<name>`` parts)."""
    out = [f"# {_escape(title)}\n\n"] if title else []
    for m in scan(text):
        if m.kind == "text":
            out.append(_escape(m.value))
        elif m.kind == "newpage":
            out.append("\n\n---\n\n")
        elif m.kind == "chapter":
            out.append(f"\n\n## {_escape(m.value)}\n\n")
        elif m.kind == "jump":
            out.append(f"（→ {_escape(m.value)}）")
        elif m.kind == "ruby":
            base, reading = _split(m.value)
            out.append(f"{_escape(base)}（{_escape(reading)}）" if reading else _escape(base))
        elif m.kind == "jumpuri":
            label, target = _split(m.value)
            link = _LINK.search(target or label)
            out.append(f"[{_escape(label or link.group(0))}]({link.group(0)})" if link else _escape(label))
        elif m.raw in files:
            out.append(f"\n\n![](images/{files[m.raw]})\n\n")
        else:
            out.append(_escape(m.raw))
    return re.sub(r"\n{3,}", "\n\n", "".join(out)).strip() + "\n"


__all__ = ["InlineImage", "Marker", "inline_images", "render_markdown", "scan"]
