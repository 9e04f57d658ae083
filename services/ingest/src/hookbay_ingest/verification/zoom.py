"""Zoom: ``x-zm-signature: v0=<hex>`` over ``v0:{x-zm-request-timestamp}:{raw body}``
(HMAC-SHA256 keyed with the app's secret token), tolerance 300 s by default (Zoom publishes
none; a common choice).

Handshake: ``POST {"event": "endpoint.url_validation", "payload": {"plainToken": …}}`` (on
set-up and every 72 hours) is answered ``{"plainToken", "encryptedToken": hex HMAC-SHA256(secret,
plainToken)}`` only once the request's own signature is valid: answered unsigned, it would hand
anyone a valid ``x-zm-signature`` for a body of their choosing (``plainToken =
"v0:<ts>:<body>"``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from hookbay_common.models import HandshakeKind
from hookbay_ingest.verification._engine import mac
from hookbay_ingest.verification._timestamped import TimestampedVerifier, V0Scheme, json_object
from hookbay_ingest.verification.base import Clock, HandshakeAnswer, SignedRequest, SigningSecrets

SIGNATURE_HEADER: Final = "x-zm-signature"
TIMESTAMP_HEADER: Final = "x-zm-request-timestamp"
DEFAULT_TOLERANCE_S: Final = 300
_MARKER: Final = b"endpoint.url_validation"


class ZoomVerifier(TimestampedVerifier):
    scheme = V0Scheme(SIGNATURE_HEADER, TIMESTAMP_HEADER)
    default_tolerance_s = DEFAULT_TOLERANCE_S
    methods: frozenset[str] = frozenset({"POST"})

    def detect(self, request: SignedRequest) -> HandshakeKind | None:
        if request.method != "POST" or _plain_token(request.body) is None:
            return None
        return HandshakeKind.ZOOM_URL_VALIDATION

    def answer(
        self, kind: HandshakeKind, request: SignedRequest, secrets: SigningSecrets, clock: Clock
    ) -> HandshakeAnswer:
        verification = self.verify(request, secrets, clock)
        token = _plain_token(request.body)
        if verification.secret is None or token is None:
            return HandshakeAnswer(verification)
        key = secrets.key(verification.secret)
        encrypted = mac(key, hashlib.sha256, token.encode()).hex()
        reply = {"plainToken": token, "encryptedToken": encrypted}
        return HandshakeAnswer(verification, json.dumps(reply).encode(), "application/json")


def _plain_token(body: bytes) -> str | None:
    document = json_object(body, _MARKER)
    if document is None or document.get("event") != "endpoint.url_validation":
        return None
    payload = document.get("payload")
    token = payload.get("plainToken") if isinstance(payload, dict) else None
    return token if isinstance(token, str) else None
