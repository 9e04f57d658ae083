"""What a lane obeys: a destination's delivery controls, as the lanes see them."""

from __future__ import annotations

from dataclasses import dataclass

from hookbay_common.models import MAX_CONCURRENCY_DEFAULT as DEFAULT_MAX_CONCURRENCY
from hookbay_common.models import MAX_CONCURRENCY_MAX as MAX_CONCURRENCY
from hookbay_common.models import Destination, DestinationState, StateReason
from hookbay_forwarder.gateway.breaker import BreakerSettings
from hookbay_forwarder.gateway.bucket import Rate

__all__ = ["DEFAULT_MAX_CONCURRENCY", "MAX_CONCURRENCY", "DestinationState", "LaneConfig"]

DEFAULT_BREAKER = BreakerSettings()


@dataclass(frozen=True, slots=True)
class LaneConfig:
    """``max_concurrency`` attempts at once (1: one at a time, in arrival order), at most
    ``rate`` started, and only while ``state`` is active; otherwise every task is held.
    ``breaker``: the thresholds of the destination's circuit breaker, which holds the lane's
    tasks while it is open."""

    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    rate: Rate | None = None
    state: DestinationState = DestinationState.ACTIVE
    breaker: BreakerSettings = DEFAULT_BREAKER

    def __post_init__(self) -> None:
        if not 1 <= self.max_concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"max_concurrency must be within 1..{MAX_CONCURRENCY}")

    @property
    def active(self) -> bool:
        return self.state is DestinationState.ACTIVE


def lane_config(destination: Destination | None) -> LaneConfig | None:
    """A destination's controls as its lane obeys them (``None``: an unknown destination).

    ``paused`` by the breaker (``state_reason`` ``breaker``) is active for the lane: the
    breaker itself holds the tasks and lets its probe out, which a paused lane never would."""
    if destination is None:
        return None
    limit = destination.rate_limit
    state = destination.state
    if state is DestinationState.PAUSED and destination.state_reason is StateReason.BREAKER:
        state = DestinationState.ACTIVE
    return LaneConfig(
        max_concurrency=destination.max_concurrency,
        rate=Rate(limit.count, limit.period) if limit is not None else None,
        state=state,
        breaker=BreakerSettings.of(destination.breaker),
    )
