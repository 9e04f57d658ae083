"""Claims of deduplication keys on a real Redis: the first claim wins, a later one by another
event is a duplicate naming it, the same event again is not its own duplicate, the window is
set on the key and ends it, routes and installations never share keys, and an unreachable
Redis answers "unavailable" within a bounded time. Every test uses a namespace of its own."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis.asyncio

from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.routing import dedupe_store
from hookbay_common.routing.dedupe import DedupePreset, DedupeRule, dedupe_key
from hookbay_common.routing.dedupe_store import (
    CLAIM_TIMEOUT,
    FIRST,
    Claim,
    ClaimOutcome,
    Deduplicator,
)
from hookbay_common.routing.subject import Subject
from tests.support.dedupe import patient_deduplicator
from tests.support.proxy import serve_proxy
from tests.support.waiting import until

REDIS = os.environ.get("HOOKBAY_TEST_REDIS", "redis://127.0.0.1:6379")
KEY = "a" * 64  # a key as dedupe_key makes them: 64 hex digits


def event_id() -> str:
    return new_id(IdPrefix.EVENT)


def route_id() -> str:
    return new_id(IdPrefix.ROUTE)


def duplicate_of(original: str) -> Claim:
    return Claim(ClaimOutcome.DUPLICATE, original)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class RecordedLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append(("warning", event, fields))

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(("info", event, fields))

    @property
    def events(self) -> list[str]:
        return [event for _, event, _ in self.lines]


@pytest.fixture
def namespace() -> str:
    return f"test.dedupe.{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def client() -> AsyncIterator[redis.asyncio.Redis]:
    """A client of the test's own, to look at the keys a deduplicator wrote."""
    inspector = redis.asyncio.Redis.from_url(REDIS)
    yield inspector
    await inspector.aclose()


@pytest.fixture
async def opened() -> AsyncIterator[list[Deduplicator]]:
    made: list[Deduplicator] = []
    yield made
    for deduplicator in made:
        await deduplicator.close()


@pytest.fixture
def create_deduplicator(opened: list[Deduplicator], namespace: str) -> Callable[..., Deduplicator]:
    def create(url: str = REDIS, **options: Any) -> Deduplicator:
        options.setdefault("namespace", namespace)
        if options.keys() == {"namespace"}:
            made = patient_deduplicator(url, options["namespace"])
        else:
            made = Deduplicator(redis.asyncio.Redis.from_url(url), **options)
        opened.append(made)
        return made

    return create


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> RecordedLog:
    log = RecordedLog()
    monkeypatch.setattr(dedupe_store, "log", log)
    return log


