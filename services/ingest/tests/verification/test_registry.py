"""Scheme names to verifiers: ``hookbay`` registered, every webhook checked with it, unknown
names refused, and a preset added without touching the pipeline."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import SecretStr

from hookbay_ingest.verification import (
    DEFAULT_SCHEME,
    HOOKBAY,
    PRESETS,
    Clock,
    HookbayVerifier,
    InvalidReason,
    SignedRequest,
    SigningSecrets,
    UnknownScheme,
    Verification,
    VerifierRegistry,
)
from tests.support.factories import create_webhook


class RefusingVerifier:
    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return Verification.refused(InvalidReason.UNSUPPORTED_VERSION)


class TestVerifierRegistry:
    def test_hookbay_is_the_default_preset(self) -> None:
        assert DEFAULT_SCHEME == HOOKBAY == "hookbay"
        assert set(PRESETS) == {"hookbay"}
        registry = VerifierRegistry()
        assert registry.schemes == {"hookbay"}
        assert isinstance(registry.get("hookbay"), HookbayVerifier)

    def test_one_instance_per_scheme(self) -> None:
        registry = VerifierRegistry()
        assert registry.get(HOOKBAY) is registry.get(HOOKBAY)

    def test_every_webhook_uses_the_default_scheme(self) -> None:
        registry = VerifierRegistry()
        for webhook in (create_webhook(), create_webhook(secret=SecretStr("s"))):
            assert registry.for_webhook(webhook) is registry.get(DEFAULT_SCHEME)

    def test_unknown_scheme(self) -> None:
        with pytest.raises(UnknownScheme, match="'stripe'; known: hookbay") as caught:
            VerifierRegistry().get("stripe")
        assert caught.value.scheme == "stripe"
        assert isinstance(caught.value, ValueError)

    def test_a_preset_joins_by_its_factory(self) -> None:
        registry = VerifierRegistry({**PRESETS, "refusing": RefusingVerifier})
        assert registry.schemes == {"hookbay", "refusing"}
        request = SignedRequest(b"{}", {})
        result = registry.get("refusing").verify(request, SigningSecrets("s"), datetime.now)
        assert result.reason is InvalidReason.UNSUPPORTED_VERSION

    def test_the_default_scheme_must_be_registered(self) -> None:
        with pytest.raises(UnknownScheme, match="'hookbay'"):
            VerifierRegistry({"refusing": RefusingVerifier})
