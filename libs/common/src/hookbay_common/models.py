"""The records hookbay keeps: users, webhooks and their routes, destinations, API tokens, events
and delivery attempts.

These are storage- and transport-neutral; ``hookbay_common.db`` maps them to MongoDB documents and
``hookbay_common.wire`` to Kafka messages.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from hookbay_common.clock import epoch_ms
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


class InvalidReason(StrEnum):
    """Why a request's signature was refused."""

    MISSING_SIGNATURE = "missing_signature"
    """The scheme's signature header is absent (or blank)."""
    BAD_SIGNATURE = "bad_signature"
    """A signature is present but matches no secret (or cannot be read)."""
    TIMESTAMP_OUT_OF_TOLERANCE = "timestamp_out_of_tolerance"
    """The signed timestamp is further from the clock than the scheme tolerates (replay)."""
    UNSUPPORTED_VERSION = "unsupported_version"
    """The signature names a scheme version or algorithm the verifier does not implement."""


class MatchedSecret(StrEnum):
    """Which of a webhook's secrets a valid signature was made with."""

    CURRENT = "current"
    PREVIOUS = "previous"


class VerificationResult(StrEnum):
    VALID = "valid"
    INVALID = "invalid"
    SKIPPED = "skipped"
    """Nothing to verify (type ``none``)."""


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


class VerificationType(StrEnum):
    """How a webhook's requests prove they come from their sender (``docs/owners/verification.md``)."""

    HOOKBAY = "hookbay"
    STANDARD_WEBHOOKS = "standard-webhooks"
    STRIPE = "stripe"
    GITHUB = "github"
    SHOPIFY = "shopify"
    SLACK = "slack"
    TWILIO = "twilio"
    ZOOM = "zoom"
    META = "meta"
    PADDLE = "paddle"
    LINEAR = "linear"
    PAGERDUTY = "pagerduty"
    TYPEFORM = "typeform"
    INTERCOM = "intercom"
    SQUARE = "square"
    GITLAB = "gitlab"
    SENDGRID = "sendgrid"
    MAILGUN = "mailgun"
    X = "x"
    HMAC = "hmac"
    BASIC = "basic"
    API_KEY = "api-key"
    NONE = "none"


class VerificationMode(StrEnum):
    ENFORCE = "enforce"
    """A request that fails verification is answered 401, recorded as rejected, never forwarded."""
    RECORD = "record"
    """Every request is accepted and forwarded; the verdict is recorded on the event."""


class HmacAlgorithm(StrEnum):
    SHA1 = "sha1"
    SHA256 = "sha256"
    SHA512 = "sha512"


class SignatureEncoding(StrEnum):
    HEX = "hex"
    """Compared case-insensitively."""
    BASE64 = "base64"
    """The standard alphabet, padded."""


class HmacScheme(_Record):
    """The generic HMAC scheme (type ``hmac``): the MAC of ``payload`` (a template over
    ``{body}``, ``{timestamp}``, ``{id}``, ``{url}``) in header ``header``, after ``prefix``."""

    header: str = Field(min_length=1)
    algorithm: HmacAlgorithm = HmacAlgorithm.SHA256
    encoding: SignatureEncoding = SignatureEncoding.HEX
    prefix: str = ""
    payload: str = "{body}"
    timestamp_header: str | None = None
    """Where ``{timestamp}`` (Unix seconds) comes from; bounded by ``tolerance_s``."""
    id_header: str | None = None
    """Where ``{id}`` comes from."""

    @field_validator("header", "timestamp_header", "id_header")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.strip().lower() if value is not None else None

    @model_validator(mode="after")
    def _placeholders(self) -> HmacScheme:
        text = self.payload
        for name in ("body", "timestamp", "id", "url"):
            text = text.replace("{" + name + "}", "")
        if "{" in text or "}" in text:
            raise PydanticCustomError(
                "hmac_payload", "payload may use only {body}, {timestamp}, {id} and {url}"
            )
        if "{body}" not in self.payload:
            raise PydanticCustomError("hmac_payload", "payload must contain {body}")
        if "{timestamp}" in self.payload and self.timestamp_header is None:
            raise PydanticCustomError("hmac_payload", "{timestamp} needs timestamp_header")
        if "{id}" in self.payload and self.id_header is None:
            raise PydanticCustomError("hmac_payload", "{id} needs id_header")
        return self


class BasicCredentials(_Record):
    username: str = Field(min_length=1)
    password: SecretStr


class ApiKeyCredentials(_Record):
    header: str = Field(min_length=1)
    value: SecretStr

    @field_validator("header")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()


class PreviousSecret(_Record):
    """The secret a rotation replaced, still accepted until ``expires_at``."""

    secret: SecretStr
    expires_at: AwareDatetime


