"""Zoom: ``v0=`` hex over ``v0:{ts}:{body}`` and the ``endpoint.url_validation`` handshake
(answered only when its own signature is valid: else it would be a signing oracle). Zoom
publishes no vector with its secret; the fixtures are derived with plain ``hmac`` from the
construction of https://github.com/zoom/webhook-sample (index.js)."""

from __future__ import annotations

import json

from hookbay_common.models import HandshakeKind
from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, clock_at, hex_mac, run, signed

SECRET = "zoom_secret_token"
TS = 1658940994
BODY = b'{"event":"meeting.started","payload":{"account_id":"abc"}}'
EXPECTED = "v0=02864a733d7971eae6b8773c3bbda871879a5edff14d47ca5860113133e764ab"
PLAIN = "qgg8vlvZRS6UYooatFL8Aw"
ENCRYPTED = "bd48235863f4a6323ccc4963c594908b7c97f88b4a6a95278f4f093690b12726"


def headers(body: bytes, ts: int = TS, secret: str = SECRET) -> dict[str, str]:
    signature = "v0=" + hex_mac(secret, f"v0:{ts}:".encode() + body)
    return {"x-zm-signature": signature, "x-zm-request-timestamp": str(ts)}


class TestZoom:
    check = check_for("zoom", SECRET)

    def test_derived_vector(self) -> None:
        assert headers(BODY)["x-zm-signature"] == EXPECTED
        assert run(self.check, signed(BODY, headers(BODY)), TS).valid

    def test_one_body_byte_changed(self) -> None:
        result = run(self.check, signed(BODY[:-2] + b"}}", headers(BODY[:-2] + b"x}")), TS)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_stale(self) -> None:
        result = run(self.check, signed(BODY, headers(BODY)), TS + 301)
        assert result.reason is InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE


class TestUrlValidation:
    check = check_for("zoom", SECRET)
    body = json.dumps(
        {"event": "endpoint.url_validation", "payload": {"plainToken": PLAIN}, "event_ts": TS}
    ).encode()

    def test_signed_validation_is_answered(self) -> None:
        assert hex_mac(SECRET, PLAIN.encode()) == ENCRYPTED
        request = signed(self.body, headers(self.body))
        assert self.check.handshake is not None
        kind = self.check.handshake.detect(request)
        assert kind is HandshakeKind.ZOOM_URL_VALIDATION
        answer = self.check.handshake.answer(kind, request, self.check.secrets, clock_at(TS))
        assert json.loads(answer.body) == {"plainToken": PLAIN, "encryptedToken": ENCRYPTED}

    def test_unsigned_validation_is_refused(self) -> None:
        # answered, plainToken "v0:<ts>:<body>" would yield a valid x-zm-signature for <body>
        forged_token = f"v0:{TS}:" + BODY.decode()
        body = json.dumps(
            {"event": "endpoint.url_validation", "payload": {"plainToken": forged_token}}
        ).encode()
        request = signed(body, {"x-zm-request-timestamp": str(TS)})
        assert self.check.handshake is not None
        kind = self.check.handshake.detect(request)
        assert kind is not None
        answer = self.check.handshake.answer(kind, request, self.check.secrets, clock_at(TS))
        assert answer.refused
        assert answer.body == b""
