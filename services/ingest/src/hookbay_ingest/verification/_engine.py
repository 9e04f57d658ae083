"""What most schemes share: reading a signature header, decoding it, MACs over the raw bytes,
any-of matching in constant time over every presented signature and every secret, and the
timestamp bound.

Nothing here copies the body: a MAC over ``prefix + body`` is fed the prefix, then the body.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from hookbay_common.models import HmacAlgorithm, SignatureEncoding, WebhookVerification
from hookbay_ingest.verification.base import (
    Clock,
    InvalidReason,
    MatchedSecret,
    SignedRequest,
    SigningSecrets,
    Verification,
)

Digest = Callable[[], "hashlib._Hash"]
DIGESTS: Final[dict[HmacAlgorithm, Digest]] = {
    HmacAlgorithm.SHA1: hashlib.sha1,
    HmacAlgorithm.SHA256: hashlib.sha256,
    HmacAlgorithm.SHA512: hashlib.sha512,
}
MISSING: Final = Verification.refused(InvalidReason.MISSING_SIGNATURE)
BAD: Final = Verification.refused(InvalidReason.BAD_SIGNATURE)
STALE: Final = Verification.refused(InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE)
UNSUPPORTED: Final = Verification.refused(InvalidReason.UNSUPPORTED_VERSION)
ACCEPTED: Final = {slot: Verification.accepted(slot) for slot in MatchedSecret}


def header(request: SignedRequest, *names: str) -> str | None:
    """The first of ``names`` present and not blank, stripped."""
    for name in names:
        value = request.headers.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def decode(value: str, encoding: SignatureEncoding) -> bytes | None:
    """A presented signature's bytes; ``None`` when it is not valid ``encoding``."""
    try:
        if encoding is SignatureEncoding.HEX:
            return bytes.fromhex(value)
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        return None


def strip_prefix(value: str, prefix: str) -> str | None:
    """``value`` without ``prefix`` (compared case-insensitively); ``None`` when it lacks it."""
    if value[: len(prefix)].lower() != prefix.lower():
        return None
    return value[len(prefix) :]


def mac(key: bytes, digest: Digest, first: bytes, *rest: bytes) -> bytes:
    signer = hmac.new(key, first, digest)
    for part in rest:
        signer.update(part)
    return signer.digest()


def match(
    secrets: SigningSecrets,
    presented: Sequence[bytes],
    expected: Callable[[bytes], bytes],
) -> MatchedSecret | None:
    """The first secret (current first) whose ``expected(key)`` equals one of ``presented``,
    every comparison in constant time."""
    for key, slot in secrets.keys:
        digest = expected(key)
        for candidate in presented:
            if hmac.compare_digest(digest, candidate):
                return slot
    return None


def verdict(slot: MatchedSecret | None) -> Verification:
    return BAD if slot is None else ACCEPTED[slot]


def timed_verdict(
    secrets: SigningSecrets,
    presented: Sequence[bytes],
    expected: Callable[[bytes], bytes],
    fresh: bool,
) -> Verification:
    """The ``verdict`` of ``match``, except that a valid signature whose signed timestamp is not
    ``fresh`` is ``timestamp_out_of_tolerance``."""
    result = verdict(match(secrets, presented, expected))
    return STALE if result.valid and not fresh else result


def tolerance_of(config: WebhookVerification, default_s: int) -> int:
    """The webhook's ``tolerance_s``, or the scheme's ``default_s`` when it sets none."""
    return default_s if config.tolerance_s is None else config.tolerance_s


def within(timestamp: str, clock: Clock, tolerance_s: int, *, unit: float = 1.0) -> bool | None:
    """Whether ``timestamp`` (an integer count of ``unit`` seconds since the epoch) is at most
    ``tolerance_s`` from now, either side; ``None`` when it is not an integer. A tolerance of 0
    checks nothing."""
    text = timestamp.strip()
    if not text.isascii() or not text.lstrip("-").isdigit() or len(text) > 20:
        return None
    if tolerance_s == 0:
        return True
    return abs(clock().timestamp() - int(text) * unit) <= tolerance_s


def decoded_all(values: Iterable[str], encoding: SignatureEncoding) -> list[bytes]:
    """Every value that decodes (the others can match nothing)."""
    return [raw for raw in (decode(v.strip(), encoding) for v in values) if raw is not None]


@dataclass(frozen=True, slots=True)
class BodyHmac:
    """A MAC of the raw body (optionally after fixed ``leading`` bytes, e.g. a public URL) in
    one header, after ``prefix``, in ``encoding``; the first present of ``headers`` is read.

    ``separator``: the header holds a list; entries without ``prefix`` are other scheme
    versions, ignored (a header holding only such entries is ``unsupported_version``)."""

    headers: tuple[str, ...]
    algorithm: HmacAlgorithm
    encoding: SignatureEncoding
    prefix: str = ""
    separator: str | None = None
    leading: bytes = b""

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        value = header(request, *self.headers)
        if value is None:
            return MISSING
        presented = self.presented(value)
        if presented is None:
            return UNSUPPORTED
        digest, body, leading = DIGESTS[self.algorithm], request.body, self.leading
        return verdict(match(secrets, presented, lambda key: mac(key, digest, leading, body)))

    def presented(self, value: str) -> list[bytes] | None:
        """The decoded signatures of ``value``; ``None`` when a list holds no entry of ours."""
        entries = value.split(self.separator) if self.separator else [value]
        ours = [rest for rest in (strip_prefix(e.strip(), self.prefix) for e in entries) if rest]
        if not ours and self.separator and any(e.strip() for e in entries):
            return None
        return decoded_all(ours, self.encoding)
