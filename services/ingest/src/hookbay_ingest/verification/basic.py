"""Type ``basic``: ``Authorization: Basic base64(username:password)``, split on the first ``:``
(a password may hold more); both parts compared in constant time. The password is the
webhook's secret, so it rotates like one."""

from __future__ import annotations

import base64
import binascii
import hmac
from typing import Final

from hookbay_common.models import WebhookVerification
from hookbay_ingest.verification._engine import ACCEPTED, BAD, MISSING, header, strip_prefix
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

AUTHORIZATION: Final = "authorization"


class BasicVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        self._username = config.basic.username.encode() if config.basic else b""

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        value = header(request, AUTHORIZATION)
        if value is None:
            return MISSING
        encoded = strip_prefix(value, "basic ")
        if encoded is None:
            return BAD
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True)
        except (ValueError, binascii.Error):
            return BAD
        username, colon, password = decoded.partition(b":")
        user_ok = hmac.compare_digest(username, self._username)
        for key, slot in secrets.keys:
            if hmac.compare_digest(password, key) and user_ok and colon:
                return ACCEPTED[slot]
        return BAD
