"""hookbay's scheme: hex HMAC-SHA256 of the body in ``X-Service-Signature``, ``sha256=`` prefix
optional, any hex case, surrounding whitespace ignored; a missing header is invalid."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import pytest

from hookbay_ingest.verification import (
    SIGNATURE_HEADER,
    HookbayVerifier,
    InvalidReason,
    MatchedSecret,
    SignedRequest,
    SigningSecrets,
    Verification,
    Verifier,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def fixed_clock() -> datetime:
    return NOW


def sign(body: bytes, secret: str) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(
    body: bytes, signature: str | None, secrets: SigningSecrets, query: str = ""
) -> Verification:
    headers = {"content-type": "application/json"}
    if signature is not None:
        headers[SIGNATURE_HEADER] = signature
    verifier: Verifier = HookbayVerifier()
    return verifier.verify(SignedRequest(body, headers, query), secrets, fixed_clock)


class TestHookbayVerifier:
    BODY = b'{"a": 1}'
    SECRET = "s3cret-value"
    GOOD = sign(BODY, SECRET)

    def test_published_hmac_sha256_vector(self) -> None:
        """RFC 4231, test case 2: key ``Jefe``, data ``what do ya want for nothing?``."""
        digest = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        result = verify(b"what do ya want for nothing?", digest, SigningSecrets("Jefe"))
        assert result == Verification.accepted(MatchedSecret.CURRENT)

    @pytest.mark.parametrize(
        "value",
        [
            GOOD,
            GOOD.upper(),
            f"sha256={GOOD}",
            f"SHA256={GOOD}",
            f"  {GOOD}\n",
            f"\t sha256={GOOD} ",
            f"sha256= {GOOD}",
            f"Sha256={GOOD[:32].upper()}{GOOD[32:]}",
        ],
        ids=["plain", "upper", "prefixed", "upper-prefix", "spaced", "spaced-prefixed",
             "space-after-prefix", "mixed-case"],
    )  # fmt: skip
    def test_accepted_forms(self, value: str) -> None:
        result = verify(self.BODY, value, SigningSecrets(self.SECRET))
        assert (result.valid, result.secret, result.reason) == (True, MatchedSecret.CURRENT, None)

    @pytest.mark.parametrize(
        "value",
        [GOOD[:-1], GOOD + "0", "sha1=" + GOOD, "ü" * 64, "sha256=", "deadbeef", "not hex at all",
         f"sha256=sha256={GOOD}", f"{GOOD[:32]} {GOOD[32:]}"],
        ids=["short", "long", "other-algorithm", "non-ascii", "prefix-only", "wrong", "not-hex",
             "double-prefix", "inner-space"],
    )  # fmt: skip
    def test_refused_as_bad_signature(self, value: str) -> None:
        result = verify(self.BODY, value, SigningSecrets(self.SECRET))
        assert (result.valid, result.secret, result.reason) == (
            False, None, InvalidReason.BAD_SIGNATURE,
        )  # fmt: skip

    @pytest.mark.parametrize("value", [None, "", "  \t"], ids=["absent", "empty", "blank"])
    def test_missing_header_is_invalid(self, value: str | None) -> None:
        result = verify(self.BODY, value, SigningSecrets(self.SECRET))
        assert (result.valid, result.reason) == (False, InvalidReason.MISSING_SIGNATURE)

    def test_other_body(self) -> None:
        result = verify(b"{}", self.GOOD, SigningSecrets(self.SECRET))
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_other_secret(self) -> None:
        result = verify(self.BODY, self.GOOD, SigningSecrets("another-secret"))
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_only_the_named_header_counts(self) -> None:
        verifier = HookbayVerifier()
        request = SignedRequest(self.BODY, {"x-hub-signature-256": f"sha256={self.GOOD}"})
        result = verifier.verify(request, SigningSecrets(self.SECRET), fixed_clock)
        assert result.reason is InvalidReason.MISSING_SIGNATURE

    def test_query_string_is_not_signed(self) -> None:
        result = verify(self.BODY, self.GOOD, SigningSecrets(self.SECRET), query="a=1&b=2")
        assert result.valid

    def test_clock_is_not_read(self) -> None:
        def clock() -> datetime:
            raise AssertionError("the hookbay scheme signs no timestamp")

        request = SignedRequest(self.BODY, {SIGNATURE_HEADER: self.GOOD})
        assert HookbayVerifier().verify(request, SigningSecrets(self.SECRET), clock).valid

    def test_previous_secret_during_a_rotation(self) -> None:
        result = verify(self.BODY, self.GOOD, SigningSecrets("new-secret", previous=self.SECRET))
        assert result == Verification.accepted(MatchedSecret.PREVIOUS)

    def test_current_secret_wins_during_a_rotation(self) -> None:
        result = verify(self.BODY, self.GOOD, SigningSecrets(self.SECRET, previous=self.SECRET))
        assert result == Verification.accepted(MatchedSecret.CURRENT)

    def test_neither_secret_during_a_rotation(self) -> None:
        result = verify(self.BODY, self.GOOD, SigningSecrets("new-secret", previous="old-secret"))
        assert result == Verification.refused(InvalidReason.BAD_SIGNATURE)
