"""Square: base64 HMAC-SHA256 of the notification URL followed by the body; vectors from
https://github.com/square/square-python-sdk/blob/master/legacy/tests/utilities/test_webhooks_helper.py ."""

from __future__ import annotations

import pytest

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, run, signed

HEADER = "x-square-hmacsha256-signature"
BODY = (
    b'{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":'
    b'"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z",'
    b'"data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}'
)


class TestSquare:
    @pytest.mark.parametrize(
        ("key", "url", "body", "expected"),
        [
            (
                "Ibxx_5AKakO-3qeNVR61Dw",
                "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
                BODY,
                "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=",
            ),
            (
                "signature-key",
                "https://webhook.site/webhooks",
                b'{"data":{"type":"webhooks","id":">id<"}}',
                "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=",
            ),
        ],
    )
    def test_published_vectors(self, key: str, url: str, body: bytes, expected: str) -> None:
        assert run(
            check_for("square", key, public_url=url), signed(body, {HEADER: expected}), 0
        ).valid

    def test_a_trailing_slash_matters(self) -> None:
        check = check_for("square", "signature-key", public_url="https://webhook.site/webhooks/")
        body = b'{"data":{"type":"webhooks","id":">id<"}}'
        result = run(
            check, signed(body, {HEADER: "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U="}), 0
        )
        assert result.reason is InvalidReason.BAD_SIGNATURE
