"""The configuration view on the real Kafka and FerretDB: read-through for new names, the change
log for every other change, the bound on read-throughs, reconciliation of lost publications."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from hookbay_common.configlog import ConfigChange, ConfigPublisher, webhook_key
from hookbay_common.db import Database, UserRepository, WebhookRepository
from hookbay_common.kafka import create_producer
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_ingest.app import Ingest, create_app
from tests.support.factories import (
    TEST_SECRET_KEY,
    create_destination,
    create_route,
    create_user,
    create_webhook,
)
from tests.support.ingest import Stack, ingest_settings
from tests.support.waiting import until


def sample(registry: CollectorRegistry, metric: str, **labels: str) -> float:
    return registry.get_sample_value(metric, labels or None) or 0.0


@pytest.fixture(scope="module")
async def publisher(settings: Settings) -> AsyncIterator[ConfigPublisher]:
    """What the dashboard and the CLI publish with, on the real broker."""
    producer = create_producer(settings.kafka_bootstrap)
    await producer.start()

    async def send(topic: str, key: bytes, value: bytes) -> None:
        await producer.send_and_wait(topic, value, key=key)

    yield ConfigPublisher(send, settings.topics.config, SecretBox(TEST_SECRET_KEY))
    await producer.stop()


@contextlib.asynccontextmanager
async def own_ingest(
    settings: Settings, **overrides: Any
) -> AsyncIterator[tuple[Ingest, httpx.AsyncClient]]:
    """An ingest app of the test's own (settings of its own), following the change log."""
    app = create_app(ingest_settings(settings, **overrides))
    ingest: Ingest = app.state.ingest
    async with app.router.lifespan_context(app):
        async with asyncio.timeout(30):
            await ingest.view.following.wait()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
            yield ingest, client


class TestReadThrough:
    async def test_a_webhook_created_a_moment_ago_is_answered_at_once(self, stack: Stack) -> None:
        """Written to MongoDB only (no publication at all): the first request already finds it."""
        for _ in range(20):
            user, hook = await stack.owner()
            assert (await stack.post(user, hook)).status_code == 200

    async def test_concurrent_misses_for_one_key_share_one_query(self, stack: Stack) -> None:
        user, hook = await stack.owner()
        registry = stack.ingest.metrics.registry
        metric = "hookbay_ingest_config_read_throughs_total"
        before = sample(registry, metric, result="found")
        found = await asyncio.gather(
            *(stack.ingest.view.webhook(user.username, hook.name) for _ in range(50))
        )
        assert all(w is not None and w.id == hook.id for w in found)
        assert sample(registry, metric, result="found") == before + 1

    async def test_known_names_never_touch_the_database(self, stack: Stack) -> None:
        user, hook = await stack.owner()
        assert (await stack.post(user, hook)).status_code == 200  # now held by the view

        class Unreachable:
            def __getattr__(self, name: str) -> object:
                raise AssertionError(f"database used on the request path: {name}")

        view = stack.ingest.view
        saved = (view._users_repo, view._webhooks_repo)
        view._users_repo, view._webhooks_repo = Unreachable(), Unreachable()  # type: ignore[assignment]
        try:
            for _ in range(50):
                assert (await stack.post(user, hook)).status_code == 200
        finally:
            view._users_repo, view._webhooks_repo = saved

    async def test_an_unreachable_database_on_a_miss_is_a_503(self, stack: Stack) -> None:
        from pymongo.errors import ServerSelectionTimeoutError

        class Down:
            async def get(self, *args: object) -> None:
                raise ServerSelectionTimeoutError("down")

        view = stack.ingest.view
        saved = view._users_repo
        view._users_repo = Down()  # type: ignore[assignment]
        try:
            response = await stack.client.post(f"/w/nobody-{uuid.uuid4().hex[:8]}/x", content=b"")
        finally:
            view._users_repo = saved
        assert response.status_code == 503
        assert response.headers["retry-after"] == "5"
        assert response.json()["error"] == "Service unavailable"


