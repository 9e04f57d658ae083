"""The routing view: the webhooks that have routes, every destination and every
transformation, in memory, kept current by the configuration change log.

What the router asks (``webhook()``, ``destination()``) and the lanes ask
(``destination_by_id()``; ``route_transform()`` and ``transformation()`` for a route that runs
a transformation) is answered from here:

1. **The view.** Loaded from MongoDB at start and kept current by the change log
   (``Topics.config``, ``hookbay_common.configlog``, read with ``hookbay_common.changelog``), which
   every writer publishes to after its MongoDB write. A webhook without routes is not held (the
   router only asks about routed webhooks); users are skipped. Destinations are indexed by
   (owner, name) and by id, transformations by (owner, name); the webhooks with a route that
   runs a transformation are kept as a set, so that ``route_transform()`` costs one set lookup
   for every other delivery.
2. **Read-through on a miss.** The router only asks for what its events name, so a miss means
   the view is behind: it waits for the change log's end (``ChangeLog.sync``), looks again, and
   then reads MongoDB (one query per key at a time; concurrent misses for one key share it). A
   record found joins the view (a webhook only if it has routes; it is answered either way).
   Nothing remembers an absence: every miss of a name MongoDB lacks costs a query. MongoDB
   unreachable: ``RoutingViewUnavailable`` (retry later).
   ``destination_by_id()`` answers from the view alone (the lanes call it on every start).
3. **Reconciliation.** Every ``reconcile_interval`` the view is compared with MongoDB and
   repaired: the safety net for a lost publication. Every entry that differs counts as a repair.

Races, as in ingest's ``ConfigView``: a change older than the record held (``at`` before its
``updated_at``) is ignored; a read-through or a reconciliation that read MongoDB before the change
log touched a key leaves that key alone.

``on_destination(destination)`` is called whenever a destination enters the view or changes in it
(the load at start included; change log, reconciliation, read-through),
``on_destination_deleted(destination_id)`` whenever one leaves it (deleted, or its name now holds
a destination of another id); ``on_transformation(transformation)`` whenever a transformation
enters the view or changes in it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pymongo.errors import PyMongoError

from hookbay_common.changelog import RECONNECT_INTERVAL, ChangeLog
from hookbay_common.configlog import (
    ConfigChange,
    ConfigKey,
    Entity,
    destination_key,
    transformation_key,
    webhook_key,
)
from hookbay_common.db import DestinationRepository, TransformationRepository, WebhookRepository
from hookbay_common.logs import get_logger
from hookbay_common.models import Destination, Transformation, Webhook
from hookbay_forwarder.delivery.consumer import TryAgainLater
from hookbay_forwarder.metrics import RoutingViewMetrics

log = get_logger("hookbay.forwarder.routing.view")
Record = Webhook | Destination | Transformation
T = TypeVar("T")
_HELD = frozenset({Entity.WEBHOOK.value, Entity.DESTINATION.value, Entity.TRANSFORMATION.value})
"""The change log's entities routing needs; users are skipped."""


class RoutingViewUnavailable(TryAgainLater):
    """A name the view does not hold could not be read from MongoDB; ask again later (the
    forwarder's consume loop does, after a back-off)."""


