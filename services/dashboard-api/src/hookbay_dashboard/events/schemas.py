"""Bodies of the event read side: lists, detail, export and the overview.

Bodies are text: ``request_body`` / ``response_body`` hold the UTF-8 text when the bytes are
valid UTF-8 (``*_encoding: "utf8"``), else their base64 (``"base64"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, Field

from hookbay_common.models import (
    Attempt,
    AttemptTrigger,
    BodyEncoding,
    Delivery,
    DeliveryStatus,
    Event,
    EventHead,
    EventRow,
    EventStatus,
    EventVerification,
    HandshakeKind,
    RejectedReason,
    body_to_text,
)
from hookbay_dashboard.schemas import Timestamp
from hookbay_dashboard.stats.schemas import StatsCounters, StatsPoint

# an event's verification fields, the same in its list row and its detail
Verdict = Annotated[
    EventVerification | None,
    Field(
        description="The verification verdict: type, result (valid, invalid, skipped), the "
        "secret that matched (current, previous) and why it failed; null when the webhook "
        "verifies nothing."
    ),
]
HandshakeMark = Annotated[
    HandshakeKind | None,
    Field(
        description="Set when the request was a sender's handshake, answered at intake and "
        "never forwarded."
    ),
]


class StatusFilter(StrEnum):
    """The list filter: ``all`` every event, the others only their status."""

    ALL = "all"
    SUCCESS = "success"
    FAILED = "failed"
    PENDING = "pending"

    @property
    def status(self) -> EventStatus | None:
        """The one status this filter keeps; ``None`` for all."""
        return None if self is StatusFilter.ALL else EventStatus(self.value)


class EventSummary(BaseModel):
    """An event in a list: no request headers, no body; its body's size and its latest
    attempt's outcome (null until there is one)."""

    id: str
    request_id: str
    webhook_id: str
    webhook_name: str
    created_at: Timestamp
    status: EventStatus
    rejected_reason: RejectedReason | None
    content_type: str | None
    client_ip: str
    signature_valid: bool | None = Field(description="null when the webhook has no secret.")
    verification: Verdict = None
    handshake: HandshakeMark = None
    body_size: int | None = Field(
        default=None,
        description="Bytes of the request body; null for events recorded before the paged layout.",
    )
    last_status_code: int | None = Field(
        default=None, description="HTTP status of the latest attempt; null: none, or no response."
    )
    last_latency_ms: float | None = Field(
        default=None, description="Latency of the latest attempt."
    )
    last_error: str | None = Field(
        default=None, description="Why the latest attempt got no response (timeout, refused...)."
    )
    next_retry_at: Timestamp | None = Field(
        default=None, description="When the next retry is due; null when none is scheduled."
    )
    attempt_count: int = Field(
        default=0,
        description="Attempts of the latest delivery (the first one, or the latest replay), "
        "retries included; 0 before the first attempt is recorded.",
    )

    @classmethod
    def of(cls, head: EventHead) -> EventSummary:
        extra: dict[str, Any] = {}
        if isinstance(head, EventRow):
            extra = dict(
                body_size=head.body_size, last_status_code=head.last_status_code,
                last_latency_ms=head.last_latency_ms, last_error=head.last_error,
                next_retry_at=head.next_retry_at, attempt_count=head.last_attempt_number or 0,
            )  # fmt: skip
        elif isinstance(head, Event):
            extra = {"body_size": len(head.body)}
        return cls(
            id=head.id, request_id=head.request_id, webhook_id=head.webhook_id,
            webhook_name=head.webhook_name, created_at=head.created_at, status=head.status,
            rejected_reason=head.rejected_reason, content_type=head.content_type,
            client_ip=head.client_ip, signature_valid=head.signature_valid,
            verification=head.verification, handshake=head.handshake, **extra,
        )  # fmt: skip


class EventPage(BaseModel):
    items: list[EventSummary]
    next_cursor: str | None = Field(
        description=(
            "Pass as ?cursor= for the next (older) page; null on the last page. A page may hold "
            "fewer than `limit` events and still a cursor when the filter matches few events."
        )
    )


