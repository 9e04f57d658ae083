"""Linear: hex HMAC-SHA256 of the body in ``Linear-Signature``, the timestamp inside the body
(``webhookTimestamp``, ms, 60 s). Derived fixture (no published vector) with the construction of
https://github.com/linear/linear/blob/master/packages/sdk/src/webhooks/client.ts ."""

from __future__ import annotations

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, hex_mac, run, signed

SECRET = "lin_wh_test_secret"
BODY = b'{"action":"create","type":"Issue","webhookTimestamp":1714478400000}'
EXPECTED = "2da4033b5718cf52330f7802123b67251608c2590c472b5f379a01ea6ad8ddc3"
NOW = 1714478400


class TestLinear:
    check = check_for("linear", SECRET)

    def test_derived_vector(self) -> None:
        assert hex_mac(SECRET, BODY) == EXPECTED
        assert run(self.check, signed(BODY, {"Linear-Signature": EXPECTED}), NOW + 60).valid

    def test_stale_body_timestamp(self) -> None:
        result = run(self.check, signed(BODY, {"Linear-Signature": EXPECTED}), NOW + 61)
        assert result.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE

    def test_missing_body_timestamp(self) -> None:
        body = b'{"action":"create"}'
        result = run(self.check, signed(body, {"Linear-Signature": hex_mac(SECRET, body)}), NOW)
        assert result.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE

    def test_one_body_byte_changed(self) -> None:
        result = run(
            self.check,
            signed(BODY.replace(b"create", b"delete"), {"Linear-Signature": EXPECTED}),
            NOW,
        )
        assert result.reason is InvalidReason.BAD_SIGNATURE
