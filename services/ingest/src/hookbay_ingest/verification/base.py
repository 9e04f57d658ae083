"""The verifier interface: what a signature scheme is given and what it answers.

A verifier checks one request against a webhook's signing secrets. It is given the raw body bytes,
the captured headers (``hookbay_common.headers.join_headers``: names lowercased, repeated headers
joined with ``", "``), the raw query string (without ``?``, latin-1 decoded), the secrets, and a
clock (``hookbay_common.clock.utcnow`` outside tests) for schemes that bound a signed timestamp.
It answers a ``Verification``: valid, with the secret that matched, or invalid, with the reason.

A verifier never raises for anything a sender controls (a malformed header is ``bad_signature``),
never logs, and compares digests in constant time. It is built once per webhook configuration
(the tolerance, public URL or key it needs) and keeps no state between requests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from hookbay_common.models import HandshakeKind
from hookbay_common.models import InvalidReason as InvalidReason
from hookbay_common.models import MatchedSecret as MatchedSecret

Clock = Callable[[], datetime]
"""Now, timezone-aware UTC (``hookbay_common.clock.utcnow``); tests pass a fixed one."""


@dataclass(frozen=True, slots=True)
class SigningSecrets:
    """A webhook's signing secrets: ``current``, and during a rotation the ``previous`` one, still
    accepted until the rotation ends (``None`` outside a rotation)."""

    current: str
    previous: str | None = None
    keys: tuple[tuple[bytes, MatchedSecret], ...] = field(init=False, repr=False, compare=False)
    """``candidates`` as UTF-8 key bytes, encoded once."""

    def __post_init__(self) -> None:
        keys = tuple((secret.encode(), slot) for secret, slot in self.candidates())
        object.__setattr__(self, "keys", keys)

    def key(self, slot: MatchedSecret) -> bytes:
        """The UTF-8 bytes of the secret in ``slot``."""
        return next(key for key, held in self.keys if held is slot)

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
    method: str = "POST"


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
    """One signature scheme (``hookbay``, and one module per provider preset), built for one
    webhook's configuration (``registry.PRESETS``)."""

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        """Whether ``request`` was signed with one of ``secrets`` under this scheme; ``clock`` is
        now, for a scheme that bounds a signed timestamp. Pure apart from reading ``clock``."""
        ...


@dataclass(frozen=True, slots=True)
class HandshakeAnswer:
    """A handshake's outcome: ``verification`` of the handshake's own authenticity (``None``
    for a handshake the sender does not sign and nothing else can check), and, when it is
    valid or unverifiable, the reply's ``body`` and ``media_type``."""

    verification: Verification | None
    body: bytes = b""
    media_type: str = "text/plain; charset=utf-8"

    @property
    def refused(self) -> bool:
        return self.verification is not None and not self.verification.valid


@runtime_checkable
class Handshake(Protocol):
    """A scheme whose sender proves the URL before it delivers (Slack, Zoom, Meta, X).

    ``detect`` runs on every request of a webhook with this scheme and must be cheap for a
    request that is not a handshake; ``answer`` checks the handshake's authenticity before it
    computes anything with a secret (else the endpoint would sign what a stranger asks)."""

    methods: frozenset[str]
    """The HTTP methods handshakes come with (``GET`` is accepted only for these schemes)."""

    def detect(self, request: SignedRequest) -> HandshakeKind | None: ...

    def answer(
        self, kind: HandshakeKind, request: SignedRequest, secrets: SigningSecrets, clock: Clock
    ) -> HandshakeAnswer: ...
