"""Twilio: ``X-Twilio-Signature`` is the base64 HMAC-SHA1 (keyed with the auth token) of the
URL Twilio requested followed, for a form body, by every parameter as ``name + value`` in name
order (each name's values sorted, duplicates once), no separators. A JSON body is signed through
the URL instead: its query carries ``bodySHA256``, the hex SHA-256 of the body, checked here.

The URL is the configured ``public_url`` (what is set at Twilio, scheme and host included,
never one rebuilt from proxy headers); when it has no query, the request's query is appended.
As Twilio's own library does, a signature over that URL with the scheme's default port
written out (``https://host:443/…``), or without the port it names, is accepted too: Twilio
has signed both forms. No timestamp: Twilio's scheme has no replay protection.
"""

from __future__ import annotations

import hashlib
import hmac
from functools import partial
from typing import Final
from urllib.parse import parse_qs, parse_qsl, urlsplit, urlunsplit

from hookbay_common.models import SignatureEncoding, WebhookVerification
from hookbay_ingest.verification._engine import (
    BAD,
    MISSING,
    decoded_all,
    header,
    mac,
    match,
    verdict,
)
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

SIGNATURE_HEADER: Final = "x-twilio-signature"
FORM: Final = "application/x-www-form-urlencoded"
DEFAULT_PORTS: Final = {"https": 443, "http": 80}


class TwilioVerifier:
    def __init__(self, config: WebhookVerification) -> None:
        url = config.public_url or ""
        self._urls = tuple(dict.fromkeys((url, _other_port_form(url))))
        """The URL as configured, then its other port form (when there is one): they differ in
        the host part only, so the query and the body sign alike for both."""
        self._query = url.partition("?")[2] if "?" in url else None
        """The configured query; ``None``: the request's is appended."""

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        value = header(request, SIGNATURE_HEADER)
        if value is None:
            return MISSING
        query, suffix = self._query, ""
        if query is None:
            query = request.query_string
            suffix = f"?{query}" if query else ""
        body_hash = parse_qs(query).get("bodySHA256")
        if body_hash is not None:
            digest = hashlib.sha256(request.body).hexdigest().encode()
            if not hmac.compare_digest(digest, body_hash[0].lower().encode()):
                return BAD
            tail = ""
        else:
            tail = _form_string(request)
        presented = decoded_all([value], SignatureEncoding.BASE64)
        for url in self._urls:
            slot = match(secrets, presented, partial(_sha1, f"{url}{suffix}{tail}".encode()))
            if slot is not None:
                return verdict(slot)
        return BAD


def _sha1(message: bytes, key: bytes) -> bytes:
    return mac(key, hashlib.sha1, message)


def _other_port_form(url: str) -> str:
    """``url`` with its scheme's default port written out when it names none, and without its
    port when it names one (as Twilio's library compares)."""
    parts = urlsplit(url)
    default = DEFAULT_PORTS.get(parts.scheme.lower())
    if default is None or not parts.netloc:
        return url
    try:
        port = parts.port
    except ValueError:
        return url
    bare = parts.netloc[: parts.netloc.rfind(":")] if port is not None else parts.netloc
    netloc = f"{bare}:{default}" if port is None else bare
    return urlunsplit(parts._replace(netloc=netloc))


def _form_string(request: SignedRequest) -> str:
    """The sorted ``name + value`` concatenation of a form body ("" for any other body)."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith(FORM):
        return ""
    try:
        pairs = parse_qsl(request.body.decode(), keep_blank_values=True)
    except UnicodeDecodeError:
        return ""
    values: dict[str, set[str]] = {}
    for name, value in pairs:
        values.setdefault(name, set()).add(value)
    return "".join(name + value for name in sorted(values) for value in sorted(values[name]))
