"""Mailgun: the signature inside the JSON body, hex HMAC-SHA256 of ``timestamp + token``;
derived fixture from the sample values of
https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks ."""

from __future__ import annotations

import json

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, run, signed

KEY = "key-test-signing-key"
TIMESTAMP = "1770920772"
TOKEN = "e0b5477167110d68991efc6b9f89f0a11066af27834600e123"
EXPECTED = "05da75aae5916ef0aa2d4f09360b089f722764250e30fa45d13f5a610525cff1"


def body(signature: str = EXPECTED, timestamp: str = TIMESTAMP) -> bytes:
    block = {"timestamp": timestamp, "token": TOKEN, "signature": signature}
    return json.dumps({"signature": block, "event-data": {"event": "delivered"}}).encode()


class TestMailgun:
    check = check_for("mailgun", KEY)

    def test_derived_vector(self) -> None:
        assert run(self.check, signed(body()), 0).valid

    def test_other_signature(self) -> None:
        assert run(self.check, signed(body("0" * 64)), 0).reason is InvalidReason.BAD_SIGNATURE

    def test_no_signature_block(self) -> None:
        assert (
            run(self.check, signed(b'{"event-data":{}}'), 0).reason
            is InvalidReason.MISSING_SIGNATURE
        )

    def test_tolerance_when_set(self) -> None:
        check = check_for("mailgun", KEY, tolerance_s=300)
        assert run(check, signed(body()), int(TIMESTAMP) + 300).valid
        result = run(check, signed(body()), int(TIMESTAMP) + 301)
        assert result.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE
