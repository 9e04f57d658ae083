"""GitHub: ``X-Hub-Signature-256: sha256=<hex>``; the published vector from
https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries ; form-encoded
deliveries verified on their bytes; the legacy SHA-1 header alone refused."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from hookbay_ingest.verification import InvalidReason, MatchedSecret, Verification
from tests.support.signing import check_for, hex_mac, rotated, run, signed

SECRET = "It's a Secret to Everybody"
BODY = b"Hello, World!"
EXPECTED = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


class TestGitHub:
    check = check_for("github", SECRET)

    def verify(self, headers: dict[str, str], body: bytes = BODY) -> Verification:
        return run(self.check, signed(body, headers), 0)

    def test_published_vector(self) -> None:
        assert "sha256=" + hex_mac(SECRET, BODY) == EXPECTED
        assert self.verify({"X-Hub-Signature-256": EXPECTED}).secret is MatchedSecret.CURRENT

    def test_convoy_peer_vector(self) -> None:
        # https://github.com/frain-dev/convoy/blob/main/pkg/verifier/verifier_test.go
        check = check_for("github", "Convoy")
        value = "sha256=d7a154547e7c35e31c4c820e20237650939c3d34dae136e30a7757ca61abb4cf"
        assert run(check, signed(b"Test Payload Body", {"X-Hub-Signature-256": value}), 0).valid

    def test_one_body_byte_changed(self) -> None:
        result = self.verify({"X-Hub-Signature-256": EXPECTED}, b"Hello, World?")
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_wrong_prefix(self) -> None:
        result = self.verify({"X-Hub-Signature-256": EXPECTED.replace("sha256=", "sha1=")})
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_base64_instead_of_hex(self) -> None:
        import base64

        digest = bytes.fromhex(EXPECTED[7:])
        value = "sha256=" + base64.b64encode(digest).decode()
        assert self.verify({"X-Hub-Signature-256": value}).reason is InvalidReason.BAD_SIGNATURE

    def test_legacy_sha1_alone_is_unsupported(self) -> None:
        legacy = "sha1=" + hex_mac(SECRET, BODY, hashlib.sha1)
        assert legacy == "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59"
        result = self.verify({"X-Hub-Signature": legacy})
        assert result.reason is InvalidReason.UNSUPPORTED_VERSION

    def test_missing(self) -> None:
        assert self.verify({}).reason is InvalidReason.MISSING_SIGNATURE

    def test_form_encoded_on_the_raw_bytes(self) -> None:
        body = ("payload=" + quote('{"zen":"Keep it logically awesome. 🦆","hook_id":1}')).encode()
        value = "sha256=" + hex_mac(SECRET, body)
        headers = {
            "X-Hub-Signature-256": value,
            "Content-Type": "application/x-www-form-urlencoded",
        }
        assert self.verify(headers, body).valid

    def test_rotation(self) -> None:
        check = rotated("github", "new", SECRET, expires_unix=100)
        assert (
            run(check, signed(BODY, {"X-Hub-Signature-256": EXPECTED}), 99).secret
            is MatchedSecret.PREVIOUS
        )
        assert not run(check, signed(BODY, {"X-Hub-Signature-256": EXPECTED}), 100).valid
