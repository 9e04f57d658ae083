"""SendGrid: ECDSA P-256 over ``{timestamp}{body}`` with the account's public key; the vector of
https://github.com/sendgrid/sendgrid-python/blob/main/test/unit/test_eventwebhook.py (the trailing
CRLF is part of the signed body)."""

from __future__ import annotations

import json

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, run, signed

PUBLIC_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw"
    "+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
)
TIMESTAMP = "1600112502"
SIGNATURE = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
EVENTS = [{
    "email": "hello@world.com", "event": "dropped", "reason": "Bounced Address",
    "sg_event_id": "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
    "sg_message_id": "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",
    "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>", "timestamp": 1600112492,
}]  # fmt: skip
BODY = (json.dumps(EVENTS, sort_keys=True, separators=(",", ":")) + "\r\n").encode()
HEADERS = {
    "X-Twilio-Email-Event-Webhook-Signature": SIGNATURE,
    "X-Twilio-Email-Event-Webhook-Timestamp": TIMESTAMP,
}


class TestSendGrid:
    check = check_for("sendgrid", None, public_key=PUBLIC_KEY)

    def test_published_vector(self) -> None:
        assert run(self.check, signed(BODY, HEADERS), 0).valid

    def test_without_the_trailing_crlf(self) -> None:
        result = run(self.check, signed(BODY[:-2], HEADERS), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_another_timestamp(self) -> None:
        headers = {**HEADERS, "X-Twilio-Email-Event-Webhook-Timestamp": "1600112503"}
        assert run(self.check, signed(BODY, headers), 0).reason is InvalidReason.BAD_SIGNATURE

    def test_missing(self) -> None:
        assert run(self.check, signed(BODY), 0).reason is InvalidReason.MISSING_SIGNATURE
