"""Typeform: ``Typeform-Signature: sha256=<base64 HMAC-SHA256(secret, raw body)>`` — base64
despite the ``sha256=`` prefix GitHub uses with hex. No timestamp."""

from __future__ import annotations

from typing import Final

from hookbay_common.models import HmacAlgorithm, SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import BodyHmac
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "typeform-signature"
_SCHEME: Final = BodyHmac(
    (SIGNATURE_HEADER,), HmacAlgorithm.SHA256, SignatureEncoding.BASE64, "sha256="
)


class TypeformVerifier:
    def __init__(self, config: WebhookVerification | None = None) -> None:
        pass

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return _SCHEME.verify(request, secrets, clock)
