"""Shared HTTP pieces: correlation headers, JSON responses, request timing."""

from __future__ import annotations

import json
import re
import time
from typing import Any, Mapping

from aws_lambda_powertools.event_handler import Response

_ATTEMPT_RE = re.compile(r"[^A-Za-z0-9._:-]")
_PROVIDER_RE = re.compile(r"[^A-Za-z0-9._-]")


def header(headers: Mapping[str, str], name: str, *, first_value: bool = True) -> str | None:
    """A header by case-insensitive name; API Gateway joins repeated headers with commas, and
    with ``first_value`` only the first of them counts."""
    name = name.lower()
    for key, value in (headers or {}).items():
        if isinstance(key, str) and key.lower() == name:
            if not isinstance(value, str):
                return None
            return value.split(",")[0] if first_value else value
    return None


def attempt_id(headers: Mapping[str, str]) -> str | None:
    raw = header(headers, "x-schedule-attempt-id") or header(headers, "x-attempt-id")
    value = _ATTEMPT_RE.sub("", (raw or "").strip())[:64]
    return value or None


def provider(headers: Mapping[str, str]) -> str | None:
    value = _PROVIDER_RE.sub("", (header(headers, "x-schedule-provider") or "").strip())[:32]
    return value or None


def json_response(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Response:
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an echoed lone surrogate (e.g. from a path segment): escape it
        text = json.dumps(body, ensure_ascii=True, separators=(",", ":"))
    return Response(status_code=status, content_type="application/json", body=text,
                    headers=dict(headers) if headers else None)


_timer = time.perf_counter  # module-level so a test can inject the clock


class RequestClock:
    """Elapsed milliseconds of one request, for the outcome log line (started with the request)."""

    def __init__(self) -> None:
        self._start = _timer()

    def elapsed_ms(self) -> int:
        return int(round((_timer() - self._start) * 1000))
