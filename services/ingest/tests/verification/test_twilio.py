"""Twilio: base64 HMAC-SHA1 over the public URL plus sorted form parameters, and the
``bodySHA256`` path for JSON; vectors from
https://github.com/twilio/twilio-python/blob/main/tests/unit/test_request_validator.py ."""

from __future__ import annotations

import hashlib
from urllib.parse import urlencode

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import b64_mac, check_for, run, signed

TOKEN = "12345"
URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
PARAMS = {
    "CallSid": "CA1234567890ABCDE", "Caller": "+14158675309", "Digits": "1234",
    "From": "+14158675309", "To": "+18005551212",
}  # fmt: skip
EXPECTED = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class TestTwilio:
    check = check_for("twilio", TOKEN, public_url=URL)

    def test_published_vector(self) -> None:
        body = urlencode(PARAMS).encode()
        request = signed(body, {**FORM, "X-Twilio-Signature": EXPECTED})
        assert run(self.check, request, 0).valid

    def test_parameter_order_in_the_body_does_not_matter(self) -> None:
        body = urlencode(dict(reversed(PARAMS.items()))).encode()
        assert run(self.check, signed(body, {**FORM, "X-Twilio-Signature": EXPECTED}), 0).valid

    def test_one_parameter_changed(self) -> None:
        body = urlencode({**PARAMS, "Digits": "1235"}).encode()
        result = run(self.check, signed(body, {**FORM, "X-Twilio-Signature": EXPECTED}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_another_url(self) -> None:
        check = check_for("twilio", TOKEN, public_url="http://mycompany.com/myapp.php?foo=1&bar=2")
        body = urlencode(PARAMS).encode()
        result = run(check, signed(body, {**FORM, "X-Twilio-Signature": EXPECTED}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_json_body_through_body_sha256(self) -> None:
        body = b'{"property": "value", "boolean": true}'
        body_hash = hashlib.sha256(body).hexdigest()
        assert body_hash == "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
        check = check_for("twilio", TOKEN, public_url="https://mycompany.com/myapp")
        query = f"bodySHA256={body_hash}"
        signature = b64_mac(TOKEN, f"https://mycompany.com/myapp?{query}".encode(), hashlib.sha1)
        headers = {"Content-Type": "application/json", "X-Twilio-Signature": signature}
        assert run(check, signed(body, headers, query_string=query), 0).valid
        tampered = signed(body + b" ", headers, query_string=query)
        assert run(check, tampered, 0).reason is InvalidReason.BAD_SIGNATURE

    def test_the_url_with_the_default_port_written_out(self) -> None:
        """twilio-python's test_validation_adds_port_on_https: signed with ``:443``, configured
        without."""
        with_port = URL.replace(".com", ".com:443")
        body = urlencode(PARAMS).encode()
        signature = b64_mac(TOKEN, _signed_form(with_port), hashlib.sha1)
        assert run(self.check, signed(body, {**FORM, "X-Twilio-Signature": signature}), 0).valid

    def test_a_configured_port_signed_without_it(self) -> None:
        """twilio-python's test_validation_removes_port_on_https: configured with a port, the
        published signature (made without it) is valid."""
        check = check_for("twilio", TOKEN, public_url=URL.replace(".com", ".com:1234"))
        body = urlencode(PARAMS).encode()
        assert run(check, signed(body, {**FORM, "X-Twilio-Signature": EXPECTED}), 0).valid

    def test_another_port_is_another_url(self) -> None:
        check = check_for("twilio", TOKEN, public_url=URL)
        body = urlencode(PARAMS).encode()
        signature = b64_mac(TOKEN, _signed_form(URL.replace(".com", ".com:8443")), hashlib.sha1)
        result = run(check, signed(body, {**FORM, "X-Twilio-Signature": signature}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE


def _signed_form(url: str) -> bytes:
    return (url + "".join(k + PARAMS[k] for k in sorted(PARAMS))).encode()
