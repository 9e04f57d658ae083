"""Bodies of ``/destinations``. Header values are write-only: a stored value reads as a mask."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hookbay_common.db.destination_failures import RECENT_FAILURES, FailedAttempt
from hookbay_common.db.held import HoldState
from hookbay_common.headers import HOOKBAY_PREFIX, HOP_BY_HOP
from hookbay_common.models import (
    DESTINATION_TIMEOUT_DEFAULT,
    DESTINATION_TIMEOUT_MAX,
    MAX_CONCURRENCY_DEFAULT,
    MAX_CONCURRENCY_MAX,
    Breaker,
    BreakerState,
    Destination,
    DestinationState,
    RateLimit,
    RatePeriod,
    StateReason,
)
from hookbay_common.names import WEBHOOK_NAME_MAX
from hookbay_common.netguard import MAX_URL_LENGTH
from hookbay_common.settings import parse_duration
from hookbay_dashboard.schemas import Timestamp

SECRET_MASK: Final = "********"  # noqa: S105 - what a stored header value reads as
MAX_HEADERS: Final = 20
MAX_HEADER_NAME: Final = 256
MAX_HEADER_VALUE: Final = 4096
MAX_SCHEDULE_ENTRIES: Final = 20
MAX_RETRY_DELAY_S: Final = 7 * 86400.0
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_BODY_HEADERS: Final = frozenset({"content-type", "content-encoding"})
"""Describe the body, which is forwarded as received: not the destination's to change."""

_HEADERS_DOC = (
    f"Extra request headers sent with every delivery, at most {MAX_HEADERS}; names are "
    f"case-insensitive (stored lower-case). Values are write-only (read as {SECRET_MASK!r}); on "
    f"PATCH the map replaces the stored one, and a value sent as {SECRET_MASK!r} keeps the "
    "stored value of that name."
)
_SCHEDULE_DOC = (
    'Delays before the first attempt and each retry, e.g. ["0", "10s", "1m", "1h"] '
    f"(as HOOKBAY_RETRY_SCHEDULE: ms, s, m, h or bare seconds; at most {MAX_SCHEDULE_ENTRIES} "
    "entries of at most 7 days); null: the installation's schedule."
)


def _control(char: str) -> bool:
    return char != "\t" and (ord(char) < 32 or ord(char) == 127)


def _check_headers(value: dict[str, str] | None) -> dict[str, str] | None:
    if value is None:
        return None
    if len(value) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} headers")
    checked: dict[str, str] = {}
    for name, text in value.items():
        lower = name.lower()
        if not _TOKEN.fullmatch(name) or len(name) > MAX_HEADER_NAME:
            raise ValueError(
                f"header name {name!r} is not an HTTP token of at most {MAX_HEADER_NAME} characters"
            )
        if lower in HOP_BY_HOP or lower in _BODY_HEADERS or lower.startswith(HOOKBAY_PREFIX):
            raise ValueError(f"header {lower!r} is set by hookbay, not by a destination")
        if lower in checked:
            raise ValueError(f"header {lower!r} is given twice (names are case-insensitive)")
        if not text or len(text) > MAX_HEADER_VALUE:
            raise ValueError(f"header {lower!r}: a value of 1 to {MAX_HEADER_VALUE} characters")
        if text != text.strip(" \t") or any(_control(c) for c in text):
            raise ValueError(
                f"header {lower!r}: the value has control characters or surrounding spaces"
            )
        if any(ord(c) > 255 for c in text):
            raise ValueError(f"header {lower!r}: the value must be Latin-1 text")
        checked[lower] = text
    return checked


def _check_schedule(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    entries = [entry.strip() for entry in value]
    for entry in entries:
        seconds = parse_duration(entry)  # ValueError names the entry
        if seconds > MAX_RETRY_DELAY_S:
            raise ValueError(f"{entry!r} is longer than 7 days")
    return entries


class RateLimitWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(ge=1, le=1_000_000, description="Requests allowed per period.")
    period: RatePeriod

    def record(self) -> RateLimit:
        return RateLimit.model_validate(self.model_dump())


class BreakerWrite(BaseModel):
    """The breaker's thresholds (docs/owners/alerts.md); a field not sent keeps its value (the
    default at first). Its state is hookbay's: sending it is a 422."""

    model_config = ConfigDict(extra="forbid")

    window_s: int | None = Field(
        default=None, ge=10, le=86_400, description="Sliding window (120)."
    )
    min_attempts: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Attempts in the window before the share counts (10).",
    )
    failure_pct: int | None = Field(
        default=None, ge=1, le=100, description="Share of failed attempts that opens it (70)."
    )
    consecutive: int | None = Field(
        default=None, ge=1, le=10_000, description="Failures in a row that open it (20)."
    )
    cooldown_s: int | None = Field(
        default=None, ge=1, le=3600, description="Wait before the first probe (30); doubles."
    )
    max_cooldown_s: int | None = Field(
        default=None, ge=1, le=86_400, description="The longest wait between probes (1800)."
    )
    disable_after_s: int | None = Field(
        default=None, ge=60, le=30 * 86_400,
        description="Open this long: disabled, reason sustained_failure (259200: 72 h).",
    )  # fmt: skip

    def applied_to(self, current: Breaker) -> Breaker:
        changes = self.model_dump(exclude_none=True)
        return current.model_copy(update=changes)


