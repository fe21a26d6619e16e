"""OAuth for the App API: the refresh-token grant, the access-token cache, rotation.

* **Grant.** ``POST <oauth>/auth/token`` form-encoded with the app's public client id/secret,
  ``grant_type=refresh_token`` and the account's refresh token, plus ``X-Client-Time`` and
  ``X-Client-Hash`` = md5(time + hash secret) as pixivpy and gallery-dl send them
  (docs/explanation/pixiv-source.md). The answer is read from the top level or from its nested
  ``response`` object: real bodies carry both.
* **Cache.** The access token is kept per container until a minute before it expires; an API
  call answered with an auth error drops it and refreshes once (the client's job).
* **Rotation.** A changed refresh token is kept in memory at once. When it came from SSM, the
  ledger item ``PIXIV#<accountId>/TOKEN`` (a conditional update on the old token's fingerprint)
  elects ONE container per rotation, and only that one calls ``PutParameter(Overwrite=True)``:
  SSM has no conditional put, so without the guard two containers could overwrite each other.
* **Rejected token.** An answer whose OAuth ``error`` is ``invalid_grant`` first re-reads the
  SSM parameter, in case another container rotated it; if that gives nothing new, it is an
  ``AuthenticationError``: terminal ``auth_failed``, logged once per container, never retried.
  ``invalid_client`` is terminal too. Every other failure of the token endpoint (a 400 without
  the field such as the 1508 time/hash answer, Cloudflare's HTML 403, 5xx, a timeout) is retried
  with backoff and then counted in the account's cooldown: never terminal alone.

No token, and no part of one, is ever logged or put in an exception message.
"""

from __future__ import annotations

from ...domain.text import ascii_digits
import hashlib
import os
import threading
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

import httpx

from ...config.pixiv import ENV_OVERRIDES, PLACEHOLDER_TOKEN_NAME, is_placeholder_refresh_token
from ...domain.errors import AuthenticationError, RateLimitedError, SourceConfigurationError, SourceOutage
from .secrets import SecretMissing, SecretResolver, SecretUnavailable, expand, is_reference, references
from . import constants

ENV_REFRESH_TOKEN = "PIXIV_REFRESH_TOKEN"
EXPIRY_MARGIN_MS = 60_000
DEFAULT_EXPIRES_S = 3600


def client_time(now_ms: int) -> str:
    """``X-Client-Time``: the wall-clock time as ``YYYY-MM-DDTHH:MM:SS+00:00`` (UTC, so the suffix is true)."""
    return datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def client_hash(time_text: str, secret: str = constants.HASH_SECRET) -> str:
    """``X-Client-Hash``: lowercase hex MD5 of the time string followed by the hash secret."""
    return hashlib.md5((time_text + secret).encode("utf-8")).hexdigest()  # noqa: S324 - Pixiv's protocol


def fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


class ConfiguredSecret:
    """``pixiv.clientId`` / ``clientSecret``: PixivFlow's environment override (``PIXIV_CLIENT_ID``,
    ``PIXIV_CLIENT_SECRET``), else the configured value with its ``${VAR}`` references resolved
    like every secret (environment, then SSM: the literal ``${PIXIV_CLIENT_ID}`` must never reach
    Pixiv), else the app's public value. Resolved on first call, then kept."""

    def __init__(self, key: str, configured: str | None, default: str, resolver: SecretResolver, *,
                 env: Mapping[str, str]) -> None:
        self._key = key
        self._configured = (configured or "").strip() or None
        self._default = default
        self._resolver = resolver
        self._override = (env.get(ENV_OVERRIDES[key]) or "").strip() or None
        self._value: str | None = None

    def __call__(self) -> str:
        if self._value is None:
            self._value = self._resolve()
        return self._value

    def _resolve(self) -> str:
        if self._override:
            return self._override
        if not self._configured:
            return self._default
        try:
            value = expand(self._configured, self._resolver.lookup).strip()
        except SecretMissing as exc:
            raise SourceConfigurationError(f"configuration_error: pixiv.{self._key}: {exc}") from None
        except SecretUnavailable as exc:
            raise SourceOutage(f"network_error: pixiv.{self._key}: {exc}", reason="network_error") from None
        if not value:
            raise SourceConfigurationError(f"configuration_error: pixiv.{self._key} resolved to an empty value")
        return value