class EventRead(BaseModel):
    """Every captured field of an event and where it stands; what an export holds."""

    id: str
    request_id: str
    webhook_id: str
    webhook_name: str
    client_ip: str
    request_headers: dict[str, str] = Field(description="Lower-case names.")
    request_body: str
    request_body_encoding: BodyEncoding
    content_type: str | None
    signature_valid: bool | None = Field(description="null when the webhook has no secret.")
    created_at: Timestamp
    status: EventStatus
    rejected_reason: RejectedReason | None
    forward_url: str | None = Field(
        description="The destination when the event arrived; null: nothing to deliver."
    )
    verification: Verdict = None
    handshake: HandshakeMark = None

    @classmethod
    def of(cls, event: Event) -> EventRead:
        return cls(**_event_fields(event))


class AttemptRead(BaseModel):
    """One forward attempt; attempts of one chain (initial + retries, or a replay) share
    ``chain_id``. ``will_retry`` and ``next_retry_at`` say whether and when the next comes."""

    id: str
    chain_id: str
    number: int
    trigger: AttemptTrigger
    url: str
    started_at: Timestamp
    status_code: int | None = Field(description="null when no response came (see error).")
    response_headers: dict[str, str]
    response_body: str
    response_body_encoding: BodyEncoding
    response_body_truncated: bool
    latency_ms: float | None
    error: str | None
    will_retry: bool
    next_retry_at: Timestamp | None

    @classmethod
    def of(cls, attempt: Attempt) -> AttemptRead:
        body, encoding = body_to_text(attempt.response_body)
        return cls(
            id=attempt.id, chain_id=attempt.chain_id, number=attempt.number,
            trigger=attempt.trigger, url=attempt.url, started_at=attempt.started_at,
            status_code=attempt.status_code, response_headers=attempt.response_headers,
            response_body=body, response_body_encoding=encoding,
            response_body_truncated=attempt.response_body_truncated,
            latency_ms=attempt.latency_ms, error=attempt.error, will_retry=attempt.will_retry,
            next_retry_at=attempt.next_retry_at,
        )  # fmt: skip


LISTEN_BODY_LIMIT = 64 * 1024
"""Bytes of a local answer's body kept (the forwarder keeps as much of a destination's)."""


class ListenAttemptCreate(BaseModel):
    """A local answer seen by ``hookbay listen``: recorded as an attempt with trigger
    ``listen``. Sent again with the same (session_id, number), it is recorded once."""

    session_id: str = Field(pattern=r"^[A-Za-z0-9_-]{8,64}$")
    number: int = Field(ge=1, le=1_000_000, description="1, 2, … per event within a session.")
    url: str = Field(max_length=2048, description="The local URL the event was sent to.")
    started_at: Timestamp
    status_code: int | None = Field(default=None, ge=100, le=599)
    latency_ms: float | None = Field(default=None, ge=0)
    error: str | None = Field(default=None, max_length=1000)
    response_headers: dict[str, str] = Field(default_factory=dict, max_length=100)
    response_body: str = Field(
        default="", max_length=200_000, description="Base64; beyond 64 KiB of bytes it is cut."
    )


class TransformTraceRead(BaseModel):
    """What the route's transformation did for a delivery (docs/owners/transformations.md)."""

    name: str = Field(description="The transformation.")
    version: int = Field(description="The version that ran (0: it did not run).")
    body_sha256: str | None = Field(
        description="SHA-256 (hex) of the body it produced and was sent; null when it failed."
    )
    logs: list[str] = Field(
        description="What its console printed, at most 100 lines and 8 KiB (a last line says "
        "how many were left out)."
    )


class DeliveryRead(BaseModel):
    """One delivery: the event over one of its webhook's routes to that route's destination,
    with the attempts made for it, oldest first."""

    id: str
    route: str = Field(description="The route's name when the event was routed.")
    destination: str = Field(description="The destination's name when the event was routed.")
    status: DeliveryStatus
    reason: str | None = Field(
        description="Why it was filtered, held or failed (null when there is nothing to say)."
    )
    updated_at: Timestamp = Field(description="When it reached this status.")
    transform: TransformTraceRead | None = Field(
        default=None,
        description="The route's transformation on the latest attempt (or its failure); null "
        "when the route runs none.",
    )
    attempts: list[AttemptRead]


