"""X (Twitter): ``x-twitter-webhooks-signature: sha256=<base64>`` and the GET CRC. Fixtures
derived with plain ``hmac`` from the consumer secret and token of X's developer-relations
example (https://gist.github.com/jcipriano/46c4b3f379d214d57a9ddfa70dba49fe) and the
construction at https://developer.x.com/en/docs/x-api/enterprise/account-activity-api/guides/securing-webhooks ;
a token that could be a JSON body is never signed (the CRC would be a signing oracle)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from hookbay_common.models import HandshakeKind
from hookbay_ingest.verification import InvalidReason
from tests.support.signing import b64_mac, check_for, clock_at, run, signed

SECRET = "z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu"
CRC = "9b4507b3-9040-4669-9ca3-6b94edb50553"
CRC_ANSWER = "sha256=Cytd4Sq+NvEcV3MMrXxWJGJx5A+y/lXzzU2Maartkx8="
BODY = b'{"for_user_id":"2244994945"}'
EXPECTED = "sha256=xUAEawfmdDOeE294K2UExNQN/gikc6w+GyzSM4pny0g="


class TestX:
    check = check_for("x", SECRET)

    def test_derived_vector(self) -> None:
        assert "sha256=" + b64_mac(SECRET, BODY) == EXPECTED
        request = signed(BODY, {"x-twitter-webhooks-signature": EXPECTED})
        assert run(self.check, request, 0).valid

    def test_one_body_byte_changed(self) -> None:
        request = signed(BODY[:-1] + b" ", {"x-twitter-webhooks-signature": EXPECTED})
        assert run(self.check, request, 0).reason is InvalidReason.BAD_SIGNATURE


class TestCrc:
    check = check_for("x", SECRET)

    def answer(self, token: str) -> object:
        request = signed(b"", query_string=urlencode({"crc_token": token}), method="GET")
        assert self.check.handshake is not None
        kind = self.check.handshake.detect(request)
        assert kind is HandshakeKind.X_CRC
        return self.check.handshake.answer(kind, request, self.check.secrets, clock_at(0))

    def test_derived_vector(self) -> None:
        answer = self.answer(CRC)
        assert json.loads(answer.body) == {"response_token": CRC_ANSWER}  # type: ignore[attr-defined]

    @pytest.mark.parametrize(
        "token", ['{"for_user_id":"2244994945"}', "a b", "x" * 257, '"quoted"', ""]
    )
    def test_a_token_that_is_no_plain_token_is_refused(self, token: str) -> None:
        answer = self.answer(token)
        assert answer.refused  # type: ignore[attr-defined]
        assert answer.body == b""  # type: ignore[attr-defined]
