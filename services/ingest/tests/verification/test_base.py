"""The verifier interface's value types: results that are valid xor carry a reason, and the
secrets a verifier tries, current first."""

from __future__ import annotations

import pytest

from hookbay_ingest.verification import (
    InvalidReason,
    MatchedSecret,
    SignedRequest,
    SigningSecrets,
    Verification,
)


class TestVerification:
    @pytest.mark.parametrize("secret", list(MatchedSecret))
    def test_accepted_is_valid_with_the_matched_secret(self, secret: MatchedSecret) -> None:
        result = Verification.accepted(secret)
        assert (result.valid, result.secret, result.reason) == (True, secret, None)

    @pytest.mark.parametrize("reason", list(InvalidReason))
    def test_refused_is_invalid_with_its_reason(self, reason: InvalidReason) -> None:
        result = Verification.refused(reason)
        assert (result.valid, result.secret, result.reason) == (False, None, reason)

    def test_reasons_and_secrets_are_the_documented_names(self) -> None:
        assert [r.value for r in InvalidReason] == [
            "missing_signature",
            "bad_signature",
            "timestamp_out_of_tolerance",
            "unsupported_version",
        ]
        assert [s.value for s in MatchedSecret] == ["current", "previous"]

    @pytest.mark.parametrize(
        "fields",
        [{}, {"secret": MatchedSecret.CURRENT, "reason": InvalidReason.BAD_SIGNATURE}],
        ids=["neither", "both"],
    )
    def test_neither_or_both_is_refused(self, fields: dict[str, object]) -> None:
        with pytest.raises(ValueError, match="either the matched secret or the reason"):
            Verification(**fields)  # type: ignore[arg-type]


class TestSigningSecrets:
    def test_current_only_outside_a_rotation(self) -> None:
        assert SigningSecrets("new").candidates() == (("new", MatchedSecret.CURRENT),)

    def test_current_then_previous_during_a_rotation(self) -> None:
        assert SigningSecrets("new", previous="old").candidates() == (
            ("new", MatchedSecret.CURRENT),
            ("old", MatchedSecret.PREVIOUS),
        )


class TestSignedRequest:
    def test_query_string_defaults_to_empty(self) -> None:
        request = SignedRequest(b"{}", {"content-type": "application/json"})
        assert request.query_string == ""
