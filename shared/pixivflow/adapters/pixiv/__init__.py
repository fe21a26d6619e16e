"""The Pixiv App API work source: client, OAuth, rate gate, downloads.

``build_source(config, ...)`` wires it from a PixivFlow config: the ``pixiv`` block (account,
refresh token reference, client id/secret and UA overrides, with PixivFlow's
``PIXIV_REFRESH_TOKEN`` / ``PIXIV_CLIENT_ID`` / ``PIXIV_CLIENT_SECRET`` environment overrides),
``network`` (timeout, quick retries, pacing, proxy), ``download.requestDelay`` and
``source.baseUrls``. Building it creates no AWS client and sends no request.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping
from urllib.parse import quote

import httpx

from ...domain.errors import ConfigError
from ..http_pools import tls_context
from .secrets import SecretMissing, SecretResolver, expand, references
from . import constants
from .account_store import DynamoPixivAccounts, MemoryPixivAccounts
from .auth import ConfiguredSecret, PixivAuth, RefreshToken
from .client import Bases, PixivClient
from .gate import RateGate
from .governor import AccountGovernor
from .source import PixivSource

__all__ = ["AccountGovernor", "Bases", "DynamoPixivAccounts", "MemoryPixivAccounts", "PixivAuth", "PixivClient", "PixivSource",
           "RateGate", "RefreshToken", "build_source"]


def _proxy_url(network: Any, resolver: SecretResolver) -> str | None:
    proxy = getattr(network, "proxy", None)
    if proxy is None or not proxy.enabled:
        return None
    # A SOCKS proxy never gets here: config/pixiv.py refuses it where `config check` says so.
    auth = ""
    if proxy.username:
        password = proxy.password or ""
        if references(password):
            try:
                password = expand(password, resolver.lookup)
            except SecretMissing as exc:
                raise ConfigError(f"network.proxy.password: {exc}") from None
        auth = quote(proxy.username, safe="") + (":" + quote(password, safe="") if password else "") + "@"
    return f"{proxy.protocol}://{auth}{proxy.host}:{proxy.port}"


def build_source(config: Any, *, now_ms: Callable[[], int], uniform: Callable[[], float],
                 store: Any = None, sleep: Callable[[float], None] = time.sleep, resolver: SecretResolver | None = None,
                 env: Mapping[str, str] | None = None, log: Callable[..., None] | None = None,
                 transport: httpx.BaseTransport | None = None) -> PixivSource:
    """The Pixiv source of ``config`` (a ``PixivFlowConfig``). ``store`` is the account store
    (``DynamoPixivAccounts`` in a deployment); without one, the gate and rotation guard are
    in memory (a single process)."""
    env = env if env is not None else os.environ
    pixiv = config.pixiv
    network = config.network
    account = pixiv.accountId if pixiv else "default"
    resolver = resolver or SecretResolver(env=env)
    log = log or (lambda *a, **k: None)
    base_urls = config.source.baseUrls
    bases = Bases(
        oauth=(base_urls.oauth if base_urls and base_urls.oauth else constants.OAUTH_BASE),
        api=(base_urls.api if base_urls and base_urls.api else constants.API_BASE),
        image=(base_urls.image if base_urls and base_urls.image else constants.IMAGE_BASE),
    )
    headers = constants.identity_headers((pixiv.userAgent if pixiv else None) or None)
    client_id = ConfiguredSecret("clientId", pixiv.clientId if pixiv else None, constants.CLIENT_ID, resolver, env=env)
    client_secret = ConfiguredSecret("clientSecret", pixiv.clientSecret if pixiv else None, constants.CLIENT_SECRET,
                                     resolver, env=env)
    timeout = network.timeoutMs / 1000
    http = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)), follow_redirects=False,
                        proxy=_proxy_url(network, resolver), transport=transport, verify=tls_context())
    store = store if store is not None else MemoryPixivAccounts()
    gate = RateGate(store, account, now_ms=now_ms, sleep=sleep, uniform=uniform, pacing_ms=network.requestPacingMs, log=log)
    token = RefreshToken(pixiv.refreshToken if pixiv else None, resolver, env=env, log=log)
    auth = PixivAuth(http, token, account_id=account, oauth_base=bases.oauth, client_id=client_id,
                     client_secret=client_secret, headers=headers, now_ms=now_ms, sleep=sleep,
                     retries=network.retries, store=store, gate=gate, log=log)
    client = PixivClient(http, auth, gate, bases=bases, headers=headers, sleep=sleep, retries=network.retries, log=log)
    # schedulerRuntime.resourceGovernance.pixivAccounts.<account>.maxConcurrency permits,
    # held by a cell for its whole Pixiv work (the execution service asks source.governor).
    governance = config.schedulerRuntime.resourceGovernance.account(account)
    governor = AccountGovernor(store, account, governance.maxConcurrency, now_ms=now_ms)
    # A page's worst case: every try of it running into the timeout.
    worst_case_ms = network.timeoutMs * (network.retries + 1)
    return PixivSource(client, now_ms=now_ms, sleep=sleep, request_delay_ms=config.download.requestDelay, log=log,
                       governor=governor, fetch_worst_case_ms=worst_case_ms)
