"""Linear: ``Linear-Signature`` is the hex HMAC-SHA256 of the raw body (no prefix). The
timestamp is inside the signed body (``webhookTimestamp``, milliseconds); once the signature is
valid the body's top level is read for it, and one further than ``tolerance_s`` (default 60, as
Linear's SDK) from now, either side, or absent, is ``timestamp_out_of_tolerance``."""

from __future__ import annotations

import json
from typing import Final

from hookbay_common.models import HmacAlgorithm, SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import STALE, BodyHmac, tolerance_of, within
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "linear-signature"
DEFAULT_TOLERANCE_S: Final = 60
_SCHEME: Final = BodyHmac((SIGNATURE_HEADER,), HmacAlgorithm.SHA256, SignatureEncoding.HEX)


class LinearVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        self._tolerance = tolerance_of(config, DEFAULT_TOLERANCE_S)

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        result = _SCHEME.verify(request, secrets, clock)
        if not result.valid or self._tolerance == 0:
            return result
        try:
            document = json.loads(request.body)
        except ValueError:
            return STALE
        stamp = document.get("webhookTimestamp") if isinstance(document, dict) else None
        if not isinstance(stamp, int) or isinstance(stamp, bool):
            return STALE
        return result if within(str(stamp), clock, self._tolerance, unit=0.001) else STALE
