"""Verifiers by scheme name, and which one a webhook's requests are checked with.

``PRESETS`` maps each scheme name to its verifier's factory; a provider preset (``stripe``,
``github``, ``slack``, ...) is one module in this package plus one entry here, and the receive
pipeline, which asks ``VerifierRegistry.for_webhook``, does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final

from hookbay_common.models import Webhook
from hookbay_ingest.verification.base import Verifier
from hookbay_ingest.verification.hookbay import HookbayVerifier

VerifierFactory = Callable[[], Verifier]

HOOKBAY: Final = "hookbay"
PRESETS: Final[Mapping[str, VerifierFactory]] = MappingProxyType({HOOKBAY: HookbayVerifier})
DEFAULT_SCHEME: Final = HOOKBAY
"""The scheme of a webhook that names none (today: every webhook)."""


class UnknownScheme(ValueError):
    """A scheme name with no verifier."""

    def __init__(self, scheme: str, known: frozenset[str]) -> None:
        super().__init__(f"no signature scheme named {scheme!r}; known: {', '.join(sorted(known))}")
        self.scheme = scheme


class VerifierRegistry:
    """One verifier per scheme, created once (verifiers are stateless)."""

    def __init__(self, factories: Mapping[str, VerifierFactory] = PRESETS) -> None:
        self._verifiers = {scheme: factory() for scheme, factory in factories.items()}
        if DEFAULT_SCHEME not in self._verifiers:
            raise UnknownScheme(DEFAULT_SCHEME, self.schemes)

    @property
    def schemes(self) -> frozenset[str]:
        return frozenset(self._verifiers)

    def get(self, scheme: str) -> Verifier:
        """The verifier of ``scheme``; ``UnknownScheme`` for a name not registered."""
        try:
            return self._verifiers[scheme]
        except KeyError:
            raise UnknownScheme(scheme, self.schemes) from None

    def for_webhook(self, webhook: Webhook) -> Verifier:
        """The verifier for the requests of ``webhook``: ``DEFAULT_SCHEME``, the one scheme a
        webhook can be configured with so far."""
        return self._verifiers[DEFAULT_SCHEME]
