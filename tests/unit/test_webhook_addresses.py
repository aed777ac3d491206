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


# -- issue 31: addresses that carry an IPv4 address, secrets in the path ------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("2002:a00:1::1", "private (6to4 10.0.0.1)"),
        ("2002:7f00:1::1", "loopback (6to4 127.0.0.1)"),
        ("2002:a9fe:a9fe::1", "link-local (6to4 169.254.169.254)"),
        ("64:ff9b::a00:1", "private (NAT64 10.0.0.1)"),
        ("64:ff9b::7f00:1", "loopback (NAT64 127.0.0.1)"),
        ("64:ff9b::a9fe:a9fe", "link-local (NAT64 169.254.169.254)"),
        # Teredo: server 65.54.227.120, client (obfuscated) 10.0.0.10.
        ("2001:0:4136:e378:8000:63bf:f5ff:fff5", "private (Teredo client 10.0.0.10)"),
        ("2002:808:808::1", None),  # 6to4 of a public address
        ("64:ff9b::808:808", None),  # NAT64 of a public address
    ],
)
def test_embedded_ipv4_addresses_are_judged_by_the_address_they_carry(address, reason):
    assert refusal(ipaddress.ip_address(address)) == reason


def test_an_allowed_network_of_the_embedded_address_lets_it_through():
    allowed = allowed_networks(("10.0.0.0/8",))
    assert refusal(ipaddress.ip_address("2002:a00:1::1"), allowed) is None
    assert refusal(ipaddress.ip_address("64:ff9b::a00:1"), allowed) is None


@pytest.mark.parametrize(
    ("url", "shown", "secret"),
    [
        (
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "https://hooks.slack.com/services/***",
            "XXXXXXXXXXXXXXXXXXXXXXXX",
        ),
        (
            "https://discord.com/api/webhooks/123456789012345678/abcDEF-ghi_jkl",
            "https://discord.com/api/webhooks/***",
            "abcDEF-ghi_jkl",
        ),
        (
            "https://x.webhook.office.com/webhookb2/aaaa-bbbb@cccc/IncomingWebhook/dd/ee",
            "https://x.webhook.office.com/webhookb2/***",
            "aaaa-bbbb@cccc",
        ),
        (
            "https://api.telegram.org/bot123456:AAEhBOweik6ad/sendMessage",
            "https://api.telegram.org/bot***/sendMessage",
            "AAEhBOweik6ad",
        ),
        (
            "https://hooks.zapier.com/hooks/catch/123/abcdef/",
            "https://hooks.zapier.com/hooks/catch/***",
            "abcdef",
        ),
        (
            "https://example.com/in/0123456789abcdefABCDEF0123/x",
            "https://example.com/in/***/x",
            "0123456789abcdefABCDEF0123",
        ),
    ],
)
def test_path_secrets_are_masked_by_rule(url, shown, secret):
    assert mask_url(url) == shown
    assert secret not in mask_url(url)
    error = describe(OSError(f"cannot reach {url} (path {url.split('/', 3)[3]})"), url)
    assert secret not in error
    assert "***" in error
    assert any(secret in s for s in url_secrets(url))


def test_secret_patterns_are_the_operators_rules():
    url = "https://example.com/custom/hunter2/go"
    assert mask_url(url) == url  # no default rule knows this path
    patterns = (r"/custom/([^/]+)",)
    assert mask_url(url, patterns) == "https://example.com/custom/***/go"
    assert "hunter2" not in describe(OSError("at /custom/hunter2/go"), url, patterns)
