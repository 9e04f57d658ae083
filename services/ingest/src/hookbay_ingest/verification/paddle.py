"""Paddle Billing: ``Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>…]``; each ``h1`` is the hex
HMAC-SHA256 of ``{ts}:{raw body}`` keyed with the notification destination's secret as text.
Several ``h1`` appear while Paddle rotates: any match passes; a header without ``h1`` is
``unsupported_version``. Tolerance 300 s by default, either side (Paddle's SDK uses 5 s, which
clock skew and queueing break).
"""

from __future__ import annotations

import hashlib
from typing import Final

from hookbay_common.models import SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import (
    BAD,
    MISSING,
    STALE,
    UNSUPPORTED,
    decoded_all,
    header,
    mac,
    match,
    verdict,
    within,
)
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "paddle-signature"
DEFAULT_TOLERANCE_S: Final = 300


class PaddleVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        tolerance = config.tolerance_s
        self._tolerance = DEFAULT_TOLERANCE_S if tolerance is None else tolerance

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        value = header(request, SIGNATURE_HEADER)
        if value is None:
            return MISSING
        timestamp, signatures = "", []
        for item in value.split(";"):
            name, _, content = item.strip().partition("=")
            if name == "ts":
                timestamp = content
            elif name == "h1":
                signatures.append(content)
        if not signatures:
            return UNSUPPORTED if timestamp else BAD
        fresh = within(timestamp, clock, self._tolerance)
        if fresh is None:
            return BAD
        signed, body = f"{timestamp.strip()}:".encode(), request.body
        presented = decoded_all(signatures, SignatureEncoding.HEX)
        result = verdict(match(secrets, presented, lambda k: mac(k, hashlib.sha256, signed, body)))
        return STALE if result.valid and not fresh else result
