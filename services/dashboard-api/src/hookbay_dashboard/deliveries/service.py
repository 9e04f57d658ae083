"""Retrying one delivery on its own: ``POST /deliveries/{id}/retry``.

A retry sends the event again over the one route, to the delivery's destination as it is now
(its URL, headers, rate and state), as a new attempt chain of the *same* delivery: the event's
other deliveries are untouched, and the event's status follows the retried delivery (a later
chain's records stand over the first's, ``Delivery.supersedes``). Two records are published:
the task, on ``Topics.deliveries`` keyed by the destination's id (its lane delivers it, after
the tasks already waiting there), then the delivery's new status (``scheduled``, or ``held``
while the destination is paused or disabled) on ``Topics.attempts``. The answer comes once
Kafka holds both; after a 503 some may be there already, so retrying may deliver twice
(at-least-once, as every replay).

Retrying a destination's failed deliveries (``POST /destinations/{dest}/retry-failed``) does the
same for each delivery of that destination still ``failed`` in its event's latest routing, over
the failed events of the owner's webhooks whose routes name the destination now, oldest first,
at most ``RETRY_FAILED_MAX`` deliveries (and ``SCAN_MAX`` failed events read) per call; the
answer's ``next`` resumes where it stopped, in the same window (events failed before the first
call), so a delivery is not retried twice by two calls while the first's records are on their way.
"""

from __future__ import annotations

import base64
import binascii
import json
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from hookbay_common.clock import isoformat, utcnow
from hookbay_common.db import (
    DestinationRepository,
    EventCursor,
    EventRepository,
    WebhookRepository,
)
from hookbay_common.errors import DeliveryNotFound, DeliveryNotRetryable, InvalidField
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.logs import get_logger
from hookbay_common.models import (
    AttemptTrigger,
    Delivery,
    DeliveryStatus,
    Destination,
    Event,
    EventStatus,
    latest_routing,
)
from hookbay_common.routing.tasks import DestinationTask, event_of, first_status
from hookbay_common.wire import encode_delivery, encode_destination_task
from hookbay_dashboard.deliveries.schemas import DeliveryRetryAccepted, FailedRetried
from hookbay_dashboard.replays.service import ReplayPublisher

log = get_logger("hookbay.dashboard.deliveries")

NOT_RETRYABLE: Final = {
    DeliveryStatus.FILTERED: "its route's filter did not match: replay the event to route it again",
    DeliveryStatus.DEDUPLICATED: "its route dropped it as a duplicate: replay the event to route it again",
    DeliveryStatus.TRANSFORM_FAILED: "its transformation failed: replay the event to route it again",
    DeliveryStatus.HELD: "it is held: resume or re-enable its destination to deliver it",
    DeliveryStatus.SCHEDULED: "it is waiting for its next attempt already",
    DeliveryStatus.DELIVERING: "an attempt is under way",
}
"""Why a delivery in these statuses is not retried (``failed`` and ``success`` are)."""
RETRY_FAILED_MAX: Final = 1000
"""Deliveries one ``retry-failed`` call retries at most."""
SCAN_MAX: Final = 10_000
"""Failed events one ``retry-failed`` call reads at most (those failed elsewhere are skipped)."""
PUBLISH_BATCH: Final = 100


