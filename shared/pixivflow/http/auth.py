"""Bearer auth (spec §11.1; DESIGN §8): fail closed, constant-time, never log token material.

Tokens come from env (``TRIGGER_TOKEN``, ``JOBS_TOKEN``) or from SSM by name
(``TRIGGER_TOKEN_PARAMETER``, ``JOBS_TOKEN_PARAMETER``), read once per cold start; a transient
SSM failure is retried and never cached (``Secrets``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
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
    """``None`` only when the parameter does not exist; any other failure raises (see secret_refs)."""
    from ..adapters.secret_refs import ssm_reader

    return ssm_reader(name)


NEGATIVE_TTL_S = 60.0  # a token parameter that does not exist is asked again after a minute


class Secrets:
    """Bearer tokens of the HTTP surface and the secrets of the delivery routes.

    A value that was read is kept for the cold start. A parameter SSM does not know is
    remembered as missing for a minute only. A transient SSM failure is retried, and if it
    persists the call fails closed for THIS request and remembers nothing: a blip of SSM must
    never turn into "no token" for the rest of the container's life (which would answer 503 to
    every caller, or send deliveries without their ``Authorization`` header).
    """

    def __init__(self, reader: Callable[[str], str | None] = _ssm, env: Mapping[str, str] | None = None, *,
                 attempts: int = 3, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        from ..adapters.secret_refs import SecretResolver

        self._reader = reader
        self._env = env if env is not None else os.environ
        self._attempts = attempts
        self._sleep = sleep
        self._monotonic = monotonic
        self._cache: dict[str, str] = {}
        self._missing: dict[str, float] = {}
        self.routes = SecretResolver(env=self._env, reader=reader, attempts=attempts, sleep=sleep, monotonic=monotonic)

    def _parameter(self, name: str) -> str | None:
        """One parameter's value; ``None`` when it does not exist. Raises SecretStoreUnavailable."""
        from ..adapters.secret_refs import read_with_retry

        if name in self._cache:
            return self._cache[name]
        missing_since = self._missing.get(name)
        if missing_since is not None and self._monotonic() - missing_since < NEGATIVE_TTL_S:
            return None
        value = (read_with_retry(self._reader, name, attempts=self._attempts, sleep=self._sleep) or "").strip()
        if not value:
            self._missing[name] = self._monotonic()
            return None
        self._missing.pop(name, None)
        self._cache[name] = value
        return value

    def token(self, kind: str) -> str | None:
        """The bearer token of ``kind``; ``None`` (fail closed) when unset or unreadable right now."""
        from ..adapters.secret_refs import SecretStoreUnavailable

        var = _ENV[kind]
        value = (self._env.get(var) or "").strip()
        if value:
            return value
        name = self._env.get(f"{var}_PARAMETER")
        if not name:
            return None
        try:
            return self._parameter(name)
        except SecretStoreUnavailable:
            return None  # this request is refused; the next one reads again

    def route_token(self, route: Any) -> str | None:
        """A ``kind: webhook`` route's bearer token. Raises SecretStoreUnavailable on a transient
        failure, so the delivery attempt is retried instead of being sent without credentials."""
        if getattr(route, "token", None):
            return route.token
        name = getattr(route, "tokenParameter", None)
        return self._parameter(name) if name else None

    def lookup(self, name: str) -> str | None:
        """``${VAR}`` resolution for the PixivFlow routes (env, then SSM below RouteSecretsPath)."""
        return self.routes.lookup(name)


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
