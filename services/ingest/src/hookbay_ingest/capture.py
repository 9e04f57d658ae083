"""Turning an HTTP request into event fields: client address, signature check (headers are
``hookbay_common.headers.join_headers``)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Sequence

from hookbay_common.settings import IPNetwork

SIGNATURE_HEADER = "x-service-signature"


def client_ip(peer: str, forwarded_for: str | None, trusted: Sequence[IPNetwork]) -> str:
    """The socket peer; when the peer is a trusted proxy, the right-most untrusted address of
    ``X-Forwarded-For`` (addresses a client wrote itself further left are not believed)."""
    if not forwarded_for or not _is_trusted(peer, trusted):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop if _is_address(hop) else peer
    return hops[0] if hops and _is_address(hops[0]) else peer


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _is_trusted(address: str, trusted: Sequence[IPNetwork]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)


def signature_valid(body: bytes, secret: str, presented: str | None) -> bool:
    """Hex HMAC-SHA256 of ``body`` keyed with ``secret``; ``sha256=`` prefix optional, any hex
    case, surrounding whitespace ignored; constant-time comparison. A missing header is invalid."""
    if presented is None:
        return False
    value = presented.strip()
    if value[:7].lower() == "sha256=":
        value = value[7:].strip()
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), value.lower().encode("ascii", "replace"))
