"""The forwarder role, wired from settings: the process that routes and delivers.

Consumer group ``<namespace>.forwarder`` on the events topic (routing, and ``forward_url`` first
attempts, ordered per owner), ``<namespace>.forwarder-tasks`` on the retry tiers and replays, and
``<namespace>.forwarder-deliveries`` on the deliveries topic (routed deliveries, through each
destination's lane). The routing view (webhooks with routes, destinations) follows the
configuration change log. Each destination's circuit breaker lives in the lanes; its
transitions become the destination's stored state (``gateway.health``), published to the same
change log, and open or resolve the owner's issues, told to their alert channels. The ``Process`` contract (start, run, stop, readiness and liveness) is
in ``hookbay_forwarder.process``; readiness here also needs the producer able to send and the
routing view following the change log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx
from pymongo.errors import PyMongoError

from hookbay_common.alerts import IssueTracker, create_notifier
from hookbay_common.changelog import ChangeLog
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    AlertChannelRepository,
    DestinationRepository,
    HoldRepository,
    IssueRepository,
    TransformationRepository,
    WebhookRepository,
)
from hookbay_common.db import client as db_client
from hookbay_common.destination_state import DestinationStates
from hookbay_common.kafka import create_consumer, ensure_configured_topics
from hookbay_common.logs import get_logger
from hookbay_common.models import Destination
from hookbay_common.producer import ResilientProducer
from hookbay_common.routing.dedupe_store import Deduplicator
from hookbay_common.secrets_box import SecretBox
from hookbay_forwarder.delivery.consumer import HandlerCrashed, OrderedConsumer
from hookbay_forwarder.delivery.deadletter import DeadLetterLimit, DeadLetterLimitExceeded
from hookbay_forwarder.delivery.deliverer import Deliverer, create_clients, create_session
from hookbay_forwarder.delivery.handlers import ForwarderHandlers
from hookbay_forwarder.delivery.retry import RetryPolicy
from hookbay_forwarder.gateway.config import LaneConfig, lane_config
from hookbay_forwarder.gateway.deliver import DestinationDelivery
from hookbay_forwarder.gateway.feed import LaneFeed
from hookbay_forwarder.gateway.health import DestinationHealth
from hookbay_forwarder.gateway.lanes import Lanes
from hookbay_forwarder.gateway.transform import LazyPool, TransformStep
from hookbay_forwarder.metrics import (
    BreakerMetrics,
    DedupeMetrics,
    ForwarderMetrics,
    LaneMetrics,
    RoutingViewMetrics,
    TransformMetrics,
)
from hookbay_forwarder.process import (
    EXIT_DEAD_LETTER_LIMIT,
    EXIT_OK,
    OBSERVE_INTERVAL,
    closed,
    exit_status,
    report_lag,
    until_connected,
)
from hookbay_forwarder.routing.dedupe import RouteDedupe
from hookbay_forwarder.routing.router import Router
from hookbay_forwarder.routing.view import RoutingView
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_sandbox import TransformPool

log = get_logger("hookbay.forwarder")

MONGO_SOCKET_TIMEOUT_MS = 10_000
FALLBACK_POOLS = 4
"""httpx pools for the rare request whose header bytes are not UTF-8 (see ``Deliverer``)."""


class Forwarder:
    def __init__(
        self,
        settings: ForwarderSettings,
        *,
        deduplicator: Callable[[str, str], Deduplicator] | None = None,
    ) -> None:
        """``deduplicator`` builds the routes' claim store from the Redis URL and the namespace
        (``RouteDedupe``'s; tests give their own)."""
        self.settings = settings
        self.metrics = ForwarderMetrics()
        self.topics = settings.topics
        self._stopping = asyncio.Event()
        self._started = False
        self.producer = ResilientProducer.from_settings(
            settings, name="hookbay-forwarder", registry=self.metrics.registry
        )
        allow_private = settings.allow_private_destinations
        self.deliverer = Deliverer(
            create_session(allow_private=allow_private, max_connections=settings.max_connections),
            create_clients(FALLBACK_POOLS, allow_private=allow_private, max_connections=100),
            timeout=settings.forward_timeout,
            allow_private=allow_private,
        )
        self.handlers = ForwarderHandlers(
            deliverer=self.deliverer,
            producer=self.producer,
            topics=self.topics,
            policy=RetryPolicy(settings.retry_schedule, settings.retry_jitter),
            limit=DeadLetterLimit(
                window=settings.dlq_limit_window,
                ratio=settings.dlq_limit_ratio,
                min_hosts=settings.dlq_limit_min_hosts,
                max_invalid=settings.dlq_limit_invalid,
            ),
            metrics=self.metrics,
            tiers=settings.delay_tiers,
        )
        self.mongo = db_client.connect(
            settings.mongo_url, socket_timeout_ms=MONGO_SOCKET_TIMEOUT_MS
        )
        db = db_client.database(self.mongo)
        box = SecretBox(settings.secret_key.get_secret_value())
        destinations = DestinationRepository(db, box)
        self.view = RoutingView(
            WebhookRepository(db, box), destinations,
            ChangeLog(settings.kafka_bootstrap, self.topics.config_spec(), box,
                      client_id="hookbay-forwarder-config"),
            RoutingViewMetrics(self.metrics.registry),
            on_destination=self._destination_changed,
            on_destination_deleted=self._destination_deleted,
            transformations=TransformationRepository(db, box),
            on_transformation=lambda t: self.transform.changed(t),
        )  # fmt: skip
        self.dedupe = RouteDedupe(
            settings.redis_url, namespace=settings.kafka_namespace,
            metrics=DedupeMetrics(self.metrics.registry), deduplicator=deduplicator,
        )  # fmt: skip
        self.handlers.router = Router(
            self.view, self.handlers.write, self.topics, dedupe=self.dedupe,
            tiers=settings.delay_tiers,
        )  # fmt: skip
        self.alert_http = httpx.AsyncClient(timeout=10.0, follow_redirects=False)
        self.notifier = create_notifier(
            AlertChannelRepository(db, box), settings, self.alert_http, self.metrics.registry
        )
        self.sandbox = LazyPool(  # no worker until a route runs a transformation
            lambda: TransformPool(size=settings.transform_workers)
        )
        self.transform = TransformStep(
            self.view, self.sandbox, issues=IssueTracker(IssueRepository(db), self.notifier),
            metrics=TransformMetrics(self.metrics.registry),
        )  # fmt: skip
        self.health = DestinationHealth(
            self.view,
            DestinationStates(
                destinations, ConfigPublisher(self._send_config, self.topics.config, box)
            ),
            issues=IssueTracker(IssueRepository(db), self.notifier),
        )
        self.lanes = Lanes(
            DestinationDelivery(
                self.view, self.deliverer, self.handlers.write, self.topics,
                schedule=settings.retry_schedule, jitter=settings.retry_jitter,
                transform=self.transform,
            ),
            lambda destination_id: lane_config(self.view.destination_by_id(destination_id)),
            HoldRepository(db),
            metrics=LaneMetrics(self.metrics.registry),
            on_transition=self.health.transitioned,
            breaker_metrics=BreakerMetrics(self.metrics.registry),
        )  # fmt: skip
        self.events = self._ordered(f"{self.topics.namespace}.forwarder", self.handlers.on_event)
        self.tasks = self._ordered(
            f"{self.topics.namespace}.forwarder-tasks", self.handlers.on_task
        )
        self.deliveries = LaneFeed(
            create_consumer(
                settings.kafka_bootstrap, group_id=f"{self.topics.namespace}.forwarder-deliveries",
                client_id="hookbay-forwarder", session_timeout_ms=settings.kafka_session_timeout_ms,
            ),
            self.lanes, topic=self.topics.deliveries,
            name=f"{self.topics.namespace}.forwarder-deliveries",
            revoke_grace=settings.shutdown_grace,
        )  # fmt: skip

    def _destination_deleted(self, destination_id: str) -> None:
        """Its lane, if held, drains: each task's delivery fails ("the destination was
        deleted") instead of waiting in the hold store for ever, whatever its breaker said."""
        self.lanes.configure(destination_id, LaneConfig())
        self.lanes.forget_breaker(destination_id)

    def _destination_changed(self, destination: Destination) -> None:
        config = lane_config(destination)
        if config is not None:
            self.lanes.configure(destination.id, config)
        self.health.changed(destination, self.lanes)

    async def _send_config(self, topic: str, key: bytes, value: bytes) -> None:
        await self.producer.send_and_wait(topic, value, key=key)

    def _ordered(self, group: str, handler: Callable[[Any], Awaitable[None]]) -> OrderedConsumer:
        s = self.settings
        consumer = create_consumer(
            s.kafka_bootstrap, group_id=group, client_id="hookbay-forwarder",
            session_timeout_ms=s.kafka_session_timeout_ms,
            metadata_max_age_ms=30_000,  # notices new retry tiers (pattern subscription)
        )  # fmt: skip
        return OrderedConsumer(
            consumer, handler, name=group, max_buffered=s.max_buffered_events,
            max_buffered_bytes=s.max_buffered_bytes, revoke_grace=s.shutdown_grace,
            metrics=self.metrics,
        )  # fmt: skip

    def checks(self) -> dict[str, bool]:
        return {
            "kafka": self._started and self.producer.answering,
            "producer": self.producer.ready,
            "events_consumer": self.events.running,
            "tasks_consumer": self.tasks.running,
            "deliveries_consumer": self.deliveries.running,
            "routing_view": self.view.following,
        }

    def healthy(self) -> bool:
        ended = self.events.ended or self.tasks.ended or self.deliveries.ended
        return (not ended or self._stopping.is_set()) and self.producer.healthy

    def request_stop(self) -> None:
        self._stopping.set()
        self.events.stop()
        self.tasks.stop()
        self.deliveries.stop()

    async def start(self) -> None:
        async def connect() -> None:
            await ensure_configured_topics(self.settings)
            await self.producer.start()  # connects in the background, replaces itself if wedged
            await self.producer.wait_ready(within=5.0)
            await self._load_view()  # the routing view: loaded before the first event is read
            self.events.consumer.subscribe([self.topics.events], listener=self.events)
            self.tasks.consumer.subscribe(pattern=self.topics.task_pattern, listener=self.tasks)
            self.deliveries.consumer.subscribe([self.topics.deliveries], listener=self.deliveries)
            await self.events.consumer.start()
            await self.tasks.consumer.start()
            await self.deliveries.consumer.start()

        self._started = await until_connected(connect, self._stopping)
        if self._started:
            log.info("forwarder_started", namespace=self.topics.namespace)

    async def _load_view(self) -> None:
        """Until MongoDB answers (or a stop is requested)."""
        while True:
            try:
                await self.view.start()
                return
            except PyMongoError as exc:
                log.warning("store_unreachable", error=type(exc).__name__)
                if self._stopping.is_set():
                    raise OSError("stopped before the store answered") from None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), 2.0)

    async def run(self) -> int:
        if not self._started:
            return EXIT_OK
        observer = asyncio.create_task(self._observe())
        loops = [asyncio.create_task(c.run()) for c in (self.events, self.tasks, self.deliveries)]
        try:
            await asyncio.wait(loops, return_when=asyncio.FIRST_EXCEPTION)
            self.request_stop()
            results = await asyncio.gather(*loops, return_exceptions=True)
        finally:
            observer.cancel()
        return _exit_status(results)

    async def stop(self) -> None:
        grace = self.settings.shutdown_grace
        if self._started:
            await asyncio.gather(
                self.events.drain(grace), self.tasks.drain(grace), self.deliveries.drain(grace)
            )
        await self.health.close(grace)  # the last transitions' states, before the producer goes
        await self.transform.close()
        await self.sandbox.close()  # after the lanes: no call waits for a worker any more
        for consumer in (self.events.consumer, self.tasks.consumer, self.deliveries.consumer):
            await closed(consumer.stop(), "consumer")
        await self.view.stop()
        await self.dedupe.close()
        await self.producer.stop()  # flushes what is still queued (bounded)
        await self.deliverer.aclose()
        await self.notifier.close()  # notifications still waiting for a retry are given up
        await self.alert_http.aclose()
        await self.mongo.close()
        log.info("forwarder_stopped")

    async def _observe(self) -> None:
        while True:
            waiting = 0
            for ordered in (self.events, self.tasks):
                report_lag(self.metrics, ordered.name, ordered.consumer, ordered.lag())
                self.metrics.buffered.labels(ordered.name).set(ordered.buffered)
            feed = self.deliveries
            report_lag(self.metrics, feed.name, feed.consumer, feed.lag())
            for tp, lag in self.tasks.lag().items():
                if tp.topic != self.topics.replays:
                    waiting += lag
            self.metrics.retries_waiting.set(waiting)
            await asyncio.sleep(OBSERVE_INTERVAL)


def _exit_status(results: Sequence[Any]) -> int:
    """``EXIT_DEAD_LETTER_LIMIT`` when a handler tripped the dead-letter limit, else as
    ``exit_status`` says (a crashed handler judged by what it raised)."""
    for result in results:
        if isinstance(result, BaseException):
            cause = result.__cause__ if isinstance(result, HandlerCrashed) else result
            if isinstance(cause, DeadLetterLimitExceeded):
                log.critical("dead_letter_limit_exceeded", reason=str(cause))
                return EXIT_DEAD_LETTER_LIMIT
            return exit_status([cause])
    return EXIT_OK
