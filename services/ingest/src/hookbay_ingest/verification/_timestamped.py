"""The ``v0`` scheme Slack and Zoom share: ``<signature header>: v0=<hex HMAC-SHA256>`` over
``v0:{timestamp}:{raw body}``, the timestamp (Unix seconds) in its own header; a valid signature
further than the tolerance from now, either side, is ``timestamp_out_of_tolerance``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from hookbay_common.models import SignatureEncoding
from hookbay_ingest.verification._engine import (
    BAD,
    MISSING,
    STALE,
    decoded_all,
    header,
    mac,
    match,
    strip_prefix,
    verdict,
    within,
)
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification


@dataclass(frozen=True, slots=True)
class V0Scheme:
    signature_header: str
    timestamp_header: str
    tolerance_s: int

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        value = header(request, self.signature_header)
        timestamp = header(request, self.timestamp_header)
        if value is None or timestamp is None:
            return MISSING
        hexdigest = strip_prefix(value, "v0=")
        fresh = within(timestamp, clock, self.tolerance_s)
        if hexdigest is None or fresh is None:
            return BAD
        presented = decoded_all([hexdigest], SignatureEncoding.HEX)
        signed, body = f"v0:{timestamp}:".encode(), request.body
        result = verdict(match(secrets, presented, lambda k: mac(k, hashlib.sha256, signed, body)))
        return STALE if result.valid and not fresh else result


def json_object(body: bytes, marker: bytes) -> dict[str, Any] | None:
    """``body`` as a JSON object when it mentions ``marker`` (a cheap test first: most requests
    are not handshakes); else ``None``."""
    if marker not in body:
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None
