"""PagerDuty (webhooks v3): ``X-PagerDuty-Signature`` is a comma-separated list; each ``v1=``
entry is a hex HMAC-SHA256 of the raw body (one per active secret while PagerDuty rotates);
any match passes, other versions are ignored. No timestamp."""

from __future__ import annotations

from typing import Final

from hookbay_common.models import HmacAlgorithm, SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import BodyHmac
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "x-pagerduty-signature"
_SCHEME: Final = BodyHmac(
    (SIGNATURE_HEADER,), HmacAlgorithm.SHA256, SignatureEncoding.HEX, "v1=", separator=","
)


class PagerDutyVerifier:
    def __init__(self, config: WebhookVerification | None = None) -> None:
        pass

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return _SCHEME.verify(request, secrets, clock)
