"""The circuit breaker of one destination: when it fails, hold instead of hammering it.

States (``BreakerState``):

- **closed**: attempts go out. Each result counts in a sliding window of ``window_s``
  seconds; the breaker *opens* when the window holds at least ``min_attempts`` results of which
  at least ``failure_pct`` % failed, or after ``consecutive`` failures in a row. The window
  keeps counts per bucket of ``bucket_width(window_s)`` seconds (one second up to a window of
  ``WINDOW_BUCKETS`` seconds), not the results themselves: its memory is at most
  ``WINDOW_BUCKETS + 1`` buckets whatever the rate. A bucket leaves the window once its start
  is ``window_s`` old, so a result counts for ``window_s`` seconds less at most one bucket
  (exactly ``window_s`` for results on whole bucket boundaries).
- **open**: no attempt goes out (the lane holds). After a cool-down the next ``admit`` is the
  *probe*: the breaker turns **half_open** and admits that one attempt only. The cool-down is
  ``cooldown_s`` at the first opening and doubles at every failed probe up to ``max_cooldown_s``;
  a 429's ``Retry-After`` lengthens it when longer.
- **half_open**: the probe's success closes the breaker (the lane drains what it held); its
  failure opens it again with the next cool-down.

A failure (``classify``): a network error, a timeout, a 5xx, a 429. Any other 4xx fails the
event, not the destination: it counts as neither. A **410 Gone** disables the destination at
once, whatever the state. Open (re-openings included) for ``disable_after_s`` without a
successful probe: disabled for **sustained failure**. Disabled holds until ``reset`` (the owner
resumed the destination).

Time is an injected ``Clock``; nothing here sleeps. Every change of state is reported to
``on_transition`` (and kept in ``transitions`` of the ``Breakers`` book) as a ``Transition``
whose ``action`` tells the caller what to do with the destination: pause it (reason
``breaker``), resume it, or disable it (reason ``gone`` / ``sustained_failure``).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from hookbay_common.models import Breaker as BreakerModel
from hookbay_forwarder.gateway.clock import Clock, SystemClock
from hookbay_forwarder.metrics import BreakerMetrics

DEFAULT_WINDOW_S: Final = 120
DEFAULT_MIN_ATTEMPTS: Final = 10
DEFAULT_FAILURE_PCT: Final = 70
DEFAULT_CONSECUTIVE: Final = 20
DEFAULT_COOLDOWN_S: Final = 30
DEFAULT_MAX_COOLDOWN_S: Final = 1800
DEFAULT_DISABLE_AFTER_S: Final = 72 * 3600
WINDOW_BUCKETS: Final = 120
"""Buckets a window is divided into at most (one-second buckets up to a 120 s window)."""


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Outcome(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"
    """A 4xx other than 408/429/410: the event's fault, not the destination's."""
    GONE = "gone"


def classify(status: int | None) -> Outcome:
    """What an attempt's answer says about the destination; ``None``: no answer (a network
    error or a timeout). 408 counts as a timeout."""
    if status is None or status >= 500 or status in (408, 429):
        return Outcome.FAILURE
    if status == 410:
        return Outcome.GONE
    if status >= 400:
        return Outcome.NEUTRAL
    return Outcome.SUCCESS


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """One destination's thresholds; the defaults are the documented ones
    (docs/owners/alerts.md)."""

    window_s: int = DEFAULT_WINDOW_S
    min_attempts: int = DEFAULT_MIN_ATTEMPTS
    failure_pct: int = DEFAULT_FAILURE_PCT
    consecutive: int = DEFAULT_CONSECUTIVE
    cooldown_s: int = DEFAULT_COOLDOWN_S
    max_cooldown_s: int = DEFAULT_MAX_COOLDOWN_S
    disable_after_s: int = DEFAULT_DISABLE_AFTER_S

    def __post_init__(self) -> None:
        if not 1 <= self.failure_pct <= 100:
            raise ValueError("failure_pct must be within 1..100")
        if min(self.window_s, self.min_attempts, self.consecutive, self.cooldown_s) < 1:
            raise ValueError("window_s, min_attempts, consecutive and cooldown_s must be >= 1")
        if self.max_cooldown_s < self.cooldown_s:
            raise ValueError("max_cooldown_s must be at least cooldown_s")
        if self.disable_after_s < self.cooldown_s:
            raise ValueError("disable_after_s must be at least cooldown_s")

    @classmethod
    def of(cls, breaker: BreakerModel) -> BreakerSettings:
        """The thresholds of a destination's ``breaker`` (``hookbay_common.models.Breaker``)."""
        return cls(
            window_s=breaker.window_s, min_attempts=breaker.min_attempts,
            failure_pct=breaker.failure_pct, consecutive=breaker.consecutive,
            cooldown_s=breaker.cooldown_s, max_cooldown_s=breaker.max_cooldown_s,
            disable_after_s=breaker.disable_after_s,
        )  # fmt: skip

    def cooldown(self, level: int) -> float:
        """The cool-down after the ``level``-th opening in a row (0: the first)."""
        return float(min(self.cooldown_s * 2 ** min(level, 32), self.max_cooldown_s))


