"""Schemes that sign a timestamp with the body, shared by several providers, and the verifier
that runs one at the webhook's tolerance.

Both schemes here sign hex HMAC-SHA256 over ``{timestamp}…{raw body}``; any presented signature
matching passes, and a valid one further than the tolerance from now, either side, is
``timestamp_out_of_tolerance``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from hookbay_common.models import SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import (
    BAD,
    MISSING,
    UNSUPPORTED,
    decoded_all,
    header,
    mac,
    strip_prefix,
    timed_verdict,
    tolerance_of,
    within,
)
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification


class TimestampedScheme(Protocol):
    def verify(
        self, request: SignedRequest, secrets: SigningSecrets, clock: Clock, tolerance_s: int
    ) -> Verification: ...


class TimestampedVerifier:
    """A provider's verifier: its ``scheme`` at the webhook's ``tolerance_s``, or at
    ``default_tolerance_s`` when the webhook sets none. A provider subclasses it and names both."""

    scheme: ClassVar[TimestampedScheme]
    default_tolerance_s: ClassVar[int]

    def __init__(self, config: WebhookVerification) -> None:
        self._tolerance = tolerance_of(config, self.default_tolerance_s)

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return self.scheme.verify(request, secrets, clock, self._tolerance)


@dataclass(frozen=True, slots=True)
class V0Scheme:
    """``<signature header>: v0=<hex>`` over ``v0:{timestamp}:{raw body}``, the timestamp (Unix
    seconds) in its own header (Slack, Zoom)."""

    signature_header: str
    timestamp_header: str

    def verify(
        self, request: SignedRequest, secrets: SigningSecrets, clock: Clock, tolerance_s: int
    ) -> Verification:
        value = header(request, self.signature_header)
        timestamp = header(request, self.timestamp_header)
        if value is None or timestamp is None:
            return MISSING
        hexdigest = strip_prefix(value, "v0=")
        if hexdigest is None:
            return BAD
        signed = f"v0:{timestamp}:".encode()
        return _timed_hex(request, secrets, clock, tolerance_s, timestamp, [hexdigest], signed)


@dataclass(frozen=True, slots=True)
class KeyValueScheme:
    """``<signature header>: <timestamp key>=<unix>{separator}<signature key>=<hex>[…]``, the
    items in any order, several signatures while a secret rolls; each signs
    ``{timestamp}{joiner}{raw body}`` (Stripe, Paddle).

    Items of other keys (other scheme versions) are ignored. A header without a signature is
    ``bad_signature``, except: with a timestamp and another item it is ``unsupported_version``;
    with a timestamp alone it is ``timestamp_alone``."""

    signature_header: str
    separator: str
    timestamp_key: str
    signature_key: str
    joiner: str
    timestamp_alone: Verification

    def verify(
        self, request: SignedRequest, secrets: SigningSecrets, clock: Clock, tolerance_s: int
    ) -> Verification:
        value = header(request, self.signature_header)
        if value is None:
            return MISSING
        timestamp, signatures, others = "", [], False
        for item in value.split(self.separator):
            name, _, content = item.strip().partition("=")
            if name == self.timestamp_key:
                timestamp = content
            elif name == self.signature_key:
                signatures.append(content)
            else:
                others = True
        if not signatures:
            if not timestamp:
                return BAD
            return UNSUPPORTED if others else self.timestamp_alone
        signed = f"{timestamp.strip()}{self.joiner}".encode()
        return _timed_hex(request, secrets, clock, tolerance_s, timestamp, signatures, signed)


def _timed_hex(
    request: SignedRequest,
    secrets: SigningSecrets,
    clock: Clock,
    tolerance_s: int,
    timestamp: str,
    hexdigests: list[str],
    signed: bytes,
) -> Verification:
    """Any of ``hexdigests`` against HMAC-SHA256 over ``signed`` then the raw body, ``timestamp``
    (Unix seconds) within ``tolerance_s``; a timestamp that is not an integer is ``bad_signature``."""
    fresh = within(timestamp, clock, tolerance_s)
    if fresh is None:
        return BAD
    presented, body = decoded_all(hexdigests, SignatureEncoding.HEX), request.body
    return timed_verdict(secrets, presented, lambda k: mac(k, hashlib.sha256, signed, body), fresh)


def json_object(body: bytes, marker: bytes) -> dict[str, Any] | None:
    """``body`` as a JSON object when it mentions ``marker`` (a cheap test first: most requests
    are not handshakes); else ``None``."""
    if marker not in body:
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None
