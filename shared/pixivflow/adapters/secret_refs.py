"""``${VAR}`` secret references, as PixivFlow writes them.

A PixivFlow config never holds a secret: it names one as ``${VAR}`` inside a route's URL, a
header, ``token`` or ``signingSecret``. A reference is expanded when the request is SENT, never
when the config is loaded, so a rotated secret needs no redeploy and a config check needs no
secret at all.

:func:`expand` is the pure substitution; :class:`SecretResolver` is the lookup a route uses: the
process environment first, then SSM Parameter Store below ``RouteSecretsPath``
(``<path>/<VAR>``). Found values are cached for a few minutes; a name SSM does not know is not
cached (the next send asks again, so creating the parameter takes effect at once). A transient
SSM failure is retried a few times and then raised as :class:`SecretStoreUnavailable`: it is
NEVER remembered as "no secret", which would send a request without its credentials.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Callable, Mapping

from ..domain.errors import ConfigError, SecretStoreUnavailable

REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Names the Lambda runtime itself puts into the environment (its credentials among them) are
# never handed to a route from env, whatever the config says: they may only come from SSM.
_ENV_DENIED_PREFIXES = ("AWS_", "LAMBDA_", "_")
DEFAULT_TTL_S = 300.0
DEFAULT_ATTEMPTS = 3


class UnresolvedSecret(ConfigError):
    """A ``${VAR}`` reference has no value anywhere. Carries the NAME only, never a value."""

    def __init__(self, name: str, where: str | None = None) -> None:
        self.name = name
        detail = f" ({where})" if where else ""
        super().__init__(f"secret reference ${{{name}}} cannot be resolved{detail}: configuration error")


def references(text: str | None) -> list[str]:
    """The variable names ``text`` refers to, in order, without repeats."""
    return list(dict.fromkeys(REFERENCE.findall(text or "")))


def is_reference(text: str | None) -> bool:
    """True when ``text`` is exactly one ``${NAME}`` reference."""
    return bool(text and REFERENCE.fullmatch(text.strip()))


def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """Replace every ``${VAR}`` with ``lookup(VAR)``; raise :class:`UnresolvedSecret` for the first
    name that has no value. Text without references is returned unchanged (no lookup at all)."""
    if "${" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        value = lookup(name)
        if value is None:
            raise UnresolvedSecret(name)
        return value

    return REFERENCE.sub(one, text)


def read_with_retry(read: Callable[[str], str | None], name: str, *, attempts: int = DEFAULT_ATTEMPTS,
                    sleep: Callable[[float], None] = time.sleep, base_delay_s: float = 0.1) -> str | None:
    """``read(name)`` with a short retry on failure. ``None`` means "the store has no such name";
    any exception means "the store did not answer", and after the last try it is raised as
    :class:`SecretStoreUnavailable` (its message names the parameter, never a value)."""
    last: Exception | None = None
    for attempt in range(max(1, attempts)):
        if attempt:
            sleep(base_delay_s * (2 ** (attempt - 1)))
        try:
            return read(name)
        except Exception as exc:  # classified below: any failure to answer is transient
            last = exc
    raise SecretStoreUnavailable(f"secret store unavailable reading {name!r} after {max(1, attempts)} attempts: "
                                 f"{type(last).__name__}")


def ssm_reader(name: str) -> str | None:
    """Read one SecureString, decrypted, with an SSM client made through ``pixivflow.aws`` (every
    AWS client is made there, so the twins and moto see it too). ``None`` only for
    ParameterNotFound; every other failure raises, with botocore's error as it came.

    Not Powertools' parameters utility: importing it and its provider's own boto3 session cost a
    cold start about 55 ms (measured by make bench), and its cache is never wanted here
    (the callers keep their own)."""
    from .. import aws

    try:
        answer = aws.client("ssm").get_parameter(Name=name, WithDecryption=True)
    except Exception as exc:
        if _not_found(exc):
            return None
        raise
    return str(answer.get("Parameter", {}).get("Value") or "")


def _not_found(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            break
        response = getattr(seen, "response", None)
        if isinstance(response, dict) and response.get("Error", {}).get("Code") == "ParameterNotFound":
            return True
        if "ParameterNotFound" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class SecretResolver:
    """``lookup(name)``: env, then SSM ``<path>/<name>`` (cached ``ttl_s``, misses not cached)."""

    def __init__(self, *, env: Mapping[str, str] | None = None, reader: Callable[[str], str | None] | None = ssm_reader,
                 path: str | None = None, ttl_s: float = DEFAULT_TTL_S, attempts: int = DEFAULT_ATTEMPTS,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._env = env if env is not None else os.environ
        self._reader = reader
        self._path = (path if path is not None else self._env.get("ROUTE_SECRETS_PATH", "")).rstrip("/")
        self._ttl_s = ttl_s
        self._attempts = attempts
        self._sleep = sleep
        self._monotonic = monotonic
        self._cache: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def parameter_name(self, name: str) -> str | None:
        return f"{self._path}/{name}" if self._path else None

    def lookup(self, name: str) -> str | None:
        if not name.startswith(_ENV_DENIED_PREFIXES):
            value = self._env.get(name)
            if value:
                return value
        parameter = self.parameter_name(name)
        if parameter is None or self._reader is None:
            return None
        now = self._monotonic()
        with self._lock:
            hit = self._cache.get(name)
        if hit is not None and now - hit[1] < self._ttl_s:
            return hit[0]
        value = read_with_retry(self._reader, parameter, attempts=self._attempts, sleep=self._sleep)
        if value is None or not value.strip():
            with self._lock:
                self._cache.pop(name, None)  # a miss is asked again next time
            return None
        value = value.strip()
        with self._lock:
            self._cache[name] = (value, now)
        return value

    __call__ = lookup

    def expand(self, text: str) -> str:
        return expand(text, self.lookup)


class Expander:
    """Expands the references of one request and remembers every value it substituted, so any
    text about that request (an error, a response preview) can be scrubbed before it is stored
    or logged: a secret never reaches the ledger or a log, not even echoed back by a server."""

    def __init__(self, lookup: Callable[[str], str | None], where: str | None = None) -> None:
        self._lookup = lookup
        self._where = where
        self.used: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        def lookup(name: str) -> str | None:
            value = self._lookup(name)
            if value is not None:
                self.used[name] = value
            return value

        try:
            return expand(text, lookup)
        except UnresolvedSecret as exc:
            raise UnresolvedSecret(exc.name, self._where) from None

    def scrub(self, text: str) -> str:
        for name, value in sorted(self.used.items(), key=lambda kv: -len(kv[1])):
            if len(value) >= 4:
                text = text.replace(value, f"${{{name}}}")
        return text


__all__ = [
    "REFERENCE",
    "Expander",
    "SecretResolver",
    "SecretStoreUnavailable",
    "UnresolvedSecret",
    "expand",
    "read_with_retry",
    "references",
    "ssm_reader",
]