class Action(StrEnum):
    """What the caller does with the destination on a transition."""

    PAUSE = "pause"
    """Hold its deliveries: ``paused`` with ``state_reason`` ``breaker``."""
    RESUME = "resume"
    """``active`` again; the lane drains what it held, in order."""
    DISABLE = "disable"
    """``disabled`` with ``state_reason`` = the transition's ``reason``; held, never discarded."""
    NONE = "none"
    """Nothing to change on the destination (a probe goes out)."""


class TransitionKind(StrEnum):
    OPENED = "opened"
    """closed → open: the breaker tripped."""
    PROBING = "probing"
    """open → half_open: the cool-down is over, one probe is admitted."""
    REOPENED = "reopened"
    """half_open → open: the probe failed; the next cool-down is longer."""
    CLOSED = "closed"
    """half_open → closed: the probe succeeded."""
    DISABLED = "disabled"
    """410 Gone, or open for longer than ``disable_after_s``."""


_ACTIONS: Final = {
    TransitionKind.OPENED: Action.PAUSE,
    TransitionKind.PROBING: Action.NONE,
    TransitionKind.REOPENED: Action.NONE,
    TransitionKind.CLOSED: Action.RESUME,
    TransitionKind.DISABLED: Action.DISABLE,
}


@dataclass(frozen=True, slots=True)
class Transition:
    destination: str
    kind: TransitionKind
    state: BreakerState
    """The state after the transition."""
    at: datetime
    reason: str | None = None
    """``breaker`` (opened), ``gone`` or ``sustained_failure`` (disabled)."""
    opened_at: datetime | None = None
    next_probe_at: datetime | None = None
    cooldown_s: float | None = None
    event_id: str | None = None
    """The event of the attempt that caused it: the failure that tripped the breaker, the failed
    probe, the 410; for a disabling by sustained failure, the last failed probe's (``None``
    when no attempt failed since the breaker was restored from the store)."""

    @property
    def action(self) -> Action:
        return _ACTIONS[self.kind]


@dataclass(frozen=True, slots=True)
class Permit:
    """Leave to make one attempt; give it back to ``Breaker.record`` with the result."""

    generation: int
    probe: bool


OnTransition = Callable[[Transition], None]


def bucket_width(window_s: float) -> float:
    """Seconds one bucket of a ``window_s`` window covers: one, or ``window_s /
    WINDOW_BUCKETS`` for longer windows."""
    return max(1.0, window_s / WINDOW_BUCKETS)


class _Bucket:
    __slots__ = ("failures", "start", "total")

    def __init__(self, start: float) -> None:
        self.start = start
        self.total = 0
        self.failures = 0


class Window:
    """Counts of the results of the last ``window_s`` seconds, in buckets (``bucket_width``).
    A bucket leaves once its start is ``window_s`` old (``start <= now - window_s``)."""

    def __init__(self) -> None:
        self._buckets: deque[_Bucket] = deque()
        self.total = 0
        self.failures = 0

    @property
    def buckets(self) -> int:
        return len(self._buckets)

    def add(self, now: float, failed: bool, window_s: float) -> None:
        """Count one result at ``now`` (monotonic, never earlier than the previous one)."""
        width = bucket_width(window_s)
        start = math.floor(now / width) * width
        if not self._buckets or self._buckets[-1].start < start:
            self._buckets.append(_Bucket(start))
        bucket = self._buckets[-1]
        bucket.total += 1
        bucket.failures += failed
        self.total += 1
        self.failures += failed
        self.expire(now, window_s)

    def expire(self, now: float, window_s: float) -> None:
        horizon = now - window_s
        while self._buckets and self._buckets[0].start <= horizon:
            old = self._buckets.popleft()
            self.total -= old.total
            self.failures -= old.failures

    def clear(self) -> None:
        self._buckets.clear()
        self.total = self.failures = 0


