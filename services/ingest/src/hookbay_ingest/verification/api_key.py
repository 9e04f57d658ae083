"""Type ``api-key``: the configured header carries the key itself; compared in constant time.
The key is the webhook's secret, so it rotates like one."""

from __future__ import annotations

from hookbay_common.models import WebhookVerification
from hookbay_ingest.verification._engine import header
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification
from hookbay_ingest.verification.gitlab import token_verdict


class ApiKeyVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        self._header = config.api_key.header if config.api_key else "x-api-key"

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return token_verdict(header(request, self._header), secrets)
