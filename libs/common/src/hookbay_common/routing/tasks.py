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

from hookbay_common.ids import IdPrefix
from hookbay_common.models import AttemptTrigger, Event


def delivery_id(source_id: str, route_id: str) -> str:
    """The id of the delivery of ``source_id`` (an event id for its routing, a replay's chain id
    for a replay) over route ``route_id``: the same pair gives the same id however often it is
    routed, so a re-route after a crash converges on the same delivery. Ids of one event sort
    together, in the event's time order."""
    digest = hashlib.blake2b(f"{source_id}\x00{route_id}".encode(), digest_size=10).digest()
    return f"{IdPrefix.DELIVERY}_{source_id.partition('_')[2]}_{b32encode(digest).decode().lower()}"


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