class TestClaims:
    async def test_the_first_claim_wins_and_holds_the_event_id(
        self, create_deduplicator: Callable[..., Deduplicator], client: redis.asyncio.Redis,
        namespace: str,
    ) -> None:  # fmt: skip
        dedup, route, first = create_deduplicator(), route_id(), event_id()
        assert await dedup.claim(route, KEY, first, 600) == Claim(ClaimOutcome.FIRST)
        stored = f"{namespace}:dedupe:{route}:{KEY}"
        assert dedup.redis_key(route, KEY) == stored
        assert await client.get(stored) == first.encode()

    async def test_the_window_is_the_key_s_time_to_live(
        self, create_deduplicator: Callable[..., Deduplicator], client: redis.asyncio.Redis
    ) -> None:
        dedup, route = create_deduplicator(), route_id()
        await dedup.claim(route, KEY, event_id(), 604_800)
        left = await client.pttl(dedup.redis_key(route, KEY))
        assert 604_800_000 - 5_000 < left <= 604_800_000  # just set: a few ms gone at most

    async def test_a_later_claim_by_another_event_is_a_duplicate_naming_the_first(
        self, create_deduplicator: Callable[..., Deduplicator]
    ) -> None:
        dedup, route, first = create_deduplicator(), route_id(), event_id()
        await dedup.claim(route, KEY, first, 600)
        for _ in range(3):
            claim = await dedup.claim(route, KEY, event_id(), 600)
            assert claim == duplicate_of(first)
            assert claim.is_duplicate

    async def test_a_duplicate_does_not_extend_the_window(
        self, create_deduplicator: Callable[..., Deduplicator], client: redis.asyncio.Redis
    ) -> None:
        dedup, route, first = create_deduplicator(), route_id(), event_id()
        await dedup.claim(route, KEY, first, 600)
        stored = dedup.redis_key(route, KEY)
        await client.pexpire(stored, 100_000)  # as if 500 s of the window had gone
        assert await dedup.claim(route, KEY, event_id(), 600) == duplicate_of(first)
        assert 0 < await client.pttl(stored) <= 100_000
        assert await client.get(stored) == first.encode()

    async def test_the_same_event_again_is_not_its_own_duplicate(
        self, create_deduplicator: Callable[..., Deduplicator], client: redis.asyncio.Redis
    ) -> None:
        """A router that crashed after claiming routes the event again: it is delivered."""
        dedup, route, first = create_deduplicator(), route_id(), event_id()
        await dedup.claim(route, KEY, first, 600)
        await client.pexpire(dedup.redis_key(route, KEY), 100_000)
        again = await dedup.claim(route, KEY, first, 600)
        assert again == Claim(ClaimOutcome.REPEAT)
        assert not again.is_duplicate
        assert 0 < await client.pttl(dedup.redis_key(route, KEY)) <= 100_000
        assert await dedup.claim(route, KEY, event_id(), 600) == duplicate_of(first)

    async def test_after_the_window_the_next_event_wins(
        self, create_deduplicator: Callable[..., Deduplicator], client: redis.asyncio.Redis
    ) -> None:
        dedup, route, first = create_deduplicator(), route_id(), event_id()
        await dedup.claim(route, KEY, first, 600)
        await client.delete(dedup.redis_key(route, KEY))  # the window ran out
        later = event_id()
        assert await dedup.claim(route, KEY, later, 600) == Claim(ClaimOutcome.FIRST)
        assert await dedup.claim(route, KEY, first, 600) == duplicate_of(later)

    async def test_a_one_second_window_ends_on_its_own(
        self, create_deduplicator: Callable[..., Deduplicator], client: redis.asyncio.Redis
    ) -> None:
        dedup, route, first = create_deduplicator(), route_id(), event_id()
        await dedup.claim(route, KEY, first, 1)
        assert await dedup.claim(route, KEY, event_id(), 1) == duplicate_of(first)

        async def expired() -> bool:
            return not await client.exists(dedup.redis_key(route, KEY))

        await until(expired, timeout=10, what="the 1 s window to end")
        assert await dedup.claim(route, KEY, event_id(), 1) == Claim(ClaimOutcome.FIRST)

    async def test_two_routes_keep_their_own_keys(
        self, create_deduplicator: Callable[..., Deduplicator]
    ) -> None:
        dedup, orders, audit = create_deduplicator(), route_id(), route_id()
        first, second = event_id(), event_id()
        assert (await dedup.claim(orders, KEY, first, 600)).outcome is ClaimOutcome.FIRST
        assert (await dedup.claim(audit, KEY, second, 600)).outcome is ClaimOutcome.FIRST
        assert await dedup.claim(orders, KEY, second, 600) == duplicate_of(first)
        assert await dedup.claim(audit, KEY, first, 600) == duplicate_of(second)

    async def test_two_keys_on_one_route_are_independent(
        self, create_deduplicator: Callable[..., Deduplicator]
    ) -> None:
        dedup, route = create_deduplicator(), route_id()
        assert (await dedup.claim(route, "b" * 64, event_id(), 600)).outcome is ClaimOutcome.FIRST
        assert (await dedup.claim(route, "c" * 64, event_id(), 600)).outcome is ClaimOutcome.FIRST

    async def test_two_installations_on_one_redis_never_meet(
        self, create_deduplicator: Callable[..., Deduplicator], namespace: str
    ) -> None:
        ours, theirs = create_deduplicator(), create_deduplicator(namespace=f"{namespace}.other")
        route = route_id()  # the same id in both: only the namespace sets them apart
        assert (await ours.claim(route, KEY, event_id(), 600)).outcome is ClaimOutcome.FIRST
        assert (await theirs.claim(route, KEY, event_id(), 600)).outcome is ClaimOutcome.FIRST

    async def test_concurrent_claims_from_two_routers_have_one_winner(
        self, create_deduplicator: Callable[..., Deduplicator]
    ) -> None:
        routers, route = [create_deduplicator(), create_deduplicator()], route_id()
        events = [event_id() for _ in range(40)]
        claims = await asyncio.gather(
            *(routers[i % 2].claim(route, KEY, e, 600) for i, e in enumerate(events))
        )
        winners = [e for e, c in zip(events, claims, strict=True) if c == FIRST]
        assert len(winners) == 1
        losers = [c for c in claims if c != FIRST]
        assert losers == [duplicate_of(winners[0])] * (len(events) - 1)

    async def test_keys_from_a_rule_end_to_end(
        self, create_deduplicator: Callable[..., Deduplicator]
    ) -> None:
        rule = DedupeRule(window_s=60, preset=DedupePreset.GITHUB)
        dedup, route = create_deduplicator(), route_id()

        def delivery(guid: str) -> Subject:
            return Subject.from_request(b"{}", "application/json", {"X-GitHub-Delivery": guid}, {})

        first, retry, other = (dedupe_key(rule, delivery(g)) for g in ("g1", "g1", "g2"))
        assert first is not None
        assert retry is not None
        assert other is not None
        original = event_id()
        assert (
            await dedup.claim(route, first, original, rule.window_s)
        ).outcome is ClaimOutcome.FIRST
        assert await dedup.claim(route, retry, event_id(), rule.window_s) == duplicate_of(original)
        assert (
            await dedup.claim(route, other, event_id(), rule.window_s)
        ).outcome is ClaimOutcome.FIRST

    async def test_a_window_below_one_second_is_a_programming_error(
        self, create_deduplicator: Callable[..., Deduplicator]
    ) -> None:
        with pytest.raises(ValueError, match="window_s must be at least 1"):
            await create_deduplicator().claim(route_id(), KEY, event_id(), 0)

    async def test_a_namespace_that_could_collide_is_refused(
        self, client: redis.asyncio.Redis
    ) -> None:
        for namespace in ("", "a:b", "a b", "a..b"):
            with pytest.raises(ValueError, match="namespace"):
                Deduplicator(client, namespace=namespace)


