"""The router: an event of a webhook with routes becomes one delivery per enabled route.

For each of the webhook's enabled routes, in order, the router evaluates the route's filter on
the event (``hookbay_common.routing``) and writes, in one durable write:

- a delivery record (``delivery/1`` on the attempts topic, keyed by event id): ``filtered``
  with the filter's reason; ``held`` (the reason: the destination's state reason) when the
  destination is paused or disabled; ``scheduled`` (waiting for its first attempt) otherwise;
  ``failed`` when the route names a destination that no longer exists;
- ``deduplicated`` (the reason names the event it repeats) when the route's ``dedupe`` rule
  finds another event holding the event's key (``routing.dedupe``): initial routing only, a
  replay is the owner's request and is never deduplicated;
- for every delivery not filtered or deduplicated, its first task (``destination-task/1``) on the deliveries
  topic, keyed by the destination's id, where the destination's lane picks it up.

A route with a delay (``Route.delay_s`` above 0) makes its delivery, when not deduplicated
(the key is claimed when the event is routed, not when the delay ends), ``scheduled`` (the
reason says until when, whatever the destination's state: its lane holds it when it comes due
if the destination is paused then) and its first task due that long after the event was
received (a replay: after the replay), through the delay tiers a retry waits in
(``hookbay_forwarder.waiting``), never the deliveries topic, where the lane would keep it in
memory and its partition's commits back for that long.

The configuration is the routing view's (the change log's, milliseconds behind a write). A
webhook that lost its enabled routes between the event's capture and its routing gets one
``filtered`` delivery saying so, so its event still settles.

Delivery ids derive from (event id, routing, route id): routing an event again after a crash
gives the same deliveries (their tasks may run twice: at-least-once).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Final, Protocol

from hookbay_common.clock import utcnow
from hookbay_common.models import (
    AttemptTrigger,
    Delivery,
    DeliveryStatus,
    Destination,
    Event,
    Route,
    Webhook,
)
from hookbay_common.routing.filters import Filter, FilterError, Subject, Verdict, compile_filter
from hookbay_common.routing.subject import event_subject
from hookbay_common.routing.tasks import DestinationTask, delivery_id, first_status
from hookbay_common.topics import DELAY_TIERS, Topics
from hookbay_common.wire import encode_delivery, encode_destination_task
from hookbay_forwarder.routing.dedupe import RouteDedupe
from hookbay_forwarder.waiting import Waiting
from hookbay_forwarder.writes import Message

Write = Callable[[Sequence[Message]], Awaitable[None]]
NO_ROUTE: Final = "-"
"""The route name of the delivery that says a webhook had no enabled route left."""
FILTER_CACHE_SIZE: Final = 10_000


class _Unreadable(Filter):
    """A filter this version cannot read: it matches nothing, and says why."""

    def __init__(self) -> None:
        super().__init__(())

    def evaluate(self, subject: Subject) -> Verdict:
        return Verdict(matched=False, reason="the route's filter is not readable by this version")


UNREADABLE: Final = _Unreadable()


class RouteLookup(Protocol):
    """What the router reads of the configuration (``RoutingView``)."""

    async def webhook(self, username: str, name: str) -> Webhook | None: ...

    async def destination(self, username: str, name: str) -> Destination | None: ...


class Router:
    def __init__(
        self, view: RouteLookup, write: Write, topics: Topics,
        *, dedupe: RouteDedupe | None = None, tiers: Sequence[float] = DELAY_TIERS,
    ) -> None:  # fmt: skip
        """``tiers``: the installation's delay tiers (``Settings.delay_tiers``), which delayed
        routes' first tasks wait in."""
        self._view = view
        self._write = write
        self._topics = topics
        self._dedupe = dedupe or RouteDedupe(None)
        """Without one, routes' ``dedupe`` rules deliver everything (no Redis configured)."""
        self._waiting = Waiting(topics, tiers)
        self._filters: dict[str, tuple[datetime, Filter | None]] = {}

    async def route(
        self,
        event: Event,
        *,
        trigger: AttemptTrigger = AttemptTrigger.INITIAL,
        source_id: str | None = None,
    ) -> list[Delivery]:
        """Write the deliveries of ``event`` over its webhook's current routes and return them.
        ``source_id`` (default: the event's id) names this routing: a replay passes its own,
        so its deliveries are new ones."""
        source = source_id or event.id
        at = event.created_at if trigger is AttemptTrigger.INITIAL else utcnow()
        webhook = await self._view.webhook(event.username, event.webhook_name)
        routes = webhook.enabled_routes if webhook else ()
        if not routes:
            nothing = self._delivery(event, source, NO_ROUTE, "", at, DeliveryStatus.FILTERED,
                                     "the webhook has no enabled route")  # fmt: skip
            await self._write([self._record(nothing)])
            return [nothing]
        subject: Subject | None = None
        deliveries: list[Delivery] = []
        messages: list[Message] = []
        for route in routes:
            compiled = self._filter(route)
            if compiled is not None:
                subject = subject or event_subject(event)
                verdict = compiled.evaluate(subject)
                if not verdict.matched:
                    deliveries.append(self._delivery(
                        event, source, route.name, route.destination, at,
                        DeliveryStatus.FILTERED, verdict.reason, route.id,
                    ))  # fmt: skip
                    continue
            destination = await self._view.destination(event.username, route.destination)
            if destination is None:
                deliveries.append(self._delivery(
                    event, source, route.name, route.destination, at, DeliveryStatus.FAILED,
                    f"destination {route.destination!r} no longer exists", route.id,
                ))  # fmt: skip
                continue
            if route.dedupe is not None and trigger is AttemptTrigger.INITIAL:
                subject = subject or event_subject(event)
                holder = await self._dedupe.duplicate_of(route, route.dedupe, event, subject)
                if holder is not None:
                    deliveries.append(self._delivery(
                        event, source, route.name, route.destination, at,
                        DeliveryStatus.DEDUPLICATED, f"duplicate of {holder}", route.id,
                    ))  # fmt: skip
                    continue
            status, reason = first_status(destination)
            due = at
            if route.delay_s:
                due = at + timedelta(seconds=route.delay_s)
                status = DeliveryStatus.SCHEDULED
                reason = f"delayed by the route until {due.isoformat(timespec='milliseconds')}"
            delivery = self._delivery(event, source, route.name, route.destination, at, status,
                                      reason, route.id)  # fmt: skip
            deliveries.append(delivery)
            task = encode_destination_task(DestinationTask(
                delivery_id=delivery.id, chain_id=delivery.first_chain,
                destination=destination.id, route=route.name, trigger=trigger, attempt=1,
                not_before=due, event=event,
            ))  # fmt: skip
            if route.delay_s:  # through the delay tiers, never a lane's memory
                due_ms = int(due.timestamp() * 1000)
                messages.append(self._waiting.message(task, destination.id, due_ms))
            else:
                messages.append(Message(self._topics.deliveries, task, destination.id.encode()))
        await self._write([*(self._record(d) for d in deliveries), *messages])
        return deliveries

    def _filter(self, route: Route) -> Filter | None:
        cached = self._filters.get(route.id)
        if cached is not None and cached[0] == route.updated_at:
            return cached[1]
        compiled: Filter | None
        try:
            compiled = compile_filter(route.filter)
        except FilterError:  # refused when saved: written by a later version; match nothing
            compiled = UNREADABLE
        if len(self._filters) >= FILTER_CACHE_SIZE:
            self._filters.clear()
        self._filters[route.id] = (route.updated_at, compiled)
        return compiled

    @staticmethod
    def _delivery(
        event: Event, source: str, route: str, destination: str, at: datetime,
        status: DeliveryStatus, reason: str | None, route_id: str = NO_ROUTE,
    ) -> Delivery:  # fmt: skip
        return Delivery(
            id=delivery_id(source, route_id, event.id), event_id=event.id, webhook_id=event.webhook_id,
            username=event.username, route=route, destination=destination, status=status,
            reason=reason, at=at,
        )  # fmt: skip

    def _record(self, delivery: Delivery) -> Message:
        return Message(self._topics.attempts, encode_delivery(delivery), delivery.event_id.encode())
