"""Verifiers by verification type, and the check each webhook's requests go through.

``PRESETS`` maps each type to its verifier's factory, called with the webhook's
``WebhookVerification`` (a preset is one module in this package plus one entry here). A webhook's
``WebhookCheck`` is built once per configuration and cached (``VerifierRegistry.for_webhook``):
the verifier, the secrets as key bytes, and the verdicts as event records, so a request costs
a dictionary lookup before its verifier runs, and no database call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Final

from hookbay_common.logs import get_logger
from hookbay_common.models import (
    EventVerification,
    InvalidReason,
    MatchedSecret,
    VerificationMode,
    VerificationResult,
    VerificationType,
    Webhook,
    WebhookVerification,
)
from hookbay_ingest.verification._engine import BAD
from hookbay_ingest.verification.api_key import ApiKeyVerifier
from hookbay_ingest.verification.base import (
    Clock,
    Handshake,
    SignedRequest,
    SigningSecrets,
    Verification,
    Verifier,
)
from hookbay_ingest.verification.basic import BasicVerifier
from hookbay_ingest.verification.generic_hmac import HmacVerifier
from hookbay_ingest.verification.github import GitHubVerifier
from hookbay_ingest.verification.gitlab import GitLabVerifier
from hookbay_ingest.verification.hookbay import HookbayVerifier
from hookbay_ingest.verification.intercom import IntercomVerifier
from hookbay_ingest.verification.linear import LinearVerifier
from hookbay_ingest.verification.mailgun import MailgunVerifier
from hookbay_ingest.verification.meta import MetaVerifier
from hookbay_ingest.verification.paddle import PaddleVerifier
from hookbay_ingest.verification.pagerduty import PagerDutyVerifier
from hookbay_ingest.verification.sendgrid import SendGridVerifier
from hookbay_ingest.verification.shopify import ShopifyVerifier
from hookbay_ingest.verification.slack import SlackVerifier
from hookbay_ingest.verification.square import SquareVerifier
from hookbay_ingest.verification.standard_webhooks import StandardWebhooksVerifier
from hookbay_ingest.verification.stripe import StripeVerifier
from hookbay_ingest.verification.twilio import TwilioVerifier
from hookbay_ingest.verification.typeform import TypeformVerifier
from hookbay_ingest.verification.x import XVerifier
from hookbay_ingest.verification.zoom import ZoomVerifier

log = get_logger("hookbay.ingest.verification")

VerifierFactory = Callable[[WebhookVerification], Verifier]

HOOKBAY: Final = "hookbay"
T = VerificationType
PRESETS: Final[Mapping[str, VerifierFactory]] = MappingProxyType({
    T.HOOKBAY: HookbayVerifier, T.STANDARD_WEBHOOKS: StandardWebhooksVerifier,
    T.STRIPE: StripeVerifier, T.GITHUB: GitHubVerifier, T.SHOPIFY: ShopifyVerifier,
    T.SLACK: SlackVerifier, T.TWILIO: TwilioVerifier, T.ZOOM: ZoomVerifier, T.META: MetaVerifier,
    T.PADDLE: PaddleVerifier, T.LINEAR: LinearVerifier, T.PAGERDUTY: PagerDutyVerifier,
    T.TYPEFORM: TypeformVerifier, T.INTERCOM: IntercomVerifier, T.SQUARE: SquareVerifier,
    T.GITLAB: GitLabVerifier, T.SENDGRID: SendGridVerifier, T.MAILGUN: MailgunVerifier,
    T.X: XVerifier, T.HMAC: HmacVerifier, T.BASIC: BasicVerifier, T.API_KEY: ApiKeyVerifier,
})  # fmt: skip
"""Every type but ``none`` (which checks nothing)."""
DEFAULT_SCHEME: Final = HOOKBAY
"""The type of a webhook that has a plain ``secret`` and no ``verification``."""


class UnknownScheme(ValueError):
    """A verification type with no verifier."""

    def __init__(self, scheme: str, known: frozenset[str]) -> None:
        super().__init__(f"no signature scheme named {scheme!r}; known: {', '.join(sorted(known))}")
        self.scheme = scheme


class _Refusing:
    """Stands in for a verifier its configuration cannot build (fail closed, never open)."""

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return BAD


@dataclass(frozen=True, slots=True)
class WebhookCheck:
    """One webhook's verification, precomputed: ``verifier`` is ``None`` for type ``none``;
    ``handshake`` is the verifier when its scheme has one. ``previous_until``: when the
    previous secret stops being accepted."""

    type: VerificationType
    mode: VerificationMode
    verifier: Verifier | None
    handshake: Handshake | None
    secrets: SigningSecrets
    current_only: SigningSecrets
    previous_until: datetime | None
    records: Mapping[Verification | None, EventVerification] = field(repr=False)
    """The event's ``verification`` for each verdict (``None``: nothing verified)."""

    def secrets_at(self, now: datetime) -> SigningSecrets:
        """The secrets accepted at ``now``: the previous one only until its expiry."""
        if self.previous_until is None or now < self.previous_until:
            return self.secrets
        return self.current_only

    def accepts(self, method: str) -> bool:
        """Whether ``method`` is a handshake's (only ``POST`` otherwise)."""
        return self.handshake is not None and method in self.handshake.methods


