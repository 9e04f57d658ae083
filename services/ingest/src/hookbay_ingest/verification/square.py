"""Square: ``x-square-hmacsha256-signature`` is the base64 HMAC-SHA256 of the subscription's
notification URL followed by the raw body (no separator), keyed with its signature key. The URL
is the configured ``public_url``, exactly as registered at Square (a trailing slash matters),
never one rebuilt from the request. No timestamp."""

from __future__ import annotations

from typing import Final

from hookbay_common.models import HmacAlgorithm, SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import BodyHmac
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "x-square-hmacsha256-signature"


class SquareVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        url = (config.public_url or "").encode()
        self._scheme = BodyHmac(
            (SIGNATURE_HEADER,), HmacAlgorithm.SHA256, SignatureEncoding.BASE64, leading=url
        )

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return self._scheme.verify(request, secrets, clock)
