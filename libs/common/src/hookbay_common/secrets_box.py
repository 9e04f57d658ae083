"""Encryption at rest for webhook secrets, and hashing of API tokens.

Webhook secrets must be readable by ingest (to verify HMACs), so they are encrypted with a key
derived from ``HOOKBAY_SECRET_KEY`` (Fernet: AES-128-CBC + HMAC-SHA256) rather than hashed.
API tokens are only ever compared, so they are stored as SHA-256 digests.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

from cryptography.fernet import Fernet, InvalidToken

from hookbay_common.httperrors import ConfigurationError

TOKEN_PREFIX = "hbk_"  # noqa: S105 - a public prefix that makes leaked tokens greppable


class SecretBox:
    def __init__(self, secret_key: str) -> None:
        digest = hashlib.sha256(b"hookbay/webhook-secrets/v1\x00" + secret_key.encode()).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))

    def seal(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode("ascii")

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode()
        except InvalidToken:
            raise ConfigurationError(
                "a stored webhook secret cannot be decrypted: HOOKBAY_SECRET_KEY differs from "
                "the key it was stored with"
            ) from None


def new_api_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_api_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
