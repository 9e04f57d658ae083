"""The router's deduplication step on a real Redis, with the router's in-memory configuration:
a second event with the same key is ``deduplicated`` naming the first and gets no task; the same
event routed again is delivered; a replay is never claimed; no key delivers; keys are per route;
a delayed route claims when the event is routed; a Redis that is away or not configured
delivers, and every claim is counted by outcome. Each test claims under a namespace of its own. (End to end: tests/test_dedupe.py.)"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence

import pytest

from hookbay_common.metrics import new_registry
from hookbay_common.models import (
    AttemptTrigger,
    Delivery,
    DeliveryStatus,
    Destination,
    Event,
    Webhook,
)
from hookbay_common.routing.dedupe_store import Deduplicator
from hookbay_common.topics import DELAY_TIERS, Topics
from hookbay_common.wire import decode_delivery
from hookbay_forwarder.metrics import DedupeMetrics
from hookbay_forwarder.routing.dedupe import RouteDedupe
from hookbay_forwarder.routing.router import Router
from hookbay_forwarder.writes import Message
from tests.support.dedupe import patient_deduplicator
from tests.support.factories import (
    create_destination,
    create_event,
    create_route,
    create_webhook,
    unique_name,
)

REDIS = os.environ.get("HOOKBAY_TEST_REDIS", "redis://127.0.0.1:6379")
CLOSED = "redis://127.0.0.1:1"
STRIPE = {"window_s": 3600, "preset": "stripe"}
TOPICS = Topics("unit")


class Config:
    def __init__(self, webhook: Webhook, *destinations: Destination) -> None:
        self.hook = webhook
        self.destinations = {d.name: d for d in destinations}

    async def webhook(self, username: str, name: str) -> Webhook | None:
        return self.hook

    async def destination(self, username: str, name: str) -> Destination | None:
        return self.destinations.get(name)


class Written:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, messages: Sequence[Message]) -> None:
        self.messages.extend(messages)

    def deliveries(self) -> list[Delivery]:
        return [decode_delivery(m.value) for m in self.messages if m.topic == TOPICS.attempts]

    def tasks(self) -> list[Message]:
        return [m for m in self.messages if m.topic == TOPICS.deliveries]


def stripe_event(stripe_id: str | None, **overrides: object) -> Event:
    body = b"{}" if stripe_id is None else f'{{"id": "{stripe_id}"}}'.encode()
    return create_event(routed=True, body=body, **overrides)


class Claims:
    """A ``RouteDedupe`` for one test, with its counter and the number of stores it built."""

    def __init__(self, url: str | None) -> None:
        self.registry = new_registry()
        self.built = 0

        def build(url: str, namespace: str) -> Deduplicator:
            self.built += 1
            return patient_deduplicator(url, namespace)

        self.dedupe = RouteDedupe(
            url, namespace=unique_name("dd"), metrics=DedupeMetrics(self.registry),
            deduplicator=build,
        )  # fmt: skip

    def counted(self, outcome: str) -> float:
        value = self.registry.get_sample_value(
            "hookbay_forwarder_dedupe_claims_total", {"outcome": outcome}
        )
        return value or 0.0


@pytest.fixture
async def claims() -> AsyncIterator[Claims]:
    made = Claims(REDIS)
    yield made
    await made.dedupe.close()


def dedupe_router(claims: Claims, *routes: dict[str, object]) -> tuple[Router, Written]:
    hook = create_webhook(username="alice", name="orders",
                          routes=tuple(create_route(**r) for r in routes))  # fmt: skip
    config = Config(hook, *(create_destination(name=n, username="alice")
                            for n in ("billing", "analytics")))  # fmt: skip
    written = Written()
    return Router(config, written, TOPICS, dedupe=claims.dedupe), written


class TestRouteDedupe:
    async def test_a_second_event_with_the_key_is_deduplicated_naming_the_first(
        self, claims: Claims
    ) -> None:
        router, written = dedupe_router(
            claims, {"name": "a", "destination": "billing", "dedupe": STRIPE},
            {"name": "b", "destination": "analytics"},
        )  # fmt: skip
        first, second = stripe_event("evt_1"), stripe_event("evt_1")
        delivered = await router.route(first)
        assert [d.status for d in delivered] == [DeliveryStatus.SCHEDULED] * 2
        tasks_before = len(written.tasks())
        dropped, other = await router.route(second)
        assert dropped.status is DeliveryStatus.DEDUPLICATED
        assert dropped.reason == f"duplicate of {first.id}"
        assert other.status is DeliveryStatus.SCHEDULED  # a route without the rule delivers
        assert len(written.tasks()) == tasks_before + 1
        assert dropped in written.deliveries()
        assert (claims.counted("first"), claims.counted("duplicate")) == (1, 1)

    async def test_the_same_event_routed_again_is_not_its_own_duplicate(
        self, claims: Claims
    ) -> None:
        router, written = dedupe_router(
            claims, {"name": "a", "destination": "billing", "dedupe": STRIPE}
        )
        event = stripe_event("evt_crash")
        once = await router.route(event)
        again = await router.route(event)
        assert [d.status for d in again] == [DeliveryStatus.SCHEDULED]
        assert [d.id for d in again] == [d.id for d in once]
        assert len(written.tasks()) == 2
        assert claims.counted("repeat") == 1

    async def test_a_replay_is_never_claimed(self, claims: Claims) -> None:
        router, _ = dedupe_router(claims, {"name": "a", "destination": "billing", "dedupe": STRIPE})
        first, second = stripe_event("evt_r"), stripe_event("evt_r")
        await router.route(first)
        (dropped,) = await router.route(second)
        assert dropped.status is DeliveryStatus.DEDUPLICATED
        (replayed,) = await router.route(
            second, trigger=AttemptTrigger.REPLAY, source_id="chn_replay_1"
        )
        assert replayed.status is DeliveryStatus.SCHEDULED
        assert claims.counted("first") + claims.counted("duplicate") == 2  # the replay: none

    async def test_an_event_without_the_key_is_delivered(self, claims: Claims) -> None:
        router, _ = dedupe_router(claims, {"name": "a", "destination": "billing", "dedupe": STRIPE})
        for _ in range(2):
            (delivery,) = await router.route(stripe_event(None))
            assert delivery.status is DeliveryStatus.SCHEDULED
        assert claims.built == 0  # no key: Redis is not asked

    async def test_keys_are_per_route(self, claims: Claims) -> None:
        router, _ = dedupe_router(
            claims, {"name": "a", "destination": "billing", "dedupe": STRIPE},
            {"name": "b", "destination": "analytics", "dedupe": STRIPE},
        )  # fmt: skip
        deliveries = await router.route(stripe_event("evt_p"))
        assert [d.status for d in deliveries] == [DeliveryStatus.SCHEDULED] * 2
        assert claims.counted("first") == 2

    async def test_a_filtered_event_claims_nothing(self, claims: Claims) -> None:
        router, _ = dedupe_router(claims, {
            "name": "a", "destination": "billing", "dedupe": STRIPE,
            "filter": {"body": {"take": True}},
        })  # fmt: skip
        turned_away = create_event(routed=True, body=b'{"id": "evt_f"}')
        taken = create_event(routed=True, body=b'{"id": "evt_f", "take": true}')
        assert (await router.route(turned_away))[0].status is DeliveryStatus.FILTERED
        assert (await router.route(taken))[0].status is DeliveryStatus.SCHEDULED

    async def test_a_delayed_route_claims_when_routed_and_only_its_first_event_waits(
        self, claims: Claims
    ) -> None:
        router, written = dedupe_router(
            claims, {"name": "a", "destination": "billing", "dedupe": STRIPE, "delay_s": 60}
        )
        first, second = stripe_event("evt_later"), stripe_event("evt_later")
        (waits,) = await router.route(first)
        assert waits.status is DeliveryStatus.SCHEDULED
        assert (waits.reason or "").startswith("delayed by the route until ")
        waiting = [m for m in written.messages if m.topic != TOPICS.attempts]
        (tier,) = [m.topic for m in waiting]  # a delay tier, no task on the lanes' topic
        assert tier in {TOPICS.retry(seconds) for seconds in DELAY_TIERS}
        (dropped,) = await router.route(second)
        assert (dropped.status, dropped.reason) == (
            DeliveryStatus.DEDUPLICATED, f"duplicate of {first.id}",
        )  # fmt: skip
        assert [m for m in written.messages if m.topic != TOPICS.attempts] == waiting
        assert (claims.counted("first"), claims.counted("duplicate")) == (1, 1)

    async def test_routes_without_a_rule_never_build_a_store(self, claims: Claims) -> None:
        router, _ = dedupe_router(claims, {"name": "a", "destination": "billing"})
        await router.route(stripe_event("evt_n"))
        await router.route(stripe_event("evt_n"))
        assert claims.built == 0


class TestRouteDedupeWithoutRedis:
    async def test_redis_away_delivers_and_counts(self) -> None:
        claims = Claims(CLOSED)
        try:
            router, _ = dedupe_router(
                claims, {"name": "a", "destination": "billing", "dedupe": STRIPE}
            )
            for _ in range(2):
                (delivery,) = await router.route(stripe_event("evt_away"))
                assert delivery.status is DeliveryStatus.SCHEDULED
            assert claims.counted("unavailable") == 2
        finally:
            await claims.dedupe.close()

    async def test_no_redis_configured_delivers_and_counts(self) -> None:
        claims = Claims(None)
        router, _ = dedupe_router(claims, {"name": "a", "destination": "billing", "dedupe": STRIPE})
        for _ in range(2):
            (delivery,) = await router.route(stripe_event("evt_none"))
            assert delivery.status is DeliveryStatus.SCHEDULED
        assert (claims.built, claims.counted("unconfigured")) == (0, 2)
