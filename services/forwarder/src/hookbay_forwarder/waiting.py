"""Where a routed delivery's task waits for its ``not_before``: in Kafka, never in memory.

A task due later than the shortest delay tier goes to the longest tier not longer than its
wait (``topics.fitting_tier``), with a ``not-before`` header at the earlier of its due time and
the tier's own time (written + tier), so a tier partition stays in due order. When the task
consumer reads it there (``ForwarderHandlers.on_task``), it asks again: a task still not due by
the shortest tier or more takes another hop, through the tier that fits what is left; anything
else goes to the deliveries topic, where its lane waits out the remainder (less than the
shortest tier, 10 s by default) beside its queue. So a route's delay (up to 24 h) or a long
retry wait is a few hops through Kafka: durable, restart-safe, and never a lane holding a task,
and its partition's commits, for hours.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from hookbay_common.topics import Topics, fitting_tier
from hookbay_forwarder.delivery.consumer import NOT_BEFORE_HEADER
from hookbay_forwarder.writes import Message


class Waiting:
    """The message that carries one encoded ``destination-task/1`` towards its lane."""

    def __init__(self, topics: Topics, tiers: Sequence[float]) -> None:
        """``tiers``: the installation's delay tiers, shortest first (``Settings.delay_tiers``;
        every one a topic ``ensure_configured_topics`` made)."""
        self._topics = topics
        self._tiers = tuple(sorted(t for t in tiers if t > 0))

    def message(
        self, task: bytes, destination: str, not_before_ms: int, now_ms: int | None = None
    ) -> Message:
        """The next hop of ``task`` (encoded) for ``destination`` (its id, the key), due at
        ``not_before_ms`` (Unix milliseconds): a delay tier while the wait left is at least the
        shortest tier, else the deliveries topic."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        key = destination.encode()
        tier = fitting_tier((not_before_ms - now) / 1000, self._tiers)
        if tier is None:
            return Message(self._topics.deliveries, task, key)
        due = min(not_before_ms, now + round(tier * 1000))
        return Message(
            self._topics.retry(tier), task, key, [(NOT_BEFORE_HEADER, str(due).encode())]
        )