class TestFloodOfUnknownNames:
    async def test_read_throughs_are_bounded_per_replica(
        self, settings: Settings, db: Database
    ) -> None:
        """300 requests to random unknown users cost at most burst + rate x elapsed queries;
        the rest are answered 403 without one."""
        async with own_ingest(settings, view_read_through_rate=5, view_read_through_burst=5) as (
            ingest,
            client,
        ):
            registry = ingest.metrics.registry
            metric = "hookbay_ingest_config_read_throughs_total"
            started = time.monotonic()
            answers = await asyncio.gather(
                *(
                    client.post(f"/w/ghost-{uuid.uuid4().hex[:12]}/hook", content=b"")
                    for _ in range(300)
                )
            )
            elapsed = time.monotonic() - started
            assert {a.status_code for a in answers} == {403}
            queried = sample(registry, metric, result="absent") + sample(
                registry, metric, result="found"
            )
            assert queried <= 5 + 5 * elapsed + 1
            assert sample(registry, metric, result="refused") >= 300 - queried
            assert sample(registry, metric, result="refused") > 0

    async def test_a_repeated_unknown_name_is_answered_from_the_negative_cache(
        self, settings: Settings, db: Database, publisher: ConfigPublisher
    ) -> None:
        """Cached absent while nothing says otherwise; the request right after the name's
        publication is accepted (the cache is checked against the change log's end first)."""
        users, webhooks = UserRepository(db), WebhookRepository(db, SecretBox(TEST_SECRET_KEY))
        async with own_ingest(settings, view_negative_ttl=60) as (ingest, client):
            user = await users.create(create_user(plan="pro"))
            hook = create_webhook(username=user.username)
            url = f"/w/{user.username}/{hook.name}"
            assert (await client.post(url, content=b"")).status_code == 404
            registry = ingest.metrics.registry
            hits = sample(registry, "hookbay_ingest_config_negative_hits_total")
            await webhooks.create(hook)
            assert (await client.post(url, content=b"")).status_code == 404  # not published
            assert sample(registry, "hookbay_ingest_config_negative_hits_total") == hits + 1
            await publisher.webhook_changed(hook)
            # published before this request: the negative answer is not served any more
            assert (await client.post(url, content=b"")).status_code == 200


class TestChangeLog:
    async def test_every_change_applies_without_reconciliation(
        self, settings: Settings, db: Database, publisher: ConfigPublisher
    ) -> None:
        """With reconciliation an hour away, only the change log can make these visible."""
        users, webhooks = UserRepository(db), WebhookRepository(db, SecretBox(TEST_SECRET_KEY))
        async with own_ingest(settings, view_reconcile_interval=3600) as (ingest, client):
            user = await users.create(create_user(plan="pro"))
            hook = await webhooks.create(create_webhook(username=user.username))
            url = f"/w/{user.username}/{hook.name}"
            assert (await client.post(url, content=b"{}")).status_code == 200

            async def answers(expected: int) -> None:
                async def check() -> bool:
                    return (await client.post(url, content=b"{}")).status_code == expected

                await until(check, timeout=10, what=f"ingest answers {expected}")

            await publisher.webhook_changed(
                await webhooks.update(user.username, hook.name, active=False)
            )
            await answers(403)
            await publisher.webhook_changed(
                await webhooks.update(user.username, hook.name, active=True)
            )
            await answers(200)
            await publisher.user_changed(await users.update(user.username, plan="free"))
            await until(
                lambda: ingest.view._users[user.username].plan == "free",
                timeout=10, what="the plan change",
            )  # fmt: skip
            await webhooks.delete(user.username, hook.name)
            await publisher.webhook_deleted(user.username, hook.name)
            await answers(404)
            await users.delete(user.username)
            await publisher.user_deleted(user.username)
            await answers(403)
            assert (
                sample(ingest.metrics.registry, "hookbay_ingest_config_reconcile_repairs_total")
                == 0
            )

    async def test_a_change_older_than_the_view_is_ignored(self, stack: Stack) -> None:
        user, hook = await stack.owner()
        view = stack.ingest.view
        assert await view.webhook(user.username, hook.name) is not None
        stale = hook.model_copy(
            update={"active": False, "updated_at": hook.updated_at - timedelta(seconds=5)}
        )
        view.apply(ConfigChange.of_webhook(stale))
        view.apply(
            ConfigChange.deletion(
                webhook_key(user.username, hook.name), hook.updated_at - timedelta(seconds=1)
            )
        )
        assert (await stack.post(user, hook)).status_code == 200


