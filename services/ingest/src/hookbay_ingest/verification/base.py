"""The verifier interface: what a signature scheme is given and what it answers.

A verifier checks one request against a webhook's signing secrets. It is given the raw body bytes,
the captured headers (``hookbay_common.headers.join_headers``: names lowercased, repeated headers
joined with ``", "``), the raw query string (without ``?``, latin-1 decoded), the secrets, and a
clock (``hookbay_common.clock.utcnow`` outside tests) for schemes that bound a signed timestamp.
It answers a ``Verification``: valid, with the secret that matched, or invalid, with the reason.

A verifier never raises for anything a sender controls (a malformed header is ``bad_signature``),
never logs, and compares digests in constant time. It is stateless: one instance serves every
request of every webhook that uses its scheme.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

Clock = Callable[[], datetime]
"""Now, timezone-aware UTC (``hookbay_common.clock.utcnow``); tests pass a fixed one."""


class InvalidReason(StrEnum):
    """Why a request's signature was refused."""

    MISSING_SIGNATURE = "missing_signature"
    """The scheme's signature header is absent (or blank)."""
    BAD_SIGNATURE = "bad_signature"
    """A signature is present but matches no secret (or cannot be read)."""
    TIMESTAMP_OUT_OF_TOLERANCE = "timestamp_out_of_tolerance"
    """The signed timestamp is further from the clock than the scheme tolerates (replay)."""
    UNSUPPORTED_VERSION = "unsupported_version"
    """The signature names a scheme version or algorithm the verifier does not implement."""


class MatchedSecret(StrEnum):
    """Which of a webhook's secrets a valid signature was made with."""

    CURRENT = "current"
    PREVIOUS = "previous"


@dataclass(frozen=True, slots=True)
class SigningSecrets:
    """A webhook's signing secrets: ``current``, and during a rotation the ``previous`` one, still
    accepted until the rotation ends (``None`` outside a rotation)."""

    current: str
    previous: str | None = None

    def candidates(self) -> tuple[tuple[str, MatchedSecret], ...]:
        """The secrets to try, current first."""
        if self.previous is None:
            return ((self.current, MatchedSecret.CURRENT),)
        return (
            (self.current, MatchedSecret.CURRENT),
            (self.previous, MatchedSecret.PREVIOUS),
        )


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """The parts of a received request a signature can cover."""

    body: bytes
    """The body exactly as received."""
    headers: Mapping[str, str]
    """As ``hookbay_common.headers.join_headers`` captures them."""
    query_string: str = ""
    """The raw query string, without ``?``, latin-1 decoded (byte for byte)."""


@dataclass(frozen=True, slots=True)
class Verification:
    """A verifier's answer: exactly one of ``secret`` (valid) and ``reason`` (invalid) is set.
    Build one with ``accepted`` or ``refused``."""

    secret: MatchedSecret | None = None
    reason: InvalidReason | None = None

    def __post_init__(self) -> None:
        if (self.secret is None) == (self.reason is None):
            raise ValueError("a verification carries either the matched secret or the reason")

    @property
    def valid(self) -> bool:
        return self.reason is None

    @classmethod
    def accepted(cls, secret: MatchedSecret) -> Verification:
        return cls(secret=secret)

    @classmethod
    def refused(cls, reason: InvalidReason) -> Verification:
        return cls(reason=reason)


class Verifier(Protocol):
    """One signature scheme (``hookbay``, and later one module per provider preset)."""

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        """Whether ``request`` was signed with one of ``secrets`` under this scheme; ``clock`` is
        now, for a scheme that bounds a signed timestamp. Pure apart from reading ``clock``."""
        ...
