"""hookbay's own scheme: ``X-Service-Signature`` carries the hex HMAC-SHA256 of the raw body,
keyed with the webhook's secret.

Accepted forms: the 64 hex digits in any case, optionally prefixed ``sha256=`` (any case), with
surrounding whitespace (around the whole value and after the prefix) ignored. The digest is
compared in constant time with each secret, current first. An absent or blank header is
``missing_signature``; any other value that matches no secret is ``bad_signature``. The scheme
signs no timestamp, so the clock is not read.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from hookbay_common.models import WebhookVerification
from hookbay_ingest.verification._engine import ACCEPTED, BAD, MISSING
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "x-service-signature"
_PREFIX: Final = "sha256="


class HookbayVerifier:
    def __init__(self, config: WebhookVerification | None = None) -> None:
        pass

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        presented = request.headers.get(SIGNATURE_HEADER)
        if presented is None or not presented.strip():
            return MISSING
        value = presented.strip()
        if value[: len(_PREFIX)].lower() == _PREFIX:
            value = value[len(_PREFIX) :].strip()
        # a non-ASCII character cannot be a hex digit: replaced, it still compares unequal
        digest = value.lower().encode("ascii", "replace")
        for key, slot in secrets.keys:
            expected = hmac.new(key, request.body, hashlib.sha256).hexdigest()
            if hmac.compare_digest(expected.encode(), digest):
                return ACCEPTED[slot]
        return BAD