class RefreshToken:
    """Where the account's refresh token comes from, and where a rotated one goes.

    Precedence: the ``PIXIV_REFRESH_TOKEN`` environment variable (PixivFlow's override), then
    ``pixiv.refreshToken``, whose ``${VAR}`` references resolve like route secrets (env, then
    SSM below ``RouteSecretsPath``). Resolved on first use, then kept for the container.
    """

    def __init__(self, configured: str | None, resolver: SecretResolver, *, env: Mapping[str, str] | None = None,
                 log: Callable[..., None] | None = None) -> None:
        configured = (configured or "").strip() or None
        # A placeholder (PixivFlow's sample text, empty, < 10 characters) stands for
        # PIXIV_REFRESH_TOKEN: the environment variable, else its SSM parameter, which is also
        # where a rotated token is then written back.
        self._placeholder = is_placeholder_refresh_token(configured)
        self._configured = "${" + PLACEHOLDER_TOKEN_NAME + "}" if self._placeholder or configured is None else configured
        self._resolver = resolver
        self._env = env if env is not None else os.environ
        self._log = log or (lambda *a, **k: None)
        self._value: str | None = None
        self._lock = threading.Lock()
        self._warned_literal = False

    @property
    def ssm_reference(self) -> str | None:
        """The ``${NAME}`` the token was SEEDED from SSM with (None: env, literal, or no SSM path)."""
        if (self._env.get(ENV_REFRESH_TOKEN) or "").strip() or not is_reference(self._configured):
            return None
        name = references(self._configured)[0]
        if self._resolver.from_env(name) or self._resolver.parameter_name(name) is None:
            return None
        return name

    @property
    def ssm_name(self) -> str | None:
        """The SSM parameter (below ``PIXIV_SECRETS_PATH``, or ``ROUTE_SECRETS_PATH`` when that is
        unset) that holds the account's CURRENT token once one was rotated: the config's
        ``${NAME}``, else ``PIXIV_REFRESH_TOKEN`` (the stack may write ``PIXIV_*`` names). The
        environment and the config only seed it."""
        name = references(self._configured)[0] if is_reference(self._configured) else ENV_REFRESH_TOKEN
        return name if self._resolver.parameter_name(name) is not None else None

    def stored(self) -> str | None:
        """The SSM parameter's value right now (None: no parameter, or the store did not answer)."""
        name = self.ssm_name
        if name is None:
            return None
        try:
            return self._resolver.read_stored(name)
        except (SecretUnavailable, SecretMissing):
            return None  # compared again at the next refresh

    def current(self) -> str:
        with self._lock:
            if self._value is None:
                self._value = self._resolve(fresh=False)
            return self._value

    def replace(self, value: str) -> None:
        with self._lock:
            self._value = value
        name = self.ssm_reference
        if name is not None:
            self._resolver.remember(name, value)

    def persist(self, value: str) -> None:
        name = self.ssm_name
        if name is None:
            raise SecretMissing("refreshToken", "no ROUTE_SECRETS_PATH to keep it below")
        self._resolver.put(name, value)

    def known(self) -> list[str]:
        with self._lock:
            return [v for v in (self._value,) if v]

    def _resolve(self, *, fresh: bool) -> str:
        override = (self._env.get(ENV_REFRESH_TOKEN) or "").strip()
        if override:
            return override
        if not references(self._configured):
            if not self._warned_literal:
                self._warned_literal = True
                self._log("warning", "pixiv.refreshToken is written in the config itself; use a ${VAR} reference",
                          event="pixiv.literal_refresh_token")
            return self._configured
        try:
            value = expand(self._configured, lambda name: self._resolver.lookup(name, fresh=fresh))
        except SecretMissing as exc:
            if self._placeholder:
                where = self._resolver.parameter_name(PLACEHOLDER_TOKEN_NAME) or "SSM (no RouteSecretsPath)"
                raise SourceConfigurationError(
                    "configuration_error: pixiv.refreshToken: a placeholder, and neither the environment variable "
                    f"{PLACEHOLDER_TOKEN_NAME} nor {where} holds a token") from None
            raise SourceConfigurationError(f"configuration_error: pixiv.refreshToken: {exc}") from None
        except SecretUnavailable as exc:
            raise SourceOutage(f"network_error: pixiv.refreshToken: {exc}", reason="network_error") from None
        if not value.strip():
            raise SourceConfigurationError("configuration_error: pixiv.refreshToken resolved to an empty value")
        return value.strip()


