"""Dedupe claims for tests that assert what a claim decides, not how long it may take."""

from __future__ import annotations

from hookbay_common.routing.dedupe_store import Deduplicator

PATIENT_CLAIM_S = 10.0
"""Tests run on a machine the other tests keep busy: a claim's answer (the first one connects)
can take longer there than the product's ``CLAIM_TIMEOUT`` and fail open (deliver), which is
``test_dedupe_store.py``'s ``TestRedisAway``'s subject, not these tests'."""


def patient_deduplicator(url: str, namespace: str) -> Deduplicator:
    """``Deduplicator.from_url`` with ``PATIENT_CLAIM_S`` for its claims and sockets."""
    return Deduplicator.from_url(url, namespace=namespace, timeout=PATIENT_CLAIM_S)
