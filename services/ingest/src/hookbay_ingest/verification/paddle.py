"""Paddle Billing: ``Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>…]``; each ``h1`` is the hex
HMAC-SHA256 of ``{ts}:{raw body}`` keyed with the notification destination's secret as text.
Several ``h1`` appear while Paddle rotates: any match passes; a header without ``h1`` is
``unsupported_version``. Tolerance 300 s by default, either side (Paddle's SDK uses 5 s, which
clock skew and queueing break).
"""

from __future__ import annotations

from typing import Final

from hookbay_ingest.verification._engine import UNSUPPORTED
from hookbay_ingest.verification._timestamped import KeyValueScheme, TimestampedVerifier

SIGNATURE_HEADER: Final = "paddle-signature"
DEFAULT_TOLERANCE_S: Final = 300


class PaddleVerifier(TimestampedVerifier):
    scheme = KeyValueScheme(
        SIGNATURE_HEADER, separator=";", timestamp_key="ts", signature_key="h1",
        joiner=":", timestamp_alone=UNSUPPORTED,
    )  # fmt: skip
    default_tolerance_s = DEFAULT_TOLERANCE_S
