"""Standard Webhooks signatures (standardwebhooks.com): ``v1,<base64 HMAC-SHA256>`` of
``{id}.{timestamp}.{body}`` under the secret's bytes (``whsec_`` + base64)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Final

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - a prefix, not a secret
MIN_SECRET_BYTES: Final = 24
MAX_SECRET_BYTES: Final = 64


def check_secret(secret: str) -> bytes:
    """The key of a ``whsec_`` secret; ``ValueError`` saying what is wrong (never echoing it)."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a Standard Webhooks secret starts with {SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"the part after {SECRET_PREFIX!r} must be base64") from None
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise ValueError(f"the key must be {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes")
    return key


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header's value."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(check_secret(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()
