"""Opaque, signed keyset cursors for a webhook's event list.

A cursor is ``base64url(JSON) + "." + base64url(HMAC-SHA256)``; the JSON is ``{"v": 2, "w":
webhook id, "s": status filter, "p": page, "t": created_at in epoch milliseconds, "i": event
id}`` of the last event of the page (``t`` and ``i`` null: the top of page ``p``, where a list
that read its page budget stopped). Cursors of version 1 (before pages) are refused as
``Invalid cursor``: a client starts the list again. The signature, under a key of its own derived from the secret key,
keeps clients from forging positions; the webhook and filter inside keep a cursor from being
used on another list.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from datetime import UTC
from typing import Any, Final

from hookbay_common.clock import epoch_ms, from_epoch_ms
from hookbay_common.db.events import EventCursor
from hookbay_common.errors import InvalidCursor

VERSION: Final = 2
_KEY_LABEL: Final = b"hookbay/event-cursor/v1\0"


def cursor_key(secret_key: str) -> bytes:
    """The signing key for cursors: bound to this use, so no other signature made under
    ``secret_key`` ever verifies as a cursor."""
    return hashlib.sha256(_KEY_LABEL + secret_key.encode()).digest()


def encode_cursor(key: bytes, webhook_id: str, status: str, position: EventCursor) -> str:
    millis = None
    if position.created_at is not None:
        created_at = position.created_at
        if created_at.tzinfo is None:
            created_at = created_at.replace(tzinfo=UTC)
        millis = epoch_ms(created_at)
    payload = {
        "v": VERSION, "w": webhook_id, "s": status, "p": position.page, "t": millis,
        "i": position.event_id,
    }  # fmt: skip
    body = _b64encode(json.dumps(payload, separators=(",", ":")).encode())
    return f"{body}.{_b64encode(_sign(key, body))}"


def decode_cursor(key: bytes, token: str, webhook_id: str, status: str) -> EventCursor:
    """The position in ``token``; ``InvalidCursor`` when it is malformed, not signed with
    ``key``, or made for another webhook or status filter."""
    body, dot, signature = token.partition(".")
    if not dot or not body:
        raise InvalidCursor("malformed")
    # Compared as text: decoding first would let a changed padding bit of the last character
    # pass as the same signature.
    if not hmac.compare_digest(signature.encode(), _b64encode(_sign(key, body)).encode()):
        raise InvalidCursor("bad signature")
    payload = _payload(body)
    if payload.get("w") != webhook_id:
        raise InvalidCursor("made for another webhook")
    if payload.get("s") != status:
        raise InvalidCursor("made for another status filter")
    page, millis, event_id = payload.get("p"), payload.get("t"), payload.get("i")
    if type(page) is not int:
        raise InvalidCursor("malformed")
    if millis is None and event_id is None:
        return EventCursor(page)
    if type(millis) is not int or not isinstance(event_id, str):
        raise InvalidCursor("malformed")
    try:
        created_at = from_epoch_ms(millis)  # exact, unlike a float
    except OverflowError:
        raise InvalidCursor("malformed") from None
    return EventCursor(page, created_at, event_id)


def _payload(body: str) -> dict[str, Any]:
    try:
        payload = json.loads(_b64decode(body))
    except ValueError:
        raise InvalidCursor("malformed") from None
    if not isinstance(payload, dict) or payload.get("v") != VERSION:
        raise InvalidCursor("unknown version")
    return payload


def _sign(key: bytes, body: str) -> bytes:
    return hmac.new(key, body.encode(), hashlib.sha256).digest()


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InvalidCursor("malformed") from None
