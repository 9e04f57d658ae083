"""Mailgun: the signature is inside the JSON body, ``{"signature": {"timestamp", "token",
"signature"}, "event-data": …}``: ``signature`` is the hex HMAC-SHA256 of ``timestamp + token``
keyed with the webhook signing key. The MAC does not cover ``event-data``; ``tolerance_s``
(default 0: not checked, as Mailgun advises against a tight bound) limits how long a captured
signature can be replayed with another body."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from hookbay_common.models import SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import (
    BAD,
    MISSING,
    decoded_all,
    mac,
    timed_verdict,
    tolerance_of,
    within,
)
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

DEFAULT_TOLERANCE_S: Final = 0


class MailgunVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        self._tolerance = tolerance_of(config, DEFAULT_TOLERANCE_S)

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        fields = _signature_fields(request.body)
        if fields is None:
            return MISSING
        timestamp, token, signature = fields
        fresh = within(timestamp, clock, self._tolerance)
        if fresh is None:
            return BAD
        signed = (timestamp + token).encode()
        presented = decoded_all([signature], SignatureEncoding.HEX)
        return timed_verdict(secrets, presented, lambda k: mac(k, hashlib.sha256, signed), fresh)


def _signature_fields(body: bytes) -> tuple[str, str, str] | None:
    if b'"signature"' not in body:
        return None
    try:
        document: Any = json.loads(body)
    except ValueError:
        return None
    block = document.get("signature") if isinstance(document, dict) else None
    if not isinstance(block, dict):
        return None
    fields = (block.get("timestamp"), block.get("token"), block.get("signature"))
    if not all(isinstance(f, str) for f in fields):
        return None
    return fields  # type: ignore[return-value]
