"""The Pixiv refresh token's store: ``${VAR}`` resolved like every secret (the
environment first, then SSM below ``PIXIV_SECRETS_PATH``, or ``ROUTE_SECRETS_PATH`` when unset), plus what only a rotating token needs:
a fresh re-read, remembering a rotated value and writing it back (``put``).

The ``${VAR}`` syntax itself (``expand``, ``references``) lives in ``adapters.secret_refs``.

A PixivFlow config writes its secrets as ``${NAME}`` (the Pixiv refresh token, a proxy password,
route tokens). ``expand(text, lookup)`` replaces each reference with ``lookup(NAME)``;
``SecretResolver.lookup`` is the lookup every secret shares: the environment variable ``NAME``
when set, else the SSM SecureString ``<PIXIV_SECRETS_PATH>/<NAME>``.

Two failure kinds are kept apart on purpose:

* a secret that does not exist (no env var, SSM ``ParameterNotFound``) raises ``SecretMissing``:
  an operator must act;
* a secret store that failed (throttling, a network error, a 5xx) is retried a few times and then
  raises ``SecretUnavailable``: a later attempt may succeed. Such a failure is never cached, and
  neither is "missing": only values that were found are kept (per container).

No value, and no part of one, ever appears in an exception message or a log line.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Mapping

from ...domain.errors import SecretStoreUnavailable
from ..secret_refs import REFERENCE, UnresolvedSecret, expand, is_reference, references  # noqa: F401 - re-exported

# The Pixiv account secrets live below their own path, which execute alone reads and writes; a
# stack that never set one keeps them below the routes' path.
SECRETS_PATH_ENV = "PIXIV_SECRETS_PATH"
FALLBACK_PATH_ENV = "ROUTE_SECRETS_PATH"
_TRANSIENT_ATTEMPTS = 3

# One ``${VAR}`` syntax for every secret (routes and Pixiv alike): parsed by secret_refs.
SecretMissing = UnresolvedSecret


class SecretUnavailable(SecretStoreUnavailable):
    """The secret store could not answer (after retries). Retryable; never read as "no secret".
    The one "unavailable" of every secret reader (domain.errors.SecretStoreUnavailable)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"secret store unavailable while reading ${{{name}}}: {detail}")
        self.name = name


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


class SecretResolver:
    """``lookup(NAME)``: env ``NAME``, else SSM ``<path>/<NAME>`` (decrypted). Thread-safe.

    ``ssm`` is a boto3 SSM client or a zero-argument factory of one (created on first use, so
    building a resolver creates no client). Without a ``path`` only the environment is read.
    """

    def __init__(self, path: str | None = None, *, env: Mapping[str, str] | None = None,
                 ssm: Any = None, sleep: Callable[[float], None] = time.sleep, attempts: int = _TRANSIENT_ATTEMPTS) -> None:
        if path is None:
            path = os.environ.get(SECRETS_PATH_ENV) or os.environ.get(FALLBACK_PATH_ENV) or ""
        self._path = path.rstrip("/") or None
        self._env = env if env is not None else os.environ
        self._ssm_arg = ssm
        self._ssm_client: Any = None
        self._sleep = sleep
        self._attempts = max(1, attempts)
        self._found: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def path(self) -> str | None:
        return self._path

    def parameter_name(self, name: str) -> str | None:
        """The SSM parameter that holds ``${name}``, or None when no secret path is configured."""
        return f"{self._path}/{name}" if self._path else None

    def from_env(self, name: str) -> bool:
        return bool((self._env.get(name) or "").strip())

    def lookup(self, name: str, *, fresh: bool = False) -> str | None:
        value: str | None = (self._env.get(name) or "").strip()
        if value:
            return value
        parameter = self.parameter_name(name)
        if parameter is None:
            return None
        with self._lock:
            if not fresh and name in self._found:
                return self._found[name]
        value = self._read(name, parameter)
        if value is not None:
            with self._lock:
                self._found[name] = value
        return value

    def read_stored(self, name: str) -> str | None:
        """The SSM parameter of ``${name}`` as it is now: no environment, no cache (the
        rotation guard compares it on every refresh). None when no path is configured or it is absent."""
        parameter = self.parameter_name(name)
        return None if parameter is None else self._read(name, parameter)

    def remember(self, name: str, value: str) -> None:
        """Replace the cached value of an SSM-held secret (after this container rotated it)."""
        with self._lock:
            self._found[name] = value

    def put(self, name: str, value: str) -> None:
        """Overwrite the SSM SecureString of ``${name}`` (SSM has no conditional put: callers guard it)."""
        parameter = self.parameter_name(name)
        if parameter is None:
            raise SecretMissing(name, f"no {SECRETS_PATH_ENV} to write it below")
        self._client().put_parameter(Name=parameter, Value=value, Type="SecureString", Overwrite=True)
        self.remember(name, value)

    # -- SSM -------------------------------------------------------------------------------
    def _client(self) -> Any:
        if self._ssm_client is None:
            arg = self._ssm_arg
            if arg is None:
                from ... import aws

                arg = aws.client("ssm")
            elif callable(arg) and not hasattr(arg, "get_parameter"):
                arg = arg()
            self._ssm_client = arg
        return self._ssm_client

    def _read(self, name: str, parameter: str) -> str | None:
        last = ""
        for attempt in range(self._attempts):
            try:
                answer = self._client().get_parameter(Name=parameter, WithDecryption=True)
                value = str(answer.get("Parameter", {}).get("Value") or "").strip()
                return value or None
            except Exception as exc:  # noqa: BLE001 - sorted into missing vs transient below
                code = _error_code(exc)
                if code in ("ParameterNotFound", "ParameterVersionNotFound"):
                    return None
                if code in ("AccessDeniedException", "ValidationException"):
                    # Not transient: the operator must fix the grant or the name.
                    raise SecretMissing(name, f"the secret store refused {parameter}: {code}") from None
                last = code or type(exc).__name__
            if attempt + 1 < self._attempts:
                self._sleep(0.2 * 2**attempt)
        raise SecretUnavailable(name, last)
