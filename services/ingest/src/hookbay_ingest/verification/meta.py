"""Meta (Facebook, Instagram, Messenger, WhatsApp): ``X-Hub-Signature-256: sha256=<hex
HMAC-SHA256(app secret, raw body)>``. No timestamp.

Handshake: ``GET ?hub.mode=subscribe&hub.challenge=…&hub.verify_token=…`` is answered with
the challenge as ``text/plain`` when ``hub.verify_token`` equals the webhook's ``verify_token``
(constant time) and the challenge is a short plain token (never reflected markup).
"""

from __future__ import annotations

import hmac

from hookbay_common.models import HandshakeKind, MatchedSecret, WebhookVerification
from hookbay_ingest.verification._challenge import query_value, safe_token
from hookbay_ingest.verification._engine import ACCEPTED, BAD, MISSING
from hookbay_ingest.verification.base import (
    Clock,
    HandshakeAnswer,
    SignedRequest,
    SigningSecrets,
    Verification,
)
from hookbay_ingest.verification.github import GitHubVerifier


class MetaVerifier:
    methods: frozenset[str] = frozenset({"GET"})

    def __init__(self, config: WebhookVerification) -> None:
        token = config.verify_token
        self._verify_token = token.get_secret_value().encode() if token is not None else None
        self._signature = GitHubVerifier()

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return self._signature.verify(request, secrets, clock)

    def detect(self, request: SignedRequest) -> HandshakeKind | None:
        if request.method != "GET" or "hub.mode" not in request.query_string:
            return None
        if query_value(request.query_string, "hub.mode") != "subscribe":
            return None
        return HandshakeKind.META_SUBSCRIBE

    def answer(
        self, kind: HandshakeKind, request: SignedRequest, secrets: SigningSecrets, clock: Clock
    ) -> HandshakeAnswer:
        presented = query_value(request.query_string, "hub.verify_token")
        challenge = query_value(request.query_string, "hub.challenge")
        if presented is None or self._verify_token is None:
            return HandshakeAnswer(MISSING)
        if not hmac.compare_digest(presented.encode(), self._verify_token):
            return HandshakeAnswer(BAD)
        if challenge is None or not safe_token(challenge):
            return HandshakeAnswer(BAD)
        return HandshakeAnswer(ACCEPTED[MatchedSecret.CURRENT], challenge.encode())
