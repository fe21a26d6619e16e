"""The operator page's session (``http/ui.py``): a cookie ``v2.<epoch>.<expiry>.<signature>``, an
HMAC over the session epoch and an expiry, keyed by an HMAC of the trigger token (never the token
itself); the epoch is the ledger's, so a logout ends every cookie of the epoch it names."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from aws_lambda_powertools.shared.cookies import Cookie, SameSite

from .. import runtime
from .common import header

COOKIE = "pixivflow_ui"
SESSION_MS = 8 * 3_600_000
_KEY_CONTEXT = b"pixivflow-ui-session-key:v1"


def _session_key(token: str) -> bytes:
    return hmac.new(token.encode("utf-8", "surrogatepass"), _KEY_CONTEXT, hashlib.sha256).digest()


def _signature(token: str, epoch: int, expiry_s: int) -> str:
    mac = hmac.new(_session_key(token), f"v2.{epoch}.{expiry_s}".encode("ascii"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode("ascii").rstrip("=")


def issue_session(token: str, epoch: int, now_ms: int) -> str:
    """``v2.<epoch>.<expiry epoch s>.<base64url HMAC>``: what the cookie carries (never the token)."""
    expiry = (now_ms + SESSION_MS) // 1000
    return f"v2.{epoch}.{expiry}.{_signature(token, epoch, expiry)}"


def session_epoch(value: str | None, token: str, now_ms: int) -> int | None:
    """The epoch a cookie value was issued under, when it is ours, signed under ``token`` and
    unexpired; else None. Whether that epoch is still current is the caller's ledger read."""
    if not isinstance(value, str) or len(value) > 200:
        return None
    parts = value.split(".")
    if len(parts) != 4 or parts[0] != "v2":
        return None
    _, epoch_text, expiry_text, signature = parts
    if not (epoch_text.isascii() and epoch_text.isdigit() and len(epoch_text) <= 12
            and expiry_text.isascii() and expiry_text.isdigit() and len(expiry_text) <= 12):
        return None
    epoch, expiry = int(epoch_text), int(expiry_text)
    if expiry * 1000 <= now_ms:
        return None
    if not hmac.compare_digest(signature.encode("ascii", "replace"), _signature(token, epoch, expiry).encode("ascii")):
        return None
    return epoch


def live_session(event: Any, token: str, now_ms: int) -> int | None:
    """The epoch of the request's live session (a valid cookie naming the CURRENT epoch), or None."""
    epochs = {e for e in (session_epoch(v, token, now_ms) for v in cookie_values(event)) if e is not None}
    if not epochs:
        return None  # no ledger read for a request without a well-signed cookie
    current = runtime.get().wiring.sessions.ui_session_epoch()
    return current if current in epochs else None


def cookie_values(event: Any) -> list[str]:
    """Every ``pixivflow_ui`` value the request carries: API Gateway v2 moves cookies to ``cookies``."""
    raw: list[str] = [c for c in (event.get("cookies") or []) if isinstance(c, str)]
    joined = header(event.get("headers") or {}, "cookie", first_value=False)
    if joined:
        raw += joined.split(";")
    values = []
    for piece in raw:
        for part in piece.split(";"):
            name, sep, value = part.strip().partition("=")
            if sep and name == COOKIE:
                values.append(value.strip())
    return values


def session_cookie(value: str, max_age: int) -> Cookie:
    return Cookie(COOKIE, value, path="/ui", secure=True, http_only=True, max_age=max_age, same_site=SameSite.STRICT_MODE)