class RoutingView:
    def __init__(
        self,
        webhooks: WebhookRepository,
        destinations: DestinationRepository,
        changes: ChangeLog,
        metrics: RoutingViewMetrics,
        *,
        reconcile_interval: float = 60.0,
        on_destination: Callable[[Destination], None] | None = None,
        on_destination_deleted: Callable[[str], None] | None = None,
        transformations: TransformationRepository | None = None,
        on_transformation: Callable[[Transformation], None] | None = None,
    ) -> None:
        """Without ``transformations`` (a repository), no transformation is loaded from
        MongoDB or read through; the change log's still join the view."""
        self._webhooks_repo = webhooks
        self._destinations_repo = destinations
        self._transformations_repo = transformations
        self._on_transformation = on_transformation
        self._changes = changes
        self._metrics = metrics
        self._reconcile_interval = reconcile_interval
        self._on_destination = on_destination
        self._on_destination_deleted = on_destination_deleted
        self._webhooks: dict[tuple[str, str], Webhook] = {}
        self._destinations: dict[tuple[str, str], Destination] = {}
        self._by_id: dict[str, Destination] = {}
        self._transformations: dict[tuple[str, str], Transformation] = {}
        self._transforming: set[tuple[str, str]] = set()
        """The held webhooks with a route that runs a transformation."""
        self._inflight: dict[ConfigKey, asyncio.Task[Record | None]] = {}
        self._generation = 0
        self._touched: dict[ConfigKey, int] = {}  # key -> generation of its last change
        self._tasks: list[asyncio.Task[None]] = []
        self._following = False
        self.loaded = False

    # --- lookups -------------------------------------------------------------------------------

    async def webhook(self, username: str, name: str) -> Webhook | None:
        webhook = self._webhooks.get((username, name))
        if webhook is not None:
            return webhook
        found = await self._miss(webhook_key(username, name))
        return found if isinstance(found, Webhook) else None

    async def destination(self, username: str, name: str) -> Destination | None:
        destination = self._destinations.get((username, name))
        if destination is not None:
            return destination
        found = await self._miss(destination_key(username, name))
        return found if isinstance(found, Destination) else None

    def destination_by_id(self, destination_id: str) -> Destination | None:
        return self._by_id.get(destination_id)

    async def transformation(self, username: str, name: str) -> Transformation | None:
        transformation = self._transformations.get((username, name))
        if transformation is not None:
            return transformation
        found = await self._miss(transformation_key(username, name))
        return found if isinstance(found, Transformation) else None

    def may_transform(self, username: str, webhook: str) -> bool:
        """False when ``webhook`` is held and none of its routes runs a transformation (one dict
        and one set lookup, no await); True when one may (``route_transform`` then says)."""
        names = (username, webhook)
        return names in self._transforming or names not in self._webhooks

    async def route_transform(self, username: str, webhook: str, route: str) -> str | None:
        """The name of the transformation route ``route`` of ``webhook`` runs (``None``: none,
        or no such route). A set lookup for a held webhook none of whose routes transforms."""
        names = (username, webhook)
        held = self._webhooks.get(names)
        if held is not None and names not in self._transforming:
            return None
        found = held or await self.webhook(username, webhook)
        chosen = found.route(route) if found is not None else None
        return chosen.transform if chosen is not None else None

    @property
    def following(self) -> bool:
        """Following the change log, with everything committed before its end was taken loaded
        (readiness)."""
        return self._following and all(not task.done() for task in self._tasks)

    async def _miss(self, key: ConfigKey) -> Record | None:
        await self._changes.sync()  # every change published before this call, applied
        held = self._get(key)
        if held is not None:
            return held
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._fetch(key), name="routing-read-through")
            self._inflight[key] = task
        return await asyncio.shield(task)  # a caller that goes away leaves the query to the rest

    async def _fetch(self, key: ConfigKey) -> Record | None:
        started = self._generation
        try:
            record = await self._read(key)
        finally:
            del self._inflight[key]
        self._metrics.read_throughs.labels("absent" if record is None else "found").inc()
        if self._touched.get(key, 0) > started:  # the change log knows better by now
            return self._get(key)
        if record is not None:
            self._put(key, record)
        return record

    async def _read(self, key: ConfigKey) -> Record | None:
        try:
            if key[0] == Entity.WEBHOOK:
                return await self._webhooks_repo.get(key[1], key[2])
            if key[0] == Entity.TRANSFORMATION:
                if self._transformations_repo is None:
                    return None
                return await self._transformations_repo.get(key[1], key[2])
            return await self._destinations_repo.get(key[1], key[2])
        except PyMongoError as exc:
            log.warning("routing_view_read_through_failed", entity=key[0], error=type(exc).__name__)
            raise RoutingViewUnavailable() from None

    # --- the view's entries --------------------------------------------------------------------

    def _get(self, key: ConfigKey) -> Record | None:
        if key[0] == Entity.WEBHOOK:
            return self._webhooks.get((key[1], key[2]))
        if key[0] == Entity.TRANSFORMATION:
            return self._transformations.get((key[1], key[2]))
        return self._destinations.get((key[1], key[2]))

    def _put(self, key: ConfigKey, record: Record | None) -> None:
        names = (key[1], key[2])
        if key[0] == Entity.WEBHOOK:
            if isinstance(record, Webhook) and record.routes:
                self._webhooks[names] = record
                if any(route.transform for route in record.routes):
                    self._transforming.add(names)
                else:
                    self._transforming.discard(names)
            else:  # gone, or without routes: nothing to route
                self._webhooks.pop(names, None)
                self._transforming.discard(names)
            return
        if key[0] == Entity.TRANSFORMATION:
            self._put_transformation(names, record)
            return
        held = self._destinations.get(names)
        destination = record if isinstance(record, Destination) else None
        if destination == held:
            return
        if held is not None and (destination is None or destination.id != held.id):
            del self._destinations[names]
            self._forget_id(held)
        if destination is not None:
            self._destinations[names] = destination
            self._by_id[destination.id] = destination
            self._notify(self._on_destination, destination)

    def _put_transformation(self, names: tuple[str, str], record: Record | None) -> None:
        held = self._transformations.get(names)
        if not isinstance(record, Transformation):
            self._transformations.pop(names, None)
        elif record != held:
            self._transformations[names] = record
            self._notify(self._on_transformation, record)

    def _forget_id(self, destination: Destination) -> None:
        """``destination`` left its name; its id leaves the view unless another name holds it
        now (a rename whose new name arrived first)."""
        current = self._by_id.get(destination.id)
        if current is None or (current.username, current.name) != (
            destination.username,
            destination.name,
        ):
            return
        del self._by_id[destination.id]
        self._notify(self._on_destination_deleted, destination.id)

    @staticmethod
    def _notify(callback: Callable[[T], None] | None, value: T) -> None:
        if callback is None:
            return
        try:
            callback(value)
        except Exception:  # a bug of the caller's: the view keeps following
            log.exception("routing_view_callback_failed")

    def apply(self, change: ConfigChange) -> None:
        """Apply one change-log record (see the module docstring for ordering). Users are
        skipped."""
        if change.key[0] not in _HELD or len(change.key) != 3:
            return
        self._generation += 1
        self._touched[change.key] = self._generation
        current = self._get(change.key)
        if current is not None and current.updated_at > change.at:
            return  # an older change published late: the view holds something newer
        self._put(change.key, change.webhook or change.destination or change.transformation)
        self._metrics.changes_applied.inc()

    # --- reconciliation ------------------------------------------------------------------------

    async def reconcile(self) -> int:
        """Make the view equal to MongoDB, except for keys the change log touched meanwhile;
        return how many entries were repaired (a first load repairs nothing)."""
        started = self._generation
        snapshot: dict[ConfigKey, Record] = {
            webhook_key(w.username, w.name): w
            for w in await self._webhooks_repo.list_all()
            if w.routes
        }
        snapshot.update(
            (destination_key(d.username, d.name), d)
            for d in await self._destinations_repo.list_all()
        )
        if self._transformations_repo is not None:
            snapshot.update(
                (transformation_key(t.username, t.name), t)
                for t in await self._transformations_repo.list_all()
            )
        held: list[ConfigKey] = [webhook_key(*names) for names in self._webhooks]
        held += [destination_key(*names) for names in self._destinations]
        held += [transformation_key(*names) for names in self._transformations]
        repairs = 0
        for key in {*snapshot, *held}:
            if self._touched.get(key, 0) > started:
                continue
            current, stored = self._get(key), snapshot.get(key)
            if current == stored:
                continue
            self._put(key, stored)
            repairs += 1
        if self.loaded and repairs:
            self._metrics.reconcile_repairs.inc(repairs)
            log.warning("routing_view_repaired", repairs=repairs)
        if not self._inflight:  # no read-through that started earlier can still need them
            self._touched = {k: g for k, g in self._touched.items() if g > started}
        self.loaded = True
        return repairs

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Load everything once (fails if MongoDB is unreachable); then follow the change log
        (connecting in the background, so the process starts while Kafka is away) and
        reconcile every ``reconcile_interval``."""
        await self.reconcile()
        self._tasks = [
            asyncio.create_task(self._follow(), name="routing-changelog"),
            asyncio.create_task(self._reconcile_forever(), name="routing-reconcile"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._following = False
        await self._changes.stop()

    async def _follow(self) -> None:
        await self._changes.connect()
        # changes committed before the change log's end was taken may have been published
        # before it too: one more load covers them (the initial load may be older than that)
        await self._retrying(self.reconcile)
        self._following = True
        log.info("routing_view_following")
        async for change in self._changes.follow(self._metrics):
            self.apply(change)

    async def _reconcile_forever(self) -> None:
        while True:
            await asyncio.sleep(self._reconcile_interval)
            await self._retrying(self.reconcile)

    @staticmethod
    async def _retrying(work: Callable[[], Awaitable[object]]) -> None:
        while True:
            try:
                await work()
                return
            except PyMongoError as exc:  # keep serving the last good view; MongoDB may come back
                log.warning("routing_view_reconcile_failed", error=type(exc).__name__)
            except Exception:
                log.exception("routing_view_reconcile_failed")
            await asyncio.sleep(RECONNECT_INTERVAL)
