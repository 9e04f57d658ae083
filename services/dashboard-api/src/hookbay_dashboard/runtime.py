"""What every request of the dashboard API works with, opened by the app's lifespan."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiokafka import AIOKafkaProducer
from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError

from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    AttemptRepository,
    EventRepository,
    ReplayJobRepository,
    SessionRepository,
    TokenRepository,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.db import client as db_client
from hookbay_common.errors import ServiceUnavailable
from hookbay_common.kafka import create_producer, start_when_reachable
from hookbay_common.logs import get_logger
from hookbay_common.plans import PlanBook
from hookbay_common.ratelimit import RateLimiter, RedisRateLimiter, create_rate_limiter
from hookbay_common.secrets_box import SecretBox
from hookbay_dashboard.replays.service import ReplayJobRunner, ReplayPublisher
from hookbay_dashboard.settings import DashboardSettings

log = get_logger("hookbay.dashboard")


class Runtime:
    """Clients and repositories shared by all requests of one app instance."""

    def __init__(self, settings: DashboardSettings, plans: PlanBook) -> None:
        self.settings = settings
        self.plans = plans
        self.box = SecretBox(settings.secret_key.get_secret_value())
        self.kafka_connected = asyncio.Event()
        """Set once the producer reached the broker; replays answer 503 until then."""
        self._connect_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the clients inside the server's event loop and migrate the database."""
        settings = self.settings
        self.mongo: AsyncMongoClient[dict[str, Any]] = db_client.connect(settings.mongo_url)
        self.db = db_client.database(self.mongo)
        await db_client.migrate(self.db)
        self.users = UserRepository(self.db)
        self.tokens = TokenRepository(self.db)
        self.sessions = SessionRepository(self.db)
        self.webhooks = WebhookRepository(self.db, self.box)
        self.events = EventRepository(self.db)
        self.attempts = AttemptRepository(self.db)
        self.limiter: RateLimiter = create_rate_limiter(
            settings.redis_url, key_prefix=settings.redis_key_prefix
        )
        self.producer: AIOKafkaProducer = create_producer(
            settings.kafka_bootstrap, client_id="hookbay-dashboard"
        )
        self._connect_task = asyncio.create_task(
            start_when_reachable(
                self.producer, self.kafka_connected, bootstrap=settings.kafka_bootstrap
            ),
            name="kafka-connect",
        )
        self.config = ConfigPublisher(self._send, settings.topics.config, self.box)
        self.replay_jobs = ReplayJobRepository(self.db)
        self.replay_runner = ReplayJobRunner(
            self.replay_jobs, self.webhooks, ReplayPublisher(self.require_kafka, settings.topics),
            poll_interval=settings.replay_poll_interval, lease=settings.replay_lease,
            page_size=settings.replay_page_size,
        )  # fmt: skip
        self.replay_runner.start()  # bulk replays: this replica's jobs, and orphans it adopts

    async def _send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.require_kafka().send_and_wait(topic, value, key=key)

    def require_kafka(self) -> AIOKafkaProducer:
        """The producer, or ``ServiceUnavailable`` while the broker is unreachable."""
        if not self.kafka_connected.is_set():
            unavailable = ServiceUnavailable(
                "Kafka is unreachable; try again shortly", retryAfter=5
            )
            unavailable.headers["Retry-After"] = "5"
            raise unavailable
        return self.producer

    async def checks(self) -> dict[str, bool]:
        """Readiness of each dependency (for /readyz)."""
        results = {"kafka": self.kafka_connected.is_set(), "mongo": await self._mongo_ok()}
        if isinstance(self.limiter, RedisRateLimiter):
            results["redis"] = await self.limiter.ping()
        return results

    async def _mongo_ok(self) -> bool:
        try:
            async with asyncio.timeout(2):
                await self.db.command("ping")
        except (PyMongoError, TimeoutError):
            return False
        return True

    async def stop(self) -> None:
        await self.replay_runner.stop()  # first: its jobs' leases are released through Mongo
        if self._connect_task is not None:
            self._connect_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connect_task
        await self.producer.stop()
        await self.limiter.close()
        await self.mongo.close()
        log.info("dashboard_stopped")
