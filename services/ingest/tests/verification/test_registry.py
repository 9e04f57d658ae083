"""Verification types to verifiers: every type registered, a webhook with a plain secret checked
with ``hookbay``, a webhook without one checked with nothing, unknown types refused, a preset
added without touching the pipeline, and each webhook's check built once per configuration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from hookbay_common.models import (
    PreviousSecret,
    VerificationMode,
    VerificationResult,
    VerificationType,
    WebhookVerification,
)
from hookbay_ingest.verification import (
    DEFAULT_SCHEME,
    HOOKBAY,
    PRESETS,
    Clock,
    HookbayVerifier,
    InvalidReason,
    MatchedSecret,
    SignedRequest,
    SigningSecrets,
    UnknownScheme,
    Verification,
    VerifierRegistry,
    build_check,
)
from hookbay_ingest.verification.slack import SlackVerifier
from hookbay_ingest.verification.stripe import StripeVerifier
from tests.support.factories import create_webhook
from tests.support.signing import verification

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


class RefusingVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        self.config = config

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return Verification.refused(InvalidReason.UNSUPPORTED_VERSION)


class TestVerifierRegistry:
    def test_hookbay_is_the_default_preset(self) -> None:
        assert DEFAULT_SCHEME == HOOKBAY == "hookbay"
        assert PRESETS[HOOKBAY] is HookbayVerifier

    def test_every_type_but_none_has_a_verifier(self) -> None:
        assert set(PRESETS) == {t.value for t in VerificationType} - {"none"}
        assert VerifierRegistry().schemes == {t.value for t in VerificationType}

    def test_a_plain_secret_is_checked_with_hookbay_in_enforce_mode(self) -> None:
        check = VerifierRegistry().for_webhook(create_webhook(secret=SecretStr("s")))
        assert check is not None
        assert isinstance(check.verifier, HookbayVerifier)
        assert (check.type, check.mode) == (VerificationType.HOOKBAY, VerificationMode.ENFORCE)
        assert check.secrets == SigningSecrets("s")

    def test_a_webhook_without_secret_or_verification_verifies_nothing(self) -> None:
        assert VerifierRegistry().for_webhook(create_webhook()) is None

    def test_verification_wins_over_a_plain_secret(self) -> None:
        config = verification("stripe", secret=SecretStr("whsec_x"))
        webhook = create_webhook(secret=SecretStr("s"), verification=config)
        check = VerifierRegistry().for_webhook(webhook)
        assert check is not None
        assert isinstance(check.verifier, StripeVerifier)

    def test_one_check_per_webhook_record(self) -> None:
        registry = VerifierRegistry()
        webhook = create_webhook(secret=SecretStr("s"))
        assert registry.for_webhook(webhook) is registry.for_webhook(webhook)
        changed = webhook.model_copy(update={"secret": SecretStr("t")})
        rebuilt = registry.for_webhook(changed)
        assert rebuilt is not None
        assert rebuilt.secrets == SigningSecrets("t")

    def test_type_none_has_no_verifier_and_records_skipped(self) -> None:
        check = build_check(verification("none"), PRESETS)
        assert check.verifier is None
        assert check.records[None].result is VerificationResult.SKIPPED

    def test_handshake_schemes_are_detected(self) -> None:
        config = verification("slack", secret=SecretStr("s"))
        check = build_check(config, PRESETS)
        assert isinstance(check.handshake, SlackVerifier)
        assert check.accepts("POST")
        assert not check.accepts("GET")
        assert build_check(verification("github", secret="s"), PRESETS).handshake is None

    def test_unknown_scheme(self) -> None:
        registry = VerifierRegistry({HOOKBAY: HookbayVerifier})
        with pytest.raises(UnknownScheme, match="'stripe'; known: hookbay") as caught:
            registry.for_webhook(create_webhook(verification=verification("stripe", secret="s")))
        assert caught.value.scheme == "stripe"
        assert isinstance(caught.value, ValueError)

    def test_a_preset_joins_by_its_factory(self) -> None:
        registry = VerifierRegistry({**PRESETS, "stripe": RefusingVerifier})
        webhook = create_webhook(verification=verification("stripe", secret="s"))
        check = registry.for_webhook(webhook)
        assert check is not None
        assert check.verifier is not None
        result = check.verifier.verify(SignedRequest(b"{}", {}), check.secrets, datetime.now)
        assert result.reason is InvalidReason.UNSUPPORTED_VERSION

    def test_the_default_scheme_must_be_registered(self) -> None:
        with pytest.raises(UnknownScheme, match="'hookbay'"):
            VerifierRegistry({"refusing": RefusingVerifier})

    def test_an_unbuildable_configuration_fails_closed(self) -> None:
        config = verification("sendgrid", public_key="bm90IGEga2V5")
        check = build_check(config, PRESETS)
        assert check.verifier is not None
        result = check.verifier.verify(SignedRequest(b"{}", {}), check.secrets, datetime.now)
        assert result.reason is InvalidReason.BAD_SIGNATURE


class TestRotation:
    def config(self, expires_at: datetime) -> WebhookVerification:
        previous = PreviousSecret(secret=SecretStr("old"), expires_at=expires_at)
        return verification("github", secret=SecretStr("new"), previous=previous)

    def test_previous_accepted_until_its_expiry(self) -> None:
        check = build_check(self.config(NOW + timedelta(seconds=1)), PRESETS)
        assert check.secrets_at(NOW).candidates()[1] == ("old", MatchedSecret.PREVIOUS)

    def test_previous_refused_from_its_expiry(self) -> None:
        check = build_check(self.config(NOW), PRESETS)
        assert check.secrets_at(NOW) == SigningSecrets("new")