class _DestinationFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    headers: dict[str, str] | None = Field(default=None, description=_HEADERS_DOC)
    retry_schedule: list[str] | None = Field(
        default=None, min_length=1, max_length=MAX_SCHEDULE_ENTRIES, description=_SCHEDULE_DOC
    )
    rate_limit: RateLimitWrite | None = Field(
        default=None,
        description="At most count requests per period, retries included; null: no limit.",
    )

    breaker: BreakerWrite | None = Field(default=None, description="The breaker's thresholds.")

    _headers = field_validator("headers")(_check_headers)
    _schedule = field_validator("retry_schedule")(_check_schedule)


class DestinationCreate(_DestinationFields):
    name: str = Field(
        min_length=1, max_length=WEBHOOK_NAME_MAX,
        description="Lowercase words of a-z and 0-9 joined by single hyphens.",
    )  # fmt: skip
    url: str = Field(
        min_length=1, max_length=MAX_URL_LENGTH,
        description="http(s); the SSRF rules of forward URLs apply.",
    )  # fmt: skip
    timeout_s: int = Field(
        default=DESTINATION_TIMEOUT_DEFAULT, ge=1, le=DESTINATION_TIMEOUT_MAX,
        description="Seconds an attempt may take.",
    )  # fmt: skip
    max_concurrency: int = Field(
        default=MAX_CONCURRENCY_DEFAULT, ge=1, le=MAX_CONCURRENCY_MAX,
        description="Deliveries in flight at once; 1: one at a time, in arrival order.",
    )  # fmt: skip


class DestinationUpdate(_DestinationFields):
    """Only the fields sent change. ``headers`` replaces the stored map (``{}`` or null removes
    every header; a value sent as the mask keeps the stored one); ``retry_schedule`` and
    ``rate_limit`` null go back to the default. ``url``, ``timeout_s`` and
    ``max_concurrency`` cannot be null. The state changes only by pause and resume."""

    url: str | None = Field(default=None, min_length=1, max_length=MAX_URL_LENGTH)
    timeout_s: int | None = Field(default=None, ge=1, le=DESTINATION_TIMEOUT_MAX)
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY_MAX)

    @field_validator("url", "timeout_s", "max_concurrency")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("may not be null")
        return value


class RateLimitRead(BaseModel):
    count: int
    period: RatePeriod


class BreakerRead(BaseModel):
    state: BreakerState = Field(description="Written by hookbay: closed, open or half_open.")
    window_s: int
    min_attempts: int
    failure_pct: int
    consecutive: int
    cooldown_s: int
    max_cooldown_s: int
    disable_after_s: int
    opened_at: Timestamp | None = Field(description="When it opened (the current streak).")
    next_probe_at: Timestamp | None = Field(description="When the next probe goes out.")

    @classmethod
    def of(cls, breaker: Breaker) -> BreakerRead:
        return cls.model_validate(breaker.model_dump())


class DestinationRead(BaseModel):
    id: str
    username: str
    name: str
    url: str
    timeout_s: int
    headers: dict[str, str] = Field(description=f"Every value reads as {SECRET_MASK!r}.")
    retry_schedule: list[str] | None = Field(description="null: the installation's schedule.")
    rate_limit: RateLimitRead | None
    max_concurrency: int
    state: DestinationState
    state_reason: StateReason | None
    breaker: BreakerRead
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, destination: Destination) -> DestinationRead:
        d = destination
        rate = d.rate_limit
        return cls(
            id=d.id, username=d.username, name=d.name, url=d.url, timeout_s=d.timeout_s,
            headers={name: SECRET_MASK for name in d.headers},
            retry_schedule=list(d.retry_schedule) if d.retry_schedule is not None else None,
            rate_limit=RateLimitRead(count=rate.count, period=rate.period) if rate else None,
            max_concurrency=d.max_concurrency, state=d.state, state_reason=d.state_reason,
            breaker=BreakerRead.of(d.breaker), created_at=d.created_at, updated_at=d.updated_at,
        )  # fmt: skip

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


class FailedAttemptRead(BaseModel):
    at: Timestamp = Field(description="When the attempt began.")
    event_id: str
    status_code: int | None = Field(description="What the destination answered; null: nothing.")
    error: str | None = Field(description="Why no answer came (a timeout, a refused connection).")

    @classmethod
    def of(cls, failed: FailedAttempt) -> FailedAttemptRead:
        return cls(
            at=failed.at, event_id=failed.event_id, status_code=failed.status_code,
            error=failed.error,
        )  # fmt: skip


class DestinationHealthRead(BaseModel):
    held: int = Field(
        description="Deliveries held for it (paused, open breaker, disabled, or a backlog "
        "spilled out of memory); while a drain runs, the count may include a few it just "
        "delivered."
    )
    oldest_held_at: Timestamp | None = Field(
        description="When the oldest held delivery was held; null: none held."
    )
    last_errors: list[FailedAttemptRead] = Field(
        description=f"Its newest failed attempts, newest first, at most {RECENT_FAILURES}."
    )

    @classmethod
    def of(cls, hold: HoldState, last_errors: Sequence[FailedAttempt]) -> DestinationHealthRead:
        return cls(
            held=hold.count, oldest_held_at=hold.oldest_held_at,
            last_errors=[FailedAttemptRead.of(f) for f in last_errors],
        )  # fmt: skip
