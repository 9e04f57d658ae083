"""Intercom: ``X-Hub-Signature: sha1=<hex HMAC-SHA1>``; derived fixture with the construction of
https://developers.intercom.com/intercom-api-reference/v1.0/reference/signed-notifications ."""

from __future__ import annotations

import hashlib

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, hex_mac, run, signed

SECRET = "intercom_client_secret"
BODY = b'{"type":"notification_event","topic":"ping"}'
EXPECTED = "sha1=4a37c1578001e2cd7b91d44b5ae611ebd8578887"


class TestIntercom:
    check = check_for("intercom", SECRET)

    def test_derived_vector(self) -> None:
        assert "sha1=" + hex_mac(SECRET, BODY, hashlib.sha1) == EXPECTED
        assert run(self.check, signed(BODY, {"X-Hub-Signature": EXPECTED}), 0).valid

    def test_sha256_is_refused(self) -> None:
        value = "sha256=" + hex_mac(SECRET, BODY)
        result = run(self.check, signed(BODY, {"X-Hub-Signature": value}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE
