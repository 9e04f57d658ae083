"""Standard Webhooks (Svix, Clerk, Resend): the published vector (identical in the reference
libraries' tests: https://github.com/standard-webhooks/standard-webhooks/blob/main/libraries/python/tests/test_webhooks.py),
``svix-`` headers, space-separated multi-signatures, tolerance; signatures for other inputs come
from the official ``standardwebhooks`` package, pinned as a dev dependency."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook as SdkWebhook

from hookbay_ingest.verification import InvalidReason, MatchedSecret, Verification
from tests.support.signing import check_for, rotated, run, signed

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TS = 1614265330
BODY = b'{"test": 2432232314}'
EXPECTED = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def headers(signature: str, prefix: str = "webhook-", ts: int = TS) -> dict[str, str]:
    return {f"{prefix}id": MSG_ID, f"{prefix}timestamp": str(ts), f"{prefix}signature": signature}


def sdk_sign(secret: str, body: bytes, ts: int = TS) -> str:
    return SdkWebhook(secret).sign(MSG_ID, datetime.fromtimestamp(ts, tz=UTC), body.decode())


class TestStandardWebhooks:
    check = check_for("standard-webhooks", SECRET)

    def verify(self, hdrs: dict[str, str], body: bytes = BODY, now: float = TS) -> Verification:
        return run(self.check, signed(body, hdrs), now)

    def test_published_vector(self) -> None:
        assert sdk_sign(SECRET, BODY) == EXPECTED
        assert self.verify(headers(EXPECTED)).secret is MatchedSecret.CURRENT

    def test_published_negative(self) -> None:
        bad = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="
        assert self.verify(headers(bad)).reason is InvalidReason.BAD_SIGNATURE

    def test_svix_headers(self) -> None:
        assert self.verify(headers(EXPECTED, prefix="svix-")).valid

    def test_multi_signature_from_the_published_tests(self) -> None:
        bad = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
        value = f"{bad} v2,{bad} {EXPECTED} v1,{bad}"
        assert self.verify(headers(value)).valid

    def test_other_versions_only(self) -> None:
        result = self.verify(headers("v1a,QYZGUGaq6g4kw9Vr"))
        assert result.reason is InvalidReason.UNSUPPORTED_VERSION

    def test_one_body_byte_changed(self) -> None:
        assert (
            self.verify(headers(EXPECTED), BODY.replace(b"2", b"3", 1)).reason
            is InvalidReason.BAD_SIGNATURE
        )

    def test_missing_headers(self) -> None:
        assert self.verify({}).reason is InvalidReason.MISSING_SIGNATURE
        no_id = {k: v for k, v in headers(EXPECTED).items() if k != "webhook-id"}
        assert self.verify(no_id).reason is InvalidReason.MISSING_SIGNATURE

    @pytest.mark.parametrize("offset", [-301, 301])
    def test_stale_either_side(self, offset: int) -> None:
        result = self.verify(headers(EXPECTED), now=TS + offset)
        assert result.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE

    def test_sdk_signature_for_a_non_utf8_body_free_input(self) -> None:
        body = '{"emoji": "🦆"}'.encode()
        assert self.verify(headers(sdk_sign(SECRET, body)), body).valid

    def test_unpadded_secret_without_prefix(self) -> None:
        check = check_for("standard-webhooks", SECRET.removeprefix("whsec_"))
        assert run(check, signed(BODY, headers(EXPECTED)), TS).valid

    def test_rotation(self) -> None:
        check = rotated(
            "standard-webhooks", "whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB", SECRET, TS + 1
        )
        assert run(check, signed(BODY, headers(EXPECTED)), TS).secret is MatchedSecret.PREVIOUS
        assert not run(check, signed(BODY, headers(EXPECTED)), TS + 1).valid


class TestHeaderBytes:
    def test_an_id_with_a_non_ascii_byte_is_signed_as_sent(self) -> None:
        import base64
        import hashlib
        import hmac

        key = base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        raw_id = b"msg_\xe9"  # captured headers are latin-1 decoded, byte for byte
        digest = hmac.new(key, raw_id + f".{TS}.".encode() + BODY, hashlib.sha256).digest()
        value = "v1," + base64.b64encode(digest).decode()
        hdrs = {"webhook-id": raw_id.decode("latin-1"), "webhook-timestamp": str(TS),
                "webhook-signature": value}  # fmt: skip
        assert run(check_for("standard-webhooks", SECRET), signed(BODY, hdrs), TS).valid
