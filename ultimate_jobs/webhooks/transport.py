"""One webhook request, guarded (B6): resolve once, check the address, connect to it.

``post(url, body, headers, timeout, allowed=...)``:

1. resolves the URL's host ONCE (``socket.getaddrinfo``; an IP literal resolves to
   itself) and refuses the request unless EVERY address it answers is public: not
   loopback, link-local (169.254.0.0/16 and its cloud metadata service, fe80::/10),
   private (10/8, 172.16/12, 192.168/16, 100.64/10 shared space), unique-local
   (fc00::/7), multicast, unspecified, reserved or documentation space, with an
   IPv4-mapped IPv6 address (``::ffff:10.0.0.1``) judged as the IPv4 address it maps.
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
never holds the URL's credentials or query values (``mask_url``, ``url_secrets``):
the ledger, ``last_error`` and the logs get the masked form. Proxies
(``HTTPS_PROXY``) are not used: the check is of the address the request goes to.
"""

from __future__ import annotations

import base64
import email.utils
import functools
import http.client
import ipaddress
import socket
import ssl
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ultimate_jobs.declaration.redaction import scrub_text

MAX_ERROR_CHARS = 300
MASK = "***"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")


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


def mask_url(url: str) -> str:
    """The URL with its credentials and each query value replaced by ``***``:
    ``https://***:***@host/hook?token=***``. The fragment is dropped."""
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
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def url_secrets(url: str) -> list[str]:
    """The parts of ``url`` no text may show: the whole URL, its user info, its query
    and each query value (and their decoded forms)."""
    found = {url}
    try:
        parts = urllib.parse.urlsplit(url)
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


def describe(error: BaseException, url: str) -> str:
    """An error's text with every secret part of ``url`` masked, bounded."""
    text = f"{type(error).__name__}: {error}"
    text = text.replace(url, mask_url(url))
    return scrub_text(text, url_secrets(url)).replace("[redacted]", MASK)[
        :MAX_ERROR_CHARS
    ]


# -- which addresses a delivery may reach --------------------------------------------------


@functools.lru_cache(maxsize=64)
def allowed_networks(networks: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(n, strict=False) for n in networks)


def refusal(address: IPAddress, allowed: Iterable[Network] = ()) -> str | None:
    """Why a delivery may not reach ``address`` (None: it may). An IPv4-mapped IPv6
    address is judged as the IPv4 address it maps."""
    if any(address in network for network in allowed):
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return refusal(address.ipv4_mapped, allowed)
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
        return Answer(None, error=describe(exc, url))
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
        return Answer(None, error=describe(exc, url))
    finally:
        connection.close()
