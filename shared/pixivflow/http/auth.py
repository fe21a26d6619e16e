"""Bearer auth (spec §11.1; DESIGN §8): fail closed, constant-time, never log token material.

Tokens come from env (``TRIGGER_TOKEN``, ``JOBS_TOKEN``) or from SSM by name
(``TRIGGER_TOKEN_PARAMETER``, ``JOBS_TOKEN_PARAMETER``), read once per cold start.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

TRIGGER = "trigger"
JOBS = "jobs"
CALLBACK = "callback"  # the job event callback signing secret (never a bearer token)
_ENV = {TRIGGER: "TRIGGER_TOKEN", JOBS: "JOBS_TOKEN", CALLBACK: "CALLBACK_SIGNING_SECRET"}


@dataclass(frozen=True)
class AuthFailure:
    status: int  # 503 or 401
    error: str
    reason: str


NOT_CONFIGURED = AuthFailure(503, "endpoint disabled: token not configured", "token_not_configured")


def _ssm(name: str) -> str | None:
    from aws_lambda_powertools.utilities import parameters

    try:
        return parameters.get_parameter(name, decrypt=True)
    except Exception:  # a missing parameter fails closed, like a missing env var
        return None


class Secrets:
    def __init__(self, reader: Callable[[str], str | None] = _ssm, env: Mapping[str, str] | None = None) -> None:
        self._reader = reader
        self._env = env if env is not None else os.environ
        self._cache: dict[str, str | None] = {}

    def token(self, kind: str) -> str | None:
        if kind not in self._cache:
            var = _ENV[kind]
            value = (self._env.get(var) or "").strip()
            if not value and self._env.get(f"{var}_PARAMETER"):
                value = (self._reader(self._env[f"{var}_PARAMETER"]) or "").strip()
            self._cache[kind] = value or None
        return self._cache[kind]

    def route_token(self, route: Any) -> str | None:
        if getattr(route, "token", None):
            return route.token
        name = getattr(route, "tokenParameter", None)
        if name:
            key = f"route:{name}"
            if key not in self._cache:
                self._cache[key] = self._reader(name)
            return self._cache[key]
        return None


def check_bearer(headers: Mapping[str, str], expected: str | None) -> AuthFailure | None:
    """None when authorised; never raises, whatever the header holds.

    ``Authorization: Bearer <token>``: the scheme is case-insensitive (RFC 9110 §11.1, issue 17),
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
