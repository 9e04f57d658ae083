"""Keyed rate limiting: per owner at the receiving endpoint (docs/decisions.md, "Rate limits and plans"), per user and
per address for dashboard logins.

Requests are counted per owner (username), across all their webhooks, with GCRA (the generic cell
rate algorithm): rate ``limit`` per 60 s and burst ``limit``. A fresh owner may send ``limit``
requests at once, then one every ``60 / limit`` s; an owner idle for 60 s is fresh again. Both
implementations make identical decisions:

* a refused hit consumes nothing, so hammering while limited never extends the wait;
* ``retry_after`` is the whole number of seconds (at least 1) until the next hit would be allowed;
* a plan change applies on the owner's next hit. What was used carries over as a number of
  requests: an upgrade frees the difference at once, a downgrade leaves the owner with at most the
  new plan's full allowance used (never a longer wait than one fresh burst of the new plan).

Time is kept in integer microseconds; the state of an owner is its theoretical arrival time (TAT)
and the limit that TAT was computed with.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import redis.asyncio
from redis.exceptions import RedisError

WINDOW_US = 60_000_000
DEFAULT_KEY_PREFIX = "hookbay:rl:"
REDIS_TIMEOUT = 2.0
"""Seconds a hit may wait on Redis before raising (from_url clients)."""
PING_TIMEOUT = 0.5
"""Seconds ``ping`` waits for Redis before answering ``False``: it serves ``/readyz``, whose
probe a kubelet gives up on after a few seconds, and a Redis that drops packets (no refusal)
would otherwise hold it for the socket timeout and the client's retries."""


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after: int
    """Whole seconds >= 1 the caller should wait when not allowed; 0 when allowed."""


ALLOWED = RateDecision(allowed=True, retry_after=0)


class RateLimiter(Protocol):
    async def hit(self, owner: str, limit_per_minute: int) -> RateDecision:
        """Count one request by ``owner`` if the plan allows it now; a refusal counts nothing.

        Raises ``ValueError`` when ``limit_per_minute`` is below 1.
        """
        ...

    async def close(self) -> None:
        """Release what the limiter holds; the limiter is not used afterwards."""
        ...


@dataclass(frozen=True)
class _State:
    tat: int
    limit: int


