"""Which addresses a webhook may reach, and what a URL may show (B6). No network."""

from __future__ import annotations

import ipaddress

import pytest

from ultimate_jobs.webhooks.transport import (
    allowed_networks,
    describe,
    mask_url,
    refusal,
    url_secrets,
)


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.31.255.255", "private"),
        ("192.168.0.1", "private"),
        ("100.64.0.1", "non-public"),  # shared address space (carrier-grade NAT)
        ("fd00::1", "unique-local"),
        ("fc00::1", "unique-local"),
        ("224.0.0.251", "multicast"),
        ("ff02::fb", "multicast"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - the address refused
        ("::", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:192.168.1.1", "private"),
        ("93.184.216.34", None),
        ("2606:2800:220:1:248:1893:25c8:1946", None),
        ("::ffff:93.184.216.34", None),
    ],
)
def test_only_public_addresses_pass(address, reason):
    assert refusal(ipaddress.ip_address(address)) == reason


def test_allowed_networks_let_their_addresses_through_and_only_those():
    allowed = allowed_networks(("127.0.0.0/8", "fd00:1::/32"))
    assert refusal(ipaddress.ip_address("127.0.0.1"), allowed) is None
    assert refusal(ipaddress.ip_address("::ffff:127.0.0.1"), allowed) is None
    assert refusal(ipaddress.ip_address("fd00:1::5"), allowed) is None
    assert refusal(ipaddress.ip_address("::1"), allowed) == "loopback"
    assert refusal(ipaddress.ip_address("10.0.0.1"), allowed) == "private"


def test_a_url_is_shown_with_its_credentials_and_query_values_masked():
    url = "https://ops:s3cret@hooks.example.com:8443/in?token=abc123&v=2&flag#frag"
    assert (
        mask_url(url)
        == "https://***:***@hooks.example.com:8443/in?token=***&v=***&flag"
    )
    assert mask_url("http://[::1]:80/x") == "http://[::1]:80/x"
    secrets = url_secrets(url)
    assert {"s3cret", "ops", "abc123", url} <= set(secrets)
    text = describe(OSError(f"cannot reach {url} (token abc123, user ops:s3cret)"), url)
    assert "s3cret" not in text and "abc123" not in text
    assert "hooks.example.com" in text