# A guard rotation SSM still lacks this long after it was recorded is lost (its container's
# PutParameter failed or it died between the two writes): longer than any invocation's life.
LOST_ROTATION_MS = 5 * 60_000

# The OAuth ``error`` values that only an operator can fix, with what to tell them.
TERMINAL_OAUTH_ERRORS = {
    "invalid_grant": "the refresh token is invalid, expired or revoked; paste a new one",
    "invalid_client": "the app's client id/secret were refused (pixiv.clientId / pixiv.clientSecret, "
                      "PIXIV_CLIENT_ID / PIXIV_CLIENT_SECRET)",
}


def _transient_cause(status: int, body: Any) -> str:
    """What a retryable token-endpoint answer was, in words free of any token."""
    if body is None:
        return "an HTML page, as Cloudflare's challenge" if status == 403 else "no JSON body"
    system = (body.get("errors") or {}).get("system") if isinstance(body, dict) and isinstance(body.get("errors"), dict) else None
    if isinstance(system, dict) and system.get("code") is not None:
        return f"error code {system.get('code')} without an OAuth error, as Pixiv's time/hash refusal"
    return "no OAuth error field" if status < 500 else "a server error"


def _value(value: str | Callable[[], str]) -> str:
    return value() if callable(value) else value


def _field(body: Any, name: str) -> Any:
    if not isinstance(body, dict):
        return None
    if body.get(name) not in (None, ""):
        return body.get(name)
    nested = body.get("response")
    return nested.get(name) if isinstance(nested, dict) else None


def _error_text(body: Any, text: str) -> str:
    """A short, token-free description of an OAuth error body."""
    if isinstance(body, dict):
        parts = []
        if isinstance(body.get("error"), str):
            parts.append(body["error"])
        system = (body.get("errors") or {}).get("system") if isinstance(body.get("errors"), dict) else None
        if isinstance(system, dict) and system.get("message"):
            parts.append(str(system["message"]))
        if parts:
            return "; ".join(parts)[:200]
    return (text or "")[:120]


