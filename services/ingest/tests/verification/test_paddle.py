"""Paddle Billing: ``ts=…;h1=…`` over ``{ts}:{body}``, several ``h1``, a list of secrets; the
vector of https://github.com/PaddleHQ/paddle-python-sdk/blob/main/tests/Unit/Notification/test_Verifier.py ."""

from __future__ import annotations

from hookbay_ingest.verification import InvalidReason, MatchedSecret
from tests.support.signing import check_for, rotated, run, signed

HEADER = (
    "ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"
)
BODY = b"hello-world"
FAILING = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4"
PASSING = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh"
TS = 1696195954


class TestPaddle:
    def test_published_vector(self) -> None:
        request = signed(BODY, {"Paddle-Signature": HEADER})
        assert run(check_for("paddle", PASSING), request, TS).valid
        assert not run(check_for("paddle", FAILING), request, TS).valid

    def test_published_vector_with_the_passing_secret_as_previous(self) -> None:
        check = rotated("paddle", FAILING, PASSING, expires_unix=TS + 1)
        request = signed(BODY, {"Paddle-Signature": HEADER})
        assert run(check, request, TS).secret is MatchedSecret.PREVIOUS

    def test_one_body_byte_changed(self) -> None:
        result = run(
            check_for("paddle", PASSING), signed(b"hello-World", {"Paddle-Signature": HEADER}), TS
        )
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_stale(self) -> None:
        result = run(
            check_for("paddle", PASSING), signed(BODY, {"Paddle-Signature": HEADER}), TS + 301
        )
        assert result.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE

    def test_no_h1_is_unsupported(self) -> None:
        result = run(
            check_for("paddle", PASSING), signed(BODY, {"Paddle-Signature": f"ts={TS};h2=ab"}), TS
        )
        assert result.reason is InvalidReason.UNSUPPORTED_VERSION
