"""Stripe: ``t=…,v1=…`` over ``{t}.{body}``, the ``whsec_`` secret used as text, several
``v1`` (rotation at Stripe), ``v0`` ignored, tolerance on the injected clock. Signatures come
from the official ``stripe`` SDK (``stripe.WebhookSignature``), pinned as a dev dependency."""

from __future__ import annotations

import pytest
import stripe

from hookbay_ingest.verification import InvalidReason, MatchedSecret, Verification
from tests.support.signing import check_for, rotated, run, signed

SECRET = "whsec_test_secret"
T = 1492774577
BODY = b'{"id":"evt_test_webhook","object":"event"}'


def sdk_signature(body: bytes, secret: str, t: int) -> str:
    return stripe.WebhookSignature._compute_signature(f"{t}.{body.decode()}", secret)


def header(body: bytes = BODY, secret: str = SECRET, t: int = T) -> str:
    return f"t={t},v1={sdk_signature(body, secret, t)}"


class TestStripe:
    check = check_for("stripe", SECRET)

    def verify(self, value: str | None, body: bytes = BODY, now: float = T) -> Verification:
        headers = {"Stripe-Signature": value} if value is not None else {}
        return run(self.check, signed(body, headers), now)

    def test_derived_vector(self) -> None:
        # derived with the documented construction (Stripe publishes no full vector)
        expected = "88a022085c6bdb887b02cb26ff76dd681234d9675c0f22844059f55552a8883a"
        assert sdk_signature(BODY, SECRET, T) == expected
        assert self.verify(f"t={T},v1={expected}").secret is MatchedSecret.CURRENT

    def test_the_sdk_accepts_what_it_signed(self) -> None:
        stripe.WebhookSignature.verify_header(BODY.decode(), header(), SECRET, tolerance=None)

    def test_one_body_byte_changed(self) -> None:
        assert self.verify(header(), BODY[:-1] + b"]").reason is InvalidReason.BAD_SIGNATURE

    def test_several_v1_any_match(self) -> None:
        value = f"t={T},v1={'0' * 64},v1={sdk_signature(BODY, SECRET, T)},v0={'1' * 64}"
        assert self.verify(value).valid

    def test_only_v0_is_unsupported_version(self) -> None:
        value = f"t={T},v0={sdk_signature(BODY, SECRET, T)}"
        assert self.verify(value).reason is InvalidReason.UNSUPPORTED_VERSION

    def test_missing(self) -> None:
        assert self.verify(None).reason is InvalidReason.MISSING_SIGNATURE

    @pytest.mark.parametrize("offset", [-301, 301])
    def test_stale_either_side(self, offset: int) -> None:
        result = self.verify(header(), now=T + offset)
        assert result.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE

    @pytest.mark.parametrize("offset", [-300, 300])
    def test_within_tolerance(self, offset: int) -> None:
        assert self.verify(header(), now=T + offset).valid

    def test_secret_is_text_not_base64(self) -> None:
        import base64
        import hashlib
        import hmac

        key = base64.b64decode("dGVzdF9zZWNyZXQ=")  # what a Standard Webhooks reading would use
        wrong = hmac.new(key, f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
        assert self.verify(f"t={T},v1={wrong}").reason is InvalidReason.BAD_SIGNATURE

    def test_custom_tolerance_and_zero_disables(self) -> None:
        assert not run(
            check_for("stripe", SECRET, tolerance_s=10),
            signed(BODY, {"stripe-signature": header()}),
            T + 11,
        ).valid
        assert run(
            check_for("stripe", SECRET, tolerance_s=0),
            signed(BODY, {"stripe-signature": header()}),
            T + 10**6,
        ).valid


class TestRotation:
    def test_previous_within_and_after_its_overlap(self) -> None:
        check = rotated("stripe", "whsec_new", SECRET, expires_unix=T + 60)
        request = signed(BODY, {"Stripe-Signature": header()})
        assert run(check, request, T).secret is MatchedSecret.PREVIOUS
        assert run(check, request, T + 60).reason is InvalidReason.BAD_SIGNATURE
        new = signed(BODY, {"Stripe-Signature": header(secret="whsec_new")})
        assert run(check, new, T).secret is MatchedSecret.CURRENT
