"""The forwarder's routing view on the real Kafka and FerretDB: the load at start, changes from the
change log, the ordering rule, read-through on a miss, reconciliation of lost publications."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr
from pymongo.errors import ServerSelectionTimeoutError

from hookbay_common.changelog import ChangeLog
from hookbay_common.clock import utcnow
from hookbay_common.configlog import ConfigChange, ConfigPublisher, destination_key, webhook_key
from hookbay_common.db import (
    Database,
    DestinationRepository,
    TransformationRepository,
    WebhookRepository,
)
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.kafka import create_producer
from hookbay_common.models import (
    Destination,
    DestinationState,
    StateReason,
    Transformation,
    Webhook,
)
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_forwarder.metrics import RoutingViewMetrics
from hookbay_forwarder.routing import RoutingView, RoutingViewUnavailable
from hookbay_forwarder.routing import view as view_module
from tests.support.factories import (
    TEST_SECRET_KEY,
    create_destination,
    create_route,
    create_webhook,
    unique_name,
)
from tests.support.net import free_port
from tests.support.waiting import until

BOX = SecretBox(TEST_SECRET_KEY)


@pytest.fixture(scope="module")
async def publisher(settings: Settings) -> AsyncIterator[ConfigPublisher]:
    """What the dashboard and the CLI publish with, on the real broker."""
    producer = create_producer(settings.kafka_bootstrap)
    await producer.start()

    async def send(topic: str, key: bytes, value: bytes) -> None:
        await producer.send_and_wait(topic, value, key=key)

    yield ConfigPublisher(send, settings.topics.config, BOX)
    await producer.stop()


@dataclass
class Routing:
    view: RoutingView
    registry: CollectorRegistry
    webhooks: WebhookRepository
    destinations: DestinationRepository
    changed: list[Destination] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def sample(self, metric: str, **labels: str) -> float:
        return self.registry.get_sample_value(metric, labels or None) or 0.0

    def held_webhook(self, username: str, name: str) -> Webhook | None:
        """What the view holds, without a read-through."""
        return self.view._webhooks.get((username, name))

    def held_destination(self, username: str, name: str) -> Destination | None:
        return self.view._destinations.get((username, name))

    async def destination(self, username: str, **overrides: Any) -> Destination:
        return await self.destinations.create(create_destination(username=username, **overrides))

    async def routed_webhook(self, username: str, destination: str) -> Webhook:
        route = create_route(destination=destination)
        return await self.webhooks.create(create_webhook(username=username, routes=(route,)))


def make_view(
    settings: Settings, db: Database, *, bootstrap: str | None = None, **transformations: Any
) -> Routing:
    """``transformations``: the view's ``transformations`` and ``on_transformation``."""
    registry = CollectorRegistry()
    changes = ChangeLog(
        bootstrap or settings.kafka_bootstrap, settings.topics.config_spec(), BOX,
        client_id="hookbay-forwarder-config",
    )  # fmt: skip
    webhooks, destinations = WebhookRepository(db, BOX), DestinationRepository(db, BOX)
    routing = Routing(None, registry, webhooks, destinations)  # type: ignore[arg-type]
    routing.view = RoutingView(
        webhooks, destinations, changes, RoutingViewMetrics(registry),
        reconcile_interval=3600,  # only the change log (or a call to reconcile) changes it
        on_destination=routing.changed.append, on_destination_deleted=routing.deleted.append,
        **transformations,
    )  # fmt: skip
    return routing


@contextlib.asynccontextmanager
async def following(settings: Settings, db: Database) -> AsyncIterator[Routing]:
    """A routing view of the test's own, loaded and following the change log."""
    routing = make_view(settings, db)
    await routing.view.start()
    try:
        await until(lambda: routing.view.following, timeout=30, what="the view follows")
        yield routing
    finally:
        await routing.view.stop()


async def applied(routing: Routing, publisher: ConfigPublisher) -> None:
    """Every change published before this call is applied: a later record of the
    (one-partition) log is."""
    marker = create_destination(username=unique_name("marker"))
    await publisher.destination_changed(marker)
    await until(
        lambda: routing.view.destination_by_id(marker.id) is not None,
        timeout=10, what="the records before the marker",
    )  # fmt: skip


