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
"""

from __future__ import annotations

from typing import Final

from hookbay_common.clock import utcnow
from hookbay_common.db import DestinationRepository, EventRepository
from hookbay_common.errors import DeliveryNotFound, DeliveryNotRetryable
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.logs import get_logger
from hookbay_common.models import AttemptTrigger, Delivery, DeliveryStatus, Event
from hookbay_common.routing.tasks import DestinationTask, event_of, first_status
from hookbay_common.wire import encode_delivery, encode_destination_task
from hookbay_dashboard.deliveries.schemas import DeliveryRetryAccepted
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


class DeliveryService:
    def __init__(
        self,
        events: EventRepository,
        destinations: DestinationRepository,
        publisher: ReplayPublisher,
    ) -> None:
        self._events = events
        self._destinations = destinations
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
        await self._publisher.send([
            (topics.deliveries, destination.id.encode(), encode_destination_task(task)),
            (topics.attempts, delivery.event_id.encode(), encode_delivery(record)),
        ])  # fmt: skip
        log.info("delivery_retry_queued", delivery_id=delivery.id, chain_id=chain)
        return DeliveryRetryAccepted(
            delivery_id=delivery.id, event_id=delivery.event_id, chain_id=chain,
            route=delivery.route, destination=delivery.destination, status=status,
        )  # fmt: skip
