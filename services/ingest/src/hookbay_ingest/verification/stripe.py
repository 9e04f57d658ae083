"""Stripe: ``Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=<hex>]``; each ``v1`` is the
hex HMAC-SHA256 of ``{t}.{raw body}`` keyed with the endpoint secret *as text* (the ``whsec_``
string's UTF-8 bytes, not base64-decoded as Standard Webhooks does).

Several ``v1`` appear while Stripe rolls a secret: any match passes. Other schemes (``v0``, the
test-mode fake) are ignored, so a header with only those is ``unsupported_version``. A valid
signature whose ``t`` is further than ``tolerance_s`` (default 300) from now, either side, is
``timestamp_out_of_tolerance``.
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

SIGNATURE_HEADER: Final = "stripe-signature"
DEFAULT_TOLERANCE_S: Final = 300


class StripeVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        tolerance = config.tolerance_s
        self._tolerance = DEFAULT_TOLERANCE_S if tolerance is None else tolerance

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        value = header(request, SIGNATURE_HEADER)
        if value is None:
            return MISSING
        timestamp, signatures, others = "", [], False
        for item in value.split(","):
            name, _, content = item.strip().partition("=")
            if name == "t":
                timestamp = content
            elif name == "v1":
                signatures.append(content)
            else:
                others = True
        if not signatures:
            return UNSUPPORTED if others and timestamp else BAD
        fresh = within(timestamp, clock, self._tolerance)
        if fresh is None:
            return BAD
        signed, body = f"{timestamp.strip()}.".encode(), request.body
        presented = decoded_all(signatures, SignatureEncoding.HEX)
        result = verdict(match(secrets, presented, lambda k: mac(k, hashlib.sha256, signed, body)))
        return STALE if result.valid and not fresh else result
