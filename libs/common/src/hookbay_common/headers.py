"""HTTP header handling shared by capture (ingest) and forwarding (forwarder)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

HOP_BY_HOP: Final = frozenset(
    {
        "connection", "keep-alive", "proxy-connection", "proxy-authenticate",
        "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade",
        "host", "content-length", "expect",
    }
)  # fmt: skip
"""Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus Host and
Content-Length, which the forwarding request sets for itself, and Expect."""
HOOKBAY_PREFIX: Final = "x-hookbay-"


def join_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Every header, names lowercased, repeated headers joined with ``", "`` in arrival order.
    Bytes are decoded as latin-1, so they round-trip exactly."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def forwardable(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """The captured headers to send on: without hop-by-hop headers, without the headers the
    ``Connection`` header names, and without ``X-Hookbay-*`` (only hookbay sets those)."""
    named = {token.strip().lower() for token in headers.get("connection", "").split(",")}
    return [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in headers.items()
        if name not in HOP_BY_HOP and name not in named and not name.startswith(HOOKBAY_PREFIX)
    ]
