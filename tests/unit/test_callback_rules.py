"""Callback URLs are untrusted (DESIGN §11): the vetting rules, and Standard Webhooks signing.

The resolver is a dict: no real DNS lookup ever happens here."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from pixivflow.domain.callbacks import (
    CallbackRefused, CallbackUnresolvable, address_refusal, header_value, sign, signing_key, verify, vet_callback_url,
)

DNS = {
    "consumer.example": ["93.184.216.34"],
    "internal.example": ["10.1.2.3"],
    "mixed.example": ["93.184.216.34", "192.168.0.7"],
    "localhost": ["127.0.0.1"],
    "xn--exmple-cua.com": ["93.184.216.34"],  # exämple.com
    "xn--fsq.xn--0zwm56d": ["10.9.8.7"],  # 例.测试, private
}


def resolver(host, port):
    if host not in DNS:
        raise OSError("NXDOMAIN")
    return DNS[host]


def refusal(url, allow=()):
    with pytest.raises(CallbackRefused) as info:
        vet_callback_url(url, allow, resolver)
    return info.value.reason


@pytest.mark.parametrize("url,reason", [
    ("http://consumer.example/cb", "https_required"),
    ("ftp://consumer.example/cb", "invalid_url"),
    ("consumer.example/cb", "invalid_url"),
    ("https:///nohost", "invalid_url"),
    ("https://user:pw@consumer.example/cb", "userinfo_not_allowed"),
    ("https://consumer.example:99999/cb", "invalid_url"),
    ("https://127.0.0.1/cb", "loopback_address"),
    ("https://127.8.9.10:8443/cb", "loopback_address"),
    ("https://[::1]/cb", "loopback_address"),
    ("https://[::ffff:127.0.0.1]/cb", "loopback_address"),
    ("https://10.0.0.1/cb", "private_address"),
    ("https://172.16.5.4/cb", "private_address"),
    ("https://192.168.1.1/cb", "private_address"),
    ("https://[fd12:3456::1]/cb", "private_address"),
    ("https://169.254.169.254/latest/meta-data", "metadata_address"),
    ("https://[fd00:ec2::254]/", "metadata_address"),
    ("https://169.254.1.1/cb", "link_local_address"),
    ("https://[fe80::1]/cb", "link_local_address"),
    ("https://100.64.0.1/cb", "cgnat_address"),
    ("https://0.0.0.0/cb", "reserved_address"),
    ("https://224.0.0.1/cb", "reserved_address"),
    ("https://internal.example/cb", "private_address"),
    ("https://mixed.example/cb", "private_address"),  # one private answer is enough to refuse
    ("https://localhost/cb", "loopback_address"),
])
def test_refused_urls(url, reason):
    assert refusal(url) == reason


def test_a_public_https_url_is_vetted_with_the_address_to_connect_to():
    vetted = vet_callback_url("https://Consumer.Example./api/v1/events?tenant=bot1", [], resolver)
    assert (vetted.scheme, vetted.host, vetted.port, vetted.target, vetted.address, vetted.allowlisted) == (
        "https", "consumer.example", 443, "/api/v1/events?tenant=bot1", "93.184.216.34", False)
    assert vetted.connect_url == "https://93.184.216.34:443/api/v1/events?tenant=bot1"
    assert vetted.host_header == "consumer.example"
    assert vet_callback_url("https://consumer.example:8443", [], resolver).host_header == "consumer.example:8443"


def test_an_allowlisted_host_is_exempt_from_https_and_the_address_rules():
    vetted = vet_callback_url("http://127.0.0.1:8081/hook", ["127.0.0.1"], resolver)
    assert (vetted.address, vetted.port, vetted.allowlisted, vetted.connect_url) == (
        "127.0.0.1", 8081, True, "http://127.0.0.1:8081/hook")
    assert vet_callback_url("http://LOCALHOST:9/x", ["localhost"], resolver).address == "127.0.0.1"
    # the exemption is per host: another loopback host is still refused
    assert refusal("http://127.0.0.2:8081/hook", ["127.0.0.1"]) == "https_required"
    assert refusal("https://127.0.0.2:8081/hook", ["127.0.0.1"]) == "loopback_address"


def test_an_unresolvable_host_is_its_own_error():
    with pytest.raises(CallbackUnresolvable):
        vet_callback_url("https://nowhere.example/cb", [], resolver)
    with pytest.raises(CallbackUnresolvable):
        vet_callback_url("https://empty.example/cb", [], lambda h, p: [])


def test_public_addresses_pass():
    for address in ("93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"):
        assert address_refusal(address) is None, address


def test_signatures_are_standard_webhooks():
    secret = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
    body = b'{"event_id":"evt-1-1"}'
    signature = sign(secret, "msg_1", 1_790_000_000, body)
    expected = base64.b64encode(hmac.new(b"0123456789abcdef0123456789abcdef", b"msg_1.1790000000." + body,
                                         hashlib.sha256).digest()).decode()
    assert signature == f"v1,{expected}"
    assert verify(secret, "msg_1", "1790000000", body, f"v1,bogus {signature}")
    assert not verify(secret, "msg_1", "1790000001", body, signature)
    assert not verify(secret, "msg_1", "1790000000", body + b" ", signature)
    assert signing_key("plain-secret") == b"plain-secret"


def test_header_values_are_ascii_whatever_the_key():
    value = header_value("job-event:plan@manual-键 1:evt-1-2")
    assert value.isascii() and " " not in value and "\n" not in value
    assert header_value("job-event:plan@manual-k:evt-1-2") == "job-event:plan@manual-k:evt-1-2"


def test_an_internationalised_host_is_resolved_and_sent_in_its_ascii_form():
    """``exämple.com`` passed admission, then every send failed on a non-ASCII Host header."""
    vetted = vet_callback_url("https://ExÄmple.com./hook?x=1", (), resolver)
    assert (vetted.host, vetted.host_header, vetted.address) == ("xn--exmple-cua.com", "xn--exmple-cua.com", "93.184.216.34")
    assert vetted.host_header.isascii()
    assert refusal("https://例.测试/hook") != "invalid_url"  # judged by its address like any other name
    assert refusal("https://a\u200b..b/hook") == "invalid_url"  # no ASCII form: refused at admission
