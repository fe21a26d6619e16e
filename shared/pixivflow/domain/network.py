"""Which IP addresses a server may connect to on a consumer's behalf: explicit tables.

The rule is this module's, not the interpreter's: ``ipaddress``'s ``is_global`` / ``is_private`` /
``is_reserved`` tables changed between Python 3.11 (this machine) and 3.13 (Lambda) -- 3.11 called
``2002:7f00:1::`` (6to4 around 127.0.0.1) global -- so nothing here calls an ``is_*`` property.
``ipaddress`` only parses and compares. The tables follow the IANA special-purpose address
registries (RFC 6890 and successors); a table test (tests/unit/test_network_tables.py) pins them.

Addresses that carry an IPv4 address inside them are judged by what they carry, because a
gateway on the path delivers to that IPv4 address:

* IPv4-mapped ``::ffff:0:0/96`` and the deprecated IPv4-compatible ``::/96``;
* NAT64 ``64:ff9b::/96`` (RFC 6052: the low 32 bits);
* 6to4 ``2002::/16`` (RFC 3056: bits 16..47);
* Teredo ``2001::/32`` (RFC 4380: the server in bits 32..63, the client in the low 32 bits,
  inverted) -- refused when either is.

Anything outside global unicast ``2000::/3`` is refused as reserved. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from typing import Union

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

# Reasons (``detail.reason`` of a refused callback_url).
METADATA = "metadata_address"
LOOPBACK = "loopback_address"
LINK_LOCAL = "link_local_address"
CGNAT = "cgnat_address"
PRIVATE = "private_address"
RESERVED = "reserved_address"
INVALID = "invalid_address"

# Cloud instance-metadata endpoints, named before the ranges that contain them.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS / GCP / Azure instance metadata
    "169.254.170.2",  # ECS task metadata
    "100.100.100.200",  # Alibaba Cloud metadata
    "fd00:ec2::254",  # AWS IMDS over IPv6
))

# (network, reason) -- IANA IPv4 Special-Purpose Address Registry, the ranges not globally reachable.
IPV4_TABLE: tuple[tuple[ipaddress.IPv4Network, str], ...] = tuple((ipaddress.IPv4Network(net), reason) for net, reason in (
    ("0.0.0.0/8", RESERVED),  # "this network" (0.0.0.0 unspecified)
    ("10.0.0.0/8", PRIVATE),
    ("100.64.0.0/10", CGNAT),  # shared address space (carrier-grade NAT)
    ("127.0.0.0/8", LOOPBACK),
    ("169.254.0.0/16", LINK_LOCAL),
    ("172.16.0.0/12", PRIVATE),
    ("192.0.0.0/24", RESERVED),  # IETF protocol assignments
    ("192.0.2.0/24", RESERVED),  # documentation TEST-NET-1
    ("192.88.99.0/24", RESERVED),  # deprecated 6to4 relay anycast
    ("192.168.0.0/16", PRIVATE),
    ("198.18.0.0/15", RESERVED),  # benchmarking
    ("198.51.100.0/24", RESERVED),  # documentation TEST-NET-2
    ("203.0.113.0/24", RESERVED),  # documentation TEST-NET-3
    ("224.0.0.0/4", RESERVED),  # multicast
    ("240.0.0.0/4", RESERVED),  # reserved, and 255.255.255.255 broadcast
))

# IPv6 ranges refused outright (those that embed an IPv4 address are handled before this table).
IPV6_TABLE: tuple[tuple[ipaddress.IPv6Network, str], ...] = tuple((ipaddress.IPv6Network(net), reason) for net, reason in (
    ("::/128", RESERVED),  # unspecified
    ("::1/128", LOOPBACK),
    ("64:ff9b:1::/48", PRIVATE),  # local-use NAT64 (RFC 8215)
    ("100::/64", RESERVED),  # discard-only
    ("2001:2::/48", RESERVED),  # benchmarking
    ("2001:db8::/32", RESERVED),  # documentation
    ("2001::/23", RESERVED),  # IETF protocol assignments (Teredo, judged by what it carries, comes first)
    ("3fff::/20", RESERVED),  # documentation (RFC 9637)
    ("5f00::/16", RESERVED),  # SRv6 SIDs
    ("fc00::/7", PRIVATE),  # unique local (ULA)
    ("fe80::/10", LINK_LOCAL),
    ("fec0::/10", PRIVATE),  # site-local (deprecated, still routed inside sites)
    ("ff00::/8", RESERVED),  # multicast
))
GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")

# IPv6 prefixes that carry an IPv4 address: (network, how to extract it as an int)
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_LOW32 = 0xFFFFFFFF
LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
LOOPBACK_V6 = ipaddress.IPv6Address("::1")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address delivers to (empty when it carries none)."""
    value = int(ip)
    if ip in _MAPPED or ip in _NAT64:
        return [ipaddress.IPv4Address(value & _LOW32)]
    if ip in _COMPATIBLE and value > 1:  # :: and ::1 are their own (unspecified, loopback)
        return [ipaddress.IPv4Address(value & _LOW32)]
    if ip in _SIX_TO_FOUR:
        return [ipaddress.IPv4Address((value >> 80) & _LOW32)]
    if ip in _TEREDO:
        return [ipaddress.IPv4Address((value >> 64) & _LOW32), ipaddress.IPv4Address(~value & _LOW32)]
    return []


def _ipv4_refusal(ip: ipaddress.IPv4Address) -> str | None:
    if ip in METADATA_ADDRESSES:
        return METADATA
    for network, reason in IPV4_TABLE:
        if ip in network:
            return reason
    return None


def refusal(ip: IPAddress) -> str | None:
    """Why ``ip`` may not be connected to on a consumer's behalf, or None (globally routable)."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _ipv4_refusal(ip)
    if ip in METADATA_ADDRESSES:
        return METADATA
    carried = embedded_ipv4(ip)
    if carried:
        reasons = [r for r in map(_ipv4_refusal, carried) if r is not None]
        return reasons[0] if reasons else None
    for network, reason in IPV6_TABLE:
        if ip in network:
            return reason
    if ip not in GLOBAL_UNICAST:
        return RESERVED
    return None


def address_refusal(address: str) -> str | None:
    """``refusal`` of an address written as text (a zone id ``%eth0`` is ignored); ``invalid_address``
    when it is not an IP address at all."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return INVALID
    return refusal(ip)


def is_loopback(address: str) -> bool:
    """127.0.0.0/8 or ::1 exactly (``pixivflow dev``'s egress guard): by table, like the rest."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in LOOPBACK_V4
    return ip == LOOPBACK_V6


__all__ = [
    "CGNAT", "GLOBAL_UNICAST", "INVALID", "IPV4_TABLE", "IPV6_TABLE", "LINK_LOCAL", "LOOPBACK", "METADATA",
    "METADATA_ADDRESSES", "PRIVATE", "RESERVED", "address_refusal", "embedded_ipv4", "is_loopback", "refusal",
]
