"""Helpers for verification tests: a fixed clock, a signed request, a check built the way
ingest builds it, and independent signers (plain ``hmac``) for schemes without an official SDK."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

from pydantic import SecretStr

from hookbay_common.models import PreviousSecret, WebhookVerification
from hookbay_ingest.verification import (
    PRESETS,
    Clock,
    SignedRequest,
    Verification,
    WebhookCheck,
    build_check,
)


def clock_at(unix: float) -> Clock:
    moment = datetime.fromtimestamp(unix, tz=UTC)
    return lambda: moment


def signed(body: bytes, headers: dict[str, str] | None = None, **kw: Any) -> SignedRequest:
    return SignedRequest(body, {k.lower(): v for k, v in (headers or {}).items()}, **kw)


def verification(kind: str, **fields: Any) -> WebhookVerification:
    """A ``WebhookVerification`` from plain values, as owner input arrives (validated)."""
    return WebhookVerification.model_validate({"type": kind, **fields})


def check_for(kind: str, secret: str | None, **fields: Any) -> WebhookCheck:
    if secret is not None:
        fields["secret"] = SecretStr(secret)
    return build_check(verification(kind, **fields), PRESETS)


def rotated(kind: str, current: str, previous: str, expires_unix: float, **fields: Any) -> Any:
    expires = datetime.fromtimestamp(expires_unix, tz=UTC)
    fields["previous"] = PreviousSecret(secret=SecretStr(previous), expires_at=expires)
    return check_for(kind, current, **fields)


def run(check: WebhookCheck, request: SignedRequest, now: float) -> Verification:
    assert check.verifier is not None
    clock = clock_at(now)
    return check.verifier.verify(request, check.secrets_at(clock()), clock)


def hex_mac(key: str | bytes, message: bytes, digest: Any = hashlib.sha256) -> str:
    raw = key.encode() if isinstance(key, str) else key
    return hmac.new(raw, message, digest).hexdigest()


def b64_mac(key: str | bytes, message: bytes, digest: Any = hashlib.sha256) -> str:
    raw = key.encode() if isinstance(key, str) else key
    return base64.b64encode(hmac.new(raw, message, digest).digest()).decode()