class PixivAuth:
    def __init__(self, http: httpx.Client, token: RefreshToken, *, account_id: str, oauth_base: str,
                 client_id: str | Callable[[], str], client_secret: str | Callable[[], str],
                 headers: Mapping[str, str], now_ms: Callable[[], int],
                 sleep: Callable[[float], None], retries: int = 2, store: Any = None, gate: Any = None,
                 log: Callable[..., None] | None = None) -> None:
        self._http = http
        self._token = token
        self._account = account_id
        self._url = oauth_base.rstrip("/") + constants.TOKEN_PATH
        # Plain strings, or zero-argument callables resolved at the first grant (``${VAR}`` in SSM).
        self._client_id = client_id
        self._client_secret = client_secret
        self._headers = dict(headers)
        self._now = now_ms
        self._sleep = sleep
        self._retries = retries
        self._store = store
        self._gate = gate
        self._log = log or (lambda *a, **k: None)
        self._access: str | None = None
        self._expires_at = 0
        self._lock = threading.RLock()
        self._failure_logged = False
        self._lost: tuple[str, str] | None = None  # the guard as read, naming a rotation SSM never got (_heal)
        self.refreshes = 0  # token requests this container made (cost figures, tests)

    def secrets(self) -> list[str]:
        """Every token value this container knows, for redaction."""
        with self._lock:
            return [v for v in [self._access, *self._token.known()] if v]

    def bearer(self) -> str:
        with self._lock:
            if self._access is None or self._now() >= self._expires_at - EXPIRY_MARGIN_MS:
                self._refresh()
            assert self._access is not None
            return self._access

    def invalidate(self, access: str) -> None:
        """Drop the cached access token if it is still ``access`` (an API call rejected it)."""
        with self._lock:
            if self._access == access:
                self._access = None
                self._expires_at = 0

    # -- the grant --------------------------------------------------------------------------
    def _refresh(self) -> None:
        self._lost = None
        refresh = self._heal(self._token.current())
        try:
            self._grant(refresh)
        except AuthenticationError:
            # Another container may have rotated the token (and persisted it to SSM) meanwhile.
            fresh = self._token.stored()
            if fresh is None or fresh == refresh:
                self._fail_once()
                raise
            self._token.replace(fresh)
            self._grant(fresh)

    def _heal(self, mine: str) -> str:
        """The refresh token to use, after comparing the guard with SSM's value NOW.

        The guard (``PIXIV#<account>/TOKEN``) holds the fingerprint of the account's current token
        and of the one it replaced. On every refresh:

        * SSM holds the guard's current token: it wins over the environment, the config and a
          stale copy in memory (they only seed it);
        * SSM still holds the token the guard replaced while this container holds the current
          one: this container's PutParameter failed; it writes it again now;
        * SSM holds a token no rotation produced: pasted by hand. It is used, and recorded as
          the guard's current one (conditional on the guard as read).

        A container that holds neither (it started from a stale SSM value, or its own rotation lost
        the guard's race) changes nothing while the guard's rotation is young: the container that
        holds the current token heals SSM at its own next refresh. Once that rotation is older than
        ``LOST_ROTATION_MS`` it is judged lost, and this refresh's rotation may replace it."""
        if self._store is None:
            return mine
        stored = self._token.stored()
        if stored is None:
            return mine  # no SSM parameter (or SSM did not answer: compared again next time)
        guard, previous = self._store.token_guard(self._account)
        held, seen = fingerprint(mine), fingerprint(stored)
        if guard is None and stored == mine:
            return mine  # nothing rotated yet, and SSM holds the token this container uses
        if seen == guard:
            if stored != mine:
                self._token.replace(stored)
            return stored
        if guard is not None and seen == previous:
            if held != guard and self._now() - (self._store.token_rotated_at(self._account) or 0) >= LOST_ROTATION_MS:
                # SSM holds the token the guard says was replaced, long after the rotation (its
                # writer would have written SSM right after the guard): the replacement lives only
                # in a container whose PutParameter failed or that died between the two writes. Our
                # own rotation may take its place, from SSM's token or from the one we hold (a warm
                # container whose earlier rotation lost to the lost one).
                self._lost = (guard, previous)
            if held == guard:
                try:
                    self._token.persist(mine)
                except Exception as exc:  # noqa: BLE001 - tried again at the next refresh
                    self._log("warning", "rotated Pixiv refresh token still missing from SSM; writing it failed again",
                              event="pixiv.token_persist_failed", account_id=self._account, error_type=type(exc).__name__)
                else:
                    self._log("warning", "Pixiv refresh token healed: SSM still held the token a rotation had replaced "
                              "(its PutParameter had failed); the current one was written again",
                              event="pixiv.token_healed", account_id=self._account, cause="put_parameter_failed")
            return mine
        if guard is None and self._token.ssm_reference is None:
            return mine  # seeded from the environment or the config: SSM wins only once a rotation is recorded
        if self._store.adopt_token(self._account, guard, seen, self._now()):
            self._log("warning", "Pixiv refresh token healed: SSM holds a token no rotation produced (pasted by hand); "
                      "it is used and recorded from now on", event="pixiv.token_healed", account_id=self._account,
                      cause="pasted_by_hand")
        self._token.replace(stored)
        return stored

    def _fail_once(self) -> None:
        if not self._failure_logged:
            self._failure_logged = True
            self._log("error", "Pixiv rejected the refresh token; cells of this account end auth_failed until it is replaced",
                      event="pixiv.auth_failed", account_id=self._account)

    def _grant(self, refresh: str) -> None:
        attempt = 0
        while True:
            stamp = client_time(self._now())
            headers = {**self._headers, "X-Client-Time": stamp, "X-Client-Hash": client_hash(stamp)}
            form = {"client_id": _value(self._client_id), "client_secret": _value(self._client_secret),
                    "grant_type": "refresh_token", "refresh_token": refresh,
                    "get_secure_url": "1", "include_policy": "true"}
            self.refreshes += 1
            status = None
            problem: str | None
            try:
                response = self._http.post(self._url, data=form, headers=headers)
            except httpx.TimeoutException:
                problem = "network_error: the Pixiv OAuth endpoint did not answer in time"
            except httpx.TransportError as exc:
                problem = f"network_error: the Pixiv OAuth endpoint could not be reached ({type(exc).__name__})"
            else:
                status = response.status_code
                problem = self._answer(response, refresh)
                if problem is None:
                    return
            attempt += 1
            if attempt > self._retries:
                # A blip of the token endpoint is never terminal on its own. It counts in
                # the account's cooldown (60 s doubling, shared by every container), and the cell
                # is retried when that ends.
                cause = problem.split(":", 1)[0]
                wait = self._gate.penalize(None, status=status, where="oauth", cause=cause) if self._gate else None
                tail = f"; account cooling down {-(-wait // 1000)} s" if wait else ""
                raise SourceOutage(f"{problem} after {attempt} attempt(s){tail}", status=status,
                                   reason=problem.split(":", 1)[0], retry_after_ms=wait)
            self._log("info", "Pixiv token request failed; retrying", event="pixiv.oauth_retry", status=status,
                      attempt=attempt, problem=problem.split(":", 1)[0])
            self._sleep(float(attempt))  # quick retries with backoff: 1 s, 2 s, ...

    def _answer(self, response: httpx.Response, refresh: str) -> str | None:
        """None on success; a retryable problem's description; raises for the final answers.

        Decided by the answer's OAuth ``error`` field: ``invalid_grant`` (the refresh token) and
        ``invalid_client`` (the app's id/secret) are terminal ``auth_failed`` naming that cause.
        Everything else is retryable: a 400 without the field (Pixiv's 1508 time/hash answer
        carries the same ``errors.system.code`` as a bad token, but no ``error``), Cloudflare's
        HTML 403 challenge, other 4xx, 5xx."""
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            body = None
        text = "" if body is not None else response.text
        message = redact(_error_text(body, text), [refresh])
        if status == 429 or "rate limit" in message.lower():
            retry_after = _retry_after_ms(response, self._now())
            wait = self._gate.penalize(retry_after, status=status, where="oauth") if self._gate else retry_after
            raise RateLimitedError(f"rate_limited: the Pixiv OAuth endpoint answered HTTP {status} (Rate Limit)",
                                   status=status, retry_after_ms=wait)
        if status >= 300 or not isinstance(body, dict):
            code = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), str) else None
            if code in TERMINAL_OAUTH_ERRORS:
                raise AuthenticationError(f"auth_failed: Pixiv OAuth answered HTTP {status} {code} ({message}): "
                                          f"{TERMINAL_OAUTH_ERRORS[code]}", status=status)
            return f"remote_http_error: the Pixiv OAuth endpoint answered HTTP {status} ({_transient_cause(status, body)})"
        access = _field(body, "access_token")
        if not isinstance(access, str) or not access:
            return "remote_http_error: the Pixiv OAuth endpoint answered without an access token"
        try:
            expires_s = int(_field(body, "expires_in") or DEFAULT_EXPIRES_S)
        except (TypeError, ValueError):
            expires_s = DEFAULT_EXPIRES_S
        self._access = access
        self._expires_at = self._now() + max(0, expires_s) * 1000
        self._log("info", "Pixiv access token refreshed", event="pixiv.token_refreshed", account_id=self._account,
                  expires_in_s=expires_s)
        if self._gate is not None:
            self._gate.succeeded()
        rotated = _field(body, "refresh_token")
        if isinstance(rotated, str) and rotated and rotated != refresh:
            self._rotate(refresh, rotated)
        return None

    def _rotate(self, old: str, new: str) -> None:
        self._token.replace(new)  # this container uses the newest token from now on
        persisted = False
        if self._token.ssm_name is not None and self._store is not None:
            lost, self._lost = (self._lost if self._lost is not None and fingerprint(old) != self._lost[0] else None), None
            if self._store.rotate_token(self._account, fingerprint(old), fingerprint(new), self._now(), lost=lost):
                try:
                    self._token.persist(new)
                    persisted = True
                except Exception as exc:  # noqa: BLE001 - the access token works; the next refresh retries
                    self._log("warning", "rotated Pixiv refresh token could not be written to SSM",
                              event="pixiv.token_persist_failed", account_id=self._account, error_type=type(exc).__name__)
                if lost is not None and persisted:
                    self._log("warning", "Pixiv refresh token healed: the rotation the guard named never reached SSM "
                              "(its container is gone); this container's rotation replaced it", event="pixiv.token_healed",
                              account_id=self._account, cause="rotation_lost")
        self._log("info", "Pixiv refresh token rotated", event="pixiv.token_rotated", account_id=self._account,
                  persisted=persisted)


def _retry_after_ms(response: httpx.Response, now_ms: int) -> int | None:
    raw = (response.headers.get("retry-after") or "").strip()
    if not raw:
        return None
    if ascii_digits(raw):
        return int(raw) * 1000
    try:
        from email.utils import parsedate_to_datetime

        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0, int(when.timestamp() * 1000) - now_ms)


retry_after_ms = _retry_after_ms