class TestDestinationsAndRoutes:
    async def test_destination_records_are_skipped_and_routes_are_held(
        self, settings: Settings, db: Database, publisher: ConfigPublisher
    ) -> None:
        """A destination named like a webhook, its change and its deletion, leave the webhook
        as it is; a webhook's routes come with its record, and reconciliation agrees."""
        box = SecretBox(TEST_SECRET_KEY)
        users, webhooks = UserRepository(db), WebhookRepository(db, box)
        async with own_ingest(settings, view_reconcile_interval=3600) as (ingest, client):
            user = await users.create(create_user(plan="pro"))
            hook = await webhooks.create(create_webhook(username=user.username))
            url = f"/w/{user.username}/{hook.name}"
            assert (await client.post(url, content=b"{}")).status_code == 200
            destination = create_destination(username=user.username, name=hook.name)
            await publisher.destination_changed(destination)
            await publisher.destination_deleted(user.username, hook.name)
            # a later record of the same (one-partition) log: once it is applied, so are those
            await publisher.user_changed(await users.update(user.username, plan="free"))
            await until(
                lambda: ingest.view._users[user.username].plan == "free",
                timeout=10, what="the records after the destination's",
            )  # fmt: skip
            assert ingest.view._webhooks[(user.username, hook.name)] == hook
            route = create_route(destination=hook.name, filter={"body": {"type": "paid"}})
            with_routes = await webhooks.replace_routes(hook, [route])
            assert with_routes is not None
            await publisher.webhook_changed(with_routes)

            async def routes_held() -> bool:
                held = await ingest.view.webhook(user.username, hook.name)
                return held is not None and held.routes == (route,)

            await until(routes_held, timeout=10, what="the webhook's routes in the view")
            assert (await client.post(url, content=b"{}")).status_code == 200
            assert await ingest.view.reconcile() == 0
            assert (
                sample(ingest.metrics.registry, "hookbay_ingest_config_unreadable_changes_total")
                == 0
            )


class TestReconciliation:
    async def test_a_lost_publication_is_repaired(self, settings: Settings, db: Database) -> None:
        """A writer that died between its MongoDB write and its publication: the change is in
        MongoDB only; the next reconciliation makes it live."""
        users, webhooks = UserRepository(db), WebhookRepository(db, SecretBox(TEST_SECRET_KEY))
        async with own_ingest(settings, view_reconcile_interval=0.5) as (ingest, client):
            user = await users.create(create_user(plan="pro"))
            hook = await webhooks.create(create_webhook(username=user.username))
            url = f"/w/{user.username}/{hook.name}"
            assert (await client.post(url, content=b"{}")).status_code == 200
            await webhooks.update(user.username, hook.name, active=False)  # never published

            async def refused() -> bool:
                return (await client.post(url, content=b"{}")).status_code == 403

            await until(refused, timeout=15, what="the reconciliation repairs the view")
            repairs = "hookbay_ingest_config_reconcile_repairs_total"
            assert sample(ingest.metrics.registry, repairs) >= 1


class TestReadiness:
    async def test_not_ready_until_the_change_log_is_followed(self, settings: Settings) -> None:
        """MongoDB loaded, Kafka away: the view is not following the change log, so not ready."""
        from tests.support.net import free_port

        app = create_app(ingest_settings(settings, kafka_bootstrap=f"127.0.0.1:{free_port()}"))
        async with app.router.lifespan_context(app):
            assert app.state.ingest.view.loaded
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://i") as client:
                ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["config_view"] is False

    async def test_view_metrics_are_exposed(self, stack: Stack) -> None:
        text = (await stack.client.get("/metrics")).text
        for metric in (
            "hookbay_ingest_config_changes_applied_total",
            "hookbay_ingest_config_changelog_lag",
            "hookbay_ingest_config_view_age_seconds",
            "hookbay_ingest_config_read_throughs_total",
            "hookbay_ingest_config_negative_hits_total",
            "hookbay_ingest_config_reconcile_repairs_total",
        ):
            assert metric in text, metric
