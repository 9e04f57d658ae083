"""Shopify: ``X-Shopify-Hmac-Sha256`` (Events webhooks: ``shopify-hmac-sha256``, read first)
holds the base64 HMAC-SHA256 of the raw body, keyed with the app's secret. No timestamp."""

from __future__ import annotations

from typing import Final

from hookbay_common.models import HmacAlgorithm, SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import BodyHmac
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADERS: Final = ("shopify-hmac-sha256", "x-shopify-hmac-sha256")
_SCHEME: Final = BodyHmac(SIGNATURE_HEADERS, HmacAlgorithm.SHA256, SignatureEncoding.BASE64)


class ShopifyVerifier:
    def __init__(self, config: WebhookVerification | None = None) -> None:
        pass

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return _SCHEME.verify(request, secrets, clock)