class EventDetail(EventRead):
    """The event with its forward attempts, oldest first, and its deliveries."""

    attempts: list[AttemptRead] = Field(
        description="Every attempt, oldest first (those of deliveries too)."
    )
    deliveries: list[DeliveryRead] = Field(
        description=(
            "One per route the event went through, each with its own attempts. Empty for an "
            "event delivered to its webhook's forward_url, whose attempts are in attempts."
        )
    )

    @classmethod
    def with_attempts(
        cls, event: Event, attempts: list[Attempt], deliveries: Sequence[Delivery] = ()
    ) -> EventDetail:
        grouped: dict[str, list[AttemptRead]] = {d.id: [] for d in deliveries}
        reads = []
        for attempt in attempts:
            read = AttemptRead.of(attempt)
            reads.append(read)
            if attempt.delivery_id in grouped:
                grouped[attempt.delivery_id].append(read)
        return cls(
            **_event_fields(event), attempts=reads,
            deliveries=[
                DeliveryRead(
                    id=d.id, route=d.route, destination=d.destination, status=d.status,
                    reason=d.reason, updated_at=d.at, attempts=grouped[d.id],
                    transform=TransformTraceRead(
                        name=d.transform.name, version=d.transform.version,
                        body_sha256=d.transform.body_sha256, logs=list(d.transform.logs),
                    ) if d.transform is not None else None,
                )
                for d in deliveries
            ],
        )  # fmt: skip


def _event_fields(event: Event) -> dict[str, Any]:
    body, encoding = body_to_text(event.body)
    return dict(
        id=event.id, request_id=event.request_id, webhook_id=event.webhook_id,
        webhook_name=event.webhook_name, client_ip=event.client_ip,
        request_headers=event.request_headers, request_body=body,
        request_body_encoding=encoding, content_type=event.content_type,
        signature_valid=event.signature_valid, created_at=event.created_at,
        status=event.status, rejected_reason=event.rejected_reason,
        forward_url=event.forward_url, verification=event.verification,
        handshake=event.handshake,
    )  # fmt: skip


class EventCounts(BaseModel):
    success: int
    failed: int
    pending: int
    total: int


class WebhookOverview(BaseModel):
    """A webhook's last 24 hours, from the stats processor's hour buckets: the current UTC hour
    and the 23 before it (``Overview.stats_since`` on)."""

    name: str
    active: bool
    stats_24h: StatsCounters = Field(description="The counters summed over the 24 hours.")
    hourly_24h: list[StatsPoint] = Field(
        description="One point per hour, oldest first, 24 of them (zeros included)."
    )
    pending_24h: int = Field(
        description="Events received in the 24 hours (from stats_since on) whose delivery has "
        "not ended yet: from the event store, as GET /webhooks/{name}/events/counts?since= "
        "counts them (the stats count deliveries when they end, not waiting events)."
    )
    counts_24h: EventCounts = Field(
        description="Deprecated (kept for earlier clients; read stats_24h and pending_24h): "
        "from the stats, success = delivered, failed = failed + rejected, total = received + "
        "rejected; pending = pending_24h.",
        json_schema_extra={"deprecated": True},
    )
    success_rate_24h: float | None = Field(
        description="stats_24h.success_rate: delivered / (delivered + failed) over the 24 "
        "hours; null when no delivery chain ended."
    )
    last_event_at: Timestamp | None = Field(description="When the newest stored event arrived.")


class Overview(BaseModel):
    webhooks: list[WebhookOverview] = Field(description="The owner's webhooks, by name.")
    stats_since: Timestamp = Field(
        description="Start of the webhooks' 24 hours (the first hourly point)."
    )
    recent_events: list[EventSummary] = Field(description="The owner's 10 newest events.")
