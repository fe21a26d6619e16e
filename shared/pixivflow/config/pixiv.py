"""The work source and the Pixiv account: ``source``, ``pixiv``, ``network`` and ``download``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import ID_PATTERN, _base_url, _Model

class SourceBaseUrls(_Model):
    """Where the Pixiv source sends its requests (DESIGN §12): each key optional, the real host by default."""

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


class PixivConfig(_Model):
    """PixivFlow's own ``pixiv`` block (../shared/notes/pixiv-app-api.md §5).

    ``refreshToken`` is a secret: write it as a ``${VAR}`` reference (environment, then SSM below
    ``RouteSecretsPath``; DESIGN §7), or set ``PIXIV_REFRESH_TOKEN``. It is resolved when the
    first Pixiv request needs it, never at load time, and never logged.
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
            # Issue 24: the layer ships httpx without SOCKS support (no socksio), so a SOCKS proxy
            # would make every function fail at start. Refused here, where `config check` says it,
            # rather than supported: an HTTP CONNECT proxy serves Pixiv's HTTPS hosts just as well
            # and keeps one proxy code path.
            raise ValueError(f"protocol: {self.protocol} proxies are not supported by this runtime; "
                             "use an http or https (CONNECT) proxy")
        return self


class NetworkConfig(_Model):
    """PixivFlow's ``network`` block, as the Pixiv source honours it.

    ``retries`` is the number of quick retries of a 5xx answer or a timeout (after 1 s, 2 s, ...);
    ``requestPacingMs`` the least time between two App API requests of one container (plus up
    to 25 % jitter). ``retryDelay`` is accepted for compatibility; the quick-retry steps are fixed.
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
