"""Event callbacks: which URLs may be called, and how each call is signed.

A ``callback_url`` comes from a consumer and is untrusted. It is vetted twice, with the same
rules: when the Task is admitted (a refusal is a 400 naming ``callback_url``) and again right
before every send, against the address the request will actually connect to, so a name that
later resolves somewhere else (DNS rebinding) cannot reach inside the network:

* HTTPS only, no user-info, a host name; an internationalised name is used in its ASCII form
  (``exämple.com`` is ``xn--exmple-cua.com``: what DNS resolves and what the ``Host`` header
  carries), and one that has none is refused;
* every address the host resolves to must be globally routable by the explicit tables of
  ``domain/network.py`` (never the interpreter's ``is_*`` tables, which change between versions): loopback,
  private, link-local, CGNAT, site-local, unique-local, multicast, documentation, benchmarking,
  reserved, unspecified and cloud metadata addresses are refused, and an IPv6 address that carries
  an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) is judged by what it carries;
* a host listed in ``jobs.callbackAllowHosts`` is exempt from both rules (local development).

Signing follows Standard Webhooks: ``webhook-signature: v1,<base64 HMAC-SHA256 of
"<webhook-id>.<webhook-timestamp>.<body>">``. A secret written ``whsec_<base64>`` is used as the
decoded bytes (what Standard Webhooks libraries expect); any other secret as its UTF-8 bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence
from urllib.parse import SplitResult, quote, urlsplit

from .network import address_refusal

Resolver = Callable[[str, int], Sequence[str]]  # (host, port) -> IP address strings

class CallbackRefused(Exception):
    """The URL may not be called. ``reason`` is a short code for ``detail.reason`` and logs."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class CallbackUnresolvable(Exception):
    """The host did not resolve (at send time this is retryable: DNS may be down)."""


@dataclass(frozen=True)
class VettedUrl:
    """A URL that passed vetting, and the one address a request to it must connect to."""

    scheme: str
    host: str  # lower-cased host name (or address literal) as written
    port: int
    target: str  # path + query, as sent in the request line
    address: str  # the vetted IP address
    allowlisted: bool

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def connect_url(self) -> str:
        addr = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{addr}:{self.port}{self.target}"


def _split(url: str) -> SplitResult:
    try:
        parts = urlsplit(url.strip())
        parts.port  # raises ValueError for a bad port
    except ValueError as exc:
        raise CallbackRefused("invalid_url", f"callback_url is not a valid URL ({exc})") from None
    return parts


def vet_callback_url(url: str, allow_hosts: Iterable[str], resolver: Resolver) -> VettedUrl:
    """Vet a callback URL and pick the address to connect to. Raises CallbackRefused, or
    CallbackUnresolvable when the host name does not resolve."""
    parts = _split(url)
    scheme = (parts.scheme or "").lower()
    host = (parts.hostname or "").lower().rstrip(".")
    if scheme not in ("https", "http") or not host:
        raise CallbackRefused("invalid_url", "callback_url must be an absolute https URL")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise CallbackRefused("invalid_url", "callback_url host is not a valid internationalised domain name") from None
    if parts.username is not None or parts.password is not None:
        raise CallbackRefused("userinfo_not_allowed", "callback_url must not carry user information")
    allowed = host in {h.strip().lower().rstrip(".") for h in allow_hosts if h and h.strip()}
    if scheme != "https" and not allowed:
        raise CallbackRefused("https_required", "callback_url must use https")
    port = parts.port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = [a for a in resolver(host, port) if a]
        except CallbackRefused:
            raise
        except Exception as exc:
            raise CallbackUnresolvable(f"callback_url host does not resolve: {type(exc).__name__}") from None
        if not addresses:
            raise CallbackUnresolvable("callback_url host does not resolve")
    if not allowed:
        # Every address must be public: a name with one private answer could be steered to it.
        for address in addresses:
            refusal = address_refusal(address)
            if refusal is not None:
                raise CallbackRefused(refusal, "callback_url resolves to an address that may not be called")
    return VettedUrl(scheme, host, port, target, addresses[0], allowed)


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


# -- signing (Standard Webhooks) ----------------------------------------------------------------


def signing_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret[len("whsec_"):], validate=True)
        except ValueError:
            pass
    return secret.encode("utf-8")


def sign(secret: str, message_id: str, timestamp_s: int, body: bytes) -> str:
    signed = f"{message_id}.{int(timestamp_s)}.".encode("utf-8") + body
    digest = hmac.new(signing_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def verify(secret: str, message_id: str, timestamp_s: str | int, body: bytes, signature_header: str) -> bool:
    """What a consumer does: recompute and compare with every ``v1,`` signature in the header."""
    expected = sign(secret, message_id, int(timestamp_s), body)
    return any(hmac.compare_digest(expected, candidate) for candidate in signature_header.split(" ") if candidate)


def header_value(value: str) -> str:
    """A header-safe spelling of a key that may carry any characters (percent-encoded UTF-8)."""
    return quote(value, safe="!#$&'()*+,/:;=?@[]~-._")


__all__ = [
    "CallbackRefused", "CallbackUnresolvable", "Resolver", "VettedUrl", "address_refusal", "header_value", "sign",
    "signing_key", "verify", "vet_callback_url",
]
