"""Intercom: ``X-Hub-Signature: sha1=<hex HMAC-SHA1(client secret, raw body)>``. No timestamp."""

from __future__ import annotations

from typing import Final

from hookbay_common.models import HmacAlgorithm, SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import BodyHmac
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "x-hub-signature"
_SCHEME: Final = BodyHmac((SIGNATURE_HEADER,), HmacAlgorithm.SHA1, SignatureEncoding.HEX, "sha1=")


class IntercomVerifier:
    def __init__(self, config: WebhookVerification | None = None) -> None:
        pass

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return _SCHEME.verify(request, secrets, clock)
