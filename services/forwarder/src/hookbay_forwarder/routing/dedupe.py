"""The router's deduplication step: a route's ``dedupe`` rule, its key and its claim in Redis.

    dedupe = RouteDedupe(settings.redis_url, namespace=settings.kafka_namespace, metrics=...)
    holder = await dedupe.duplicate_of(route, rule, event, subject)   # None: deliver

The Redis client is made on the first claim (a route with a rule), so an installation whose
routes have none never connects. Semantics: docs/owners/routes.md ("Deduplication"); reasons:
docs/decisions.md ("Deduplication").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from hookbay_common.logs import get_logger
from hookbay_common.models import Event, Route
from hookbay_common.routing.dedupe import DedupeRule, dedupe_key
from hookbay_common.routing.dedupe_store import Deduplicator
from hookbay_common.routing.subject import Subject
from hookbay_common.topics import DEFAULT_NAMESPACE
from hookbay_forwarder.metrics import DedupeMetrics

log = get_logger(__name__)

UNCONFIGURED: Final = "unconfigured"
"""The outcome counted for a claim not made because ``HOOKBAY_REDIS_URL`` is not set."""


class RouteDedupe:
    """Decides whether an event is a duplicate on a route: ``duplicate_of`` answers the id of
    the event holding the key, or ``None`` (deliver) — no key, the first event with it, the
    same event again (routed after a crash), Redis unavailable, or no Redis configured. Never
    raises on a Redis failure. Every claim is counted by outcome (``DedupeMetrics``);
    without ``redis_url`` the first rule met logs ``dedupe_unconfigured`` once.
    ``deduplicator`` builds the claim store (tests give their own); called at most once."""

    def __init__(
        self,
        redis_url: str | None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        metrics: DedupeMetrics | None = None,
        deduplicator: Callable[[str, str], Deduplicator] | None = None,
    ) -> None:
        self._url = redis_url
        self._namespace = namespace
        self._metrics = metrics
        self._build = deduplicator or _from_url
        self._store: Deduplicator | None = None
        self._told_unconfigured = False

    async def duplicate_of(
        self, route: Route, rule: DedupeRule, event: Event, subject: Subject
    ) -> str | None:
        key = dedupe_key(rule, subject)
        if key is None:
            return None
        store = self._deduplicator()
        if store is None:
            self._count(UNCONFIGURED)
            return None
        claim = await store.claim(route.id, key, event.id, rule.window_s)
        self._count(claim.outcome.value)
        return claim.duplicate_of if claim.is_duplicate else None

    def _deduplicator(self) -> Deduplicator | None:
        if self._store is None and self._url is not None:
            self._store = self._build(self._url, self._namespace)
        if self._store is None and not self._told_unconfigured:
            self._told_unconfigured = True
            log.warning("dedupe_unconfigured", reason="HOOKBAY_REDIS_URL is not set: delivering")
        return self._store

    def _count(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.claims.labels(outcome).inc()

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None


def _from_url(url: str, namespace: str) -> Deduplicator:
    return Deduplicator.from_url(url, namespace=namespace)
