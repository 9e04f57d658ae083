"""Forward destinations: only http(s) URLs whose every address is publicly routable (SSRF guard).

Checked when a destination is configured and again at each delivery (addresses are re-resolved,
so a DNS change cannot turn an accepted host into an internal one).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from hookbay_common.httperrors import InvalidRequest

MAX_URL_LENGTH = 2048


class DestinationNotAllowed(InvalidRequest):
    error = "Destination not allowed"


def check_url_shape(url: str) -> str:
    """The URL itself: http(s), a host, no credentials, bounded length. Returns the host."""
    if len(url) > MAX_URL_LENGTH:
        raise DestinationNotAllowed(f"forward URL longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for an invalid port
    except ValueError as exc:
        raise DestinationNotAllowed(f"forward URL is malformed: {exc}") from None
    if parts.scheme not in {"http", "https"}:
        raise DestinationNotAllowed("forward URL must start with http:// or https://")
    if not parts.hostname:
        raise DestinationNotAllowed("forward URL has no host")
    if parts.username or parts.password:
        raise DestinationNotAllowed("forward URL must not carry credentials")
    return parts.hostname


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def check_destination(url: str, *, allow_private: bool) -> None:
    """Raise ``DestinationNotAllowed`` unless ``url`` may receive forwarded events."""
    host = check_url_shape(url)
    if allow_private:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise DestinationNotAllowed(f"forward URL host {host!r} does not resolve") from None
    blocked = sorted({str(info[4][0]) for info in infos if not is_public(str(info[4][0]))})
    if blocked:
        raise DestinationNotAllowed(
            f"forward URL host {host!r} resolves to a non-public address ({', '.join(blocked)}); "
            "set HOOKBAY_ALLOW_PRIVATE_DESTINATIONS=true to allow private destinations"
        )