class Breaker:
    """The breaker of one destination. Not thread-safe; one event loop drives it."""

    def __init__(
        self,
        destination: str,
        settings: BreakerSettings | None = None,
        *,
        clock: Clock | None = None,
        on_transition: OnTransition | None = None,
    ) -> None:
        self.destination = destination
        self.settings = settings or BreakerSettings()
        self._clock = clock or SystemClock()
        self._on_transition = on_transition
        self.state = BreakerState.CLOSED
        self.disabled_reason: str | None = None
        self._window = Window()
        self._consecutive = 0
        self._level = 0
        self._generation = itertools.count(1)
        self._current = next(self._generation)
        self._open_since: float | None = None
        self._opened_at: datetime | None = None
        self._probe_at: float | None = None
        self._probe_out = False
        self._cause: str | None = None

    # ------------------------------------------------------------------ reading

    @property
    def disabled(self) -> bool:
        return self.disabled_reason is not None

    @property
    def window(self) -> Window:
        """The results counted while closed."""
        return self._window

    @property
    def opened_at(self) -> datetime | None:
        """When the current streak of openings began (``None`` while closed)."""
        return self._opened_at

    @property
    def next_probe_at(self) -> datetime | None:
        if self._probe_at is None or self.state is not BreakerState.OPEN or self.disabled:
            return None
        return self._wall(self._probe_at)

    def probe_in(self) -> float | None:
        """Seconds until a probe may go out (0: now); ``None`` when no probe is waited for
        (closed, a probe out, disabled). The lane arms its timer on this."""
        if self.state is not BreakerState.OPEN or self.disabled or self._probe_at is None:
            return None
        return max(0.0, self._probe_at - self._clock.monotonic())

    # ------------------------------------------------------------------ driving

    def admit(self) -> Permit | None:
        """Leave for one attempt now, or ``None``: hold it. While open, the first ``admit``
        after the cool-down is the probe (the breaker turns half-open); no other attempt is
        admitted until the probe's result is recorded."""
        self.poll()
        if self.disabled:
            return None
        if self.state is BreakerState.CLOSED:
            return Permit(self._current, probe=False)
        if self.state is BreakerState.OPEN and self.probe_in() == 0:
            self.state = BreakerState.HALF_OPEN
            self._probe_out = True
            self._current = next(self._generation)
            self._emit(TransitionKind.PROBING)
            return Permit(self._current, probe=True)
        return None

    def record(
        self,
        permit: Permit,
        status: int | None,
        *,
        retry_after_s: float = 0,
        event_id: str | None = None,
    ) -> None:
        """The result of an admitted attempt: its HTTP status, ``None`` for a network error or
        a timeout; ``retry_after_s``: a 429's (or 503's) ``Retry-After``; ``event_id``: the
        event it delivered, named by the transition it causes (``Transition.event_id``).
        Results of attempts admitted before the latest opening change nothing but a 410 (they
        were already on their way)."""
        outcome = classify(status)
        if self.disabled:
            return
        if outcome is Outcome.GONE:
            self._cause = event_id
            self._disable("gone")
            return
        if permit.generation != self._current:
            return
        if outcome is Outcome.FAILURE:
            self._cause = event_id
        if permit.probe:
            self._probe_out = False
            if outcome is Outcome.FAILURE:
                self._level += 1
                self._open(TransitionKind.REOPENED, retry_after_s)
            else:  # a neutral 4xx answered too: the destination is up
                self._close()
            return
        if outcome is Outcome.NEUTRAL:
            return
        self._count(outcome is Outcome.FAILURE)
        if self._tripped():
            self._open(TransitionKind.OPENED, retry_after_s)

    def poll(self) -> None:
        """Apply what time alone changes: disable after ``disable_after_s`` of openness. Called
        by ``admit`` and ``record``; a caller with nothing to deliver calls it from a timer."""
        if self.disabled or self._open_since is None:
            return
        if self._clock.monotonic() - self._open_since >= self.settings.disable_after_s:
            self._disable("sustained_failure")

    def reset(self) -> None:
        """Closed with an empty window (the owner resumed or re-enabled the destination)."""
        self.state = BreakerState.CLOSED
        self.disabled_reason = None
        self._clear()
        self._current = next(self._generation)

    def restore(self, opened_at: datetime, next_probe_at: datetime | None) -> None:
        """Open, as the destination's stored state says another process's breaker left it
        (after a restart or a rebalance): the probe at ``next_probe_at`` (now, when it is past
        or unknown), sustained failure counted from ``opened_at``. Reports no transition (the
        state is stored already) and changes nothing unless closed. How many probes failed
        before is not stored: the next cool-down starts again from the second step."""
        if self.state is not BreakerState.CLOSED or self.disabled:
            return
        now, wall = self._clock.monotonic(), self._clock.now()
        self._clear()
        self.state = BreakerState.OPEN
        self._current = next(self._generation)
        self._opened_at = opened_at
        self._open_since = now - max(0.0, (wall - opened_at).total_seconds())
        ahead = (next_probe_at - wall).total_seconds() if next_probe_at is not None else 0.0
        self._probe_at = now + max(0.0, ahead)

    def configure(self, settings: BreakerSettings) -> None:
        """New thresholds; the window and the state are kept."""
        self.settings = settings

    # ------------------------------------------------------------------ inside

    def _count(self, failed: bool) -> None:
        self._window.add(self._clock.monotonic(), failed, self.settings.window_s)
        self._consecutive = self._consecutive + 1 if failed else 0

    def _tripped(self) -> bool:
        s, window = self.settings, self._window
        if self._consecutive >= s.consecutive:
            return True
        total = window.total
        return total >= s.min_attempts and window.failures * 100 >= s.failure_pct * total

    def _open(self, kind: TransitionKind, retry_after_s: float) -> None:
        now = self._clock.monotonic()
        self.state = BreakerState.OPEN
        self._current = next(self._generation)
        if self._open_since is None:
            self._open_since = now
            self._opened_at = self._clock.now()
        cooldown = max(self.settings.cooldown(self._level), retry_after_s)
        self._probe_at = now + cooldown
        self._window.clear()
        self._consecutive = 0
        self._emit(kind, reason="breaker", cooldown_s=cooldown)
        self.poll()

    def _close(self) -> None:
        self.state = BreakerState.CLOSED
        self._clear()
        self._current = next(self._generation)
        self._emit(TransitionKind.CLOSED)

    def _disable(self, reason: str) -> None:
        self.disabled_reason = reason
        self.state = BreakerState.OPEN
        self._probe_out = False
        if self._opened_at is None:
            self._opened_at = self._clock.now()
        self._emit(TransitionKind.DISABLED, reason=reason)

    def _clear(self) -> None:
        self._window.clear()
        self._consecutive = self._level = 0
        self._open_since = self._probe_at = None
        self._opened_at = None
        self._probe_out = False
        self._cause = None

    def _wall(self, monotonic: float) -> datetime:
        return self._clock.now() + timedelta(seconds=monotonic - self._clock.monotonic())

    def _emit(
        self, kind: TransitionKind, *, reason: str | None = None, cooldown_s: float | None = None
    ) -> None:
        if self._on_transition is None:
            return
        transition = Transition(
            destination=self.destination, kind=kind, state=self.state, at=self._clock.now(),
            reason=reason, opened_at=self._opened_at, next_probe_at=self.next_probe_at,
            cooldown_s=cooldown_s, event_id=self._cause,
        )  # fmt: skip
        self._on_transition(transition)


