"""The rate limit of one destination: a token bucket that computes waits and never sleeps.

Hand-written (about 30 lines) rather than ``aiolimiter``: the lane must know *how long* to wait
without parking a coroutine per task, take its time from an injected clock, and change its rate
in place when the destination's configuration changes; aiolimiter sleeps inside ``acquire`` on
the event loop's own clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookbay_common.models import RatePeriod

_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` attempts started per ``period``."""

    count: int
    period: RatePeriod

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("a rate allows at least one attempt per period")

    @property
    def per_second(self) -> float:
        return self.count / self.period.seconds

    @property
    def burst(self) -> float:
        """One second's worth of attempts, at least one: a full bucket never starts more than a
        second's share at once, so any minute holds at most rate x 60 + burst starts (5/s:
        305 in the first minute, +1.7 %), where a burst of the whole period (300/min at once)
        would double a minute's count."""
        return max(1.0, self.per_second)


class TokenBucket:
    """Starts full; refills at ``rate.per_second`` up to ``rate.burst``."""

    def __init__(self, rate: Rate, now: float) -> None:
        self.rate = rate
        self._tokens = rate.burst
        self._updated = now

    def configure(self, rate: Rate, now: float) -> None:
        """A new rate from now on; tokens saved up are kept up to the new burst."""
        self._refill(now)
        self.rate = rate
        self._tokens = min(self._tokens, rate.burst)

    def take(self, now: float) -> float:
        """Take one token and return 0, or take nothing and return the seconds until one is due."""
        self._refill(now)
        if self._tokens >= 1 - _EPSILON:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self.rate.per_second

    def full(self, now: float) -> bool:
        """Saved up to the burst: a new bucket would behave the same."""
        self._refill(now)
        return self._tokens >= self.rate.burst - _EPSILON

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(self.rate.burst, self._tokens + elapsed * self.rate.per_second)
        self._updated = now
