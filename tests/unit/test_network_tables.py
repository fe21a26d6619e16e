"""The SSRF tables pinned (issue 21 item 8): the same verdict on every interpreter.

No ``ipaddress`` ``is_*`` property decides anything: the verdicts below were written from the IANA
special-purpose registries, and the module is checked not to call those properties at all."""

from __future__ import annotations

import ast
import ipaddress
from pathlib import Path

import pytest

from pixivflow.domain import network
from pixivflow.domain.network import address_refusal, embedded_ipv4, is_loopback

TABLE = [
    # IPv4
    ("0.0.0.0", "reserved_address"), ("0.1.2.3", "reserved_address"),
    ("10.0.0.1", "private_address"), ("10.255.255.255", "private_address"),
    ("100.64.0.1", "cgnat_address"), ("100.127.255.254", "cgnat_address"), ("100.128.0.1", None),
    ("100.100.100.200", "metadata_address"),
    ("127.0.0.1", "loopback_address"), ("127.255.255.254", "loopback_address"),
    ("169.254.169.254", "metadata_address"), ("169.254.170.2", "metadata_address"),
    ("169.254.1.1", "link_local_address"),
    ("172.16.0.1", "private_address"), ("172.31.255.255", "private_address"), ("172.32.0.1", None),
    ("192.0.0.8", "reserved_address"), ("192.0.2.1", "reserved_address"), ("192.88.99.1", "reserved_address"),
    ("192.168.1.1", "private_address"), ("198.18.0.1", "reserved_address"), ("198.19.255.255", "reserved_address"),
    ("198.51.100.7", "reserved_address"), ("203.0.113.9", "reserved_address"),
    ("224.0.0.1", "reserved_address"), ("239.255.255.255", "reserved_address"),
    ("240.0.0.1", "reserved_address"), ("255.255.255.255", "reserved_address"),
    ("8.8.8.8", None), ("93.184.216.34", None), ("1.1.1.1", None),
    # IPv6, outright
    ("::", "reserved_address"), ("::1", "loopback_address"),
    ("fe80::1", "link_local_address"), ("febf::1", "link_local_address"),
    ("fec0::1", "private_address"), ("feff::1", "private_address"),
    ("fc00::1", "private_address"), ("fd12:3456::1", "private_address"), ("fd00:ec2::254", "metadata_address"),
    ("ff02::1", "reserved_address"), ("2001:db8::1", "reserved_address"), ("2001:2::1", "reserved_address"),
    ("3fff::1", "reserved_address"), ("100::1", "reserved_address"), ("64:ff9b:1::1", "private_address"),
    ("2001:10::1", "reserved_address"), ("5f00::1", "reserved_address"), ("4000::1", "reserved_address"),
    ("2606:4700:4700::1111", None), ("2a00:1450:4001::200e", None),
    # IPv6 carrying IPv4: judged by what it carries
    ("::ffff:127.0.0.1", "loopback_address"), ("::ffff:169.254.169.254", "metadata_address"),
    ("::ffff:8.8.8.8", None), ("::127.0.0.1", "loopback_address"), ("::10.0.0.1", "private_address"),
    ("64:ff9b::7f00:1", "loopback_address"), ("64:ff9b::a9fe:a9fe", "metadata_address"),
    ("64:ff9b::c0a8:101", "private_address"), ("64:ff9b::808:808", None),
    ("2002:7f00:1::", "loopback_address"), ("2002:a9fe:a9fe::1", "metadata_address"),
    ("2002:a00:1::", "private_address"), ("2002:c0a8:101::", "private_address"), ("2002:6440:1::", "cgnat_address"),
    ("2002:808:808::1", None),
    # Teredo: server 8.8.8.8 (0808:0808), client = ~low32; 127.0.0.1 inverted is 80ff:fffe
    ("2001:0:808:808:0:0:80ff:fffe", "loopback_address"), ("2001:0:7f00:1::f7f7:f7f7", "loopback_address"),
    ("2001:0:808:808::f7f7:f7f7", None),
    # text that is not an address
    ("not-an-ip", "invalid_address"), ("fe80::1%eth0", "link_local_address"),
]


@pytest.mark.parametrize("address,reason", TABLE)
def test_the_table(address, reason):
    assert address_refusal(address) == reason


def test_embedded_ipv4_extraction():
    assert embedded_ipv4(ipaddress.IPv6Address("2002:7f00:1::")) == [ipaddress.IPv4Address("127.0.0.1")]
    assert embedded_ipv4(ipaddress.IPv6Address("64:ff9b::102:304")) == [ipaddress.IPv4Address("1.2.3.4")]
    assert embedded_ipv4(ipaddress.IPv6Address("2001:0:4136:e378:8000:63bf:3fff:fdd2")) == [
        ipaddress.IPv4Address("65.54.227.120"), ipaddress.IPv4Address("192.0.2.45")]  # RFC 4380's example
    assert embedded_ipv4(ipaddress.IPv6Address("2606:4700::1")) == []


def test_no_is_property_of_ipaddress_is_consulted():
    tree = ast.parse(Path(network.__file__).read_text(encoding="utf-8"))
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not {name for name in used if name.startswith("is_")}, used


def test_the_dev_egress_rule_is_127_slash_8_and_ipv6_loopback_only():
    assert all(is_loopback(a) for a in ("127.0.0.1", "127.1.2.3", "::1"))
    assert not any(is_loopback(a) for a in ("::ffff:127.0.0.1", "10.0.0.1", "8.8.8.8", "::", "localhost", "0.0.0.0"))
