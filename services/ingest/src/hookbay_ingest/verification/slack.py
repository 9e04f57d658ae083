"""Slack: ``X-Slack-Signature: v0=<hex>`` over ``v0:{X-Slack-Request-Timestamp}:{raw body}``
(HMAC-SHA256 keyed with the app's signing secret), tolerance 300 s by default. JSON (Events
API) and form-encoded (slash commands, interactivity) bodies are verified on their bytes.

Handshake: the Events API's signed ``POST {"type": "url_verification", "challenge": …}`` is
answered with the challenge as ``text/plain`` once its signature is valid.
"""

from __future__ import annotations

from typing import Final

from hookbay_common.models import HandshakeKind
from hookbay_ingest.verification._timestamped import TimestampedVerifier, V0Scheme, json_object
from hookbay_ingest.verification.base import Clock, HandshakeAnswer, SignedRequest, SigningSecrets

SIGNATURE_HEADER: Final = "x-slack-signature"
TIMESTAMP_HEADER: Final = "x-slack-request-timestamp"
DEFAULT_TOLERANCE_S: Final = 300
_MARKER: Final = b"url_verification"


class SlackVerifier(TimestampedVerifier):
    scheme = V0Scheme(SIGNATURE_HEADER, TIMESTAMP_HEADER)
    default_tolerance_s = DEFAULT_TOLERANCE_S
    methods: frozenset[str] = frozenset({"POST"})

    def detect(self, request: SignedRequest) -> HandshakeKind | None:
        if request.method != "POST":
            return None
        document = json_object(request.body, _MARKER)
        if document is None or document.get("type") != "url_verification":
            return None
        return HandshakeKind.SLACK_URL_VERIFICATION

    def answer(
        self, kind: HandshakeKind, request: SignedRequest, secrets: SigningSecrets, clock: Clock
    ) -> HandshakeAnswer:
        verification = self.verify(request, secrets, clock)
        document = json_object(request.body, _MARKER) or {}
        challenge = document.get("challenge")
        if not verification.valid or not isinstance(challenge, str):
            return HandshakeAnswer(verification)
        return HandshakeAnswer(verification, challenge.encode())
