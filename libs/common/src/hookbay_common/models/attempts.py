"""Delivery attempts, made and still to make."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models.deliveries import Delivery, DeliveryStatus, TransformTrace
from hookbay_common.models.events import AttemptTrigger, Event, EventStatus
from hookbay_common.models.record import Record


class Attempt(Record):
    """One forward attempt of an event; attempts of one chain share ``chain_id``.

    An attempt of a routed delivery carries its ``delivery_id``, ``route`` and
    ``destination`` (names); it then moves that delivery's status (``as_delivery``), and the
    event's status follows its deliveries. Without them (a webhook's ``forward_url`` path) it
    moves the event's status itself, as it always did."""

    id: str
    event_id: str
    username: str
    webhook_id: str
    chain_id: str
    number: int = Field(ge=1)
    trigger: AttemptTrigger
    url: str
    started_at: datetime
    status_code: int | None = None
    response_headers: dict[str, str] = Field(default_factory=dict)
    response_body: bytes = Field(default=b"", repr=False)
    response_body_truncated: bool = False
    latency_ms: float | None = None
    error: str | None = None
    will_retry: bool = False
    next_retry_at: datetime | None = None
    delivery_id: str | None = None
    route: str | None = None
    destination: str | None = None
    transform: TransformTrace | None = None
    """The route's transformation that made the request sent (left out when none)."""

    def as_delivery(self) -> Delivery | None:
        """What this attempt says about its delivery (``None``: not a routed attempt): a 2xx
        succeeded, a waiting retry is scheduled, anything else failed; at its start time. A
        ``listen`` attempt never moves a delivery."""
        if self.delivery_id is None or self.trigger is AttemptTrigger.LISTEN:
            return None
        status = {
            EventStatus.SUCCESS: DeliveryStatus.SUCCESS,
            EventStatus.PENDING: DeliveryStatus.SCHEDULED,
            EventStatus.FAILED: DeliveryStatus.FAILED,
        }[self.outcome]
        reason = None
        if status is not DeliveryStatus.SUCCESS:
            reason = self.error or (f"HTTP {self.status_code}" if self.status_code else None)
        return Delivery(
            id=self.delivery_id, event_id=self.event_id, webhook_id=self.webhook_id,
            username=self.username, route=self.route or "", destination=self.destination or "",
            status=status, reason=reason, at=self.started_at, chain=self.chain_id,
            transform=self.transform,
        )  # fmt: skip

    @property
    def outcome(self) -> EventStatus:
        """What this attempt means for its event: a 2xx succeeded, a waiting retry keeps it
        pending, anything else failed it."""
        if self.status_code is not None and 200 <= self.status_code < 300:
            return EventStatus.SUCCESS
        return EventStatus.PENDING if self.will_retry else EventStatus.FAILED

    @property
    def status_key(self) -> str:
        """Orders the attempts of an event: the latest chain wins (chain ids sort by time), and
        within a chain the highest number, then the latest attempt id (a redone attempt)."""
        return f"{self.chain_id}:{self.number:06d}:{self.id}"


class DeliveryTask(Record):
    """One attempt still to make: attempt ``number`` of chain ``chain_id`` for ``event``, sent to
    ``url`` no earlier than ``not_before``. Retries and replays travel through Kafka as tasks."""

    event: Event
    chain_id: str
    trigger: AttemptTrigger
    number: int = Field(ge=1)
    url: str
    not_before: datetime

    @classmethod
    def replay(
        cls, event: Event, url: str, *, now: datetime, chain_id: str | None = None
    ) -> DeliveryTask:
        """A new attempt chain (``chain_id``, default a new one) for ``event`` to ``url`` (the
        webhook's current destination), to publish on ``Topics.replays`` keyed by the event id."""
        return cls(
            event=event, chain_id=chain_id or new_id(IdPrefix.CHAIN),
            trigger=AttemptTrigger.REPLAY, number=1, url=url, not_before=now,
        )  # fmt: skip
