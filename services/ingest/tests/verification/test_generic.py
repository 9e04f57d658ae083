"""Types ``hmac`` (header, algorithm, encoding, prefix, payload template, timestamp header),
``basic``, ``api-key`` and ``none``. Signatures computed with plain ``hmac``."""

from __future__ import annotations

import base64
import hashlib

import pytest

from hookbay_common.models import HmacScheme
from hookbay_ingest.verification import InvalidReason, MatchedSecret
from tests.support.signing import b64_mac, check_for, hex_mac, run, signed

BODY = b'{"order": 1}'


class TestHmac:
    @pytest.mark.parametrize("algorithm", ["sha1", "sha256", "sha512"])
    @pytest.mark.parametrize("encoding", ["hex", "base64"])
    def test_algorithms_and_encodings(self, algorithm: str, encoding: str) -> None:
        scheme = HmacScheme.model_validate(
            {"header": "X-Sig", "algorithm": algorithm, "encoding": encoding, "prefix": "s="}
        )
        check = check_for("hmac", "k", hmac=scheme)
        digest = getattr(hashlib, algorithm)
        value = hex_mac("k", BODY, digest) if encoding == "hex" else b64_mac("k", BODY, digest)
        assert run(check, signed(BODY, {"x-sig": "s=" + value}), 0).valid
        assert not run(check, signed(BODY, {"x-sig": value}), 0).valid  # prefix missing
        assert not run(check, signed(BODY + b" ", {"x-sig": "s=" + value}), 0).valid

    def test_payload_template_with_timestamp_id_and_url(self) -> None:
        scheme = HmacScheme(
            header="x-sig", payload="{id}:{timestamp}:{url}:{body}",
            timestamp_header="x-ts", id_header="x-id",
        )  # fmt: skip
        check = check_for("hmac", "k", hmac=scheme, public_url="https://h.example/w")
        value = hex_mac("k", b"evt_1:1000:https://h.example/w:" + BODY)
        headers = {"x-sig": value, "x-ts": "1000", "x-id": "evt_1"}
        assert run(check, signed(BODY, headers), 1000).valid
        stale = run(check, signed(BODY, headers), 1301)
        assert stale.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE
        other_id = run(check, signed(BODY, {**headers, "x-id": "evt_2"}), 1000)
        assert other_id.reason is InvalidReason.BAD_SIGNATURE


class TestBasic:
    check = check_for("basic", None, basic={"username": "hooks", "password": "pa:ss"})

    def auth(self, credentials: bytes) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(credentials).decode()}

    def test_password_with_a_colon(self) -> None:
        assert (
            run(self.check, signed(BODY, self.auth(b"hooks:pa:ss")), 0).secret
            is MatchedSecret.CURRENT
        )

    @pytest.mark.parametrize("credentials", [b"hooks:pa:sS", b"hookz:pa:ss", b"hookspa:ss"])
    def test_wrong_credentials(self, credentials: bytes) -> None:
        result = run(self.check, signed(BODY, self.auth(credentials)), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_missing(self) -> None:
        assert run(self.check, signed(BODY), 0).reason is InvalidReason.MISSING_SIGNATURE


class TestApiKey:
    check = check_for("api-key", None, api_key={"header": "X-Api-Key", "value": "k-123"})

    def test_equal_key(self) -> None:
        assert run(self.check, signed(BODY, {"x-api-key": "k-123"}), 0).valid

    def test_other_key(self) -> None:
        result = run(self.check, signed(BODY, {"x-api-key": "k-124"}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE


class TestNone:
    def test_checks_nothing(self) -> None:
        assert check_for("none", None).verifier is None
