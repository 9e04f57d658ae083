"""Stripe: ``Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=<hex>]``; each ``v1`` is the
hex HMAC-SHA256 of ``{t}.{raw body}`` keyed with the endpoint secret *as text* (the ``whsec_``
string's UTF-8 bytes, not base64-decoded as Standard Webhooks does).

Several ``v1`` appear while Stripe rolls a secret: any match passes. Other schemes (``v0``, the
test-mode fake) are ignored, so a header with only those is ``unsupported_version``. A valid
signature whose ``t`` is further than ``tolerance_s`` (default 300) from now, either side, is
``timestamp_out_of_tolerance``.
"""

from __future__ import annotations

from typing import Final

from hookbay_ingest.verification._engine import BAD
from hookbay_ingest.verification._timestamped import KeyValueScheme, TimestampedVerifier

SIGNATURE_HEADER: Final = "stripe-signature"
DEFAULT_TOLERANCE_S: Final = 300


class StripeVerifier(TimestampedVerifier):
    scheme = KeyValueScheme(
        SIGNATURE_HEADER, separator=",", timestamp_key="t", signature_key="v1",
        joiner=".", timestamp_alone=BAD,
    )  # fmt: skip
    default_tolerance_s = DEFAULT_TOLERANCE_S
