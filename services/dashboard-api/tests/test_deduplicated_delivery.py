"""Routes' deduplication end to end on real services: a rule made through the API reaches the
forwarder; ingest → Kafka → router (claiming in the real Redis) → a real local destination.
The second event with a key is recorded ``deduplicated`` naming the first and never reaches the
destination; no key delivers; the window ends; an event routed again or replayed is delivered;
keys are per route, so another owner's identical key is not a duplicate; a Redis that is away
delivers and counts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio

from hookbay_common.models import DeliveryStatus
from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Owner
from tests.support.receiver import Receiver
from tests.support.routed import RoutedStack, event_ids, make, routed_stack
from tests.support.waiting import until

CLOSED_REDIS = "redis://127.0.0.1:1"


@pytest.fixture(scope="module")
async def stack(
    settings: Settings, dashboard_settings: DashboardSettings, receiver: Receiver
) -> AsyncIterator[RoutedStack]:
    async with routed_stack(settings, dashboard_settings, receiver) as routed:
        yield routed


async def deduped_route(
    stack: RoutedStack, owner: Owner, webhook: str, dedupe: dict[str, Any]
) -> str:
    """``webhook`` with one route, ``main``, to a fresh destination under ``dedupe``; its URL."""
    url = stack.receiver.url()
    await make(owner, "/webhooks", {"name": webhook})
    await make(owner, "/destinations", {"name": f"{webhook}-dest", "url": url})
    await make(owner, f"/webhooks/{webhook}/routes", {
        "name": "main", "destination": f"{webhook}-dest", "dedupe": dedupe,
    })  # fmt: skip
    await stack.routed(owner, webhook)
    return url


def only_delivery(event: dict[str, Any]) -> dict[str, Any]:
    (delivery,) = event["deliveries"]
    return dict(delivery)


def claims(stack: RoutedStack, outcome: str) -> float:
    value = stack.forwarder.metrics.registry.get_sample_value(
        "hookbay_forwarder_dedupe_claims_total", {"outcome": outcome}
    )
    return value or 0.0


class TestPresets:
    async def test_github_a_redelivery_is_deduplicated_naming_the_first(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        url = await deduped_route(stack, owner, "gh", {"window_s": 3600, "preset": "github"})
        delivery = {"x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}
        first = await stack.send(owner, "gh", b'{"action": "opened"}', headers=delivery)
        original = await stack.event(owner, "gh", first, "success", 1)
        again = await stack.send(owner, "gh", b'{"action": "opened", "n": 2}', headers=delivery)
        repeated = await stack.event(owner, "gh", again, "success", 1)
        dropped = only_delivery(repeated)
        assert dropped["status"] == DeliveryStatus.DEDUPLICATED.value
        assert dropped["reason"] == f"duplicate of {original['id']}"
        assert dropped["attempts"] == []
        other = await stack.send(owner, "gh", b"{}", headers={"x-github-delivery": "another"})
        await stack.event(owner, "gh", other, "success", 1)
        received = event_ids(stack.receiver, url)
        assert original["id"] in received
        assert repeated["id"] not in received
        assert len(received) == 2

    async def test_stripe_the_same_body_id_is_deduplicated(self, stack: RoutedStack) -> None:
        owner = await stack.owner()
        url = await deduped_route(stack, owner, "st", {"window_s": 86400, "preset": "stripe"})
        body = json.dumps({"id": "evt_1NG8Du2eZvKYlo2CUI79vXWy", "type": "charge.succeeded"})
        first = await stack.send(owner, "st", body.encode())
        original = await stack.event(owner, "st", first, "success", 1)
        again = await stack.send(owner, "st", body.encode())
        dropped = only_delivery(await stack.event(owner, "st", again, "success", 1))
        assert (dropped["status"], dropped["reason"]) == (
            "deduplicated", f"duplicate of {original['id']}",
        )  # fmt: skip
        assert event_ids(stack.receiver, url) == [original["id"]]

    async def test_events_without_the_key_are_all_delivered(self, stack: RoutedStack) -> None:
        owner = await stack.owner()
        url = await deduped_route(stack, owner, "nokey", {"window_s": 3600, "preset": "stripe"})
        sent = [await stack.send(owner, "nokey", body) for body in (b"{}", b'{"id": null}')]
        for request_id in sent:
            assert (
                only_delivery(await stack.event(owner, "nokey", request_id, "success", 1))["status"]
                == "success"
            )
        assert len(event_ids(stack.receiver, url)) == 2


class TestWindowAndRepeats:
    async def test_after_the_window_the_key_is_delivered_again(self, stack: RoutedStack) -> None:
        owner = await stack.owner()
        url = await deduped_route(stack, owner, "win", {"window_s": 2, "fields": ["body.n"]})
        first = await stack.send(owner, "win", b'{"n": 1}')
        second = await stack.send(owner, "win", b'{"n": 1}')
        original = await stack.event(owner, "win", first, "success", 1)
        assert only_delivery(await stack.event(owner, "win", second, "success", 1))["status"] == (
            "deduplicated"
        )
        route_id = (await owner.client.get("/api/v1/webhooks/win/routes/main")).json()["id"]
        client = redis.asyncio.Redis.from_url(str(stack.forwarder.settings.redis_url))
        pattern = f"{stack.forwarder.settings.kafka_namespace}:dedupe:{route_id}:*"
        try:
            assert [key async for key in client.scan_iter(pattern)] != []

            async def expired() -> bool:
                return [key async for key in client.scan_iter(pattern)] == []

            await until(expired, 30, interval=0.1, what="the window's key expires")
        finally:
            await client.aclose()
        third = await stack.send(owner, "win", b'{"n": 1}')
        later = await stack.event(owner, "win", third, "success", 1)
        assert only_delivery(later)["status"] == "success"
        assert event_ids(stack.receiver, url) == [original["id"], later["id"]]

    async def test_an_event_routed_again_or_replayed_is_delivered(self, stack: RoutedStack) -> None:
        owner = await stack.owner()
        url = await deduped_route(stack, owner, "again", {"window_s": 3600, "fields": ["body.k"]})
        first = await stack.send(owner, "again", b'{"k": "a"}')
        original = await stack.event(owner, "again", first, "success", 1)
        second = await stack.send(owner, "again", b'{"k": "a"}')
        duplicate = await stack.event(owner, "again", second, "success", 1)
        assert only_delivery(duplicate)["status"] == "deduplicated"

        # the router working the first event again (as after a crash before its commit)
        stored = await stack.dashboard.runtime.events.get(original["id"])
        assert stored is not None
        router = stack.forwarder.handlers.router
        assert router is not None
        (rerouted,) = await router.route(stored)
        assert rerouted.status is DeliveryStatus.SCHEDULED
        assert rerouted.id == only_delivery(original)["id"]

        # the owner's replay of the duplicate is delivered
        replayed = await owner.client.post(f"/api/v1/events/{duplicate['id']}/replay")
        assert replayed.status_code == 202, replayed.text
        done = await stack.event(owner, "again", second, "success", 2)
        assert sorted(d["status"] for d in done["deliveries"]) == ["deduplicated", "success"]
        await stack.receiver.wait_for(url, 3)
        assert event_ids(stack.receiver, url).count(duplicate["id"]) == 1


class TestIsolation:
    async def test_another_owners_identical_key_is_not_a_duplicate(
        self, stack: RoutedStack
    ) -> None:
        body = b'{"id": "evt_shared"}'
        delivered = []
        for _ in range(2):
            owner = await stack.owner()
            url = await deduped_route(stack, owner, "iso", {"window_s": 3600, "preset": "stripe"})
            request_id = await stack.send(owner, "iso", body)
            event = await stack.event(owner, "iso", request_id, "success", 1)
            assert only_delivery(event)["status"] == "success"
            delivered.append(event_ids(stack.receiver, url))
        assert [len(ids) for ids in delivered] == [1, 1]


class TestRedisAway:
    async def test_a_forwarder_without_its_redis_delivers_and_counts(
        self, settings: Settings, dashboard_settings: DashboardSettings, receiver: Receiver
    ) -> None:
        away = settings.model_copy(update={"redis_url": CLOSED_REDIS})
        async with routed_stack(away, dashboard_settings, receiver) as stack:
            owner = await stack.owner()
            url = await deduped_route(stack, owner, "away", {"window_s": 60, "preset": "stripe"})
            sent = [await stack.send(owner, "away", b'{"id": "evt_same"}') for _ in range(2)]
            for request_id in sent:
                event = await stack.event(owner, "away", request_id, "success", 1)
                assert only_delivery(event)["status"] == "success"
            assert len(event_ids(stack.receiver, url)) == 2
            assert claims(stack, "unavailable") == 2
