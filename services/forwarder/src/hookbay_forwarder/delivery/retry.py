"""When to retry an attempt, how long to wait, and which delay tier carries the wait.

Retries wait in Kafka, in one topic per distinct delay of the schedule (a "tier"). Every
record of a tier is due about the same time after it was written, so a tier partition is
read in due order and a consumer only ever waits for the record at its head. A wait longer
than the schedule's own (a long ``Retry-After``) goes to the smallest tier that covers it, so
it never holds back a record behind it by more than that tier's jitter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

from hookbay_common.clock import utcnow

RETRYABLE_STATUSES = frozenset({408, 429})
RETRY_AFTER_STATUSES = frozenset({429, 503})


def is_retryable(status_code: int | None, error: str | None, *, blocked: bool) -> bool:
    """Network errors and timeouts, 408, 429 and 5xx retry; a refused destination and every
    other status fail at once."""
    if blocked:
        return False
    if status_code is None:
        return error is not None
    return status_code in RETRYABLE_STATUSES or status_code >= 500


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date; else ``None``."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - (now or utcnow())).total_seconds())


@dataclass(frozen=True)
class Wait:
    delay: float
    """Seconds until the next attempt."""
    tier: float
    """The delay tier (a schedule entry) whose topic carries the retry."""


@dataclass(frozen=True)
class RetryPolicy:
    schedule: tuple[float, ...]
    """Delay before attempt 1, 2, 3, ...; its length is the number of attempts of a chain."""
    jitter: float = 0.1

    @property
    def tiers(self) -> tuple[float, ...]:
        return tuple(sorted(set(self.schedule[1:])))

    def next_wait(
        self, attempts_made: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> Wait | None:
        """The wait before attempt ``attempts_made + 1``, or ``None`` when the chain is done.
        ``Retry-After`` is honoured up to the longest delay of the schedule."""
        if attempts_made >= len(self.schedule) or not self.tiers:
            return None
        base = self.schedule[attempts_made]
        delay = base * (1 + self.jitter * (rng or random).random())
        if retry_after is not None:
            delay = max(delay, retry_after)
        for tier in self.tiers:
            if tier * (1 + self.jitter) >= delay or tier >= delay:
                return Wait(delay, tier)
        longest = self.tiers[-1]
        return Wait(min(delay, longest * (1 + self.jitter)), longest)