class TestLoad:
    async def test_routed_webhooks_and_every_destination_are_loaded_at_start(
        self, settings: Settings, db: Database
    ) -> None:
        seed = make_view(settings, db)
        user = unique_name("u")
        billing = await seed.destination(user)
        spare = await seed.destination(user)
        routed = await seed.routed_webhook(user, billing.name)
        plain = await seed.webhooks.create(create_webhook(username=user))
        async with following(settings, db) as routing:
            view = routing.view
            assert routing.held_webhook(user, routed.name) == routed
            assert routing.held_webhook(user, plain.name) is None
            assert await view.webhook(user, routed.name) == routed
            for destination in (billing, spare):
                assert await view.destination(user, destination.name) == destination
                assert view.destination_by_id(destination.id) == destination
                assert destination in routing.changed
            assert view.destination_by_id("dst_unknown") is None
            metric = "hookbay_forwarder_routing_view_read_throughs_total"
            assert routing.sample(metric, result="found") == 0
            assert routing.sample(metric, result="absent") == 0
            assert routing.deleted == []

    async def test_not_following_while_kafka_is_away(
        self, settings: Settings, db: Database
    ) -> None:
        """MongoDB loaded, the change log unreachable: loaded, not ready."""
        routing = make_view(settings, db, bootstrap=f"127.0.0.1:{free_port()}")
        await routing.view.start()
        try:
            assert routing.view.loaded
            assert not routing.view.following
        finally:
            await routing.view.stop()


class TestChangeLog:
    async def test_changes_arrive_without_reconciliation(
        self, settings: Settings, db: Database, publisher: ConfigPublisher
    ) -> None:
        async with following(settings, db) as routing:
            view, user = routing.view, unique_name("u")
            destination = await routing.destination(user)
            await publisher.destination_changed(destination)
            await until(
                lambda: view.destination_by_id(destination.id) == destination,
                timeout=10, what="the new destination",
            )  # fmt: skip
            assert routing.changed[-1] == destination

            hook = await routing.webhooks.create(create_webhook(username=user))
            await publisher.webhook_changed(hook)
            route = create_route(destination=destination.name)
            with_routes = await routing.webhooks.replace_routes(hook, [route])
            assert with_routes is not None
            await publisher.webhook_changed(with_routes)
            await until(
                lambda: routing.held_webhook(user, hook.name) == with_routes,
                timeout=10, what="the webhook's routes",
            )  # fmt: skip
            assert (await view.webhook(user, hook.name) or hook).routes == (route,)

            paused = await routing.destinations.update(
                user, destination.name,
                {"state": DestinationState.PAUSED, "state_reason": StateReason.MANUAL},
            )  # fmt: skip
            await publisher.destination_changed(paused)
            await until(
                lambda: view.destination_by_id(destination.id) == paused,
                timeout=10, what="the pause",
            )  # fmt: skip
            assert routing.changed[-1].state is DestinationState.PAUSED
            assert routing.changed[-1] == paused

            without_routes = await routing.webhooks.replace_routes(with_routes, [])
            assert without_routes is not None
            await publisher.webhook_changed(without_routes)
            await routing.destinations.delete(user, destination.name)
            await publisher.destination_deleted(user, destination.name)
            await until(
                lambda: view.destination_by_id(destination.id) is None,
                timeout=10, what="the deletion",
            )  # fmt: skip
            assert routing.deleted == [destination.id]
            assert routing.held_destination(user, destination.name) is None
            assert routing.held_webhook(user, hook.name) is None  # no routes: not held
            assert await view.destination(user, destination.name) is None
            assert routing.sample("hookbay_forwarder_routing_view_changes_applied_total") >= 6
            assert routing.sample("hookbay_forwarder_routing_view_reconcile_repairs_total") == 0
            assert routing.sample("hookbay_forwarder_routing_view_unreadable_changes_total") == 0
            assert routing.sample("hookbay_forwarder_routing_view_changelog_lag") == 0

    async def test_an_older_change_does_not_overwrite_a_newer_record(
        self, settings: Settings, db: Database, publisher: ConfigPublisher
    ) -> None:
        """Two writers racing: the change published last is the older one."""
        async with following(settings, db) as routing:
            view, user = routing.view, unique_name("u")
            destination = await routing.destination(user)
            hook = await routing.routed_webhook(user, destination.name)
            await publisher.destination_changed(destination)
            await publisher.webhook_changed(hook)
            earlier = timedelta(seconds=5)
            stale_destination = destination.model_copy(
                update={
                    "url": "http://127.0.0.1:9/old",
                    "updated_at": destination.updated_at - earlier,
                }
            )
            stale_hook = hook.model_copy(
                update={"routes": (), "updated_at": hook.updated_at - earlier}
            )
            await publisher.destination_changed(stale_destination)
            await publisher.webhook_changed(stale_hook)
            await publisher.publish(
                ConfigChange.deletion(
                    destination_key(user, destination.name), destination.updated_at - earlier
                )
            )
            await publisher.publish(
                ConfigChange.deletion(webhook_key(user, hook.name), hook.updated_at - earlier)
            )
            await applied(routing, publisher)
            assert view.destination_by_id(destination.id) == destination
            assert routing.held_destination(user, destination.name) == destination
            assert routing.held_webhook(user, hook.name) == hook
            assert destination.id not in routing.deleted
            assert stale_destination not in routing.changed


