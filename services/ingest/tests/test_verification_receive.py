"""Provider verification through the real ingest (real Kafka, FerretDB, Redis): every preset's
valid delivery answered 200 and a one-byte change 401 with its reason, stale timestamps,
rotation within and after the overlap, several signatures in one header, wrong prefix or
encoding, record mode, form-encoded deliveries verified on their bytes, and the Slack, Zoom,
Meta and X handshakes answered end to end while forged ones are refused."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
import stripe
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier
from standardwebhooks import Webhook as StandardWebhook

from hookbay_common.configlog import ConfigChange
from hookbay_common.models import (
    Event,
    EventStatus,
    HandshakeKind,
    PreviousSecret,
    RejectedReason,
    VerificationResult,
    WebhookVerification,
)
from hookbay_common.wire import decode_event
from tests.support.ingest import Probe, Stack
from tests.support.signing import b64_mac, hex_mac

SECRET = "s3cret-value"
WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
PUBLIC_URL = "https://hooks.example.com/w/alice/sms"
BODY = b'{"id":"evt_1","amount":4200,"note":"caf\xc3\xa9"}'
FORM = "application/x-www-form-urlencoded"
_SENDGRID_KEY = ec.generate_private_key(ec.SECP256R1())
SENDGRID_PUBLIC = base64.b64encode(
    _SENDGRID_KEY.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
).decode()

Headers = dict[str, str]


@dataclass(frozen=True)
class Preset:
    """How to configure a preset and sign a body for it (independently of ingest's code)."""

    config: dict[str, Any]
    sign: Callable[[bytes, float], Headers]
    query: str = ""
    content_type: str = "application/json"
    extra: dict[str, Any] = field(default_factory=dict)


def _stripe(body: bytes, now: float, secret: str = SECRET) -> Headers:
    t = int(now)
    signature = stripe.WebhookSignature._compute_signature(f"{t}.{body.decode()}", secret)
    return {"Stripe-Signature": f"t={t},v1={signature}"}


def _standard(body: bytes, now: float) -> Headers:
    moment = datetime.fromtimestamp(int(now), tz=UTC)
    signature = StandardWebhook(WHSEC).sign("msg_1", moment, body.decode())
    return {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(now)),
        "webhook-signature": signature,
    }