class TestRedisAway:
    async def test_a_closed_port_answers_unavailable_at_once(
        self, create_deduplicator: Callable[..., Deduplicator], recorded: RecordedLog
    ) -> None:
        dedup = create_deduplicator("redis://127.0.0.1:1")
        began = time.monotonic()
        claim = await dedup.claim(route_id(), KEY, event_id(), 600)
        assert claim == Claim(ClaimOutcome.UNAVAILABLE)
        assert not claim.is_duplicate  # delivered
        assert time.monotonic() - began < CLAIM_TIMEOUT + 1.0  # a bound, not a measurement
        assert recorded.events == ["dedupe_unavailable"]

    async def test_a_redis_that_never_answers_is_given_up_on_within_the_timeout(
        self, create_deduplicator: Callable[..., Deduplicator], recorded: RecordedLog
    ) -> None:
        """Connections accepted, nothing answered (a dead network path): ``claim`` gives up on
        its own bound. Then, until the recheck time, claims answer without asking Redis; after
        it, the first claim asks again and, Redis back, claims work."""
        port = urlsplit(REDIS).port or 6379
        clock = FakeClock()
        async with serve_proxy(port) as proxy:
            proxy.black_hole()
            dedup = create_deduplicator(
                f"redis://127.0.0.1:{proxy.port}", timeout=0.3, recheck_after=5.0, clock=clock
            )
            route, first = route_id(), event_id()
            async with asyncio.timeout(10):  # a deadline for the test, not a measurement
                assert (
                    await dedup.claim(route, KEY, first, 600)
                ).outcome is ClaimOutcome.UNAVAILABLE
            assert proxy.connections >= 1
            asked = proxy.connections

            began = time.monotonic()
            for _ in range(50):
                claim = await dedup.claim(route, KEY, event_id(), 600)
                assert claim.outcome is ClaimOutcome.UNAVAILABLE
            assert time.monotonic() - began < 0.3  # none of the 50 waited on Redis
            assert proxy.connections == asked
            assert recorded.events == ["dedupe_unavailable"]  # once per outage, not per event

            proxy.restore()
            proxy.cut()  # the stuck connection goes, as a reset path would end it
            clock.now += 5.0
            async with asyncio.timeout(10):
                assert await dedup.claim(route, KEY, first, 600) == Claim(ClaimOutcome.FIRST)
            assert recorded.events == ["dedupe_unavailable", "dedupe_available"]

    async def test_an_error_answer_is_unavailable(
        self, create_deduplicator: Callable[..., Deduplicator], client: redis.asyncio.Redis,
        recorded: RecordedLog,
    ) -> None:  # fmt: skip
        """A key of another type under ours (an operator's mistake): delivered, not raised."""
        dedup, route = create_deduplicator(), route_id()
        await client.lpush(dedup.redis_key(route, KEY), "x")
        await client.expire(dedup.redis_key(route, KEY), 60)
        claim = await dedup.claim(route, KEY, event_id(), 600)
        assert claim.outcome is ClaimOutcome.UNAVAILABLE
        assert recorded.events == ["dedupe_unavailable"]
