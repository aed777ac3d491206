"""One webhook request, guarded (B6): resolve once, check the address, connect to it.

``post(url, body, headers, timeout, allowed=...)``:

1. resolves the URL's host ONCE (``socket.getaddrinfo``; an IP literal resolves to
   itself) and refuses the request unless EVERY address it answers is public: not
   loopback, link-local (169.254.0.0/16 and its cloud metadata service, fe80::/10),
   private (10/8, 172.16/12, 192.168/16, 100.64/10 shared space), unique-local
   (fc00::/7), multicast, unspecified, reserved or documentation space, with an
   IPv4-mapped IPv6 address (``::ffff:10.0.0.1``) judged as the IPv4 address it maps,
   and an address that carries an IPv4 address inside it judged by that address too:
   6to4 (``2002::/16``) and NAT64 (``64:ff9b::/96``) pass exactly when the IPv4 they
   embed does; Teredo (``2001::/32``) is refused whatever it embeds (its server and
   client are named when either is not public; the prefix itself is not global).
   ``WEBHOOK_ALLOWED_NETWORKS`` (CIDR) lists networks allowed anyway (a receiver on
   127.0.0.1 in development, a partner on a private link);
2. connects to the address it checked, never resolving again: the request carries
   the URL's name in its Host header and, over TLS, in SNI and the certificate check,
   so a DNS answer that changes between the check and the connection (rebinding)
   cannot move the request to another address;
3. follows no redirect: a 3xx is the receiver's answer and fails the attempt, so
   there is no second hop to check;
4. sends credentials written in the URL (``https://user:token@host/``) as HTTP Basic
   authorization, never as part of the host.

A refusal or a failure is an answer (``Answer``), never an exception; its error text
never holds the URL's credentials, its query values or the secrets its path carries
(``mask_url``, ``url_secrets``): the ledger, ``last_error`` and the logs get the
masked form. Path secrets are found by rule, ``WEBHOOK_SECRET_PATTERNS``: regular
expressions searched in the URL's path, each match's first group (or the whole match
when it has none) masked; the defaults cover Slack, Discord, Microsoft Teams,
Mattermost, Zapier, Telegram and any path segment of 24 or more token characters. Proxies
(``HTTPS_PROXY``) are not used: the check is of the address the request goes to.
"""

from __future__ import annotations

import base64
import email.utils
import functools
import http.client
import ipaddress
import re
import socket
import ssl
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ultimate_jobs.declaration.redaction import (
    DEFAULT_SECRET_PATTERNS as DEFAULT_SECRET_PATTERNS,
)
from ultimate_jobs.declaration.redaction import (
    scrub_text,
)

MAX_ERROR_CHARS = 300
MASK = "***"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@functools.lru_cache(maxsize=16)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


def path_secrets(
    path: str, patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS
) -> list[str]:
    """The secrets ``patterns`` find in a URL path (group 1, else the whole match)."""
    found: list[str] = []
    for pattern in _compiled(tuple(patterns)):
        for match in pattern.finditer(path):
            secret = match.group(1) if pattern.groups else match.group(0)
            if secret and secret not in found:
                found.append(secret)
    return found


def _masked_path(path: str, patterns: Sequence[str]) -> str:
    for secret in sorted(path_secrets(path, patterns), key=len, reverse=True):
        path = path.replace(secret, MASK)
    return path


@dataclass(frozen=True, slots=True)
class Answer:
    """What one request came to: a status, or why there was none."""

    status: int | None
    retry_after: float | None = None
    error: str = ""
    refused: bool = False  # the address check refused it: no request was made

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


# -- what a URL may show ----------------------------------------------------------------


def mask_url(url: str, patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS) -> str:
    """The URL with its credentials, each query value and each path secret
    ``patterns`` find replaced by ``***``: ``https://***:***@host/hook?token=***``.
    The fragment is dropped."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except (TypeError, ValueError):
        return "<an unparsable URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    if parts.username is not None or parts.password is not None:
        netloc = (
            f"{MASK}:{MASK}@{netloc}"
            if parts.password is not None
            else f"{MASK}@{netloc}"
        )
    query = "&".join(
        f"{key}={MASK}" if value else key
        for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    )
    path = _masked_path(parts.path, patterns)
    return urllib.parse.urlunsplit((parts.scheme, netloc, path, query, ""))


def url_secrets(
    url: str, patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS
) -> list[str]:
    """The parts of ``url`` no text may show: the whole URL, its user info, its query,
    each query value and each path secret (and their decoded forms)."""
    found = {url}
    try:
        parts = urllib.parse.urlsplit(url)
        for secret in path_secrets(parts.path, patterns):
            found.update({secret, urllib.parse.unquote(secret), parts.path})
        for value in (parts.username, parts.password):
            if value:
                found.update({value, urllib.parse.unquote(value)})
        if parts.query:
            found.add(parts.query)
            found.add(f"{parts.path}?{parts.query}")
            for _, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
                if value:
                    found.update({value, urllib.parse.quote(value, safe="")})
        if "@" in parts.netloc:
            found.add(parts.netloc.rpartition("@")[0])
    except (TypeError, ValueError):
        pass
    return sorted(found, key=len, reverse=True)


def describe(
    error: BaseException, url: str, patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS
) -> str:
    """An error's text with every secret part of ``url`` masked, bounded."""
    text = f"{type(error).__name__}: {error}"
    text = text.replace(url, mask_url(url, patterns))
    secrets = url_secrets(url, patterns)
    return scrub_text(text, secrets).replace("[redacted]", MASK)[:MAX_ERROR_CHARS]


