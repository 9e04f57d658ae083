"""Captured requests (events), their heads as lists show them, and their bodies as text."""

from __future__ import annotations

import base64
from datetime import datetime
from enum import StrEnum

from pydantic import Field

from hookbay_common.models.record import Record
from hookbay_common.models.verification import EventVerification


class EventStatus(StrEnum):
    PENDING = "pending"
    SUCCESS = "success"
    FAILED = "failed"


class RejectedReason(StrEnum):
    INVALID_SIGNATURE = "invalid_signature"


class HandshakeKind(StrEnum):
    """A sender's proof-of-ownership request, answered at intake, in the sender's own words."""

    SLACK_URL_VERIFICATION = "url_verification"
    ZOOM_URL_VALIDATION = "endpoint.url_validation"
    META_SUBSCRIBE = "subscribe"
    X_CRC = "crc"


class AttemptTrigger(StrEnum):
    INITIAL = "initial"
    RETRY = "retry"
    REPLAY = "replay"
    LISTEN = "listen"
    """A ``hookbay listen`` session's forward to a developer's machine: recorded for the owner
    to see, never a delivery (the event's status is not changed by it)."""


class BodyEncoding(StrEnum):
    UTF8 = "utf8"
    BASE64 = "base64"


def body_to_text(body: bytes) -> tuple[str, BodyEncoding]:
    """The body as text: UTF-8 when it is valid UTF-8 without a NUL, else base64. A NUL is
    valid UTF-8 but no text the store can hold (the PostgreSQL under FerretDB refuses it), so
    such a body, accepted with a 200, would never be recorded."""
    if b"\x00" not in body:
        try:
            return body.decode("utf-8"), BodyEncoding.UTF8
        except UnicodeDecodeError:
            pass
    return base64.b64encode(body).decode("ascii"), BodyEncoding.BASE64


def body_from_text(text: str, encoding: BodyEncoding) -> bytes:
    if encoding is BodyEncoding.BASE64:
        return base64.b64decode(text)
    return text.encode("utf-8")


class EventHead(Record):
    """An event without its request headers and body: what lists and live tails show, read
    with a projection that leaves the (up to 4.5 MB) body in the database."""

    id: str
    request_id: str
    webhook_id: str
    username: str
    webhook_name: str
    client_ip: str
    content_type: str | None = None
    signature_valid: bool | None = None
    status: EventStatus = EventStatus.PENDING
    rejected_reason: RejectedReason | None = None
    forward_url: str | None = None
    """The webhook's destination when the event arrived; ``None``: nothing to deliver."""
    created_at: datetime
    verification: EventVerification | None = None
    """The verdict on the request (``None``: the webhook verifies nothing)."""
    handshake: HandshakeKind | None = None
    """Set when the request was a sender's handshake, answered at intake (never forwarded)."""
    routed: bool = False
    """The webhook had enabled routes when the event arrived: the router delivers it over the
    webhook's routes (``hookbay_forwarder.routing``), beside any ``forward_url``."""
    query: str | None = None
    """The request's query string as received (without ``?``; ``None``: there was none), which
    route filters match on."""


class EventRow(EventHead):
    """A head as lists show it: its page (``hookbay_common.db.events``), its body's size and
    its latest attempt's outcome (``None`` until there is one)."""

    page: int | None = None
    body_size: int | None = None
    last_status_code: int | None = None
    last_latency_ms: float | None = None
    last_error: str | None = None
    next_retry_at: datetime | None = None
    last_attempt_number: int | None = None


class Event(EventHead):
    """One captured request. ``body`` holds the exact bytes received."""

    request_headers: dict[str, str]
    body: bytes = Field(repr=False)

    @property
    def initial_status(self) -> EventStatus:
        """The status before any attempt: rejected events failed, events without destination
        succeeded (zero attempts), the rest wait for their attempts."""
        if self.rejected_reason is not None:
            return EventStatus.FAILED
        return EventStatus.PENDING if self.deliverable else EventStatus.SUCCESS

    @property
    def deliverable(self) -> bool:
        """Neither rejected nor a handshake (answered at intake), and with a destination: its
        ``forward_url`` or its webhook's routes."""
        return (
            self.rejected_reason is None
            and self.handshake is None
            and (self.forward_url is not None or self.routed)
        )

    @property
    def forwardable(self) -> bool:
        """Deliverable to its ``forward_url`` by the forwarder's own path: an event captured
        before ``forward_url`` became a route (``docs/decisions.md``, "forward_url is a
        route"). A routed event's ``forward_url`` is its route's, delivered by routing."""
        return self.deliverable and self.forward_url is not None and not self.routed
