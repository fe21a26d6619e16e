"""Shared HTTP pieces: correlation headers (spec §11.2), JSON responses, request timing."""

from __future__ import annotations

import json
import re
import time
from typing import Any, Mapping

from aws_lambda_powertools.event_handler import Response

_ATTEMPT_RE = re.compile(r"[^A-Za-z0-9._:-]")
_PROVIDER_RE = re.compile(r"[^A-Za-z0-9._-]")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    name = name.lower()
    for key, value in (headers or {}).items():
        if key.lower() == name:
            # API Gateway joins repeated headers with commas: the first value counts.
            return value.split(",")[0] if isinstance(value, str) else None
    return None


def attempt_id(headers: Mapping[str, str]) -> str | None:
    raw = _header(headers, "x-schedule-attempt-id") or _header(headers, "x-attempt-id")
    value = _ATTEMPT_RE.sub("", (raw or "").strip())[:64]
    return value or None


def provider(headers: Mapping[str, str]) -> str | None:
    value = _PROVIDER_RE.sub("", (_header(headers, "x-schedule-provider") or "").strip())[:32]
    return value or None


def json_response(status: int, body: Any) -> Response:
    return Response(status_code=status, content_type="application/json",
                    body=json.dumps(body, ensure_ascii=False, separators=(",", ":")))


class RequestClock:
    """Elapsed milliseconds of one request, for the outcome log line."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def elapsed_ms(self) -> int:
        return int((time.perf_counter() - self._start) * 1000)