class DeliveryService:
    def __init__(
        self,
        events: EventRepository,
        destinations: DestinationRepository,
        webhooks: WebhookRepository,
        publisher: ReplayPublisher,
    ) -> None:
        self._events = events
        self._destinations = destinations
        self._webhooks = webhooks
        self._publisher = publisher

    async def _find(self, delivery_id: str, username: str) -> tuple[Event, Delivery]:
        """The delivery and its event; ``DeliveryNotFound`` also for another owner's."""
        event_id = event_of(delivery_id)
        found = await self._events.get_with_deliveries(event_id) if event_id else None
        if found is None or found[0].username != username:
            raise DeliveryNotFound(delivery_id)
        event, deliveries = found
        delivery = next((d for d in deliveries if d.id == delivery_id), None)
        if delivery is None:
            raise DeliveryNotFound(delivery_id)
        return event, delivery

    async def retry(self, delivery_id: str, *, username: str) -> DeliveryRetryAccepted:
        """Queue a new attempt chain of the delivery (see the module); ``DeliveryNotRetryable``
        unless it failed or succeeded, or when its destination no longer exists;
        ``ServiceUnavailable`` while Kafka is unreachable."""
        event, delivery = await self._find(delivery_id, username)
        if delivery.status in NOT_RETRYABLE:
            raise DeliveryNotRetryable(
                delivery_id, delivery.status.value, NOT_RETRYABLE[delivery.status]
            )
        destination = await self._destinations.get(username, delivery.destination)
        if destination is None:
            raise DeliveryNotRetryable(
                delivery_id, delivery.status.value,
                f"its destination {delivery.destination!r} no longer exists",
            )  # fmt: skip
        messages, accepted = self._retried(event, delivery, destination)
        await self._publisher.send(messages)
        log.info("delivery_retry_queued", delivery_id=delivery.id, chain_id=accepted.chain_id)
        return accepted

    async def retry_failed(
        self, username: str, name: str, *, limit: int = RETRY_FAILED_MAX, after: str | None = None
    ) -> FailedRetried:
        """Retry the destination's failed deliveries (see the module), at most ``limit``, from
        ``after`` (the ``next`` of the previous call: the same window, where it stopped);
        ``DestinationNotFound`` for another owner's; ``InvalidField`` for an ``after`` that is
        not one; ``ServiceUnavailable`` while Kafka is unreachable (what was published stays:
        calling again with the same ``after`` may send some twice, at-least-once)."""
        destination = await self._destinations.require(username, name)
        resume = _Position.decode(after) if after is not None else None
        before = resume.before if resume is not None else utcnow()
        webhooks = sorted(
            (w for w in await self._webhooks.list_for_owner(username)
             if any(route.destination == name for route in w.routes)
             and (resume is None or w.id >= resume.webhook_id)),
            key=lambda w: w.id,
        )  # fmt: skip
        retried = scanned = 0
        stopped: _Position | None = None
        batch: list[tuple[str, bytes, bytes]] = []
        for webhook in webhooks:
            start = (
                resume.cursor if resume is not None and webhook.id == resume.webhook_id else None
            )
            failed = self._events.stream_for_webhook(
                webhook.id, EventStatus.FAILED, until=before, start=start
            )
            async with aclosing(failed):
                async for event, position in failed:
                    if retried >= limit or scanned >= SCAN_MAX:
                        stopped = _Position(webhook.id, start, before)
                        break
                    scanned += 1
                    for delivery in await self._failed_to(event.id, name):
                        batch += self._retried(event, delivery, destination)[0]
                        retried += 1
                    start = position
                    if len(batch) >= 2 * PUBLISH_BATCH:
                        await self._publisher.send(batch)
                        batch = []
            if stopped is not None:
                break
        if batch:
            await self._publisher.send(batch)
        log.info("destination_failed_retried", destination=name, retried=retried,
                 more=stopped is not None)  # fmt: skip
        return FailedRetried(
            destination=name, retried=retried,
            next=stopped.encode() if stopped is not None else None,
        )  # fmt: skip

    async def _failed_to(self, event_id: str, name: str) -> list[Delivery]:
        """The event's deliveries to ``name`` still failed in its latest routing."""
        found = await self._events.get_with_deliveries(event_id)
        if found is None:
            return []
        return [
            d for d in latest_routing(found[1])
            if d.destination == name and d.status is DeliveryStatus.FAILED
        ]  # fmt: skip

    def _retried(
        self, event: Event, delivery: Delivery, destination: Destination
    ) -> tuple[list[tuple[str, bytes, bytes]], DeliveryRetryAccepted]:
        """The records of one delivery's retry (its task, then its new status) and the answer."""
        now, chain = utcnow(), new_id(IdPrefix.CHAIN)
        status, reason = first_status(destination)
        task = DestinationTask(
            delivery_id=delivery.id, chain_id=chain, destination=destination.id,
            route=delivery.route, trigger=AttemptTrigger.REPLAY, attempt=1, not_before=now,
            event=event,
        )  # fmt: skip
        record = delivery.model_copy(
            update={"status": status, "reason": reason, "at": now, "chain": chain}
        )
        topics = self._publisher.topics
        messages = [
            (topics.deliveries, destination.id.encode(), encode_destination_task(task)),
            (topics.attempts, delivery.event_id.encode(), encode_delivery(record)),
        ]
        return messages, DeliveryRetryAccepted(
            delivery_id=delivery.id, event_id=delivery.event_id, chain_id=chain,
            route=delivery.route, destination=delivery.destination, status=status,
        )  # fmt: skip


@dataclass(frozen=True)
class _Position:
    """Where a ``retry-failed`` call stopped: in webhook ``webhook_id`` after ``cursor`` (its
    start when ``None``), over the events created before ``before``; as text, base64url JSON."""

    webhook_id: str
    cursor: EventCursor | None
    before: datetime

    def encode(self) -> str:
        c = self.cursor
        fields = [self.webhook_id, isoformat(self.before)] + (
            [c.page, isoformat(c.created_at) if c.created_at else None, c.event_id] if c else []
        )
        return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> _Position:
        try:
            fields = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            webhook_id, before, *rest = fields
            cursor = None
            if rest:
                page, created_at, event_id = rest
                at = datetime.fromisoformat(created_at) if created_at is not None else None
                cursor = EventCursor(int(page), at, None if event_id is None else str(event_id))
            return cls(str(webhook_id), cursor, datetime.fromisoformat(before))
        except (ValueError, TypeError, binascii.Error):
            raise InvalidField(
                ("after",), "not a position this endpoint gave (its answer's next)"
            ) from None
