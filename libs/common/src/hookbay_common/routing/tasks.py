"""``DestinationTask``: one attempt still to make of one delivery (an event over one route to one
destination), as the router hands it to the deliverer's lanes and as retries bring it back.

The event travels inline (its exact body and headers): the deliverer needs no database, and a
task is self-contained in Kafka and in the hold store. Its encoding is ``wire.encode_destination_task``.
"""

from __future__ import annotations

import hashlib
from base64 import b32encode
from dataclasses import dataclass
from datetime import datetime

from hookbay_common.ids import IdPrefix, has_prefix
from hookbay_common.models import (
    AttemptTrigger,
    DeliveryStatus,
    Destination,
    DestinationState,
    Event,
)


def delivery_id(source_id: str, route_id: str, event_id: str) -> str:
    """The id of the delivery of event ``event_id`` in routing ``source_id`` (the event's own id
    for its first routing, a replay's chain id for a replay) over route ``route_id``:
    ``dlv_<event>_<routing>_<digest>``. The same triple gives the same id however often it is
    routed, so a re-route after a crash converges on the same delivery. Ids of one event sort
    together, its routings in time order; the id names its event (``event_of``), so a delivery
    is found from its id alone."""
    digest = hashlib.blake2b(f"{source_id}\x00{route_id}".encode(), digest_size=10).digest()
    event, routing = event_id.partition("_")[2], source_id.partition("_")[2]
    return f"{IdPrefix.DELIVERY}_{event}_{routing}_{b32encode(digest).decode().lower()}"


def event_of(delivery: str) -> str | None:
    """The id of the event a delivery id names (``None``: not a delivery id)."""
    parts = delivery.split("_")
    if (
        len(parts) != 4
        or parts[0] != IdPrefix.DELIVERY
        or not has_prefix(f"{IdPrefix.EVENT}_{parts[1]}", IdPrefix.EVENT)
    ):
        return None
    return f"{IdPrefix.EVENT}_{parts[1]}"


def first_status(destination: Destination) -> tuple[DeliveryStatus, str | None]:
    """A delivery's status (and why) when its task is handed to ``destination``'s lane:
    ``scheduled``, or ``held`` while the destination is paused or disabled."""
    if destination.state is DestinationState.ACTIVE:
        return DeliveryStatus.SCHEDULED, None
    return DeliveryStatus.HELD, f"{destination.state.value}: {destination.state_reason or 'manual'}"


@dataclass(frozen=True, slots=True)
class DestinationTask:
    """Attempt ``attempt`` of delivery ``delivery_id`` of ``event`` to ``destination``, not
    before ``not_before``.

    ``destination`` is the destination's stable key (its id, never its name, so a rename keeps
    its lane and its held tasks); the lane takes the URL, timeout and headers from the
    destination's configuration at the time of the attempt, so a destination fixed while paused
    gets its held tasks at the fixed URL."""

    delivery_id: str
    chain_id: str
    destination: str
    route: str
    trigger: AttemptTrigger
    attempt: int
    not_before: datetime
    event: Event

    def __post_init__(self) -> None:
        if self.attempt < 1:
            raise ValueError("attempt numbers start at 1")

    @property
    def event_id(self) -> str:
        return self.event.id

    @property
    def owner(self) -> str:
        return self.event.username
