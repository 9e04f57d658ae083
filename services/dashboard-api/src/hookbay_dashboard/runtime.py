"""What every request of the dashboard API works with, opened by the app's lifespan."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from prometheus_client import CollectorRegistry
from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError

from hookbay_common.alerts import Notifier, create_notifier
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import client as db_client
from hookbay_common.errors import ServiceUnavailable
from hookbay_common.logs import get_logger
from hookbay_common.plans import PlanBook
from hookbay_common.producer import ResilientProducer
from hookbay_common.ratelimit import RateLimiter, RedisRateLimiter, create_rate_limiter
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_dashboard.replays.service import ReplayJobRunner, ReplayPublisher
from hookbay_dashboard.services import Services, Stores
from hookbay_dashboard.settings import DashboardSettings
from hookbay_dashboard.transformations.sandbox import Sandbox

log = get_logger("hookbay.dashboard")


class Runtime:
    """Clients and repositories shared by all requests of one app instance."""

    def __init__(
        self,
        settings: DashboardSettings,
        plans: PlanBook,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.plans = plans
        self.registry = registry
        self.box = SecretBox(settings.secret_key.get_secret_value())
        self.producer = ResilientProducer.from_settings(
            settings, name="hookbay-dashboard", registry=registry
        )
        """The dashboard's one producer (replays); ``require_kafka`` hands it out."""
        self.sandbox = Sandbox()
        """Transformation checks and test runs; its workers start on the first test."""

    @property
    def kafka_connected(self) -> asyncio.Event:
        """Set once the producer first reached the broker; replays answer 503 until then."""
        return self.producer.started

    async def start(self) -> None:
        """Open the clients inside the server's event loop and migrate the database."""
        settings = self.settings
        self.mongo: AsyncMongoClient[dict[str, Any]] = db_client.connect(settings.mongo_url)
        self.db = db_client.database(self.mongo)
        await db_client.migrate(self.db)
        stores = Stores.open(self.db, self.box)
        self.users = stores.users
        self.tokens = stores.tokens
        self.sessions = stores.sessions
        self.webhooks = stores.webhooks
        self.events = stores.events
        self.attempts = stores.attempts
        self.stats = stores.stats
        self.replay_jobs = stores.replay_jobs
        self.destinations = stores.destinations
        self.limiter: RateLimiter = create_rate_limiter(
            settings.redis_url, key_prefix=settings.redis_prefix
        )
        await self.producer.start()  # connects in the background, replaces itself if wedged
        self.config = ConfigPublisher(self._send, settings.topics.config, self.box)
        self.alert_http = httpx.AsyncClient(timeout=10.0, follow_redirects=False)
        self.notifier = build_notifier(stores, settings, self.alert_http, self.registry)
        self.services = Services(
            stores, settings, self.plans, config=self.config, notifier=self.notifier
        )
        """Every request's services (``deps``), built as the ``hookbay-admin`` commands build theirs."""
        self.tails = self.services.tails(
            poll_interval=settings.tail_poll_interval,
            heartbeat=settings.tail_heartbeat,
            registry=self.registry,
        )
        """The live-tail feeds of this replica, shared by every open tail."""
        self.replay_runner = ReplayJobRunner(
            self.replay_jobs, self.webhooks, ReplayPublisher(self.require_kafka, settings.topics),
            poll_interval=settings.replay_poll_interval, lease=settings.replay_lease,
            page_size=settings.replay_page_size,
        )  # fmt: skip
        self.replay_runner.start()  # bulk replays: this replica's jobs, and orphans it adopts

    async def _send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.require_kafka().send_and_wait(topic, value, key=key)

    def require_kafka(self) -> ResilientProducer:
        """The producer, or ``ServiceUnavailable`` (503, Retry-After) while it cannot send: the
        broker unreachable, or the producer being replaced."""
        if not self.producer.ready:
            unavailable = ServiceUnavailable(
                "Kafka is unreachable; try again shortly", retryAfter=5
            )
            unavailable.headers["Retry-After"] = "5"
            raise unavailable
        return self.producer

    async def checks(self) -> dict[str, bool]:
        """Readiness of each dependency (for /readyz)."""
        results = {"kafka": self.producer.ready, "mongo": await self._mongo_ok()}
        if isinstance(self.limiter, RedisRateLimiter):
            results["redis"] = await self.limiter.ping()
        return results

    def healthy(self) -> bool:
        """Liveness (for /healthz): False only when the producer is wedged beyond replacement."""
        return self.producer.healthy

    async def _mongo_ok(self) -> bool:
        try:
            async with asyncio.timeout(2):
                await self.db.command("ping")
        except (PyMongoError, TimeoutError):
            return False
        return True

    async def stop(self) -> None:
        await self.replay_runner.stop()  # first: its jobs' leases are released through Mongo
        await self.tails.close()
        await self.sandbox.close()
        await self.notifier.close()
        await self.alert_http.aclose()
        await self.producer.stop()
        await self.limiter.close()
        await self.mongo.close()
        log.info("dashboard_stopped")


def build_notifier(
    stores: Stores,
    settings: Settings,
    http: httpx.AsyncClient,
    registry: CollectorRegistry | None,
    *,
    backoff: tuple[float, ...] | None = None,
) -> Notifier:
    """The notifier of the owners' alert channels, over ``http``; the API's and the
    commands' (which try each channel once: ``backoff=()``)."""
    return create_notifier(stores.alert_channels, settings, http, registry, backoff=backoff)
