"""The records hookbay keeps: users, webhooks, API tokens, events and delivery attempts.

These are storage- and transport-neutral; ``hookbay_common.db`` maps them to MongoDB documents and
``hookbay_common.wire`` to Kafka messages.
"""

from __future__ import annotations

import base64
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from hookbay_common.ids import IdPrefix, new_id


class Role(StrEnum):
    USER = "user"
    ADMIN = "admin"


class EventStatus(StrEnum):
    PENDING = "pending"
    SUCCESS = "success"
    FAILED = "failed"


class RejectedReason(StrEnum):
    INVALID_SIGNATURE = "invalid_signature"


class AttemptTrigger(StrEnum):
    INITIAL = "initial"
    RETRY = "retry"
    REPLAY = "replay"


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


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class User(_Record):
    username: str
    plan: str
    role: Role = Role.USER
    password_hash: str | None = Field(default=None, repr=False)
    created_at: datetime
    updated_at: datetime

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


class Webhook(_Record):
    """A receiving URL ``/w/{username}/{name}``. ``secret`` is plaintext in memory only."""

    id: str
    username: str
    name: str
    secret: SecretStr | None = None
    forward_url: str | None = None
    active: bool = True
    created_at: datetime
    updated_at: datetime


class ApiToken(_Record):
    """A personal API token; only the SHA-256 of the token is stored."""

    id: str
    username: str
    name: str
    token_hash: str = Field(repr=False)
    created_at: datetime
    last_used_at: datetime | None = None


class Session(_Record):
    """A dashboard login. ``id`` is the SHA-256 of the cookie value, which is never stored."""

    id: str
    username: str
    csrf_token: str = Field(repr=False)
    created_at: datetime
    expires_at: datetime


class EventHead(_Record):
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
        return EventStatus.SUCCESS if self.forward_url is None else EventStatus.PENDING

    @property
    def deliverable(self) -> bool:
        return self.rejected_reason is None and self.forward_url is not None


class Attempt(_Record):
    """One forward attempt of an event; attempts of one chain share ``chain_id``."""

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


class DeliveryTask(_Record):
    """One attempt still to make: attempt ``number`` of chain ``chain_id`` for ``event``, sent to
    ``url`` no earlier than ``not_before``. Retries and replays travel through Kafka as tasks."""

    event: Event
    chain_id: str
    trigger: AttemptTrigger
    number: int = Field(ge=1)
    url: str
    not_before: datetime

    @classmethod
    def replay(cls, event: Event, url: str, *, now: datetime) -> DeliveryTask:
        """A new attempt chain for ``event`` to ``url`` (the webhook's current destination),
        to publish on ``Topics.replays`` keyed by the event id."""
        return cls(
            event=event, chain_id=new_id(IdPrefix.CHAIN), trigger=AttemptTrigger.REPLAY,
            number=1, url=url, not_before=now,
        )  # fmt: skip