def _interval(limit: int) -> int:
    """Microseconds one request costs; rounded up so the rate never exceeds ``limit``."""
    return -(-WINDOW_US // limit)


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _check_limit(limit_per_minute: int) -> None:
    if limit_per_minute < 1:
        raise ValueError(f"limit_per_minute must be at least 1, got {limit_per_minute}")


def _micros(seconds: float) -> int:
    return int(seconds * 1_000_000)


def _decide(state: _State | None, now: int, limit: int) -> tuple[RateDecision, _State | None]:
    """One GCRA step: the decision and the state to store (``None``: leave the state as it is).

    Mirrored line by line by ``_GCRA_LUA``; change both together.
    """
    interval = _interval(limit)
    capacity = interval * limit
    tat, rescaled = now, False
    if state is not None and state.tat > now:
        tat = state.tat
        if state.limit != limit:
            # The debt carries over as a number of requests, at most a full new allowance.
            debt = _ceil_div((tat - now) * interval, _interval(state.limit))
            tat, rescaled = now + min(debt, capacity), True
    new_tat = tat + interval
    wait = new_tat - capacity - now
    if wait > 0:
        refused = RateDecision(allowed=False, retry_after=_ceil_div(wait, 1_000_000))
        return refused, _State(tat, limit) if rescaled else None
    return ALLOWED, _State(new_tat, limit)


class InProcessRateLimiter:
    """The limiter of a single replica: state lives in this process only.

    ``hit`` never awaits between reading and writing an owner's state, so concurrent hits on one
    event loop are counted exactly. Owners whose state has run out (idle long enough to be fresh
    again) are dropped as later hits arrive, so memory holds only the owners active in the last
    minute. ``clock`` returns seconds and must never go backwards; tests inject a fake one.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._owners: OrderedDict[str, _State] = OrderedDict()  # least recently written first

    @property
    def tracked_owners(self) -> int:
        """How many owners' states are kept right now (the memory the limiter holds)."""
        return len(self._owners)

    async def hit(self, owner: str, limit_per_minute: int) -> RateDecision:
        _check_limit(limit_per_minute)
        now = _micros(self._clock())
        self._prune(now)
        decision, state = _decide(self._owners.get(owner), now, limit_per_minute)
        if state is not None:
            self._owners[owner] = state
            self._owners.move_to_end(owner)
        return decision

    def _prune(self, now: int) -> None:
        # Every TAT is at most ~60 s after its write, so the oldest writes expire first.
        while self._owners:
            oldest = next(iter(self._owners))
            if self._owners[oldest].tat > now:
                return
            self._owners.popitem(last=False)

    async def close(self) -> None:
        self._owners.clear()


# KEYS[1]: the owner's hash {tat, limit}. ARGV[1]: limit per minute. ARGV[2]: "now" in µs, or ""
# to use the Redis server's clock (always, outside tests). Returns {allowed (0/1), retry_after}.
# Integers are formatted with %d because Redis may render Lua numbers in exponent notation.
_GCRA_LUA = """
local limit = tonumber(ARGV[1])
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
end
local interval = math.ceil(60000000 / limit)
local capacity = interval * limit
local state = redis.call('HMGET', KEYS[1], 'tat', 'limit')
local tat, rescaled = now, false
local stored = tonumber(state[1])
if stored and stored > now then
  tat = stored
  local old = tonumber(state[2])
  if old ~= limit then
    local debt = math.ceil((tat - now) * interval / math.ceil(60000000 / old))
    tat, rescaled = now + math.min(debt, capacity), true
  end
end
local new_tat = tat + interval
local wait = new_tat - capacity - now
local function store(value)
  redis.call('HSET', KEYS[1], 'tat', string.format('%d', value), 'limit', string.format('%d', limit))
  redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil((value - now) / 1000)))
end
if wait > 0 then
  if rescaled then
    store(tat)
  end
  return {0, math.ceil(wait / 1000000)}
end
store(new_tat)
return {1, 0}
"""


class RedisRateLimiter:
    """The limiter shared by every ingest replica: one Redis hash per owner, ``key_prefix + owner``.

    Each hit is one atomic Lua script that reads and writes the owner's TAT with the Redis server's
    clock, so replicas never race and their own clocks do not matter. A key expires when its owner
    would be fresh again (at most ~60 s after the last hit), so idle owners cost nothing.

    The limiter owns ``client`` and closes it in ``close``. ``clock`` (seconds) replaces the server's
    clock and exists for tests only: leave it ``None`` in production. ``hit`` raises
    ``redis.exceptions.RedisError`` when Redis cannot be reached; ``ping`` never raises.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._client = client
        self._key_prefix = key_prefix
        self._clock = clock
        self._script = client.register_script(_GCRA_LUA)

    @classmethod
    def from_url(cls, url: str, *, key_prefix: str = DEFAULT_KEY_PREFIX) -> RedisRateLimiter:
        """A limiter on a new client for ``url``; connects lazily, on the first command."""
        client = redis.asyncio.Redis.from_url(
            url, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT
        )
        return cls(client, key_prefix=key_prefix)

    async def hit(self, owner: str, limit_per_minute: int) -> RateDecision:
        _check_limit(limit_per_minute)
        now = "" if self._clock is None else str(_micros(self._clock()))
        allowed, retry_after = await self._script(
            keys=[self._key_prefix + owner], args=[limit_per_minute, now]
        )
        return ALLOWED if allowed else RateDecision(allowed=False, retry_after=int(retry_after))

    async def ping(self) -> bool:
        """Whether Redis answers within ``PING_TIMEOUT`` (for /readyz)."""
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                return bool(await self._client.ping())
        except (RedisError, OSError, TimeoutError):
            return False

    async def close(self) -> None:
        await self._client.aclose()


def create_rate_limiter(
    redis_url: str | None, *, key_prefix: str = DEFAULT_KEY_PREFIX
) -> RateLimiter:
    """The shared Redis limiter when ``redis_url`` is set (non-empty), else the in-process one.
    ``key_prefix`` keeps separate limits (ingest's per owner, the dashboard's per login) apart."""
    if redis_url:
        return RedisRateLimiter.from_url(redis_url, key_prefix=key_prefix)
    return InProcessRateLimiter()
