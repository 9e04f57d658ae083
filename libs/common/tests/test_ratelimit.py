"""Rate limiting: both implementations against the same scenarios, Redis ones on a real server.

Time-dependent scenarios run on an injected fake clock for both limiters (for Redis it is passed
to the script in place of the server's ``TIME``), so nothing sleeps; the scenarios that use real
time (server clock, ``time.monotonic``) either finish long before any capacity returns or wait on a
condition with a deadline. Every test uses its own Redis key prefix, so xdist workers never meet.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio

from hookbay_common.ratelimit import (
    InProcessRateLimiter,
    RateDecision,
    RateLimiter,
    RedisRateLimiter,
    create_rate_limiter,
)

REDIS = os.environ.get("HOOKBAY_TEST_REDIS", "redis://127.0.0.1:6379")
ALLOWED = RateDecision(allowed=True, retry_after=0)

Clock = Callable[[], float]
LimiterFactory = Callable[[Clock | None], RateLimiter]


def refused(retry_after: int) -> RateDecision:
    return RateDecision(allowed=False, retry_after=retry_after)


class FakeClock:
    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def hits(limiter: RateLimiter, owner: str, limit: int, count: int) -> list[RateDecision]:
    return [await limiter.hit(owner, limit) for _ in range(count)]


@pytest.fixture
def prefix() -> str:
    return f"hookbay:test:rl:{uuid.uuid4().hex}:"


@pytest.fixture
async def opened() -> AsyncIterator[list[RateLimiter]]:
    """Limiters a test created; closed (with their Redis clients) when it ends."""
    limiters: list[RateLimiter] = []
    yield limiters
    for limiter in limiters:
        await limiter.close()


@pytest.fixture
def create_redis_limiter(prefix: str, opened: list[RateLimiter]) -> Callable[..., RedisRateLimiter]:
    """A limiter on its own client (a replica of its own), all sharing the test's key prefix."""

    def create(clock: Clock | None = None) -> RedisRateLimiter:
        limiter = RedisRateLimiter(
            redis.asyncio.Redis.from_url(REDIS), key_prefix=prefix, clock=clock
        )
        opened.append(limiter)
        return limiter

    return create


@pytest.fixture(params=["in_process", "redis"])
def create_limiter(
    request: pytest.FixtureRequest,
    create_redis_limiter: Callable[..., RedisRateLimiter],
    opened: list[RateLimiter],
) -> LimiterFactory:
    """Either implementation; ``None`` for the clock means the real one."""

    def create(clock: Clock | None) -> RateLimiter:
        if request.param == "redis":
            return create_redis_limiter(clock)
        limiter = InProcessRateLimiter() if clock is None else InProcessRateLimiter(clock=clock)
        opened.append(limiter)
        return limiter

    return create


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def limiter(create_limiter: LimiterFactory, clock: FakeClock) -> RateLimiter:
    return create_limiter(clock)


class TestBurst:
    @pytest.mark.parametrize(("limit", "retry_after"), [(1, 60), (7, 9), (10, 6), (300, 1)])
    async def test_limit_at_once_then_refused(
        self, limiter: RateLimiter, limit: int, retry_after: int
    ) -> None:
        assert await hits(limiter, "alice", limit, limit) == [ALLOWED] * limit
        assert await limiter.hit("alice", limit) == refused(retry_after)

    async def test_one_more_per_interval(self, limiter: RateLimiter, clock: FakeClock) -> None:
        await hits(limiter, "alice", 10, 10)
        clock.advance(5.999)
        assert await limiter.hit("alice", 10) == refused(1)
        clock.advance(0.001)
        assert await hits(limiter, "alice", 10, 2) == [ALLOWED, refused(6)]

    async def test_retry_after_rounds_up(self, limiter: RateLimiter, clock: FakeClock) -> None:
        await hits(limiter, "alice", 10, 10)
        clock.advance(2.5)
        assert await limiter.hit("alice", 10) == refused(4)
        clock.advance(3.4)
        assert await limiter.hit("alice", 10) == refused(1)

    async def test_idle_minute_restores_the_burst(
        self, limiter: RateLimiter, clock: FakeClock
    ) -> None:
        await hits(limiter, "alice", 10, 10)
        clock.advance(60)
        assert await hits(limiter, "alice", 10, 11) == [ALLOWED] * 10 + [refused(6)]

    async def test_concurrent_hits_allow_exactly_the_limit(self, limiter: RateLimiter) -> None:
        decisions = await asyncio.gather(*(limiter.hit("alice", 30) for _ in range(100)))
        assert sum(d.allowed for d in decisions) == 30

    async def test_limit_below_one_is_an_error(self, limiter: RateLimiter) -> None:
        for limit in (0, -1):
            with pytest.raises(ValueError, match="at least 1"):
                await limiter.hit("alice", limit)


