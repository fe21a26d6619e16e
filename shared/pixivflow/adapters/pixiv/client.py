"""A thin httpx client for the Pixiv App API and image host.

No third-party Pixiv package: none is built on httpx.
Every request goes to the configured base (``source.baseUrls``; the real hosts by default), with
the same paths, parameters and headers as against Pixiv. Absolute URLs Pixiv hands out
(``next_url``, image URLs) are re-based onto the configured base, keeping path and query; a URL
on any other host is refused (a response is not allowed to steer us anywhere else).

What the client does at each answer (README "Pixiv source"):

| answer | App API | image host |
|---|---|---|
| 2xx | parsed | bytes |
| 429, or a "Rate Limit" message with any status | account cooldown (Retry-After honoured, 60 s doubling to 15 min), ``RateLimitedError`` | same |
| auth error (401, or an OAuth/invalid_grant message) | drop the access token, refresh once, repeat once; again: ``AuthenticationError`` | n/a |
| 400 "offset must be no more than 5000" | ``OffsetCapError`` (the source continues by date or stops) | n/a |
| 403 | ``SourceError`` ``access_denied`` (skip) | ``SourceError`` ``access_denied`` |
| 404 | ``WorkGoneError`` (deleted; a locked work -> LOCKED_WORK_UNAVAILABLE) | ``ImageNotFound`` (fallback to master) |
| other 4xx | ``SourceError`` ``remote_http_error`` | ``SourceError`` ``download_failed`` |
| 5xx, timeout, connection error | 2 quick retries (1 s, 2 s), then ``SourceOutage`` (retryable, the cell keeps its work) | same |
"""

from __future__ import annotations

from ...domain.text import ascii_digits
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx

from ...domain.errors import AuthenticationError, RateLimitedError, SourceError, SourceOutage, WorkGoneError
from . import constants
from .auth import PixivAuth, redact, retry_after_ms
from .gate import RateGate

MAX_FILE_BYTES = 64 * 1024 * 1024
# An App API answer is read whole (JSON, or a novel's webview page): a search page is ~100 KB; a
# novel's webview page carries its whole text, which Pixiv's editor caps at a few hundred thousand
# characters (under 2 MB even JSON-escaped at 6 bytes a character). 8 MiB is that with room to
# spare; a larger answer is refused with its reason (a novel: skipped as unsupported media) and
# never grows the Lambda's memory.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
STREAM_CHUNK = 1024 * 1024  # what one read of a streamed image holds in memory; a Pixiv original is at most a few tens of MB; a zip rarely more
_AUTH_TEXT = re.compile(r"invalid_grant|invalid_request|oauth process|access token", re.IGNORECASE)
_RATE_TEXT = re.compile(r"rate limit", re.IGNORECASE)
_OFFSET_TEXT = re.compile(r"offset must be no more than", re.IGNORECASE)


class OffsetCapError(SourceError):
    """Pixiv refused an offset above its 5000 cap (a search must continue by date, or stop)."""


class ImageNotFound(SourceError):
    """The image host has no file at that URL (the caller may try the master variant)."""


@dataclass(frozen=True)
class Bases:
    oauth: str = constants.OAUTH_BASE
    api: str = constants.API_BASE
    image: str = constants.IMAGE_BASE


def rebase(url: str, base: str, hosts: frozenset[str]) -> str:
    """``url`` moved onto ``base`` (scheme, host, port and path prefix), path and query kept.

    Accepts URLs on one of Pixiv's ``hosts`` or already on ``base``; refuses anything else."""
    parts = urlsplit(url)
    target = urlsplit(base)
    if not parts.scheme and not parts.netloc:
        path = parts.path if parts.path.startswith("/") else "/" + parts.path
    elif parts.hostname in hosts or (parts.scheme, parts.netloc) == (target.scheme, target.netloc):
        path = parts.path
        prefix = target.path.rstrip("/")
        if (parts.scheme, parts.netloc) == (target.scheme, target.netloc) and prefix and path.startswith(prefix + "/"):
            path = path[len(prefix):]
    else:
        raise SourceError(f"metadata_failed: Pixiv returned a URL on an unexpected host ({parts.hostname})", retryable=False)
    return urlunsplit((target.scheme, target.netloc, target.path.rstrip("/") + path, parts.query, ""))