class TestReadThrough:
    async def test_a_miss_reads_mongodb_and_keeps_what_it_found(
        self, settings: Settings, db: Database
    ) -> None:
        """Written to MongoDB, never published: the first lookup finds it, the next ones are
        answered by the view; concurrent misses for one key share one query."""
        async with following(settings, db) as routing:
            view, user = routing.view, unique_name("u")
            destination = await routing.destination(user)
            hook = await routing.routed_webhook(user, destination.name)
            metric = "hookbay_forwarder_routing_view_read_throughs_total"

            assert await view.webhook(user, hook.name) == hook
            assert routing.held_webhook(user, hook.name) == hook
            found = await asyncio.gather(
                *(view.destination(user, destination.name) for _ in range(20))
            )
            assert found == [destination] * 20
            assert view.destination_by_id(destination.id) == destination
            assert routing.changed[-1] == destination
            assert routing.sample(metric, result="found") == 2

            assert await view.webhook(user, hook.name) == hook  # held now: no query
            assert await view.destination(user, destination.name) == destination
            assert routing.sample(metric, result="found") == 2

            assert await view.destination(user, "nowhere") is None
            assert await view.webhook(user, "nothing") is None
            assert routing.sample(metric, result="absent") == 2

    async def test_mongodb_unreachable_on_a_miss_raises_unavailable(
        self, settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        class Down:
            async def get(self, *args: object) -> None:
                raise ServerSelectionTimeoutError("mongodb://user:hunter2@db down")

        class Logged:
            def __init__(self) -> None:
                self.lines: list[tuple[str, dict[str, Any]]] = []

            def info(self, event: str, **fields: Any) -> None:
                pass

            def warning(self, event: str, **fields: Any) -> None:
                self.lines.append((event, fields))

        logged = Logged()
        monkeypatch.setattr(view_module, "log", logged)
        async with following(settings, db) as routing:
            view = routing.view
            view._webhooks_repo = Down()  # type: ignore[assignment]
            view._destinations_repo = Down()  # type: ignore[assignment]
            with pytest.raises(RoutingViewUnavailable):
                await view.webhook("nobody", "hook")
            with pytest.raises(RoutingViewUnavailable):
                await view.destination("nobody", "billing")
        assert [event for event, _ in logged.lines] == ["routing_view_read_through_failed"] * 2
        for _, fields in logged.lines:
            assert "exc_info" not in fields
            assert "hunter2" not in repr(fields)


class TestReconciliation:
    async def test_lost_publications_are_repaired(self, settings: Settings, db: Database) -> None:
        """Writers that died between their MongoDB write and their publication: the changes are
        in MongoDB only; a reconciliation makes them live."""
        async with following(settings, db) as routing:
            view, user = routing.view, unique_name("u")
            kept = await routing.destination(user)
            gone = await routing.destination(user)
            assert await view.destination(user, kept.name) == kept  # held
            assert await view.destination(user, gone.name) == gone
            moved = await routing.destinations.update(
                user, kept.name, {"url": "http://127.0.0.1:9/moved"}
            )
            await routing.destinations.delete(user, gone.name)
            hook = await routing.routed_webhook(user, kept.name)
            routing.changed.clear()

            assert await view.reconcile() == 3
            assert view.destination_by_id(kept.id) == moved
            assert routing.changed == [moved]
            assert view.destination_by_id(gone.id) is None
            assert routing.held_destination(user, gone.name) is None
            assert routing.deleted == [gone.id]
            assert routing.held_webhook(user, hook.name) == hook
            assert routing.sample("hookbay_forwarder_routing_view_reconcile_repairs_total") == 3
            assert await view.reconcile() == 0

    async def test_keys_the_change_log_touched_meanwhile_are_left_alone(
        self, settings: Settings, db: Database
    ) -> None:
        """A reconciliation whose snapshot was read before the change log applied a newer
        record of a key does not put the snapshot's older record back."""
        async with following(settings, db) as routing:
            view, user = routing.view, unique_name("u")
            destination = await routing.destination(user)
            assert await view.destination(user, destination.name) == destination
            newer = destination.model_copy(
                update={"url": "http://127.0.0.1:9/newer",
                        "updated_at": destination.updated_at + timedelta(seconds=1)}
            )  # fmt: skip
            stored = routing.destinations

            class Racing:
                """The change log applies ``newer`` right after the snapshot is read."""

                async def list_all(self) -> list[Destination]:
                    snapshot = await stored.list_all()
                    view.apply(ConfigChange.of_destination(newer))
                    return snapshot

            view._destinations_repo = Racing()  # type: ignore[assignment]
            try:
                assert await view.reconcile() == 0
            finally:
                view._destinations_repo = stored
            assert view.destination_by_id(destination.id) == newer
            assert routing.changed[-1] == newer
            assert await view.reconcile() == 1  # the next one: MongoDB never got it


def transformation_of(username: str, name: str, version: int = 1) -> Transformation:
    now = utcnow().replace(microsecond=0)
    return Transformation(
        id=new_id(IdPrefix.TRANSFORMATION), username=username, name=name,
        code="addHandler('transform', (r) => r)", env={"KEY": SecretStr("k")}, version=version,
        created_at=now, updated_at=now,
    )  # fmt: skip


class TestTransformations:
    async def test_loaded_followed_and_read_through(
        self, settings: Settings, db: Database, publisher: ConfigPublisher
    ) -> None:
        repo = TransformationRepository(db, BOX)
        user = unique_name("u")
        first = await repo.create(transformation_of(user, "first"))
        seen: list[Transformation] = []
        routing = make_view(settings, db, transformations=repo, on_transformation=seen.append)
        await routing.view.start()
        try:
            await until(lambda: routing.view.following, timeout=30, what="the view follows")
            view = routing.view
            assert view._transformations[(user, "first")] == first
            assert [t for t in seen if t.username == user] == [first]  # others' are theirs
            assert (await view.transformation(user, "first") or first).env[
                "KEY"
            ].get_secret_value() == "k"

            edited = first.model_copy(update={"version": 2, "updated_at": utcnow()})
            await publisher.transformation_changed(edited)
            await until(
                lambda: [t for t in seen if t.username == user][-1] == edited,
                timeout=10, what="the new version",
            )  # fmt: skip

            late = await repo.create(transformation_of(user, "late"))  # not published
            assert await view.transformation(user, "late") == late  # read through
            assert await view.transformation(user, "never") is None

            await publisher.transformation_deleted(user, "first")
            await applied(routing, publisher)
            assert (user, "first") not in view._transformations
        finally:
            await routing.view.stop()

    async def test_a_routes_transformation_is_a_set_lookup_unless_a_route_has_one(
        self, settings: Settings, db: Database, publisher: ConfigPublisher
    ) -> None:
        async with following(settings, db) as routing:
            view, user = routing.view, unique_name("u")
            plain = await routing.routed_webhook(user, "d")
            await publisher.webhook_changed(plain)
            route = create_route(destination="d", transform="shape")
            shaped = await routing.webhooks.create(create_webhook(username=user, routes=(route,)))
            await publisher.webhook_changed(shaped)
            await applied(routing, publisher)
            assert await view.route_transform(user, plain.name, plain.routes[0].name) is None
            assert not view.may_transform(user, plain.name)
            assert view.may_transform(user, shaped.name)
            assert view.may_transform(user, "not-held")  # the look-up reads it through
            assert await view.route_transform(user, shaped.name, route.name) == "shape"
            assert await view.route_transform(user, shaped.name, "no-such-route") is None

            cleared = await routing.webhooks.replace_routes(
                shaped, [route.model_copy(update={"transform": None})]
            )
            assert cleared is not None
            await publisher.webhook_changed(cleared)
            await applied(routing, publisher)
            assert not view.may_transform(user, shaped.name)
            assert await view.route_transform(user, shaped.name, route.name) is None
