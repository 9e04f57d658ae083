"""Claims of deduplication keys in Redis, shared by every router.

    dedup = Deduplicator.from_url(settings.redis_url, namespace=settings.kafka_namespace)
    claim = await dedup.claim(route.id, key, event.id, route.dedupe.window_s)
    if claim.is_duplicate: ...  # record the delivery ``deduplicated``, naming claim.duplicate_of

Kept apart from the rule (``hookbay_common.routing.dedupe``) so that the models, which hold the
rule, never load a Redis client. Semantics: docs/owners/routes.md ("Deduplication"); reasons,
including why an unreachable Redis delivers: docs/decisions.md ("Deduplication").
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from hookbay_common.logs import get_logger
from hookbay_common.topics import DEFAULT_NAMESPACE, NAMESPACE_PATTERN

log = get_logger(__name__)

CLAIM_TIMEOUT: Final = 0.5
"""Seconds a claim waits on Redis, connecting and retrying included, before it answers
``UNAVAILABLE``. A claim normally takes one round trip (well under a millisecond nearby)."""
RECHECK_AFTER: Final = 5.0
"""Seconds after a failed claim during which claims answer ``UNAVAILABLE`` without asking
Redis: a Redis that drops packets costs one ``CLAIM_TIMEOUT`` per period, not one per event."""


class ClaimOutcome(StrEnum):
    FIRST = "first"
    """No event held the key: this one holds it now, for the window. Deliver."""
    REPEAT = "repeat"
    """This same event holds the key already (routed again after a crash). Deliver."""
    DUPLICATE = "duplicate"
    """Another event holds the key: do not deliver; ``duplicate_of`` names it."""
    UNAVAILABLE = "unavailable"
    """Redis did not answer in time or answered an error: deliver (fail open) and count it."""


@dataclass(frozen=True, slots=True)
class Claim:
    outcome: ClaimOutcome
    duplicate_of: str | None = None
    """The event holding the key, for ``DUPLICATE`` only."""

    @property
    def is_duplicate(self) -> bool:
        return self.outcome is ClaimOutcome.DUPLICATE


FIRST: Final = Claim(ClaimOutcome.FIRST)
REPEAT: Final = Claim(ClaimOutcome.REPEAT)
UNAVAILABLE: Final = Claim(ClaimOutcome.UNAVAILABLE)

# KEYS[1]: the key. ARGV[1]: the claiming event id. ARGV[2]: the window in seconds.
# Returns the id of the event holding the key, or nil when this event took it now. One script:
# the read and the write are atomic, so two routers claiming at once never both win, and a key
# expiring between a refused SET NX and a GET cannot happen.
_CLAIM_LUA: Final = """
local held = redis.call('GET', KEYS[1])
if held then
  return held
end
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2])
return false
"""


class Deduplicator:
    """Claims keys in Redis as ``<namespace>:dedupe:<route id>:<key>``, the value being the
    claiming event's id and its time to live the window. ``namespace`` is the installation's
    (``HOOKBAY_KAFKA_NAMESPACE``), so installations sharing one Redis never see each other's
    keys, and each route has its own keys.

    The window starts at the first claim and is not extended by later ones. ``claim`` never
    raises on a Redis failure: it answers ``UNAVAILABLE`` within ``timeout`` seconds and logs
    ``dedupe_unavailable`` once when claims start failing (``dedupe_available`` when they work
    again); the caller counts the outcome. Safe for concurrent use on one event loop. The
    deduplicator owns ``client`` and closes it in ``close``. ``clock`` (monotonic seconds)
    exists for tests."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        timeout: float = CLAIM_TIMEOUT,
        recheck_after: float = RECHECK_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not re.fullmatch(NAMESPACE_PATTERN, namespace):
            raise ValueError(f"namespace {namespace!r} does not match {NAMESPACE_PATTERN}")
        self._client = client
        self._prefix = f"{namespace}:dedupe:"
        self._timeout = timeout
        self._recheck_after = recheck_after
        self._clock = clock
        self._down_until: float | None = None
        self._script = client.register_script(_CLAIM_LUA)

    @classmethod
    def from_url(
        cls, url: str, *, namespace: str = DEFAULT_NAMESPACE, timeout: float = CLAIM_TIMEOUT
    ) -> Deduplicator:
        """A deduplicator on a new client for ``url``; connects lazily, on the first claim.
        Socket timeouts match the claim's ``timeout``; one immediate retry covers a pooled
        connection that a Redis restart closed."""
        client = redis.asyncio.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 1),
        )
        return cls(client, namespace=namespace, timeout=timeout)

    def redis_key(self, route_id: str, key: str) -> str:
        return f"{self._prefix}{route_id}:{key}"

    async def claim(self, route_id: str, key: str, event_id: str, window_s: int) -> Claim:
        """Claim ``key`` (``dedupe_key``'s) on route ``route_id`` for ``event_id``: ``FIRST``
        when no event held it within the last ``window_s`` seconds, ``REPEAT`` when
        ``event_id`` itself holds it, ``DUPLICATE`` naming the holder otherwise, and
        ``UNAVAILABLE`` when Redis failed or was recently failing. ``ValueError`` when
        ``window_s`` is below 1."""
        if window_s < 1:
            raise ValueError(f"window_s must be at least 1, got {window_s}")
        if self._down_until is not None and self._clock() < self._down_until:
            return UNAVAILABLE
        try:
            async with asyncio.timeout(self._timeout):
                held = await self._script(
                    keys=[self.redis_key(route_id, key)], args=[event_id, window_s]
                )
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)
            return UNAVAILABLE
        self._answered()
        if held is None:
            return FIRST
        holder = held.decode() if isinstance(held, bytes) else str(held)
        return REPEAT if holder == event_id else Claim(ClaimOutcome.DUPLICATE, holder)

    def _failed(self, exc: BaseException) -> None:
        if self._down_until is None:
            log.warning("dedupe_unavailable", error=repr(exc), recheck_after=self._recheck_after)
        self._down_until = self._clock() + self._recheck_after

    def _answered(self) -> None:
        if self._down_until is not None:
            log.info("dedupe_available")
            self._down_until = None

    async def close(self) -> None:
        await self._client.aclose()
