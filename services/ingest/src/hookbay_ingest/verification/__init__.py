"""Verification of received requests: one small interface (``Verifier``, and ``Handshake`` for
schemes whose sender proves the URL first, in ``base``), one module per scheme, and the registry
that maps a verification type to its verifier and builds each webhook's check (``registry``).
The receive pipeline calls a verifier only through these interfaces."""

from hookbay_ingest.verification.base import (
    Clock,
    Handshake,
    HandshakeAnswer,
    InvalidReason,
    MatchedSecret,
    SignedRequest,
    SigningSecrets,
    Verification,
    Verifier,
)
from hookbay_ingest.verification.hookbay import SIGNATURE_HEADER, HookbayVerifier
from hookbay_ingest.verification.registry import (
    DEFAULT_SCHEME,
    HOOKBAY,
    PRESETS,
    UnknownScheme,
    VerifierFactory,
    VerifierRegistry,
    WebhookCheck,
    build_check,
)

__all__ = [
    "DEFAULT_SCHEME",
    "HOOKBAY",
    "PRESETS",
    "SIGNATURE_HEADER",
    "Clock",
    "Handshake",
    "HandshakeAnswer",
    "HookbayVerifier",
    "InvalidReason",
    "MatchedSecret",
    "SignedRequest",
    "SigningSecrets",
    "UnknownScheme",
    "Verification",
    "Verifier",
    "VerifierFactory",
    "VerifierRegistry",
    "WebhookCheck",
    "build_check",
]
