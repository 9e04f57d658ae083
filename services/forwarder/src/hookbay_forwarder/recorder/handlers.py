"""The recorder's business: decode a batch of records, write its events, attempts and delivery
records to MongoDB, and note each destination's failed attempts
(``DestinationFailureRepository``) after them.

Writes are idempotent upserts (``record_batch``): a batch written again changes nothing. What
the batches change in the page summaries is gathered in a ``PendingSummaries`` and written by
``summarise`` (the consume loop decides when).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hookbay_common.db import AttemptRepository, DestinationFailureRepository, EventRepository
from hookbay_common.db.events import PendingSummaries, record_batch
from hookbay_common.logs import get_logger
from hookbay_common.models import Attempt, Delivery, Event
from hookbay_common.topics import Topics
from hookbay_common.wire import WireError, decode_attempts_record, decode_event
from hookbay_forwarder.metrics import RecorderMetrics
from hookbay_forwarder.recorder.hold import Read

log = get_logger("hookbay.recorder")


@dataclass
class RecorderHandlers:
    events: EventRepository
    attempts: AttemptRepository
    topics: Topics
    metrics: RecorderMetrics
    failures: DestinationFailureRepository | None = None
    """Keeps each destination's newest failed attempts (its page's last errors)."""

    def decode(self, records: Sequence[Any]) -> list[Read]:
        """Each record with what it holds: an event, an attempt or a delivery record (on the
        attempts topic, keyed by event id like attempts); ``None`` for an unreadable one, which
        is logged and counted (the forwarder dead-letters unreadable events)."""
        reads = []
        for record in records:
            item: Event | Attempt | Delivery | None = None
            try:
                if record.topic == self.topics.events:
                    item = decode_event(record.value)
                else:
                    item = decode_attempts_record(record.value)
            except WireError as exc:
                log.error(
                    "unreadable_message", topic=record.topic, partition=record.partition,
                    offset=record.offset, problem=str(exc),
                )  # fmt: skip
                self.metrics.unreadable.labels(record.topic).inc()
            reads.append(Read(record, item))
        return reads

    async def record(self, reads: Sequence[Read], pending: PendingSummaries) -> None:
        """Write one batch: events, attempts, delivery records, and the statuses they imply;
        what it changes in the summaries is added to ``pending``."""
        events = [r.item for r in reads if isinstance(r.item, Event)]
        attempts = [r.item for r in reads if isinstance(r.item, Attempt)]
        deliveries = [r.item for r in reads if isinstance(r.item, Delivery)]
        started = time.perf_counter()
        await record_batch(self.events, self.attempts, events, attempts, pending, deliveries)
        if self.failures is not None:
            await self.failures.note(attempts)
        self.metrics.write_latency.observe(time.perf_counter() - started)
        self.metrics.recorded.labels("event").inc(len(events))
        self.metrics.recorded.labels("attempt").inc(len(attempts))
        if deliveries:
            self.metrics.recorded.labels("delivery").inc(len(deliveries))

    async def summarise(self, pending: PendingSummaries) -> None:
        """Write what ``pending`` owes the page summaries, books and counters."""
        started = time.perf_counter()
        await self.events.summarise(pending)
        self.metrics.summary_latency.observe(time.perf_counter() - started)
