"""``WebhookVerification``: what each type requires (errors naming the field), rotation, secrets
sealed at rest and on the change log, the event's verdict on the wire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from hookbay_common.configlog import ConfigChange, decode_change, encode_change
from hookbay_common.db import Collections, Database, WebhookRepository
from hookbay_common.models import (
    REQUIRED_FIELDS,
    EventVerification,
    HandshakeKind,
    HmacScheme,
    InvalidReason,
    PreviousSecret,
    VerificationResult,
    VerificationType,
    WebhookVerification,
)
from hookbay_common.secrets_box import SecretBox
from hookbay_common.wire import decode_event, encode_event
from tests.support.factories import TEST_SECRET_KEY, create_event, create_webhook

BOX = SecretBox(TEST_SECRET_KEY)


def verification(kind: str, **fields: Any) -> WebhookVerification:
    """Built from plain values, as owner input arrives."""
    return WebhookVerification.model_validate({"type": kind, **fields})


NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
FULL = verification(
    "hmac", mode="record", secret=SecretStr("sec-current"), tolerance_s=60,
    previous=PreviousSecret(secret=SecretStr("sec-previous"), expires_at=NOW),
    public_url="https://h.example/w/a/b", verify_token=SecretStr("sec-verify"),
    hmac=HmacScheme(header="X-Sig", payload="{timestamp}.{body}", timestamp_header="X-Ts"),
    basic={"username": "u", "password": "sec-password"},
    api_key={"header": "X-Key", "value": "sec-api-key"},
)  # fmt: skip
SECRETS = ("sec-current", "sec-previous", "sec-verify", "sec-password", "sec-api-key")


class TestValidation:
    @pytest.mark.parametrize(
        ("kind", "field"),
        [
            ("stripe", "secret"), ("twilio", "public_url"), ("square", "public_url"),
            ("meta", "verify_token"), ("sendgrid", "public_key"), ("hmac", "hmac"),
            ("basic", "basic"), ("api-key", "api_key"), ("hookbay", "secret"),
        ],
    )  # fmt: skip
    def test_a_missing_field_is_named(self, kind: str, field: str) -> None:
        fields = {name: "x" for name in ("secret", "public_url", "verify_token", "public_key")}
        fields.pop(field, None)
        with pytest.raises(ValidationError) as caught:
            verification(kind, **{k: v for k, v in fields.items() if k != field})
        errors = [e for e in caught.value.errors() if e["type"] == "verification_field_required"]
        assert [e["loc"] for e in errors] == [(field,)]
        assert field in errors[0]["msg"]
        assert kind in errors[0]["msg"]

    def test_an_empty_secret_is_missing(self) -> None:
        with pytest.raises(ValidationError, match="secret is required by verification type"):
            verification("github", secret="")

    def test_none_needs_nothing(self) -> None:
        assert REQUIRED_FIELDS[VerificationType.NONE] == frozenset()
        assert verification("none").mode == "enforce"

    def test_unknown_type_mode_and_fields_refused(self) -> None:
        for fields in (
            {"type": "paypal"},
            {"type": "none", "mode": "audit"},
            {"type": "none", "x": 1},
        ):
            with pytest.raises(ValidationError):
                WebhookVerification.model_validate(fields)

    @pytest.mark.parametrize(
        ("payload", "message"),
        [("{ts}.{body}", "only"), ("{timestamp}", "must contain {body}"),
         ("{timestamp}.{body}", "timestamp_header"), ("{id}.{body}", "id_header")],
    )  # fmt: skip
    def test_hmac_payload_template(self, payload: str, message: str) -> None:
        with pytest.raises(ValidationError, match=message):
            HmacScheme(header="x", payload=payload)

    def test_plain_secret_means_hookbay(self) -> None:
        effective = create_webhook(secret=SecretStr("s")).effective_verification
        assert effective == verification("hookbay", secret=SecretStr("s"))
        assert create_webhook().effective_verification is None


class TestRotation:
    def test_the_replaced_secret_stays_for_the_overlap(self) -> None:
        before = verification("stripe", secret=SecretStr("old"))
        after = before.rotated(SecretStr("new"), now=NOW, keep_previous_for_s=3600)
        assert after.secret == SecretStr("new")
        assert after.previous == PreviousSecret(
            secret=SecretStr("old"), expires_at=NOW + timedelta(hours=1)
        )

    def test_no_overlap_drops_it(self) -> None:
        before = verification("stripe", secret=SecretStr("old"))
        assert before.rotated(SecretStr("new"), now=NOW, keep_previous_for_s=0).previous is None

    def test_the_same_secret_keeps_the_rotation(self) -> None:
        assert FULL.rotated(SecretStr("sec-current"), now=NOW, keep_previous_for_s=60) == FULL


class TestSealing:
    def test_every_secret_sealed_and_restored(self) -> None:
        document = FULL.to_document(BOX.seal)
        assert not any(secret in str(document) for secret in SECRETS)
        assert WebhookVerification.from_document(document, BOX.open) == FULL

    def test_change_log_round_trip_without_clear_secrets(self) -> None:
        webhook = create_webhook(verification=FULL)
        value = encode_change(ConfigChange.of_webhook(webhook), BOX)
        assert not any(secret.encode() in value for secret in SECRETS)
        decoded = decode_change(value, BOX).webhook
        assert decoded == webhook

    def test_change_log_record_without_verification_keeps_its_shape(self) -> None:
        value = encode_change(ConfigChange.of_webhook(create_webhook()), BOX)
        assert b"verification" not in value

    async def test_repository_round_trip_sealed_at_rest(self, db: Database) -> None:
        hooks = WebhookRepository(db, BOX)
        hook = await hooks.create(create_webhook(verification=FULL))
        raw = await db[Collections.WEBHOOKS].find_one({"_id": hook.id})
        assert raw is not None
        assert not any(secret in str(raw) for secret in SECRETS)
        assert await hooks.get(hook.username, hook.name) == hook
        other = verification("github", secret=SecretStr("gh"))
        changed = await hooks.update(hook.username, hook.name, verification=other)
        assert changed.verification == other
        removed = await hooks.update(hook.username, hook.name, verification=None)
        assert removed.verification is None


class TestEventVerdict:
    def test_on_the_wire(self) -> None:
        verdict = EventVerification(
            type=VerificationType.SLACK, result=VerificationResult.INVALID,
            reason=InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE,
        )  # fmt: skip
        event = create_event(verification=verdict, handshake=HandshakeKind.SLACK_URL_VERIFICATION)
        decoded = decode_event(encode_event(event))
        assert decoded == event
        assert not decoded.deliverable

    def test_an_ordinary_event_keeps_its_wire_shape(self) -> None:
        assert b"verification" not in encode_event(create_event())
        assert b"handshake" not in encode_event(create_event())


class TestPreviousSecret:
    def test_expiry_must_carry_its_timezone(self) -> None:
        with pytest.raises(ValidationError, match="timezone"):
            PreviousSecret.model_validate({"secret": "s", "expires_at": "2026-11-26T12:00:00"})
