"""Standard Webhooks (also Svix, Clerk, Resend): headers ``webhook-id``, ``webhook-timestamp``,
``webhook-signature`` (or the same under ``svix-``); the signature header is a space-separated
list of ``v1,<base64 HMAC-SHA256>`` over ``{id}.{timestamp}.{raw body}``.

The key is the ``whsec_`` secret without its prefix, base64-decoded (padding optional); a
secret without the prefix is decoded the same way. Entries of other versions (``v1a``, …) are
ignored; a header with only such entries is ``unsupported_version``. A valid signature whose
timestamp is further than ``tolerance_s`` (default 300) from now, either side, is
``timestamp_out_of_tolerance``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Final

from hookbay_common.models import SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import (
    ACCEPTED,
    BAD,
    MISSING,
    STALE,
    UNSUPPORTED,
    decoded_all,
    header,
    tolerance_of,
    within,
)
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

PREFIXES: Final = ("webhook-", "svix-")
DEFAULT_TOLERANCE_S: Final = 300
SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - a header name / public prefix


def signing_key(secret: str) -> bytes | None:
    """The key bytes of a ``whsec_`` secret; ``None`` when it is not base64."""
    text = secret.removeprefix(SECRET_PREFIX)
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (ValueError, binascii.Error):
        return None


class StandardWebhooksVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        self._tolerance = tolerance_of(config, DEFAULT_TOLERANCE_S)

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        for prefix in PREFIXES:
            value = header(request, prefix + "signature")
            if value is not None:
                break
        else:
            return MISSING
        msg_id, timestamp = header(request, prefix + "id"), header(request, prefix + "timestamp")
        if msg_id is None or timestamp is None:
            return MISSING
        entries = [e.partition(",") for e in value.split(" ") if e]
        ours = [sig for version, _, sig in entries if version == "v1"]
        if not ours:
            return UNSUPPORTED if entries else BAD
        fresh = within(timestamp, clock, self._tolerance)
        if fresh is None:
            return BAD
        presented = decoded_all(ours, SignatureEncoding.BASE64)
        signed = f"{msg_id}.{timestamp}.".encode("latin-1")  # the header bytes as sent
        for secret, slot in secrets.candidates():
            if (key := signing_key(secret)) is not None and _matches(
                key, signed, request, presented
            ):
                return STALE if not fresh else ACCEPTED[slot]
        return BAD


def _matches(key: bytes, signed: bytes, request: SignedRequest, presented: list[bytes]) -> bool:
    signer = hmac.new(key, signed, hashlib.sha256)
    signer.update(request.body)
    digest = signer.digest()
    return any(hmac.compare_digest(digest, candidate) for candidate in presented)