class TestRefusals:
    async def test_refused_hits_consume_nothing(
        self, limiter: RateLimiter, clock: FakeClock
    ) -> None:
        await hits(limiter, "alice", 10, 10)
        for _ in range(50):
            clock.advance(0.1)
            assert not (await limiter.hit("alice", 10)).allowed
        clock.advance(1.0)  # 6 s after the burst: exactly one interval has passed
        assert await hits(limiter, "alice", 10, 2) == [ALLOWED, refused(6)]
        clock.advance(60)
        assert await hits(limiter, "alice", 10, 11) == [ALLOWED] * 10 + [refused(6)]

    async def test_owners_are_independent(self, limiter: RateLimiter) -> None:
        await hits(limiter, "alice", 10, 10)
        assert await hits(limiter, "bob", 10, 11) == [ALLOWED] * 10 + [refused(6)]
        assert await limiter.hit("alice", 10) == refused(6)


class TestPlanChange:
    async def test_upgrade_frees_the_difference_at_once(self, limiter: RateLimiter) -> None:
        await hits(limiter, "alice", 10, 10)
        assert await limiter.hit("alice", 10) == refused(6)
        assert await hits(limiter, "alice", 300, 291) == [ALLOWED] * 290 + [refused(1)]

    async def test_downgrade_applies_at_once(self, limiter: RateLimiter, clock: FakeClock) -> None:
        await hits(limiter, "alice", 300, 100)
        assert await limiter.hit("alice", 10) == refused(6)
        clock.advance(6)
        assert await hits(limiter, "alice", 10, 2) == [ALLOWED, refused(6)]
        clock.advance(60)
        assert await hits(limiter, "alice", 10, 11) == [ALLOWED] * 10 + [refused(6)]

    async def test_downgrade_keeps_unused_allowance(self, limiter: RateLimiter) -> None:
        await hits(limiter, "alice", 300, 4)
        assert await hits(limiter, "alice", 10, 7) == [ALLOWED] * 6 + [refused(6)]


class TestRealClock:
    async def test_capacity_returns_with_time(self, create_limiter: LimiterFactory) -> None:
        limiter = create_limiter(None)
        for _ in range(2000):
            decision = await limiter.hit("alice", 600)  # one request per 100 ms
            if not decision.allowed:
                break
        assert decision == refused(1)
        async with asyncio.timeout(2):
            while not (await limiter.hit("alice", 600)).allowed:
                await asyncio.sleep(0.01)