class Breakers:
    """The breakers of the destinations one process delivers to, made on first use with
    ``settings_of(destination)``. Every transition is passed to ``on_transition``."""

    def __init__(
        self,
        settings_of: Callable[[str], BreakerSettings | None],
        *,
        clock: Clock | None = None,
        on_transition: OnTransition | None = None,
        metrics: BreakerMetrics | None = None,
    ) -> None:
        self._settings_of = settings_of
        self._clock = clock or SystemClock()
        self._caller = on_transition
        self._metrics = metrics
        self._breakers: dict[str, Breaker] = {}

    def _on_transition(self, transition: Transition) -> None:
        if self._metrics is not None:
            self._metrics.transitions.labels(transition.kind.value).inc()
        if self._caller is not None:
            self._caller(transition)

    def get(self, destination: str) -> Breaker:
        breaker = self._breakers.get(destination)
        if breaker is None:
            breaker = Breaker(
                destination, self._settings_of(destination), clock=self._clock,
                on_transition=self._on_transition,
            )  # fmt: skip
            self._breakers[destination] = breaker
        return breaker

    def poll(self) -> None:
        """``Breaker.poll`` of every breaker (sustained failure needs no attempt to notice)."""
        for breaker in list(self._breakers.values()):
            breaker.poll()

    def forget(self, destination: str) -> None:
        self._breakers.pop(destination, None)
