"""What a downloaded file is: its MIME type and size in pixels, read from its first bytes.

The image host's Content-Type and the URL's extension are usually right; the bytes always are.
Only the headers of PNG, JPEG, GIF and WebP are read (no image library in the layer).
"""

from __future__ import annotations

import struct

_EXT = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif",
        ".webp": "image/webp", ".zip": "application/zip"}
_EXT_OF = {"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp",
           "application/zip": ".zip"}


# Every extension ``extension_for`` gives: what a streamed file's name learns from its bytes.
SNIFFED_EXTENSIONS = frozenset(_EXT_OF.values()) | {".bin"}


def mime_of_name(name: str) -> str | None:
    dot = name.rfind(".")
    return _EXT.get(name[dot:].lower()) if dot >= 0 else None


def extension_for(mime: str) -> str:
    return _EXT_OF.get(mime, ".bin")


def sniff(content: bytes) -> tuple[str | None, int | None, int | None]:
    """(mime, width, height) from the file's header; None where it cannot tell."""
    if content.startswith(b"\x89PNG\r\n\x1a\n") and len(content) >= 24 and content[12:16] == b"IHDR":
        width, height = struct.unpack(">II", content[16:24])
        return "image/png", width, height
    if content[:6] in (b"GIF87a", b"GIF89a") and len(content) >= 10:
        width, height = struct.unpack("<HH", content[6:10])
        return "image/gif", width, height
    if content.startswith(b"\xff\xd8"):
        width, height = _jpeg_size(content)
        return "image/jpeg", width, height
    if content[:4] == b"RIFF" and content[8:12] == b"WEBP":
        return "image/webp", None, None
    if content.startswith(b"PK\x03\x04"):
        return "application/zip", None, None
    return None, None, None


def _jpeg_size(content: bytes) -> tuple[int | None, int | None]:
    i = 2
    while i + 4 <= len(content):
        if content[i] != 0xFF:
            return None, None
        marker = content[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = struct.unpack(">H", content[i + 2:i + 4])[0]
        # SOF0..SOF15 carry the frame size (C4 = DHT, C8 = JPG, CC = DAC are not frames).
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC) and i + 9 <= len(content):
            height, width = struct.unpack(">HH", content[i + 5:i + 9])
            return width, height
        i += 2 + length
    return None, None