_NEEDS_SECRET: Final = frozenset(VerificationType) - {
    VerificationType.SENDGRID, VerificationType.BASIC, VerificationType.API_KEY,
    VerificationType.NONE,
}  # fmt: skip
REQUIRED_FIELDS: Final[dict[VerificationType, frozenset[str]]] = {
    kind: frozenset(
        ({"secret"} if kind in _NEEDS_SECRET else set())
        | {
            VerificationType.TWILIO: {"public_url"},
            VerificationType.SQUARE: {"public_url"},
            VerificationType.META: {"verify_token"},
            VerificationType.SENDGRID: {"public_key"},
            VerificationType.HMAC: {"hmac"},
            VerificationType.BASIC: {"basic"},
            VerificationType.API_KEY: {"api_key"},
        }.get(kind, set())
    )
    for kind in VerificationType
}
"""The fields each type cannot work without (a missing one is a validation error naming it)."""

SEALED_PATHS: Final = (
    ("secret",), ("previous", "secret"), ("verify_token",), ("basic", "password"),
    ("api_key", "value"),
)  # fmt: skip
"""Where a ``WebhookVerification`` holds secrets: sealed at rest and on the change log."""


class WebhookVerification(_Record):
    """How a webhook's requests are verified. Secrets are plaintext in memory only; at rest and
    on the change log they are sealed (``to_document``). Built from owner input, it raises a
    ``pydantic.ValidationError`` whose error ``loc`` names each field the type needs and lacks
    (type ``verification_field_required``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    type: VerificationType
    mode: VerificationMode = VerificationMode.ENFORCE
    secret: SecretStr | None = None
    previous: PreviousSecret | None = None
    tolerance_s: int | None = Field(default=None, ge=0)
    """Largest distance between a signed timestamp and now; ``None``: the type's default,
    ``0``: not checked."""
    public_url: str | None = None
    verify_token: SecretStr | None = None
    public_key: str | None = None
    hmac: HmacScheme | None = None
    basic: BasicCredentials | None = None
    api_key: ApiKeyCredentials | None = None

    @field_validator(
        "secret", "public_url", "verify_token", "public_key", "hmac", "basic", "api_key"
    )
    @classmethod
    def _required_by_type(cls, value: Any, info: ValidationInfo) -> Any:
        kind = info.data.get("type")
        if kind is None or info.field_name is None:
            return value  # the type itself failed; its error is reported
        empty = value is None or (isinstance(value, SecretStr | str) and not str(_plain(value)))
        if empty and info.field_name in REQUIRED_FIELDS[kind]:
            raise PydanticCustomError(
                "verification_field_required",
                "{field} is required by verification type {type}",
                {"field": info.field_name, "type": kind.value},
            )
        return value

    def rotated(
        self, secret: SecretStr, *, now: datetime, keep_previous_for_s: int
    ) -> WebhookVerification:
        """This verification with ``secret`` as current; the replaced secret stays accepted for
        ``keep_previous_for_s`` seconds (0: not at all)."""
        previous = self.previous
        replaced = self.secret
        if replaced is not None and replaced.get_secret_value() != secret.get_secret_value():
            previous = None
            if keep_previous_for_s > 0:
                expires = now + timedelta(seconds=keep_previous_for_s)
                previous = PreviousSecret(secret=replaced, expires_at=expires)
        return self.model_copy(update={"secret": secret, "previous": previous})

    def to_document(self, seal: Callable[[str], str]) -> dict[str, Any]:
        """As stored: JSON types, every secret replaced by ``seal(secret)``."""
        doc = self.model_dump(mode="json", exclude_none=True)
        for path in SEALED_PATHS:
            value: Any = self
            for part in path:
                value = getattr(value, part, None) if value is not None else None
            if value is not None:
                _at(doc, path[:-1])[path[-1]] = seal(value.get_secret_value())
        return doc

    @classmethod
    def from_document(
        cls, doc: dict[str, Any], unseal: Callable[[str], str]
    ) -> WebhookVerification:
        """The inverse of ``to_document``."""
        doc = {k: dict(v) if isinstance(v, dict) else v for k, v in doc.items()}
        for path in SEALED_PATHS:
            parent = _at(doc, path[:-1]) if all(p in doc for p in path[:-1]) else None
            if parent is not None and parent.get(path[-1]) is not None:
                parent[path[-1]] = unseal(parent[path[-1]])
        return cls.model_validate(doc)


def _plain(value: SecretStr | str) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def _at(doc: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for part in path:
        doc = doc[part]
    return doc


class DestinationState(StrEnum):
    """Whether a destination receives deliveries (``docs/owners/routes.md``, "States")."""

    ACTIVE = "active"
    PAUSED = "paused"
    """Deliveries are held, never discarded, until it is resumed."""
    DISABLED = "disabled"
    """Turned off by hookbay (the destination is gone, or failed for too long); held too."""


class StateReason(StrEnum):
    """Why a destination is not active."""

    MANUAL = "manual"
    """Its owner paused it."""
    BREAKER = "breaker"
    GONE = "gone"
    SUSTAINED_FAILURE = "sustained_failure"


class RatePeriod(StrEnum):
    SECOND = "second"
    MINUTE = "minute"
    HOUR = "hour"

    @property
    def seconds(self) -> float:
        return {"second": 1.0, "minute": 60.0, "hour": 3600.0}[self.value]


DESTINATION_TIMEOUT_DEFAULT: Final = 10
DESTINATION_TIMEOUT_MAX: Final = 60
MAX_CONCURRENCY_DEFAULT: Final = 10
MAX_CONCURRENCY_MAX: Final = 64


class RateLimit(_Record):
    """At most ``count`` requests per ``period`` to one destination, retries included."""

    count: int = Field(ge=1, le=1_000_000)
    period: RatePeriod


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


BREAKER_DISABLE_AFTER_DEFAULT: Final = 72 * 3600


class Breaker(_Record):
    """A destination's circuit breaker (docs/owners/alerts.md): the thresholds its owner may
    set, and the state the deliverer writes (``state``, ``opened_at``, ``next_probe_at``)."""

    state: BreakerState = BreakerState.CLOSED
    window_s: int = Field(default=120, ge=10, le=86_400)
    min_attempts: int = Field(default=10, ge=1, le=10_000)
    failure_pct: int = Field(default=70, ge=1, le=100)
    consecutive: int = Field(default=20, ge=1, le=10_000)
    cooldown_s: int = Field(default=30, ge=1, le=3600)
    max_cooldown_s: int = Field(default=1800, ge=1, le=86_400)
    disable_after_s: int = Field(default=BREAKER_DISABLE_AFTER_DEFAULT, ge=60, le=30 * 86_400)
    opened_at: datetime | None = None
    next_probe_at: datetime | None = None


class Destination(_Record):
    """Where routes deliver: an owner's URL with its delivery controls. ``headers`` values are
    plaintext in memory only (sealed at rest and on the change log); ``retry_schedule``
    ``None`` means the installation's ``HOOKBAY_RETRY_SCHEDULE``."""

    id: str
    username: str
    name: str
    url: str
    timeout_s: int = Field(default=DESTINATION_TIMEOUT_DEFAULT, ge=1, le=DESTINATION_TIMEOUT_MAX)
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    retry_schedule: tuple[str, ...] | None = None
    rate_limit: RateLimit | None = None
    max_concurrency: int = Field(default=MAX_CONCURRENCY_DEFAULT, ge=1, le=MAX_CONCURRENCY_MAX)
    state: DestinationState = DestinationState.ACTIVE
    state_reason: StateReason | None = None
    breaker: Breaker = Field(default_factory=Breaker)
    created_at: datetime
    updated_at: datetime


class Route(_Record):
    """One of a webhook's ordered routes: its events that pass ``filter`` (``None``: all of
    them) go to the owner's destination named ``destination``. ``filter`` is the owner's
    filter document as saved (``hookbay_common.routing.filters``)."""

    id: str
    name: str
    destination: str
    enabled: bool = True
    filter: dict[str, Any] | None = None
    created_at: datetime
    updated_at: datetime


class Webhook(_Record):
    """A receiving URL ``/w/{username}/{name}``. ``secret`` is plaintext in memory only.

    ``verification`` says how its requests are verified; without one, a ``secret`` means type
    ``hookbay`` in ``enforce`` mode (``effective_verification``)."""

    id: str
    username: str
    name: str
    secret: SecretStr | None = None
    verification: WebhookVerification | None = None
    forward_url: str | None = None
    active: bool = True
    routes: tuple[Route, ...] = ()
    """In order: the order owners see and the router evaluates."""

    @property
    def enabled_routes(self) -> tuple[Route, ...]:
        """The routes that take events, in order (a webhook with none is not routed)."""
        return tuple(route for route in self.routes if route.enabled)

    created_at: datetime
    updated_at: datetime

    def route(self, name: str) -> Route | None:
        return next((r for r in self.routes if r.name == name), None)

    @property
    def effective_verification(self) -> WebhookVerification | None:
        if self.verification is not None:
            return self.verification
        if self.secret is None:
            return None
        return WebhookVerification(type=VerificationType.HOOKBAY, secret=self.secret)


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


class EventVerification(_Record):
    """What verification said about one request: ``secret`` is set when ``valid``, ``reason``
    when ``invalid``."""

    type: VerificationType
    result: VerificationResult
    secret: MatchedSecret | None = None
    reason: InvalidReason | None = None


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
        """Deliverable to its ``forward_url`` (the forwarder's first attempt of the event)."""
        return self.deliverable and self.forward_url is not None


class DeliveryStatus(StrEnum):
    """Where one delivery (an event over one route to its destination) stands."""

    FILTERED = "filtered"
    """The route's filter did not match (``reason`` says why): nothing to deliver."""
    DEDUPLICATED = "deduplicated"
    TRANSFORM_FAILED = "transform_failed"
    HELD = "held"
    """Waiting in the hold store: its destination is paused or disabled (``reason``)."""
    SCHEDULED = "scheduled"
    """A retry waits for its time."""
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


class Delivery(_Record):
    """The latest known state of one delivery: ``id`` (``routing.tasks.delivery_id``) of event
    ``event_id`` over the route named ``route`` to the destination named ``destination`` (names,
    as the API shows them, recorded when the event was routed), ``status`` since ``at``.

    Records of one delivery arrive in any order and any number of times; ``supersedes`` decides
    which one stands: a finished status over an unfinished one whatever their times, else the
    later ``at``."""

    id: str
    event_id: str
    webhook_id: str
    username: str
    route: str
    destination: str
    status: DeliveryStatus
    reason: str | None = None
    at: datetime

    @property
    def precedence(self) -> tuple[int, int, int]:
        """Finished or not, then ``at`` to the millisecond (what the wire and the store keep),
        then the status's place in ``DeliveryStatus``."""
        return (
            int(self.status.finished), epoch_ms(self.at), _DELIVERY_TIE_ORDER.index(self.status)
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
    return delivery_id.split("_")[1]


class Attempt(_Record):
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
            status=status, reason=reason, at=self.started_at,
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
    def replay(
        cls, event: Event, url: str, *, now: datetime, chain_id: str | None = None
    ) -> DeliveryTask:
        """A new attempt chain (``chain_id``, default a new one) for ``event`` to ``url`` (the
        webhook's current destination), to publish on ``Topics.replays`` keyed by the event id."""
        return cls(
            event=event, chain_id=chain_id or new_id(IdPrefix.CHAIN),
            trigger=AttemptTrigger.REPLAY, number=1, url=url, not_before=now,
        )  # fmt: skip


class IssueType(StrEnum):
    DELIVERY = "delivery"
    """A destination failing: its breaker opened, or deliveries failed for good."""
    DISABLED = "disabled"
    """hookbay disabled a destination (410 Gone, or failing for too long)."""
    BACKLOG = "backlog"
    """A destination's oldest held delivery is older than the threshold."""
    TRANSFORMATION = "transformation"
    """A transformation failing."""


class IssueStatus(StrEnum):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    """Someone is on it: recurrences count silently."""
    RESOLVED = "resolved"
    IGNORED = "ignored"
    """Never notifies and never reopens until its owner resolves it."""


class Notified(StrEnum):
    """What the owner's channels were last told about an issue."""

    OPENED = "opened"
    REOPENED = "reopened"
    RESOLVED = "resolved"


class Issue(_Record):
    """One problem of an owner's, one document per (``username``, ``key``): the same problem
    recurring updates or reopens it. ``key`` is ``<type>:<destination or transformation>``."""

    id: str
    username: str
    type: IssueType
    key: str
    status: IssueStatus = IssueStatus.OPEN
    destination: str | None = None
    transformation: str | None = None
    reason: str | None = None
    first_seen_at: datetime
    last_seen_at: datetime
    count: int = 1
    sample_event_id: str | None = None
    opened_at: datetime
    resolved_at: datetime | None = None
    notified: Notified | None = None
    notified_at: datetime | None = None


class AlertChannelType(StrEnum):
    WEBHOOK = "webhook"
    SLACK = "slack"
    PAGERDUTY = "pagerduty"
    EMAIL = "email"


class AlertChannel(_Record):
    """Where an owner's issue notifications go. ``url`` (webhook, slack), ``secret`` (webhook:
    a Standard Webhooks ``whsec_`` secret), ``routing_key`` and ``events_url`` (pagerduty), ``to``
    (email). ``url``, ``secret`` and ``routing_key`` are plaintext in memory only (sealed at
    rest). ``last_error`` / ``failing_since``: the channel's notifications are failing."""

    id: str
    username: str
    type: AlertChannelType
    url: SecretStr | None = None
    secret: SecretStr | None = None
    routing_key: SecretStr | None = None
    events_url: str | None = None
    to: str | None = None
    created_at: datetime
    last_sent_at: datetime | None = None
    last_error: str | None = None
    failing_since: datetime | None = None