def build_check(
    config: WebhookVerification, factories: Mapping[str, VerifierFactory]
) -> WebhookCheck:
    """The check for ``config``; ``UnknownScheme`` for a type without a factory."""
    verifier: Verifier | None = None
    if config.type is not VerificationType.NONE:
        factory = factories.get(config.type)
        if factory is None:
            raise UnknownScheme(
                config.type.value, frozenset(factories) | {VerificationType.NONE.value}
            )
        try:
            verifier = factory(config)
        except ValueError as exc:
            log.warning("verifier_unbuildable", type=config.type.value, error=str(exc))
            verifier = _Refusing()
    current = _current_secret(config)
    previous = config.previous
    both = SigningSecrets(current, previous.secret.get_secret_value() if previous else None)
    return WebhookCheck(
        type=config.type, mode=config.mode, verifier=verifier,
        handshake=verifier if isinstance(verifier, Handshake) else None,
        secrets=both, current_only=SigningSecrets(current),
        previous_until=previous.expires_at if previous else None,
        records=_records(config.type),
    )  # fmt: skip


def _current_secret(config: WebhookVerification) -> str:
    """What the verifier checks against: the secret, or the credential that plays its part."""
    if config.secret is not None:
        return config.secret.get_secret_value()
    if config.basic is not None:
        return config.basic.password.get_secret_value()
    if config.api_key is not None:
        return config.api_key.value.get_secret_value()
    return ""


def _records(kind: VerificationType) -> dict[Verification | None, EventVerification]:
    records: dict[Verification | None, EventVerification] = {
        None: EventVerification(type=kind, result=VerificationResult.SKIPPED)
    }
    for slot in MatchedSecret:
        records[Verification.accepted(slot)] = EventVerification(
            type=kind, result=VerificationResult.VALID, secret=slot
        )
    for reason in InvalidReason:
        records[Verification.refused(reason)] = EventVerification(
            type=kind, result=VerificationResult.INVALID, reason=reason
        )
    return records


class VerifierRegistry:
    """Builds each webhook's ``WebhookCheck`` once per configuration."""

    def __init__(self, factories: Mapping[str, VerifierFactory] = PRESETS) -> None:
        if DEFAULT_SCHEME not in factories:
            raise UnknownScheme(DEFAULT_SCHEME, frozenset(factories))
        self._factories = factories
        self._checks: dict[str, tuple[Webhook, WebhookCheck | None]] = {}

    @property
    def schemes(self) -> frozenset[str]:
        return frozenset(self._factories) | {VerificationType.NONE.value}

    def for_webhook(self, webhook: Webhook) -> WebhookCheck | None:
        """``webhook``'s check (``None``: it verifies nothing); rebuilt when the view holds a
        new record for it (a configuration change replaces the record)."""
        cached = self._checks.get(webhook.id)
        if cached is not None and cached[0] is webhook:
            return cached[1]
        config = webhook.effective_verification
        check = build_check(config, self._factories) if config is not None else None
        self._checks[webhook.id] = (webhook, check)
        return check
