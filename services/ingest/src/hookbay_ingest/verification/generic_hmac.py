"""Type ``hmac``, for senders without a preset: the MAC (``algorithm`` sha1, sha256 or sha512,
keyed with the secret as text) of ``payload`` — a template over ``{body}`` (the raw bytes),
``{timestamp}`` (from ``timestamp_header``), ``{id}`` (from ``id_header``) and ``{url}`` (the
configured ``public_url``) — in ``header`` after ``prefix`` (case-insensitive), ``encoding`` hex
(any case) or base64. With a timestamp header, a valid signature further than ``tolerance_s``
(default 300) from now, either side, is ``timestamp_out_of_tolerance``."""

from __future__ import annotations

import re
from typing import Final

from hookbay_common.models import HmacScheme, WebhookVerification
from hookbay_ingest.verification._engine import (
    BAD,
    DIGESTS,
    MISSING,
    STALE,
    BodyHmac,
    header,
    mac,
    match,
    tolerance_of,
    verdict,
    within,
)
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

DEFAULT_TOLERANCE_S: Final = 300
_PLACEHOLDER: Final = re.compile(r"\{(body|timestamp|id|url)\}")


class HmacVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        scheme = config.hmac or HmacScheme(header="x-signature")
        self._scheme = scheme
        self._url = config.public_url or ""
        self._tolerance = tolerance_of(config, DEFAULT_TOLERANCE_S)
        self._pieces = _pieces(scheme.payload)
        self._body_only = self._pieces == [("body", "")]
        self._fast = BodyHmac((scheme.header,), scheme.algorithm, scheme.encoding, scheme.prefix)

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        if self._body_only:
            return self._fast.verify(request, secrets, clock)
        scheme = self._scheme
        value = header(request, scheme.header)
        if value is None:
            return MISSING
        values = {"body": "", "url": self._url, "timestamp": "", "id": ""}
        fresh: bool | None = True
        if scheme.timestamp_header is not None:
            timestamp = header(request, scheme.timestamp_header)
            if timestamp is None:
                return MISSING
            values["timestamp"] = timestamp
            fresh = within(timestamp, clock, self._tolerance)
            if fresh is None:
                return BAD
        if scheme.id_header is not None:
            values["id"] = header(request, scheme.id_header) or ""
        parts = [
            request.body if name == "body" else _bytes(name, values[name] if name else text)
            for name, text in self._pieces
        ]
        presented = self._fast.presented(value) or []
        digest = DIGESTS[scheme.algorithm]
        result = verdict(match(secrets, presented, lambda k: mac(k, digest, *parts)))
        return STALE if result.valid and not fresh else result


def _bytes(name: str, text: str) -> bytes:
    """Header values as the bytes sent (captured as latin-1); the template and URL as UTF-8."""
    return text.encode("latin-1") if name in ("timestamp", "id") else text.encode()


def _pieces(payload: str) -> list[tuple[str, str]]:
    """The template as ``(placeholder, "")`` and ``("", literal text)`` pieces, in order."""
    pieces: list[tuple[str, str]] = []
    position = 0
    for found in _PLACEHOLDER.finditer(payload):
        if found.start() > position:
            pieces.append(("", payload[position : found.start()]))
        pieces.append((found.group(1), ""))
        position = found.end()
    if position < len(payload):
        pieces.append(("", payload[position:]))
    return pieces
