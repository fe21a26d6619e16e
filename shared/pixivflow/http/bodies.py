"""Reading a request body a hostile client wrote.

Pure functions, no Powertools: the HTTP shell calls them only AFTER a request passed auth, so
no byte of an unauthenticated body is ever decoded. Each problem is a ``BodyProblem`` with the
HTTP status (415 or 400), a stable ``reason`` code for protocol ``detail`` and a message that
names it; nothing here raises anything else for any input.

Limits: 64 KB of UTF-8, 64 levels of nesting, integers of at most 4300 digits (Python's own
int-parsing limit, checked before the parser would raise), finite numbers, and the JSON
grammar only (``NaN``/``Infinity`` are not JSON).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any


MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 64
MAX_INT_DIGITS = 4300
JSON_MEDIA_TYPE = "application/json"

# The messages the run route has always answered (Powertools' wording, kept byte for byte).
NOT_JSON = "JSON decode error"
NOT_AN_OBJECT = "Input should be a valid dictionary or object to extract fields from"
BAD_TEXT = "must not contain control characters or unpaired surrogates"

# What a string may hold is the one text rule's (http/text.py), which the shell applies.


class BodyProblem(Exception):
    """Why a body was refused: ``status`` 415/400, ``reason`` (stable code), ``message`` (names it)."""

    def __init__(self, status: int, reason: str, message: str, field: str = "body") -> None:
        super().__init__(message)
        self.status, self.reason, self.message, self.field = status, reason, message, field

    def __str__(self) -> str:
        return self.message


def is_json_media_type(content_type: str | None) -> bool:
    """``application/json`` compared case-insensitively, parameters (``; charset=utf-8``) allowed.

    An absent header counts as JSON: many HTTP clocks send a body without one.
    """
    if content_type is None or not content_type.strip():
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == JSON_MEDIA_TYPE


def unsupported_media_type() -> BodyProblem:
    return BodyProblem(415, "unsupported_media_type", f"Content-Type must be {JSON_MEDIA_TYPE}")


def decode_text(raw: str | None, base64_encoded: bool) -> str | None:
    """The body as text (API Gateway base64-encodes some bodies), or None when there is none."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise BodyProblem(400, "invalid_json", f"body: {NOT_JSON}")
    if base64_encoded:
        try:
            data = base64.b64decode(raw.encode("ascii"), validate=True)
        except (binascii.Error, ValueError, UnicodeEncodeError):
            raise BodyProblem(400, "invalid_encoding", "body: not valid base64") from None
        if len(data) > MAX_BODY_BYTES:
            raise too_large()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise BodyProblem(400, "invalid_encoding", "body: not valid UTF-8") from None
    return raw


def too_large() -> BodyProblem:
    return BodyProblem(400, "body_too_large", f"body: larger than {MAX_BODY_BYTES} bytes")


def _byte_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _too_deep(text: str) -> bool:
    """True when arrays/objects nest deeper than MAX_DEPTH anywhere in ``text``, read as JSON's
    brackets outside strings: decided before parsing, so the answer is the same for a complete and
    an unterminated body, whatever the interpreter's parser does near its recursion limit."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif ch in "]}":
            depth -= 1
    return False


class _Refused(Exception):
    def __init__(self, problem: BodyProblem) -> None:
        self.problem = problem


def _parse_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(BodyProblem(400, "integer_too_large", f"body: integer longer than {MAX_INT_DIGITS} digits"))
    return int(literal)


def _parse_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Refused(BodyProblem(400, "number_out_of_range", "body: number out of range"))
    return value


def _parse_constant(literal: str) -> Any:
    raise _Refused(BodyProblem(400, "invalid_json", f"body: {NOT_JSON}"))


def parse_json(text: str) -> Any:
    """Parse ``text`` within the limits above; raises ``BodyProblem`` for anything else."""
    if len(text) > MAX_BODY_BYTES or _byte_length(text) > MAX_BODY_BYTES:
        raise too_large()
    if _too_deep(text):
        raise too_deep()
    try:
        value = json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except _Refused as refused:
        raise refused.problem from None
    except ValueError:  # JSONDecodeError, or an unparsable number
        raise BodyProblem(400, "invalid_json", f"body: {NOT_JSON}") from None
    return value


def too_deep() -> BodyProblem:
    return BodyProblem(400, "body_too_deep", f"body: nested deeper than {MAX_DEPTH} levels")


__all__ = [
    "BAD_TEXT",
    "BodyProblem",
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "NOT_AN_OBJECT",
    "NOT_JSON",
    "decode_text",
    "is_json_media_type",
    "parse_json",
    "unsupported_media_type",
]
