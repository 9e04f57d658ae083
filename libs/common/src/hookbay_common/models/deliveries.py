"""Deliveries: one event over one route to its destination, and the event's status derived
from them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Final

from hookbay_common.clock import epoch_ms
from hookbay_common.ids import IdPrefix, derived_id
from hookbay_common.models.events import EventStatus
from hookbay_common.models.record import Record


class DeliveryStatus(StrEnum):
    """Where one delivery (an event over one route to its destination) stands."""

    FILTERED = "filtered"
    """The route's filter did not match (``reason`` says why): nothing to deliver."""
    DEDUPLICATED = "deduplicated"
    TRANSFORM_FAILED = "transform_failed"
    """The route's transformation failed (``reason``; its logs in ``transform``), or is
    suspended: nothing was sent, and it is not retried."""
    HELD = "held"
    """Waiting in the hold store: its destination is paused or disabled (``reason``)."""
    SCHEDULED = "scheduled"
    """A retry, or a delayed route's first attempt, waits for its time."""
    DELIVERING = "delivering"
    SUCCESS = "success"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self not in _UNFINISHED


_UNFINISHED: Final = frozenset(
    {DeliveryStatus.HELD, DeliveryStatus.SCHEDULED, DeliveryStatus.DELIVERING}
)
_DELIVERY_TIE_ORDER: Final = tuple(DeliveryStatus)
"""Among records of one delivery with the same rank and time, the later in this order wins
(any fixed order would do: it only makes the result independent of the reading order)."""


TRANSFORM_LOG_LINES: Final = 100
TRANSFORM_LOG_BYTES: Final = 8 * 1024
"""What a delivery keeps of its transformation's console output: the sandbox's own bounds
(100 lines, 8 KiB of text), the last line saying how many lines were left out."""


class TransformTrace(Record):
    """What a route's transformation did for one delivery: the transformation's ``name`` and
    the ``version`` that ran, the SHA-256 (hex) of the body it produced (``None``: it failed, or
    did not run), and its console output (``logs``, bounded as ``TRANSFORM_LOG_LINES`` /
    ``TRANSFORM_LOG_BYTES`` say). Never the env, never the body itself."""

    name: str
    version: int = 0
    body_sha256: str | None = None
    logs: tuple[str, ...] = ()


class Delivery(Record):
    """The latest known state of one delivery: ``id`` (``routing.tasks.delivery_id``) of event
    ``event_id`` over the route named ``route`` to the destination named ``destination`` (names,
    as the API shows them, recorded when the event was routed), ``status`` since ``at``.

    ``chain`` is the attempt chain the record belongs to (``None``: the delivery's first,
    ``first_chain``); retrying the delivery on its own (``POST /deliveries/{id}/retry``) starts
    a new one, whose time-ordered id sorts after it.

    Records of one delivery arrive in any order and any number of times; ``supersedes`` decides
    which one stands: the later chain's; within a chain a finished status over an unfinished
    one whatever their times, else the later ``at``."""

    id: str
    event_id: str
    webhook_id: str
    username: str
    route: str
    destination: str
    status: DeliveryStatus
    reason: str | None = None
    at: datetime
    chain: str | None = None
    transform: TransformTrace | None = None
    """The route's transformation's trace: on a ``transform_failed`` record, and on the record
    an attempt of a transformed request makes (``Attempt.as_delivery``)."""

    @property
    def first_chain(self) -> str:
        """The chain of the delivery's first attempts (the router's tasks carry it)."""
        return derived_id(IdPrefix.CHAIN, self.id)

    @property
    def precedence(self) -> tuple[str, int, int, int]:
        """The chain, then finished or not, then ``at`` to the millisecond (what the wire and
        the store keep), then the status's place in ``DeliveryStatus``."""
        return (
            self.chain or self.first_chain, int(self.status.finished), epoch_ms(self.at),
            _DELIVERY_TIE_ORDER.index(self.status),
        )  # fmt: skip

    def supersedes(self, other: Delivery) -> bool:
        """Whether this record replaces ``other`` (of the same delivery)."""
        return self.precedence > other.precedence


def event_status_of(deliveries: Iterable[Delivery]) -> EventStatus:
    """An event's status from the deliveries of its latest routing (``latest_routing``): any
    failed → failed; else any unfinished (held, scheduled, delivering) → pending; else success
    (also when every route filtered it out or none matched). ``transform_failed`` counts as
    failed, ``deduplicated`` and ``filtered`` as finished without delivery."""
    statuses = {d.status for d in latest_routing(deliveries)}
    if statuses & {DeliveryStatus.FAILED, DeliveryStatus.TRANSFORM_FAILED}:
        return EventStatus.FAILED
    if statuses & _UNFINISHED:
        return EventStatus.PENDING
    return EventStatus.SUCCESS


def latest_routing(deliveries: Iterable[Delivery]) -> list[Delivery]:
    """The deliveries of an event's latest routing: its first, or its latest replay's. A
    delivery id names its routing (``routing.tasks.delivery_id``: the event's id, or the
    replay's chain id, whose time-ordered suffix sorts later routings after earlier ones)."""
    by_routing: dict[str, list[Delivery]] = {}
    for delivery in deliveries:
        by_routing.setdefault(_routing_of(delivery.id), []).append(delivery)
    return by_routing[max(by_routing)] if by_routing else []


def _routing_of(delivery_id: str) -> str:
    """The routing a delivery id names (``routing.tasks.delivery_id``:
    ``dlv_<event>_<routing>_<digest>``)."""
    return delivery_id.split("_")[2]