def _slack(body: bytes, now: float) -> Headers:
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=str(int(now)), body=body)
    assert signature is not None
    return {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": str(int(now))}


def _zoom(body: bytes, now: float) -> Headers:
    signature = "v0=" + hex_mac(SECRET, f"v0:{int(now)}:".encode() + body)
    return {"x-zm-signature": signature, "x-zm-request-timestamp": str(int(now))}


def _twilio(body: bytes, now: float) -> Headers:
    # JSON body: Twilio signs the URL carrying bodySHA256 (the query below)
    url = f"{PUBLIC_URL}?bodySHA256={hashlib.sha256(body).hexdigest()}"
    return {"X-Twilio-Signature": b64_mac(SECRET, url.encode(), hashlib.sha1)}


def _sendgrid(body: bytes, now: float) -> Headers:
    ts = str(int(now))
    signature = _SENDGRID_KEY.sign(ts.encode() + body, ec.ECDSA(hashes.SHA256()))
    return {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": ts,
    }


def _basic(body: bytes, now: float) -> Headers:
    return {"Authorization": "Basic " + base64.b64encode(f"hooks:{SECRET}".encode()).decode()}


PRESETS: dict[str, Preset] = {
    "standard-webhooks": Preset({"secret": WHSEC}, _standard),
    "stripe": Preset({}, _stripe),
    "github": Preset({}, lambda b, n: {"X-Hub-Signature-256": "sha256=" + hex_mac(SECRET, b)}),
    "shopify": Preset({}, lambda b, n: {"X-Shopify-Hmac-Sha256": b64_mac(SECRET, b)}),
    "slack": Preset({}, _slack),
    "twilio": Preset({"public_url": PUBLIC_URL}, _twilio, query="bodySHA256={sha}"),
    "zoom": Preset({}, _zoom),
    "meta": Preset(
        {"verify_token": "tok"},
        lambda b, n: {"X-Hub-Signature-256": "sha256=" + hex_mac(SECRET, b)},
    ),
    "paddle": Preset(
        {},
        lambda b, n: {
            "Paddle-Signature": f"ts={int(n)};h1=" + hex_mac(SECRET, f"{int(n)}:".encode() + b)
        },
    ),
    "pagerduty": Preset({}, lambda b, n: {"X-PagerDuty-Signature": "v1=" + hex_mac(SECRET, b)}),
    "typeform": Preset({}, lambda b, n: {"Typeform-Signature": "sha256=" + b64_mac(SECRET, b)}),
    "intercom": Preset(
        {}, lambda b, n: {"X-Hub-Signature": "sha1=" + hex_mac(SECRET, b, hashlib.sha1)}
    ),
    "square": Preset(
        {"public_url": PUBLIC_URL},
        lambda b, n: {"x-square-hmacsha256-signature": b64_mac(SECRET, PUBLIC_URL.encode() + b)},
    ),
    "gitlab": Preset({}, lambda b, n: {"X-Gitlab-Token": SECRET}, extra={"body_signed": False}),
    "sendgrid": Preset({"public_key": SENDGRID_PUBLIC, "secret": None}, _sendgrid),
    "x": Preset({}, lambda b, n: {"x-twitter-webhooks-signature": "sha256=" + b64_mac(SECRET, b)}),
    "hmac": Preset(
        {
            "hmac": {
                "header": "X-Sig",
                "algorithm": "sha512",
                "encoding": "base64",
                "prefix": "v=",
                "payload": "{timestamp}.{body}",
                "timestamp_header": "X-Ts",
            }
        },
        lambda b, n: {
            "X-Sig": "v=" + b64_mac(SECRET, f"{int(n)}.".encode() + b, hashlib.sha512),
            "X-Ts": str(int(n)),
        },
    ),
    "basic": Preset(
        {"basic": {"username": "hooks", "password": SECRET}, "secret": None},
        _basic,
        extra={"body_signed": False},
    ),
    "api-key": Preset(
        {"api_key": {"header": "X-Api-Key", "value": SECRET}, "secret": None},
        lambda b, n: {"X-Api-Key": SECRET},
        extra={"body_signed": False},
    ),
}
LINEAR_BODY = b'{"action":"create","type":"Issue","webhookTimestamp":%d}'


def verification(kind: str, **fields: Any) -> WebhookVerification:
    config: dict[str, Any] = {"secret": SECRET, **fields}
    if config["secret"] is None:
        del config["secret"]
    return WebhookVerification.model_validate({"type": kind, **config})


async def deliver(
    stack: Stack, kind: str, body: bytes, headers: Headers, *, query: str = "", **fields: Any
) -> httpx.Response:
    preset = PRESETS.get(kind)
    config = {**(preset.config if preset else {}), **fields}
    user, hook = await stack.owner(verification=verification(kind, **config))
    content_type = preset.content_type if preset else "application/json"
    url = f"/w/{user.username}/{hook.name}" + (f"?{query}" if query else "")
    return await stack.client.post(
        url, content=body, headers={"Content-Type": content_type, **headers}
    )


def query_for(kind: str, body: bytes) -> str:
    return PRESETS[kind].query.format(sha=hashlib.sha256(body).hexdigest())


async def stored(probe: Probe, response: httpx.Response) -> Event:
    (event,) = await probe.events(response.json()["requestId"])
    return event


class TestPresets:
    @pytest.mark.parametrize("kind", sorted(PRESETS))
    async def test_valid_is_200_and_recorded_valid(
        self, stack: Stack, probe: Probe, kind: str
    ) -> None:
        headers = PRESETS[kind].sign(BODY, time.time())
        response = await deliver(stack, kind, BODY, headers, query=query_for(kind, BODY))
        assert response.status_code == 200, response.text
        event = await stored(probe, response)
        assert event.body == BODY
        assert event.signature_valid is True
        assert event.verification is not None
        assert (event.verification.type, event.verification.result) == (kind, "valid")
        assert event.verification.secret == "current"
        assert event.handshake is None

    @pytest.mark.parametrize(
        "kind", sorted(k for k, p in PRESETS.items() if p.extra.get("body_signed", True))
    )
    async def test_one_body_byte_changed_is_401(
        self, stack: Stack, probe: Probe, kind: str
    ) -> None:
        headers = PRESETS[kind].sign(BODY, time.time())
        changed = BODY.replace(b"4200", b"4201")
        response = await deliver(stack, kind, changed, headers, query=query_for(kind, BODY))
        assert response.status_code == 401
        body = response.json()
        assert (body["error"], body["message"], body["reason"]) == (
            "Invalid signature", "Signature verification failed", "bad_signature",
        )  # fmt: skip
        event = await stored(probe, response)
        assert (event.signature_valid, event.status) == (False, EventStatus.FAILED)
        assert event.rejected_reason is RejectedReason.INVALID_SIGNATURE
        assert event.verification is not None
        assert event.verification.reason == "bad_signature"
        assert not event.deliverable

    @pytest.mark.parametrize("kind", sorted(PRESETS))
    async def test_unsigned_is_401_missing_signature(self, stack: Stack, kind: str) -> None:
        response = await deliver(stack, kind, BODY, {}, query=query_for(kind, BODY))
        assert response.status_code == 401
        assert response.json()["reason"] == "missing_signature"

    @pytest.mark.parametrize(
        "kind", ["stripe", "standard-webhooks", "slack", "zoom", "paddle", "hmac"]
    )
    async def test_stale_timestamp_is_401(self, stack: Stack, kind: str) -> None:
        headers = PRESETS[kind].sign(BODY, time.time() - 3600)
        response = await deliver(stack, kind, BODY, headers)
        assert response.status_code == 401
        assert response.json()["reason"] == "timestamp_out_of_tolerance"

    async def test_linear_timestamp_in_the_body(self, stack: Stack) -> None:
        fresh = LINEAR_BODY % int(time.time() * 1000)
        stale = LINEAR_BODY % int((time.time() - 120) * 1000)
        for body, status in ((fresh, 200), (stale, 401)):
            headers = {"Linear-Signature": hex_mac(SECRET, body)}
            assert (await deliver(stack, "linear", body, headers)).status_code == status

    async def test_mailgun_signature_in_the_body(self, stack: Stack) -> None:
        ts, token = str(int(time.time())), "t" * 50
        block = {
            "timestamp": ts,
            "token": token,
            "signature": hex_mac(SECRET, (ts + token).encode()),
        }
        body = json.dumps({"signature": block, "event-data": {"event": "opened"}}).encode()
        assert (await deliver(stack, "mailgun", body, {})).status_code == 200
        block["signature"] = hex_mac("other", (ts + token).encode())
        forged = json.dumps({"signature": block, "event-data": {}}).encode()
        assert (await deliver(stack, "mailgun", forged, {})).status_code == 401

    async def test_none_accepts_and_records_skipped(self, stack: Stack, probe: Probe) -> None:
        response = await deliver(stack, "none", BODY, {}, secret=None)
        assert response.status_code == 200
        event = await stored(probe, response)
        assert event.signature_valid is None
        assert event.verification is not None
        assert event.verification.result is VerificationResult.SKIPPED

    async def test_a_plain_secret_still_means_hookbay(self, stack: Stack, probe: Probe) -> None:
        user, hook = await stack.owner(secret=SecretStr(SECRET))
        response = await stack.post(
            user, hook, BODY, headers={"X-Service-Signature": hex_mac(SECRET, BODY)}
        )
        assert response.status_code == 200
        event = await stored(probe, response)
        assert event.verification is not None
        assert event.verification.type == "hookbay"
        refused = await stack.post(user, hook, BODY, headers={"X-Service-Signature": "00"})
        assert (refused.status_code, refused.json()["reason"]) == (401, "bad_signature")


class TestSignatureForms:
    async def test_several_stripe_signatures_in_one_header(self, stack: Stack) -> None:
        t = int(time.time())
        good = _stripe(BODY, t)["Stripe-Signature"].split(",")[1]
        header = f"t={t},v1={'a' * 64},{good},v0={'b' * 64}"
        response = await deliver(stack, "stripe", BODY, {"Stripe-Signature": header})
        assert response.status_code == 200

    async def test_several_standard_webhooks_signatures(self, stack: Stack) -> None:
        headers = _standard(BODY, time.time())
        headers["webhook-signature"] = f"v1,{'A' * 44} v1a,xyz {headers['webhook-signature']}"
        assert (await deliver(stack, "standard-webhooks", BODY, headers)).status_code == 200

    async def test_several_pagerduty_signatures(self, stack: Stack) -> None:
        value = f"v1={'0' * 64},v1={hex_mac(SECRET, BODY)}"
        response = await deliver(stack, "pagerduty", BODY, {"X-PagerDuty-Signature": value})
        assert response.status_code == 200

    @pytest.mark.parametrize(
        ("kind", "headers"),
        [
            ("github", {"X-Hub-Signature-256": "sha1=" + hex_mac(SECRET, BODY)}),
            ("github", {"X-Hub-Signature-256": "sha256=" + b64_mac(SECRET, BODY)}),
            ("shopify", {"X-Shopify-Hmac-Sha256": hex_mac(SECRET, BODY)}),
            ("typeform", {"Typeform-Signature": "sha256=" + hex_mac(SECRET, BODY)}),
            ("x", {"x-twitter-webhooks-signature": b64_mac(SECRET, BODY)}),
        ],
        ids=["github-prefix", "github-base64", "shopify-hex", "typeform-hex", "x-no-prefix"],
    )
    async def test_wrong_prefix_or_encoding_is_401(
        self, stack: Stack, kind: str, headers: Headers
    ) -> None:
        response = await deliver(stack, kind, BODY, headers)
        assert (response.status_code, response.json()["reason"]) == (401, "bad_signature")

    async def test_stripe_v0_only_is_unsupported_version(self, stack: Stack) -> None:
        t = int(time.time())
        value = _stripe(BODY, t)["Stripe-Signature"].replace("v1=", "v0=")
        response = await deliver(stack, "stripe", BODY, {"Stripe-Signature": value})
        assert (response.status_code, response.json()["reason"]) == (401, "unsupported_version")

    async def test_form_encoded_github_on_the_bytes(self, stack: Stack, probe: Probe) -> None:
        body = ("payload=" + quote('{"zen":"Design for failure. 🦆","hook_id":7}')).encode()
        headers = {"Content-Type": FORM, "X-Hub-Signature-256": "sha256=" + hex_mac(SECRET, body)}
        response = await deliver(stack, "github", body, headers)
        assert response.status_code == 200
        assert (await stored(probe, response)).body == body

    async def test_form_encoded_slack_on_the_bytes(self, stack: Stack) -> None:
        body = b"token=x&command=%2Fdeploy&text=caf%C3%A9+%2B+more&trigger_id=1.2.3"
        headers = {"Content-Type": FORM, **_slack(body, time.time())}
        assert (await deliver(stack, "slack", body, headers)).status_code == 200
        reordered = b"command=%2Fdeploy&token=x&text=caf%C3%A9+%2B+more&trigger_id=1.2.3"
        assert (await deliver(stack, "slack", reordered, headers)).status_code == 401


class TestRotation:
    def rotating(self, expires_at: datetime) -> dict[str, Any]:
        previous = PreviousSecret(secret=SecretStr("whsec_old"), expires_at=expires_at)
        return {"secret": "whsec_new", "previous": previous}

    async def test_previous_secret_within_its_overlap(self, stack: Stack, probe: Probe) -> None:
        fields = self.rotating(datetime.now(UTC) + timedelta(hours=1))
        headers = _stripe(BODY, time.time(), secret="whsec_old")
        response = await deliver(stack, "stripe", BODY, headers, **fields)
        assert response.status_code == 200
        event = await stored(probe, response)
        assert event.verification is not None
        assert event.verification.secret == "previous"

    async def test_previous_secret_after_its_overlap(self, stack: Stack) -> None:
        fields = self.rotating(datetime.now(UTC) - timedelta(seconds=1))
        headers = _stripe(BODY, time.time(), secret="whsec_old")
        response = await deliver(stack, "stripe", BODY, headers, **fields)
        assert (response.status_code, response.json()["reason"]) == (401, "bad_signature")

    async def test_current_secret_during_the_overlap(self, stack: Stack, probe: Probe) -> None:
        fields = self.rotating(datetime.now(UTC) + timedelta(hours=1))
        headers = _stripe(BODY, time.time(), secret="whsec_new")
        response = await deliver(stack, "stripe", BODY, headers, **fields)
        assert response.status_code == 200
        event = await stored(probe, response)
        assert event.verification is not None
        assert event.verification.secret == "current"


class TestRecordMode:
    async def test_invalid_is_accepted_with_the_reason_stored(
        self, stack: Stack, probe: Probe
    ) -> None:
        headers = _stripe(BODY, time.time() - 3600)
        user, hook = await stack.owner(
            verification=verification("stripe", mode="record"), forward_url="http://127.0.0.1:9/"
        )
        response = await stack.post(user, hook, BODY, headers=headers)
        assert response.status_code == 200
        event = await stored(probe, response)
        assert event.signature_valid is False
        assert event.rejected_reason is None
        assert event.status is EventStatus.PENDING
        assert event.deliverable
        assert event.verification is not None
        assert (event.verification.result, event.verification.reason) == (
            "invalid", "timestamp_out_of_tolerance",
        )  # fmt: skip

    async def test_valid_in_record_mode(self, stack: Stack, probe: Probe) -> None:
        response = await deliver(stack, "stripe", BODY, _stripe(BODY, time.time()), mode="record")
        assert response.status_code == 200
        assert (await stored(probe, response)).signature_valid is True


class TestMethods:
    @pytest.mark.parametrize("kind", ["stripe", "slack", "zoom", "github"])
    async def test_get_stays_405_without_a_get_handshake(self, stack: Stack, kind: str) -> None:
        user, hook = await stack.owner(verification=verification(kind, **PRESETS[kind].config))
        response = await stack.client.get(f"/w/{user.username}/{hook.name}?crc_token=abc")
        assert (response.status_code, response.headers["allow"]) == (405, "POST")

    async def test_get_that_is_no_handshake_is_405(self, stack: Stack) -> None:
        user, hook = await stack.owner(verification=verification("meta", verify_token="tok"))
        response = await stack.client.get(f"/w/{user.username}/{hook.name}")
        assert response.status_code == 405

    async def test_get_on_an_unknown_webhook_is_405(self, stack: Stack) -> None:
        response = await stack.client.get("/w/nobody-here/nothing?crc_token=abc")
        assert response.status_code == 405

    async def test_put_on_a_handshake_webhook_is_405(self, stack: Stack) -> None:
        user, hook = await stack.owner(verification=verification("x"))
        response = await stack.client.put(f"/w/{user.username}/{hook.name}", content=b"{}")
        assert response.status_code == 405


class TestHandshakes:
    async def test_slack_url_verification(self, stack: Stack, probe: Probe) -> None:
        body = json.dumps(
            {
                "token": "Jhj5",
                "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY",
                "type": "url_verification",
            }
        ).encode()
        user, hook = await stack.owner(
            verification=verification("slack"), forward_url="http://127.0.0.1:9/"
        )
        response = await stack.post(user, hook, body, headers=_slack(body, time.time()))
        assert response.status_code == 200
        assert response.text == "3eZbrw1aBm2rZgRNFdxV2595E9CY"
        assert response.headers["content-type"].startswith("text/plain")
        assert response.headers["x-content-type-options"] == "nosniff"
        event = await self.recorded(probe, hook.id)
        assert event.handshake is HandshakeKind.SLACK_URL_VERIFICATION
        assert event.signature_valid is True
        assert not event.deliverable
        assert event.initial_status is EventStatus.SUCCESS

    async def test_forged_slack_url_verification(self, stack: Stack, probe: Probe) -> None:
        # a challenge no request id can contain (ids are lowercase base32): never echoed
        body = b'{"challenge":"Forged-Challenge","type":"url_verification"}'
        headers = {"X-Slack-Signature": "v0=" + "0" * 64,
                   "X-Slack-Request-Timestamp": str(int(time.time()))}  # fmt: skip
        for mode in ("enforce", "record"):
            user, hook = await stack.owner(verification=verification("slack", mode=mode))
            response = await stack.post(user, hook, body, headers=headers)
            assert (response.status_code, response.json()["reason"]) == (401, "bad_signature")
            assert "Forged-Challenge" not in response.text
            event = await stored(probe, response)
            assert event.handshake is HandshakeKind.SLACK_URL_VERIFICATION
            assert event.rejected_reason is RejectedReason.INVALID_SIGNATURE

    async def test_zoom_url_validation(self, stack: Stack, probe: Probe) -> None:
        body = json.dumps(
            {
                "event": "endpoint.url_validation",
                "payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"},
            }
        ).encode()
        user, hook = await stack.owner(verification=verification("zoom"))
        response = await stack.post(user, hook, body, headers=_zoom(body, time.time()))
        assert response.status_code == 200
        assert response.json() == {
            "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
            "encryptedToken": hex_mac(SECRET, b"qgg8vlvZRS6UYooatFL8Aw"),
        }
        event = await self.recorded(probe, hook.id)
        assert event.handshake is HandshakeKind.ZOOM_URL_VALIDATION

    async def test_forged_zoom_url_validation_is_no_oracle(self, stack: Stack) -> None:
        forged_token = f"v0:{int(time.time())}:" + BODY.decode()
        body = json.dumps(
            {"event": "endpoint.url_validation", "payload": {"plainToken": forged_token}}
        ).encode()
        user, hook = await stack.owner(verification=verification("zoom"))
        response = await stack.post(
            user, hook, body, headers={"x-zm-request-timestamp": str(int(time.time()))}
        )
        assert (response.status_code, response.json()["reason"]) == (401, "missing_signature")
        assert "encryptedToken" not in response.text

    async def test_meta_subscribe(self, stack: Stack, probe: Probe) -> None:
        user, hook = await stack.owner(
            verification=verification("meta", verify_token="meatyhamhock")
        )
        query = urlencode({"hub.mode": "subscribe", "hub.challenge": "1158201444",
                           "hub.verify_token": "meatyhamhock"})  # fmt: skip
        response = await stack.client.get(f"/w/{user.username}/{hook.name}?{query}")
        assert (response.status_code, response.text) == (200, "1158201444")
        event = await self.recorded(probe, hook.id)
        assert event.handshake is HandshakeKind.META_SUBSCRIBE
        assert event.body == b""

    async def test_meta_subscribe_with_a_wrong_token(self, stack: Stack) -> None:
        user, hook = await stack.owner(
            verification=verification("meta", verify_token="meatyhamhock")
        )
        query = urlencode({"hub.mode": "subscribe", "hub.challenge": "1158201444",
                           "hub.verify_token": "guess"})  # fmt: skip
        response = await stack.client.get(f"/w/{user.username}/{hook.name}?{query}")
        assert (response.status_code, response.json()["reason"]) == (401, "bad_signature")
        assert "1158201444" not in response.text

    async def test_x_crc(self, stack: Stack, probe: Probe) -> None:
        user, hook = await stack.owner(verification=verification("x"))
        response = await stack.client.get(f"/w/{user.username}/{hook.name}?crc_token=9b4507b3-9040")
        assert response.status_code == 200
        expected = "sha256=" + b64_mac(SECRET, b"9b4507b3-9040")
        assert response.json() == {"response_token": expected}
        event = await self.recorded(probe, hook.id)
        assert event.handshake is HandshakeKind.X_CRC
        assert event.signature_valid is None

    async def test_x_crc_is_no_signing_oracle(self, stack: Stack) -> None:
        user, hook = await stack.owner(verification=verification("x"))
        query = urlencode({"crc_token": BODY.decode()})
        response = await stack.client.get(f"/w/{user.username}/{hook.name}?{query}")
        assert (response.status_code, response.json()["reason"]) == (401, "bad_signature")
        assert b64_mac(SECRET, BODY) not in response.text

    async def recorded(self, probe: Probe, webhook_id: str) -> Event:
        """The one event the handshake recorded (its reply carries no request id)."""
        while True:
            for event in probe.seen.values():
                if event.webhook_id == webhook_id:
                    return event
            batch = await probe._consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    found = decode_event(record.value)
                    probe.seen[found.request_id] = found


class TestConfigurationChanges:
    async def test_a_changed_verification_applies_to_the_next_request(self, stack: Stack) -> None:
        user, hook = await stack.owner(verification=verification("stripe"))
        old = _stripe(BODY, time.time())
        assert (await stack.post(user, hook, BODY, headers=old)).status_code == 200
        config = verification("stripe", secret="whsec_rotated")
        changed = await stack.webhooks.update(user.username, hook.name, verification=config)
        stack.ingest.view.apply(ConfigChange.of_webhook(changed))  # as the change log delivers it
        assert (await stack.post(user, hook, BODY, headers=old)).status_code == 401
        new = _stripe(BODY, time.time(), secret="whsec_rotated")
        assert (await stack.post(user, hook, BODY, headers=new)).status_code == 200

    async def test_removing_the_verification_stops_verifying(self, stack: Stack) -> None:
        user, hook = await stack.owner(verification=verification("github"))
        assert (await stack.post(user, hook, BODY)).status_code == 401
        changed = await stack.webhooks.update(user.username, hook.name, verification=None)
        stack.ingest.view.apply(ConfigChange.of_webhook(changed))
        assert (await stack.post(user, hook, BODY)).status_code == 200
