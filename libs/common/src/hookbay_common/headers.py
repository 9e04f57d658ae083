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
OWS: Final = " \t"
"""Optional whitespace around a field value (RFC 9110 §5.6.3): not part of the value (§5.5)."""


def join_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Every header, names lowercased, values without the optional whitespace around them,
    repeated headers joined with ``", "`` in arrival order; an empty line of a repeated header
    adds nothing to the joined value (an empty list element, RFC 9110 §5.6.1). Bytes are decoded
    as latin-1, so they round-trip exactly.

    What comes out can be sent again by any HTTP/1.1 client: the parser in front of this
    (llhttp) has already refused control characters, obs-fold and bare CR or LF, and with the
    surrounding whitespace gone a value is exactly RFC 9110's ``field-value`` (h11, behind
    httpx, refuses trailing whitespace). docs/owners/receiving.md, "Header bytes"."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1").strip(OWS)
        if name not in headers:
            headers[name] = value
        elif value:
            headers[name] = f"{headers[name]}, {value}" if headers[name] else value
    return headers


def forwardable(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """The captured headers to send on: without hop-by-hop headers, without the headers the
    ``Connection`` header names, and without ``X-Hookbay-*`` (only hookbay sets those). Values
    are the captured bytes; whitespace around a value, which only an event captured by an
    earlier version can hold, is left out (no client would send it)."""
    named = {token.strip().lower() for token in headers.get("connection", "").split(",")}
    return [
        (name.encode("latin-1"), value.strip(OWS).encode("latin-1"))
        for name, value in headers.items()
        if name not in HOP_BY_HOP and name not in named and not name.startswith(HOOKBAY_PREFIX)
    ]
