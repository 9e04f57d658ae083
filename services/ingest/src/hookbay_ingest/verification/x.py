"""X (Twitter) Account Activity: ``x-twitter-webhooks-signature: sha256=<base64
HMAC-SHA256(consumer secret, raw body)>``. No timestamp.

Handshake (CRC): ``GET ?crc_token=…`` is answered ``{"response_token": "sha256=<base64
HMAC-SHA256(consumer secret, crc_token)>"}``. X does not sign the CRC request, and the answer
uses the key and construction of a POST signature: answering any token would sign any body a
stranger sends as ``crc_token``. So only a short token of a conservative alphabet (letters,
digits, ``._~+/=-``; no ``{``, quote or space, so never a JSON body) is answered; any other is
refused as ``bad_signature``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Final

from hookbay_common.models import (
    HandshakeKind,
    HmacAlgorithm,
    MatchedSecret,
    SignatureEncoding,
    WebhookVerification,
)
from hookbay_ingest.verification._challenge import query_value, safe_token
from hookbay_ingest.verification._engine import BAD, BodyHmac, mac
from hookbay_ingest.verification.base import (
    Clock,
    HandshakeAnswer,
    SignedRequest,
    SigningSecrets,
    Verification,
)

SIGNATURE_HEADER: Final = "x-twitter-webhooks-signature"
_SCHEME: Final = BodyHmac(
    (SIGNATURE_HEADER,), HmacAlgorithm.SHA256, SignatureEncoding.BASE64, "sha256="
)


class XVerifier:
    methods: frozenset[str] = frozenset({"GET"})

    def __init__(self, config: WebhookVerification | None = None) -> None:
        pass

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return _SCHEME.verify(request, secrets, clock)

    def detect(self, request: SignedRequest) -> HandshakeKind | None:
        if request.method != "GET" or "crc_token" not in request.query_string:
            return None
        return HandshakeKind.X_CRC

    def answer(
        self, kind: HandshakeKind, request: SignedRequest, secrets: SigningSecrets, clock: Clock
    ) -> HandshakeAnswer:
        token = query_value(request.query_string, "crc_token")
        if token is None or not safe_token(token):
            return HandshakeAnswer(BAD)
        digest = mac(secrets.key(MatchedSecret.CURRENT), hashlib.sha256, token.encode())
        reply = {"response_token": "sha256=" + base64.b64encode(digest).decode()}
        return HandshakeAnswer(None, json.dumps(reply).encode(), "application/json")
