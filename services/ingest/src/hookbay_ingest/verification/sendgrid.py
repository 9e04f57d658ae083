"""SendGrid Event Webhook: ``X-Twilio-Email-Event-Webhook-Signature`` is a base64 DER ECDSA
(P-256, SHA-256) signature of ``{X-Twilio-Email-Event-Webhook-Timestamp}{raw body}`` (the body's
trailing CRLF included), checked with the account's verification key (``public_key``: base64
SPKI DER, loaded once). No shared secret, hence no rotation. ``tolerance_s`` defaults to 0 (not
checked; SendGrid publishes no bound)."""

from __future__ import annotations

import base64
import binascii
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key

from hookbay_common.models import MatchedSecret, WebhookVerification
from hookbay_ingest.verification._engine import (
    ACCEPTED,
    BAD,
    MISSING,
    STALE,
    header,
    tolerance_of,
    within,
)
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "x-twilio-email-event-webhook-signature"
TIMESTAMP_HEADER: Final = "x-twilio-email-event-webhook-timestamp"
DEFAULT_TOLERANCE_S: Final = 0


class InvalidPublicKey(ValueError):
    """The configured ``public_key`` is not a base64 DER elliptic-curve public key."""


class SendGridVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        try:
            key = load_der_public_key(base64.b64decode(config.public_key or "", validate=True))
        except (ValueError, binascii.Error, TypeError) as exc:
            raise InvalidPublicKey(str(exc)) from None
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise InvalidPublicKey("not an elliptic-curve key")
        self._key = key
        self._tolerance = tolerance_of(config, DEFAULT_TOLERANCE_S)

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        value = header(request, SIGNATURE_HEADER)
        timestamp = header(request, TIMESTAMP_HEADER)
        if value is None or timestamp is None:
            return MISSING
        try:
            signature = base64.b64decode(value, validate=True)
        except (ValueError, binascii.Error):
            return BAD
        fresh = within(timestamp, clock, self._tolerance)
        if fresh is None:
            return BAD
        try:
            self._key.verify(
                signature, timestamp.encode() + request.body, ec.ECDSA(hashes.SHA256())
            )
        except InvalidSignature:
            return BAD
        return ACCEPTED[MatchedSecret.CURRENT] if fresh else STALE
