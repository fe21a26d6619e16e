"""The Pixiv hosts and the app identity real clients present (docs/explanation/pixiv-source.md).

The client id, client secret and hash secret are the official iOS/Android app's PUBLIC values
(published by pixivpy and gallery-dl as class constants, and by PixivFlow in its default config):
they name the app, they are not a user's secret. The user's secret is the refresh token.

The headers follow gallery-dl's iOS identity, and the OS headers always agree with the
User-Agent: a UA override that names another platform gets that platform's OS headers, or
none when its platform cannot be read (a mismatched pair is exactly what real clients avoid).
"""

from __future__ import annotations

import re

OAUTH_BASE = "https://oauth.secure.pixiv.net"
API_BASE = "https://app-api.pixiv.net"
IMAGE_BASE = "https://i.pximg.net"
TOKEN_PATH = "/auth/token"

# Hosts whose absolute URLs Pixiv hands out and we follow (re-based onto the configured bases).
API_HOSTS = frozenset({"app-api.pixiv.net"})
IMAGE_HOSTS = frozenset({"i.pximg.net"})
PLACEHOLDER_HOST = "s.pximg.net"  # restricted placeholders (limit_*.png): never downloaded

CLIENT_ID = "MOBrBDS8blbauoSck0ZfDbtuzpyT"
CLIENT_SECRET = "lsACyCD94FhDUtGTXi3QzcFE2uU1hqtDaKeqrdwj"
HASH_SECRET = "28c1fdd170a5204386cb1313c7077b34f83e4aaf4aa829ce78c231e05b0bae2c"

APP_VERSION = "7.19.1"
OS_VERSION = "16.7.2"
USER_AGENT = f"PixivIOSApp/{APP_VERSION} (iOS {OS_VERSION}; iPhone12,8)"
# The image host answers 403 without a Referer; the App API's own origin is what the apps send.
REFERER = "https://app-api.pixiv.net/"

_UA = re.compile(r"^Pixiv(IOS|Android)App/([0-9][0-9.]*) \((?:iOS|Android) ([0-9][0-9.]*)[;)]")


def identity_headers(user_agent: str | None = None) -> dict[str, str]:
    """User-Agent plus the App-OS headers that agree with it."""
    ua = user_agent or USER_AGENT
    match = _UA.match(ua)
    headers = {"User-Agent": ua}
    if match:
        platform, app_version, os_version = match.groups()
        headers.update({"App-OS": platform.lower(), "App-OS-Version": os_version, "App-Version": app_version})
    return headers
