"""Meta: ``X-Hub-Signature-256`` over the raw body with the app secret (derived fixture from the
construction at https://developers.facebook.com/docs/graph-api/webhooks/getting-started/), and
the GET ``hub.mode=subscribe`` handshake checked against the owner's verify token (example
values from the same page)."""

from __future__ import annotations

from urllib.parse import urlencode

from hookbay_common.models import HandshakeKind
from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, clock_at, hex_mac, run, signed

SECRET = "meta_app_secret"
BODY = b'{"object":"page","entry":[]}'
EXPECTED = "sha256=7737c8c2c205014576d41d33bf51e33b58a44d48700b5820ea9397d612e36dd1"
TOKEN = "meatyhamhock"


def subscribe(token: str = TOKEN, challenge: str = "1158201444") -> object:
    query = urlencode(
        {"hub.mode": "subscribe", "hub.challenge": challenge, "hub.verify_token": token}
    )
    return signed(b"", query_string=query, method="GET")


class TestMeta:
    check = check_for("meta", SECRET, verify_token=TOKEN)

    def test_derived_vector(self) -> None:
        assert "sha256=" + hex_mac(SECRET, BODY) == EXPECTED
        assert run(self.check, signed(BODY, {"X-Hub-Signature-256": EXPECTED}), 0).valid

    def test_escaped_unicode_is_verified_as_sent(self) -> None:
        body = b'{"text":"\\u00e9@"}'
        value = "sha256=" + hex_mac(SECRET, body)
        assert run(self.check, signed(body, {"X-Hub-Signature-256": value}), 0).valid

    def test_one_body_byte_changed(self) -> None:
        result = run(self.check, signed(BODY + b" ", {"X-Hub-Signature-256": EXPECTED}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE


class TestSubscribe:
    check = check_for("meta", SECRET, verify_token=TOKEN)

    def answer(self, request: object) -> object:
        assert self.check.handshake is not None
        kind = self.check.handshake.detect(request)  # type: ignore[arg-type]
        assert kind is HandshakeKind.META_SUBSCRIBE
        return self.check.handshake.answer(kind, request, self.check.secrets, clock_at(0))  # type: ignore[arg-type]

    def test_right_token_gets_the_challenge(self) -> None:
        answer = self.answer(subscribe())
        assert answer.body == b"1158201444"  # type: ignore[attr-defined]

    def test_wrong_token_is_refused(self) -> None:
        answer = self.answer(subscribe(token="guess"))
        assert answer.refused  # type: ignore[attr-defined]
        assert answer.body == b""  # type: ignore[attr-defined]

    def test_markup_is_never_reflected(self) -> None:
        assert self.answer(subscribe(challenge="<script>alert(1)</script>")).refused  # type: ignore[attr-defined]

    def test_post_is_no_handshake(self) -> None:
        assert self.check.handshake is not None
        assert self.check.handshake.detect(signed(BODY)) is None