def _message(body: Any) -> str:
    """The App API error body's message: ``{"error": {"user_message", "message", ...}}``."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("user_message") or error.get("message") or "")
        if isinstance(error, str):
            return error
    return ""


def _has_error(body: Any) -> bool:
    return isinstance(body, dict) and isinstance(body.get("error"), (dict, str)) and bool(body.get("error"))


class PixivClient:
    """App API GETs and image GETs through one gate, one auth, one httpx client."""

    def __init__(self, http: httpx.Client, auth: PixivAuth, gate: RateGate, *, bases: Bases,
                 headers: Mapping[str, str], sleep: Callable[[float], None], retries: int = 2,
                 log: Callable[..., None] | None = None) -> None:
        self._http = http
        self._auth = auth
        self._gate = gate
        self.bases = bases
        self._headers = dict(headers)
        self._sleep = sleep
        self._retries = retries
        self._log = log or (lambda *a, **k: None)
        self.api_requests = 0
        self.image_requests = 0

    # -- URLs ------------------------------------------------------------------------------
    def api_url(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        query = urlencode([(k, v) for k, v in (params or {}).items() if v is not None])
        return self.bases.api.rstrip("/") + path + (f"?{query}" if query else "")

    def follow(self, next_url: str) -> str:
        """A ``next_url`` Pixiv returned, on the configured App API base."""
        return rebase(next_url, self.bases.api, constants.API_HOSTS)

    def image_url(self, url: str) -> str:
        return rebase(url, self.bases.image, constants.IMAGE_HOSTS)

    # -- App API ---------------------------------------------------------------------------
    def get(self, path: str, params: Mapping[str, Any] | None = None, *, text: bool = False) -> Any:
        return self.get_url(self.api_url(path, params), text=text)

    def get_url(self, url: str, *, text: bool = False) -> Any:
        """GET one App API URL (already on the configured base). JSON, or the page text."""
        where = urlsplit(url).path
        refreshed = False
        attempt = 0
        while True:
            self._gate.before_request()
            bearer = self._auth.bearer()
            headers = {**self._headers, "Referer": constants.REFERER, "Authorization": f"Bearer {bearer}"}
            self.api_requests += 1
            try:
                with self._http.stream("GET", url, headers=headers) as response:
                    raw = _read_bounded(response, f"Pixiv App API {where}", MAX_ANSWER_BYTES)
            except httpx.TimeoutException:
                problem, status = f"network_error: Pixiv App API {where} timed out", None
            except httpx.TransportError as exc:
                problem, status = f"network_error: Pixiv App API {where} could not be reached ({type(exc).__name__})", None
            else:
                status = response.status_code
                body = _json_of(raw)
                message = redact(_message(body), self._auth.secrets())
                if status == 429 or (_has_error(body) and _RATE_TEXT.search(message or json.dumps(body.get("error")))):
                    self._rate_limited(response, where)
                if status == 401 or (status in (400, 403) and _AUTH_TEXT.search(_raw_error(body))):
                    self._auth.invalidate(bearer)
                    if not refreshed:
                        refreshed = True
                        continue
                    raise AuthenticationError(
                        f"auth_failed: Pixiv App API {where} rejected a freshly refreshed access token (HTTP {status})",
                        status=status)
                if status < 300 and not (_has_error(body) and not text):
                    self._gate.succeeded()
                    return raw.decode(response.encoding or "utf-8", "replace") if text else body
                if status >= 500:
                    problem = f"remote_http_error: Pixiv App API {where} answered HTTP {status}"
                elif status == 404:
                    raise WorkGoneError(f"Pixiv App API {where}: not found (HTTP 404) {message[:120]}".rstrip(), status=404)
                elif status == 403:
                    raise SourceError(f"access_denied: Pixiv App API {where} answered HTTP 403 {message[:120]}".rstrip(),
                                      status=403, retryable=False)
                elif status == 400 and _OFFSET_TEXT.search(_raw_error(body)):
                    raise OffsetCapError(f"Pixiv App API {where}: offset above the 5000 cap", status=400, retryable=False)
                else:
                    raise SourceError(f"remote_http_error: Pixiv App API {where} answered HTTP {status} {message[:120]}".rstrip(),
                                      status=status, retryable=False, reason="remote_http_error")
            attempt += 1
            if attempt > self._retries:
                reason = problem.split(":", 1)[0]
                raise SourceOutage(f"{problem} after {attempt} attempt(s)", status=status, reason=reason)
            self._log("info", "Pixiv request failed; retrying", event="pixiv.retry", endpoint=where, status=status,
                      attempt=attempt)
            self._sleep(float(attempt))  # 1 s, then 2 s

    # -- image host ------------------------------------------------------------------------
    def image(self, url: str) -> tuple[bytes, str]:
        """GET one file from the image host (Referer, no bearer). Returns (bytes, content type)."""
        target = self.image_url(url)
        where = urlsplit(target).path
        attempt = 0
        while True:
            self._gate.before_request(pace=False)
            headers = {**self._headers, "Referer": constants.REFERER}
            self.image_requests += 1
            try:
                with self._http.stream("GET", target, headers=headers) as response:
                    status = response.status_code
                    if status == 200:
                        content = _read_bounded(response, f"image {where}", MAX_FILE_BYTES)
                        self._gate.succeeded()
                        return content, response.headers.get("content-type", "")
                    response.read()
                    body = _json(response)
            except httpx.TimeoutException:
                problem, status = f"download_timeout: image {where} timed out", None
            except httpx.TransportError as exc:
                problem, status = f"download_failed: image {where} could not be fetched ({type(exc).__name__})", None
            else:
                problem = self._image_answer(response, response.status_code, body, where)
            attempt = self._image_retry(attempt, problem, status, where)

    @contextmanager
    def image_stream(self, url: str) -> Iterator[tuple[Iterator[bytes], str]]:
        """The image at ``url`` as chunks of at most ``STREAM_CHUNK`` bytes, and its content type
        (a page goes to the store as it arrives, never whole in memory). The answers
        before the body are handled like ``image`` (retries, cooldown, 404 -> ``ImageNotFound``);
        a body cut off midway is a retryable ``SourceOutage`` (the next run re-fetches that page)."""
        target = self.image_url(url)
        where = urlsplit(target).path
        attempt = 0
        while True:
            self._gate.before_request(pace=False)
            headers = {**self._headers, "Referer": constants.REFERER}
            self.image_requests += 1
            problem = None
            try:
                with self._http.stream("GET", target, headers=headers) as response:
                    status = response.status_code
                    if status == 200:
                        declared = response.headers.get("content-length")
                        if declared and ascii_digits(declared) and int(declared) > MAX_FILE_BYTES:
                            raise SourceError(f"unsupported media: image {where} is {declared} bytes "
                                              f"(limit {MAX_FILE_BYTES})", retryable=False)
                        try:
                            yield _bounded_chunks(response, where), response.headers.get("content-type", "")
                        except httpx.HTTPError as exc:  # cut off midway: never retried here (part of it was consumed)
                            raise SourceOutage(f"download_failed: image {where} was cut off ({type(exc).__name__})",
                                               reason="download_failed") from None
                        self._gate.succeeded()
                        return
                    response.read()
                    body = _json(response)
            except httpx.TimeoutException:
                problem, status = f"download_timeout: image {where} timed out", None
            except httpx.TransportError as exc:
                problem, status = f"download_failed: image {where} could not be fetched ({type(exc).__name__})", None
            if problem is None:
                problem = self._image_answer(response, response.status_code, body, where)
            attempt = self._image_retry(attempt, problem, status, where)

    def _image_answer(self, response: httpx.Response, status: int, body: Any, where: str) -> str:
        """A non-200 image answer (``image`` and ``image_stream`` alike): raises for what no retry
        can change (404, 403, other 4xx), starts a cooldown on a rate limit, and returns the
        retryable problem of a 5xx."""
        if status == 429 or _RATE_TEXT.search(_message(body)):
            self._rate_limited(response, where)
        if status == 404:
            raise ImageNotFound(f"download_failed: image {where} not found (HTTP 404)", status=404, retryable=False)
        if status == 403:
            raise SourceError(f"access_denied: image {where} answered HTTP 403", status=403, retryable=False)
        if status < 500:
            raise SourceError(f"download_failed: image {where} answered HTTP {status}", status=status,
                              retryable=False, reason="download_failed")
        return f"download_failed: image {where} answered HTTP {status}"

    def _image_retry(self, attempt: int, problem: str, status: int | None, where: str) -> int:
        """One more quick retry of an image request (after 1 s, 2 s, ...), or an outage past them."""
        attempt += 1
        if attempt > self._retries:
            raise SourceOutage(f"{problem} after {attempt} attempt(s)", status=status, reason=problem.split(":", 1)[0])
        self._log("info", "Pixiv image request failed; retrying", event="pixiv.retry", endpoint=where, status=status,
                  attempt=attempt)
        self._sleep(float(attempt))
        return attempt

    def _rate_limited(self, response: httpx.Response, where: str) -> None:
        status = response.status_code
        wait = self._gate.penalize(retry_after_ms(response, self._gate.now()), status=status, where=where)
        raise RateLimitedError(f"rate_limited: Pixiv answered HTTP {status} (Rate Limit) on {where}; "
                               f"account cooling down {-(-wait // 1000)} s", status=status, retry_after_ms=wait)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _raw_error(body: Any) -> str:
    if isinstance(body, dict) and body.get("error") is not None:
        return json.dumps(body.get("error"), ensure_ascii=False)
    return ""


def _bounded_chunks(response: httpx.Response, where: str) -> Iterator[bytes]:
    size = 0
    for chunk in response.iter_bytes(chunk_size=STREAM_CHUNK):
        size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise SourceError(f"unsupported media: image {where} is larger than {MAX_FILE_BYTES} bytes", retryable=False)
        yield chunk


def _read_bounded(response: httpx.Response, what: str, limit: int) -> bytes:
    """The whole body, refused past ``limit`` bytes (declared or read) with a reason naming it:
    nothing held whole can grow without bound (an image, an App API answer)."""
    declared = response.headers.get("content-length")
    if declared and ascii_digits(declared) and int(declared) > limit:
        raise SourceError(f"unsupported media: {what} is {declared} bytes (limit {limit})", retryable=False)
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise SourceError(f"unsupported media: {what} is larger than {limit} bytes", retryable=False)
        chunks.append(chunk)
    return b"".join(chunks)


def _json_of(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
