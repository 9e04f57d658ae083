"""The ingest app: ``create_app(settings)``, the receiving route plus health, readiness and
metrics, and ``Ingest``, what its lifespan opens and closes.

- ``/w/{username}/{webhook-name}``: the receive pipeline (``hookbay_ingest.receive``), reached
  through the ASGI fast path (``hookbay_ingest.fastpath``) in front of FastAPI, not through it.
- ``/healthz``, ``/readyz``, ``/metrics`` on FastAPI; its own 404 and 405 rendered in hookbay's
  JSON error shape (``hookbay_ingest.rendering``).
- Start-up opens MongoDB, Redis and the Kafka producer inside the server's event loop and loads
  the configuration view; shutdown flushes the producer last, so every 200 was acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from hookbay_common.changelog import ChangeLog
from hookbay_common.db import UserRepository, WebhookRepository
from hookbay_common.db import client as db_client
from hookbay_common.logs import get_logger
from hookbay_common.plans import PlanBook, load_plans
from hookbay_common.process import Probes, heap, mount_probes, report_loop_errors
from hookbay_common.producer import ResilientProducer
from hookbay_common.ratelimit import RateLimiter, RedisRateLimiter, create_rate_limiter
from hookbay_common.secrets_box import SecretBox
from hookbay_ingest.fastpath import FastPath
from hookbay_ingest.metrics import IngestMetrics
from hookbay_ingest.receive import ReceivePipeline
from hookbay_ingest.rendering import http_error
from hookbay_ingest.settings import IngestSettings
from hookbay_ingest.view import ConfigView

log = get_logger("hookbay.ingest")
DELIVERY_SHARE: Final = 0.9
"""Of ``produce_timeout``: when librdkafka gives up on an event it could not deliver."""


class Ingest:
    """Everything a receiving request needs, opened by the app's lifespan (``start``) and closed
    by it (``stop``); ``pipeline`` exists once started."""

    def __init__(self, settings: IngestSettings, plans: PlanBook) -> None:
        self.settings = settings
        self.plans = plans
        self.draining = False
        """Set on SIGTERM with a drain delay: still serving, no longer ready."""
        self.metrics = IngestMetrics()
        # librdkafka stops trying an event before the request's deadline, so an event answered
        # 503 is not sent afterwards (docs/decisions.md, "Ingest produces through librdkafka")
        self.producer = ResilientProducer.from_settings(
            settings,
            name="hookbay-ingest",
            registry=self.metrics.registry,
            librdkafka=True,
            delivery_timeout=settings.produce_timeout * DELIVERY_SHARE,
        )

    @property
    def kafka_connected(self) -> asyncio.Event:
        """Set once the producer first reached the broker; until then every event gets a 503."""
        return self.producer.started

    async def start(self) -> None:
        """Open the clients (inside the server's event loop) and load the configuration view."""
        settings = self.settings
        self.mongo = db_client.connect(settings.mongo_url)
        db = db_client.database(self.mongo)
        box = SecretBox(settings.secret_key.get_secret_value())
        self.view = ConfigView(
            UserRepository(db), WebhookRepository(db, box),
            ChangeLog(
                settings.kafka_bootstrap, settings.topics.config_spec(), box,
                client_id="hookbay-ingest-config",
            ),
            self.metrics.view, settings.view_settings(),
        )  # fmt: skip
        self.limiter: RateLimiter = create_rate_limiter(
            settings.redis_url, key_prefix=f"{settings.redis_prefix}rl:"
        )
        self.pipeline = ReceivePipeline(
            settings, self.plans, self.metrics, self.producer, self.view, self.limiter
        )
        await self.view.start()
        await self.producer.start()  # connects in the background, replaces itself when wedged

    async def stop(self) -> None:
        """Flush the producer last: every request that got a 200 is already acknowledged."""
        await self.view.stop()
        await self.producer.stop()  # flushes: waits for every pending acknowledgement
        await self.limiter.close()
        await self.mongo.close()
        log.info("ingest_stopped")

    async def receive(self, request: Request) -> Response:
        """The receiving endpoint: ``ReceivePipeline.receive``."""
        return await self.pipeline.receive(request)


def create_app(settings: IngestSettings, plans: PlanBook | None = None) -> FastPath:
    """The ASGI app to serve: the receiving route on the fast path, the rest on FastAPI."""
    ingest = Ingest(settings, plans or load_plans(settings.plans_file))

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        report_loop_errors()
        await ingest.start()
        heap.settle()
        try:
            yield
        finally:
            await ingest.stop()

    app = FastAPI(
        title="hookbay ingest", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.ingest = ingest
    app.add_exception_handler(StarletteHTTPException, http_error)

    async def reported() -> dict[str, Any]:
        # reported, never gating: the limiter fails open, and every replica turning unready at
        # once while Redis restarts would take intake down with it (the chaos suite's Redis
        # scenario)
        if isinstance(ingest.limiter, RedisRateLimiter):
            return {"redis": await ingest.limiter.ping()}
        return {}

    probes = Probes(
        checks=lambda: {"kafka": ingest.producer.ready, "config_view": ingest.view.caught_up},
        # unhealthy only when wedged beyond what replacing the producer fixes
        healthy=lambda: ingest.producer.healthy,
        draining=lambda: ingest.draining,
        reported=reported,
    )
    mount_probes(app, probes, ingest.metrics.registry)
    return FastPath(app, ingest.receive, ingest.metrics.in_flight)  # every method: the 405 is ours
