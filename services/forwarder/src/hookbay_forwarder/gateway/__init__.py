"""The deliverer side of routed delivery: per-destination lanes.

``Lanes`` (``lanes``) takes the delivery tasks one consumer reads and runs each destination's in
its own ``Lane`` (``lane``): its concurrency, rate (``bucket``) and state (``config``), holding what it
cannot take in the hold store (``hookbay_common.db.HoldRepository``) and draining it in order.
Time comes from an injected ``Clock`` (``clock``). ``breaker``: a destination's circuit breaker,
which every start of a lane asks first; its transitions hold or drain the lane and tell the
caller to pause, resume or disable the destination. ``transform``: a route's transformation,
run in the sandbox before each attempt (``TransformStep``; imported from its module, as
``deliver`` is). docs/architecture.md, "Delivery lanes".
"""

from hookbay_common.models import RatePeriod
from hookbay_forwarder.gateway.breaker import (
    Action,
    Breaker,
    Breakers,
    BreakerSettings,
    BreakerState,
    Permit,
    Transition,
    TransitionKind,
    classify,
)
from hookbay_forwarder.gateway.bucket import Rate, TokenBucket
from hookbay_forwarder.gateway.clock import Clock, ManualClock, SystemClock
from hookbay_forwarder.gateway.config import (
    DEFAULT_MAX_CONCURRENCY,
    MAX_CONCURRENCY,
    DestinationState,
    LaneConfig,
)
from hookbay_forwarder.gateway.lane import Lane, LaneMode, LaneSnapshot
from hookbay_forwarder.gateway.lanes import ConfigOf, Deliver, Delivered, HoldStore, Lanes

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "MAX_CONCURRENCY",
    "Action",
    "Breaker",
    "BreakerSettings",
    "BreakerState",
    "Breakers",
    "Clock",
    "ConfigOf",
    "Deliver",
    "Delivered",
    "DestinationState",
    "HoldStore",
    "Lane",
    "LaneConfig",
    "LaneMode",
    "LaneSnapshot",
    "Lanes",
    "ManualClock",
    "Permit",
    "Rate",
    "RatePeriod",
    "SystemClock",
    "TokenBucket",
    "Transition",
    "TransitionKind",
    "classify",
]