# -- which addresses a delivery may reach --------------------------------------------------


@functools.lru_cache(maxsize=64)
def allowed_networks(networks: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(n, strict=False) for n in networks)


def embedded_ipv4(address: IPAddress) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with the form carrying it:
    6to4 (2002::/16), Teredo (2001::/32: server and client) and NAT64 (64:ff9b::/96)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    if address.sixtofour is not None:
        return [("6to4", address.sixtofour)]
    if address.teredo is not None:
        server, client = address.teredo
        return [("Teredo server", server), ("Teredo client", client)]
    if address in NAT64:
        return [("NAT64", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))]
    return []


def refusal(address: IPAddress, allowed: Iterable[Network] = ()) -> str | None:
    """Why a delivery may not reach ``address`` (None: it may). An IPv4-mapped IPv6
    address is judged as the IPv4 address it maps, a 6to4 or NAT64 one as the IPv4 it
    embeds; a Teredo one is refused, naming an embedded address that is not public."""
    allowed = tuple(allowed)
    if any(address in network for network in allowed):
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return refusal(address.ipv4_mapped, allowed)
    carried = embedded_ipv4(address)
    for form, inner in carried:
        if (reason := refusal(inner, allowed)) is not None:
            return f"{reason} ({form} {inner})"
    if carried and not carried[0][0].startswith("Teredo"):
        return None  # 6to4 and NAT64 reach the IPv4 they carry: it passed
    if isinstance(address, ipaddress.IPv6Address) and address in UNIQUE_LOCAL:
        return "unique-local"
    for kind, test in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("unspecified", address.is_unspecified),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
    ):
        if test:
            return kind
    if not address.is_global:
        return "non-public"
    return None


def shown_address(address: IPAddress) -> str:
    """An address as a message names it (an IPv4-mapped one with its IPv4 form)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return f"{address} (IPv4-mapped {address.ipv4_mapped})"
    return str(address)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to, in the resolver's order, each once."""
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[IPAddress] = []
    for *_, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address not in out:
            out.append(address)
    return out


def checked_address(
    host: str, port: int, allowed: Sequence[Network]
) -> tuple[IPAddress | None, str]:
    """The address to connect to, or None and why not (every answer must pass)."""
    addresses = resolve(host, port)
    if not addresses:
        return None, f"{host} resolves to no address"
    for address in addresses:
        reason = refusal(address, allowed)
        if reason is not None:
            return None, (
                f"{host} resolves to {shown_address(address)}, a {reason} address "
                "(list its network in WEBHOOK_ALLOWED_NETWORKS to allow it)"
            )
    return addresses[0], ""


# -- the request ---------------------------------------------------------------------------


def retry_after_seconds(value: str | None, *, date: str | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks for: delta-seconds, or an HTTP-date against
    the response's own ``Date`` (else the local clock). 0, a past date or an unreadable
    value states nothing (None)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(int(value))
        return seconds if seconds > 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
        base = email.utils.parsedate_to_datetime(date) if date else datetime.now(UTC)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None or base.tzinfo is None:
        return None
    seconds = (when - base).total_seconds()
    return seconds if seconds > 0 else None


def _connection(
    parts: urllib.parse.SplitResult, address: IPAddress, timeout: float
) -> http.client.HTTPConnection:
    host = parts.hostname or ""
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            host, parts.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(host, parts.port, timeout=timeout)
    pinned = str(address)

    def connect_to_the_checked_address(
        where: tuple[str, int], timeout: float | None = None, source: object = None
    ) -> socket.socket:
        # http.client connects to (host, port); the host is only the Host header and
        # the TLS name here: the socket goes to the address that was checked.
        return socket.create_connection((pinned, where[1]), timeout)

    connection._create_connection = connect_to_the_checked_address  # type: ignore[attr-defined]
    return connection


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
    *,
    allowed: Sequence[Network] = (),
    secret_patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS,
) -> Answer:
    """POST once to a checked address, following no redirect (see the module)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        # The parser's message quotes the part it choked on: say nothing of it.
        return Answer(None, error="ValueError: the endpoint URL cannot be parsed")
    try:
        address, why = checked_address(parts.hostname or "", port, allowed)
    except (OSError, ValueError, UnicodeError) as exc:
        return Answer(None, error=describe(exc, url, secret_patterns))
    if address is None:
        return Answer(None, error=why[:MAX_ERROR_CHARS], refused=True)
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    sent = dict(headers)
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        secret = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
        sent["Authorization"] = f"Basic {token}"
    connection = _connection(parts, address, timeout)
    try:
        connection.request("POST", target, body=body, headers=sent)
        response = connection.getresponse()
        response.read(65536)
        if 200 <= response.status < 300:
            return Answer(response.status)
        return Answer(
            response.status,
            retry_after_seconds(
                response.headers.get("Retry-After"), date=response.headers.get("Date")
            ),
            f"HTTP {response.status} {response.reason}"[:MAX_ERROR_CHARS],
        )
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # Refused, reset, timed out, a TLS failure, a broken answer.
        return Answer(None, error=describe(exc, url, secret_patterns))
    finally:
        connection.close()
