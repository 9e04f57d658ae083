"""Shopify: base64 HMAC-SHA256 in ``X-Shopify-Hmac-Sha256`` or ``shopify-hmac-sha256``; the
vector of https://github.com/Shopify/shopify-app-js/blob/main/packages/apps/shopify-api/lib/webhooks/__tests__/validate.test.ts
(secret from its test-config.ts)."""

from __future__ import annotations

import pytest

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import b64_mac, check_for, run, signed

SECRET = "test_secret_key"
BODY = b'{"foo": "bar"}'
EXPECTED = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g="


class TestShopify:
    check = check_for("shopify", SECRET)

    @pytest.mark.parametrize("name", ["X-Shopify-Hmac-Sha256", "shopify-hmac-sha256"])
    def test_published_vector_under_either_header(self, name: str) -> None:
        assert b64_mac(SECRET, BODY) == EXPECTED
        assert run(self.check, signed(BODY, {name: EXPECTED}), 0).valid

    def test_one_body_byte_changed(self) -> None:
        result = run(self.check, signed(b'{"foo": "baz"}', {"X-Shopify-Hmac-Sha256": EXPECTED}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_hex_instead_of_base64(self) -> None:
        import base64

        value = base64.b64decode(EXPECTED).hex()
        result = run(self.check, signed(BODY, {"X-Shopify-Hmac-Sha256": value}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_missing(self) -> None:
        assert run(self.check, signed(BODY), 0).reason is InvalidReason.MISSING_SIGNATURE
