"""GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>``.

No timestamp is signed. The legacy SHA-1 ``X-Hub-Signature`` alone is ``unsupported_version``
(GitHub sends both; the SHA-256 one is the one to trust). Form-encoded deliveries
(``payload=…``) are verified on the bytes as sent, never on a decoded form.
"""

from __future__ import annotations

from typing import Final

from hookbay_common.models import HmacAlgorithm, SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import UNSUPPORTED, BodyHmac, header
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "x-hub-signature-256"
LEGACY_HEADER: Final = "x-hub-signature"
_SCHEME: Final = BodyHmac(
    (SIGNATURE_HEADER,), HmacAlgorithm.SHA256, SignatureEncoding.HEX, "sha256="
)


class GitHubVerifier:
    def __init__(self, config: WebhookVerification | None = None) -> None:
        pass

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        if header(request, SIGNATURE_HEADER) is None and header(request, LEGACY_HEADER):
            return UNSUPPORTED
        return _SCHEME.verify(request, secrets, clock)
