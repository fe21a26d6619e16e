"""The work source and the Pixiv account: ``source``, ``pixiv``, ``network`` and ``download``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .base import _SECRET_REF, ID_PATTERN, _base_url, _Model

class SourceBaseUrls(_Model):
    """Where the Pixiv source sends its requests: each key optional, the real host by default."""

    oauth: str | None = None
    api: str | None = None
    image: str | None = None

    @field_validator("oauth", "api", "image")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        return _base_url(value)


class SourceConfig(_Model):
    kind: Literal["catalog", "pixiv"] = "catalog"
    path: str | None = None
    pageSize: int = Field(default=30, ge=1, le=500)
    baseUrls: SourceBaseUrls | None = None  # pixiv only: the local fake, or a test's loopback server

    @model_validator(mode="after")
    def _path(self) -> "SourceConfig":
        if self.kind == "catalog" and not self.path:
            raise ValueError("path: required for a catalog source")
        return self


# PixivFlow's placeholder test for the refresh token (its token manager's isPlaceholderToken):
# the sample configs ship "YOUR_REFRESH_TOKEN"; a real token is far longer than 10 characters.
PLACEHOLDER_REFRESH_TOKEN = "YOUR_REFRESH_TOKEN"
PLACEHOLDER_MIN_LENGTH = 10
# Where a placeholder's real token is looked up: the variable PixivFlow itself reads, resolved like
# every secret (environment, then SSM ``<RouteSecretsPath>/PIXIV_REFRESH_TOKEN``).
PLACEHOLDER_TOKEN_NAME = "PIXIV_REFRESH_TOKEN"
# PixivFlow's environment overrides of the pixiv block (its applyEnvironmentOverrides).
ENV_OVERRIDES = {"clientId": "PIXIV_CLIENT_ID", "clientSecret": "PIXIV_CLIENT_SECRET",
                 "refreshToken": "PIXIV_REFRESH_TOKEN"}


def is_placeholder_refresh_token(value: str | None) -> bool:
    """True for a refresh token PixivFlow treats as "none given": empty, the sample text, or
    shorter than 10 characters. A ``${VAR}`` reference is never a placeholder (it is >= 10 long
    only by accident in PixivFlow; here it is a reference and resolved as one)."""
    text = (value or "").strip()
    if _SECRET_REF.fullmatch(text):
        return False
    return text == PLACEHOLDER_REFRESH_TOKEN or len(text) < PLACEHOLDER_MIN_LENGTH


class PixivConfig(_Model):
    """PixivFlow's own ``pixiv`` block: the Pixiv App API account (``docs/explanation/pixiv-source.md``).

    ``refreshToken``, ``clientId``, ``clientSecret`` and ``deviceToken`` may be ``${VAR}``
    references (environment, then SSM below ``RouteSecretsPath``), resolved when the
    first Pixiv request needs them, never at load time, never logged. ``PIXIV_CLIENT_ID``,
    ``PIXIV_CLIENT_SECRET`` and ``PIXIV_REFRESH_TOKEN`` in the environment win over the config,
    as in PixivFlow. A placeholder refresh token (``is_placeholder_refresh_token``) gives way to
    ``PIXIV_REFRESH_TOKEN`` (environment, then SSM); with neither, the first request fails with a
    configuration error naming ``pixiv.refreshToken``.
    """

    refreshToken: str | None = Field(default=None, repr=False)
    accountId: str = Field(default="default", pattern=ID_PATTERN)
    clientId: str | None = None
    clientSecret: str | None = Field(default=None, repr=False)
    userAgent: str | None = None
    deviceToken: str | None = None  # PixivFlow sends "pixiv"; the refresh grant does not need it


class ProxyConfig(_Model):
    enabled: bool = False
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    protocol: Literal["http", "https", "socks4", "socks5"] = "http"
    username: str | None = None
    password: str | None = Field(default=None, repr=False)  # may be a ${VAR} reference

    @model_validator(mode="after")
    def _host(self) -> "ProxyConfig":
        if self.enabled and not (self.host and self.port):
            raise ValueError("host: host and port are required when the proxy is enabled")
        if self.enabled and self.protocol.startswith("socks"):
            # The layer ships httpx without SOCKS support (no socksio), so a SOCKS proxy
            # would make every function fail at start. Refused here, where `config check` says it,
            # rather than supported: an HTTP CONNECT proxy serves Pixiv's HTTPS hosts just as well
            # and keeps one proxy code path.
            raise ValueError(f"protocol: {self.protocol} proxies are not supported by this runtime; "
                             "use an http or https (CONNECT) proxy")
        return self


class NetworkConfig(_Model):
    """PixivFlow's ``network`` block, as the Pixiv source honours it.

    ``retries`` is the number of quick retries of a 5xx answer or a timeout (after 1 s, 2 s, ...);
    ``requestPacingMs`` the least time between two App API requests of one account, across every
    container (plus up to 25 % jitter). ``retryDelay`` is accepted for compatibility; the quick-retry steps are fixed.
    """

    timeoutMs: int = Field(default=30_000, ge=1000, le=120_000)
    retries: int = Field(default=2, ge=0, le=5)
    retryDelay: int | None = None
    requestPacingMs: int = Field(default=1000, ge=0, le=60_000)
    proxy: ProxyConfig | None = None


class DownloadConfig(_Model):
    candidateScanLimit: int | None = None
    requestDelay: int = Field(default=500, ge=0, le=60_000)  # ms between two search pages (PixivFlow)
    # Lifetime of the presigned GET URL a delivery payload carries per stored file. Bounded by
    # SigV4 (7 days) and, in Lambda, by the role session that signs it (a few hours).
    assetUrlTtlSeconds: int = Field(default=43_200, ge=60, le=604_800)


def credential_check_warnings(pixiv: PixivConfig | None, env: dict[str, str] | Any, secrets_path: str | None) -> list[str]:
    """What ``config check`` cannot tell about the Pixiv credentials from where it runs: a
    ``${VAR}`` no environment variable answers (it may be in SSM), and a placeholder refresh token
    without ``PIXIV_REFRESH_TOKEN``. Names only, never a value."""
    if pixiv is None:
        return []
    where = f"SSM {secrets_path}/<NAME>" if secrets_path else "SSM below RouteSecretsPath"
    out = []
    for key in ("clientId", "clientSecret", "refreshToken", "deviceToken"):
        value = getattr(pixiv, key)
        override = ENV_OVERRIDES.get(key)
        if override and (env.get(override) or "").strip():
            continue
        if key == "refreshToken" and is_placeholder_refresh_token(value):
            out.append(f"pixiv.refreshToken: a placeholder; {PLACEHOLDER_TOKEN_NAME} is not set here, so the token "
                       f"must be in {where} (not checked); without it every cell ends configuration_error")
            continue
        missing = [name for name in _SECRET_REF.findall(value or "") if not (env.get(name[2:-1]) or "").strip()]
        if missing:
            out.append(f"pixiv.{key}: {', '.join(missing)} not set here; read from {where} at the first request "
                       "(not checked)")
    return out
