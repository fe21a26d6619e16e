"""The secret store (``ports.SecretStore``): the HTTP surface's bearer tokens, the
job event callback signing secret, and the delivery routes' secrets, from the environment or SSM.

An adapter, not part of the HTTP layer, so the runtime and the callback path need no HTTP code to
read a secret, and every reader of a secret shares ONE rule for what a failed read means
(``adapters.secret_refs.read_with_retry`` over ``ssm_reader``):

* the parameter does not exist (SSM ``ParameterNotFound``, or a blank value): an ANSWER, ``None``.
  A bearer token or the signing secret that is missing is remembered for a minute, so a
  misconfigured stack does not call SSM on every request; a route's ``${VAR}`` is asked again on
  the next send;
* the store did not answer (throttling, network, a 5xx, a denied grant) after a few quick
  retries: :class:`SecretStoreUnavailable`, retryable, and NEVER remembered. A blip of SSM must
  never become "no token" for the rest of the container's life (503 to every caller), a dead
  callback, or a delivery sent without its credentials.

A value that was read is kept for the cold start (a rotated token needs a new container; route
secrets are kept a few minutes, see ``secret_refs.SecretResolver``).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping

from ..domain.errors import SecretStoreUnavailable
from ..ports import CALLBACK, JOBS, TRIGGER
from .secret_refs import SecretResolver, read_with_retry, ssm_reader

# The value itself (local runs, tests), or ``<VAR>_PARAMETER`` naming its SSM parameter.
ENV_NAMES = {TRIGGER: "TRIGGER_TOKEN", JOBS: "JOBS_TOKEN", CALLBACK: "CALLBACK_SIGNING_SECRET"}
NEGATIVE_TTL_S = 60.0  # a parameter that does not exist is asked again after a minute


class SecretStore:
    """``ports.SecretStore`` on env + SSM (``reader(name) -> value | None``, None = not found)."""

    def __init__(self, reader: Callable[[str], str | None] = ssm_reader, env: Mapping[str, str] | None = None, *,
                 attempts: int = 3, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
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

    def secret(self, kind: str) -> str | None:
        """The secret of ``kind`` (TRIGGER, JOBS, CALLBACK): ``None`` when it does not exist;
        raises :class:`SecretStoreUnavailable` when the store did not answer."""
        var = ENV_NAMES[kind]
        value = (self._env.get(var) or "").strip()
        if value:
            return value
        name = self._env.get(f"{var}_PARAMETER")
        return self._parameter(name) if name else None

    def token(self, kind: str) -> str | None:
        """A bearer token for the HTTP surface: ``None`` (fail closed) when it does not exist or
        cannot be read right now. This request is refused; the next one reads again."""
        try:
            return self.secret(kind)
        except SecretStoreUnavailable:
            return None

    def callback_secret(self) -> str | None:
        """The callback signing secret. Unavailable RAISES: the outbox releases the row unsent."""
        return self.secret(CALLBACK)

    def route_token(self, route: Any) -> str | None:
        """A ``kind: webhook`` route's bearer token. Raises SecretStoreUnavailable on a transient
        failure, so the delivery attempt is retried instead of being sent without credentials."""
        if getattr(route, "token", None):
            return route.token
        name = getattr(route, "tokenParameter", None)
        return self._parameter(name) if name else None

    def lookup(self, name: str) -> str | None:
        """``${VAR}`` resolution for the PixivFlow routes (env, then SSM below ROUTE_SECRETS_PATH)."""
        return self.routes.lookup(name)


__all__ = ["ENV_NAMES", "NEGATIVE_TTL_S", "SecretStore", "SecretStoreUnavailable"]
