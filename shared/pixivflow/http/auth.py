"""Bearer auth: fail closed, constant-time, never log token material.

The tokens themselves come from the secret store (``ports.SecretStore``, implemented by
``adapters.secret_store``): env (``TRIGGER_TOKEN``, ``JOBS_TOKEN``) or SSM by name
(``TRIGGER_TOKEN_PARAMETER``, ``JOBS_TOKEN_PARAMETER``). This module only names them and checks
a presented one.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Mapping

from ..ports import CALLBACK, JOBS, TRIGGER  # noqa: F401 - the token kinds, named once in the ports


@dataclass(frozen=True)
class AuthFailure:
    status: int  # 503 or 401
    error: str
    reason: str


NOT_CONFIGURED = AuthFailure(503, "endpoint disabled: token not configured", "token_not_configured")


def check_bearer(headers: Mapping[str, str], expected: str | None) -> AuthFailure | None:
    """None when authorised; never raises, whatever the header holds.

    ``Authorization: Bearer <token>``: the scheme is case-insensitive (RFC 9110, section 11.1),
    the token exact. Compared in constant time over SHA-256 digests, so neither the content nor
    the length of the configured token leaks through timing.
    """
    if not expected:
        return NOT_CONFIGURED
    raw = None
    for name, value in (headers or {}).items():
        if isinstance(name, str) and name.lower() == "authorization":
            raw = value
            break
    scheme, _, presented = raw.strip().partition(" ") if isinstance(raw, str) else ("", "", "")
    if scheme.lower() != "bearer" or not presented.strip():
        return AuthFailure(401, "unauthorized", "missing_bearer")
    # surrogatepass: a header holding a lone surrogate is a wrong token, not an encoding crash.
    if not hmac.compare_digest(_digest(presented.strip().encode("utf-8", "surrogatepass")),
                               _digest(expected.encode("utf-8", "surrogatepass"))):
        return AuthFailure(401, "unauthorized", "bad_token")
    return None


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()
