"""Typeform: ``Typeform-Signature: sha256=<base64>`` (base64 despite the prefix); derived
fixture with the construction of https://www.typeform.com/developers/webhooks/secure-your-webhooks/ ."""

from __future__ import annotations

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import b64_mac, check_for, hex_mac, run, signed

SECRET = "typeform_secret"
BODY = b'{"event_id":"01ABC","event_type":"form_response"}'
EXPECTED = "sha256=avoM/oP7xoyOktm7gKBSCvy0i7ltp/sf6guWr8qLwwA="


class TestTypeform:
    check = check_for("typeform", SECRET)

    def test_derived_vector(self) -> None:
        assert "sha256=" + b64_mac(SECRET, BODY) == EXPECTED
        assert run(self.check, signed(BODY, {"Typeform-Signature": EXPECTED}), 0).valid

    def test_hex_with_the_same_prefix_is_refused(self) -> None:
        value = "sha256=" + hex_mac(SECRET, BODY)
        result = run(self.check, signed(BODY, {"Typeform-Signature": value}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_without_prefix_is_refused(self) -> None:
        result = run(self.check, signed(BODY, {"Typeform-Signature": EXPECTED[7:]}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE
