"""The gateway's configuration: destinations (where deliveries go, at what pace, in what state)
and the routes that send a webhook's events to them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from pydantic import Field, SecretStr

from hookbay_common.models.record import Record
from hookbay_common.routing.dedupe import DedupeRule


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
MAX_CONCURRENCY_DEFAULT: Final = 20
MAX_CONCURRENCY_MAX: Final = 64
ROUTE_DELAY_MAX: Final = 86_400
"""A route's longest delay, in seconds (24 h)."""


def _is_none(value: object) -> bool:
    return value is None


class RateLimit(Record):
    """At most ``count`` requests per ``period`` to one destination, retries included."""

    count: int = Field(ge=1, le=1_000_000)
    period: RatePeriod


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


BREAKER_DISABLE_AFTER_DEFAULT: Final = 72 * 3600


class Breaker(Record):
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


class Destination(Record):
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


class Transformation(Record):
    """An owner's JavaScript transformation (``docs/owners/transformations.md``). ``env``
    values are plaintext in memory only (sealed at rest and on the change log); ``version``
    starts at 1 and moves up by one on every change of ``code`` or ``env``."""

    id: str
    username: str
    name: str
    code: str
    env: dict[str, SecretStr] = Field(default_factory=dict)
    version: int = Field(default=1, ge=1)
    created_at: datetime
    updated_at: datetime


class Route(Record):
    """One of a webhook's ordered routes: its events that pass ``filter`` (``None``: all of
    them) go to the owner's destination named ``destination``, reshaped first by the owner's
    transformation named ``transform`` when there is one, and ``delay_s`` seconds after they
    arrived (``ROUTE_DELAY_MAX`` at most; ``None`` or 0: at once). ``filter`` is the owner's
    filter document as saved (``hookbay_common.routing.filters``). ``transform``, ``dedupe``
    and ``delay_s`` are left out of the stored and published record when ``None``, so a record
    without them reads on a replica of an earlier version (``route_document``)."""

    id: str
    name: str
    destination: str
    enabled: bool = True
    filter: dict[str, Any] | None = None
    transform: str | None = None
    dedupe: DedupeRule | None = Field(default=None, exclude_if=_is_none)
    """Deliver only the first event of each key within a window (docs/owners/routes.md,
    "Deduplication"); ``None``: every event. Left out of dumps when ``None``, as ``delay_s``:
    a stored or published route without them stays readable by a version without them."""
    delay_s: int | None = Field(default=None, ge=0, le=ROUTE_DELAY_MAX, exclude_if=_is_none)
    """Seconds to wait before the first attempt (``ROUTE_DELAY_MAX`` at most); ``None`` or 0:
    none."""
    created_at: datetime
    updated_at: datetime


def route_document(route: Route) -> dict[str, Any]:
    """``route`` as a JSON-ready map for the store and the change log, ``transform`` left out
    when it is ``None`` (readable by replicas that predate it); ``dedupe`` and ``delay_s`` are
    left out of every dump when ``None``."""
    doc = route.model_dump(mode="python")
    if doc["transform"] is None:
        del doc["transform"]
    return doc
