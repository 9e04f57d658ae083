"""Turning an HTTP request into event fields: the client's address (the signature check is
``hookbay_ingest.verification``'s)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from hookbay_common.settings import IPNetwork


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