class TestRedisRateLimiter:
    async def test_replicas_share_one_limit(
        self, create_redis_limiter: Callable[..., RedisRateLimiter]
    ) -> None:
        first, second = create_redis_limiter(), create_redis_limiter()
        decisions = [await (first, second)[i % 2].hit("alice", 10) for i in range(10)]
        assert decisions == [ALLOWED] * 10
        assert await first.hit("alice", 10) == refused(6)
        assert await second.hit("alice", 10) == refused(6)

    async def test_concurrent_replicas_allow_exactly_the_limit(
        self, create_redis_limiter: Callable[..., RedisRateLimiter], clock: FakeClock
    ) -> None:
        # A frozen clock: however slow the machine, no capacity returns during the gather.
        replicas = (create_redis_limiter(clock), create_redis_limiter(clock))
        decisions = await asyncio.gather(*(replicas[i % 2].hit("alice", 30) for i in range(100)))
        assert sum(d.allowed for d in decisions) == 30

    async def test_key_expires_when_the_owner_is_fresh_again(
        self, create_redis_limiter: Callable[..., RedisRateLimiter], prefix: str
    ) -> None:
        limiter = create_redis_limiter()
        async with redis.asyncio.Redis.from_url(REDIS) as client:
            await limiter.hit("alice", 10)
            assert 0 < await client.pttl(prefix + "alice") <= 6_000
            await hits(limiter, "alice", 10, 9)
            assert 50_000 < await client.pttl(prefix + "alice") <= 60_000

    async def test_refused_hit_writes_nothing(
        self, create_redis_limiter: Callable[..., RedisRateLimiter], prefix: str
    ) -> None:
        limiter = create_redis_limiter()
        async with redis.asyncio.Redis.from_url(REDIS) as client:
            await hits(limiter, "alice", 10, 10)
            before = await client.hgetall(prefix + "alice")
            assert not (await limiter.hit("alice", 10)).allowed
            assert await client.hgetall(prefix + "alice") == before

    async def test_from_url_and_ping(self, prefix: str) -> None:
        limiter = RedisRateLimiter.from_url(REDIS, key_prefix=prefix)
        try:
            assert await limiter.ping() is True
            assert await limiter.hit("alice", 10) == ALLOWED
        finally:
            await limiter.close()

    async def test_ping_is_false_when_redis_is_unreachable(self) -> None:
        limiter = RedisRateLimiter.from_url("redis://127.0.0.1:1")
        try:
            assert await limiter.ping() is False
        finally:
            await limiter.close()

    async def test_ping_is_false_when_redis_never_answers(self) -> None:
        """A Redis that takes the connection and then says nothing (packets dropped, a hung
        server): ``ping`` answers ``False`` on its own bound, not the socket's (here none)."""
        held: list[asyncio.StreamWriter] = []

        async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.append(writer)  # read nothing, answer nothing

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        limiter = RedisRateLimiter(redis.asyncio.Redis(host="127.0.0.1", port=port))
        try:
            async with asyncio.timeout(30):  # a deadline for the test, not a measurement
                assert await limiter.ping() is False
            assert held  # it did connect: the answer came from the bound, not a refusal
        finally:
            await limiter.close()
            for writer in held:
                writer.close()
            server.close()


class TestInProcessRateLimiter:
    async def test_idle_owners_are_dropped(self, clock: FakeClock) -> None:
        limiter = InProcessRateLimiter(clock=clock)
        for i in range(1000):
            await limiter.hit(f"owner-{i}", 10)
        assert limiter.tracked_owners == 1000
        clock.advance(60)
        await limiter.hit("latecomer", 10)
        assert limiter.tracked_owners == 1

    async def test_owners_still_limited_are_kept(self, clock: FakeClock) -> None:
        limiter = InProcessRateLimiter(clock=clock)
        await hits(limiter, "alice", 10, 10)  # fresh again at t+60
        clock.advance(30)
        await hits(limiter, "bob", 10, 10)  # fresh again at t+90
        clock.advance(31)
        await limiter.hit("carol", 10)
        assert limiter.tracked_owners == 2
        assert await hits(limiter, "bob", 10, 6) == [ALLOWED] * 5 + [refused(5)]


class TestCreateRateLimiter:
    async def test_redis_when_a_url_is_given(self) -> None:
        limiter = create_rate_limiter(REDIS)
        try:
            assert isinstance(limiter, RedisRateLimiter)
            assert await limiter.ping() is True
        finally:
            await limiter.close()

    @pytest.mark.parametrize("url", [None, ""])
    async def test_in_process_without_a_url(self, url: str | None) -> None:
        limiter = create_rate_limiter(url)
        assert isinstance(limiter, InProcessRateLimiter)
        await limiter.close()
