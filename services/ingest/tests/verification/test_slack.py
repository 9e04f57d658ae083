"""Slack: ``v0=`` hex over ``v0:{ts}:{body}``; the published vector (form-encoded) from
https://docs.slack.dev/authentication/verifying-requests-from-slack (as in
https://github.com/slackapi/python-slack-sdk/blob/main/tests/slack_sdk/signature/test_signature_verifier.py);
other signatures from the official ``slack-sdk`` (``SignatureVerifier``), pinned as a dev
dependency; the ``url_verification`` handshake answered only when signed."""

from __future__ import annotations

import json

import pytest
from slack_sdk.signature import SignatureVerifier

from hookbay_common.models import HandshakeKind
from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, clock_at, run, signed

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TS = 1531420618
BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
EXPECTED = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
CHALLENGE = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
HANDSHAKE = json.dumps(
    {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": CHALLENGE, "type": "url_verification"}
).encode()


def headers(signature: str, ts: int = TS) -> dict[str, str]:
    return {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": str(ts)}


def sdk_sign(body: bytes, ts: int = TS) -> str:
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=str(ts), body=body)
    assert signature is not None
    return signature


class TestSlack:
    check = check_for("slack", SECRET)

    def test_published_vector(self) -> None:
        assert sdk_sign(BODY) == EXPECTED
        assert run(self.check, signed(BODY, headers(EXPECTED)), TS).valid

    def test_one_body_byte_changed(self) -> None:
        result = run(self.check, signed(BODY + b"x", headers(EXPECTED)), TS)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    @pytest.mark.parametrize("offset", [-301, 301])
    def test_stale(self, offset: int) -> None:
        result = run(self.check, signed(BODY, headers(EXPECTED)), TS + offset)
        assert result.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE

    def test_wrong_prefix(self) -> None:
        result = run(self.check, signed(BODY, headers(EXPECTED.replace("v0=", "v1="))), TS)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_missing_timestamp(self) -> None:
        request = signed(BODY, {"X-Slack-Signature": EXPECTED})
        assert run(self.check, request, TS).reason is InvalidReason.MISSING_SIGNATURE


class TestUrlVerification:
    check = check_for("slack", SECRET)

    def test_signed_handshake_gets_the_challenge(self) -> None:
        request = signed(HANDSHAKE, headers(sdk_sign(HANDSHAKE)))
        assert self.check.handshake is not None
        kind = self.check.handshake.detect(request)
        assert kind is HandshakeKind.SLACK_URL_VERIFICATION
        answer = self.check.handshake.answer(kind, request, self.check.secrets, clock_at(TS))
        assert (answer.refused, answer.body) == (False, CHALLENGE.encode())
        assert answer.media_type.startswith("text/plain")

    def test_forged_handshake_is_refused_without_the_challenge(self) -> None:
        request = signed(HANDSHAKE, headers("v0=" + "0" * 64))
        assert self.check.handshake is not None
        kind = self.check.handshake.detect(request)
        assert kind is not None
        answer = self.check.handshake.answer(kind, request, self.check.secrets, clock_at(TS))
        assert answer.refused
        assert answer.body == b""

    def test_an_event_is_not_a_handshake(self) -> None:
        assert self.check.handshake is not None
        assert self.check.handshake.detect(signed(BODY, headers(EXPECTED))) is None
        event = b'{"type":"event_callback","text":"url_verification"}'
        assert self.check.handshake.detect(signed(event)) is None
