"""Signature verification of received requests: one small interface (``Verifier``, in
``base``), one module per scheme (``hookbay``), and the registry that maps a scheme name to its
verifier (``registry``). The receive pipeline calls a verifier only through ``Verifier``."""

from hookbay_ingest.verification.base import (
    Clock,
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
)

__all__ = [
    "DEFAULT_SCHEME",
    "HOOKBAY",
    "PRESETS",
    "SIGNATURE_HEADER",
    "Clock",
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
]
