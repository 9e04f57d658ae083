"""The recorder role, wired from settings: the process that writes events and attempts to MongoDB.

Consumer group ``<namespace>.recorder`` on events and attempts. The ``Process`` contract (start,
run, stop, readiness and liveness) is in ``hookbay_forwarder.process``; readiness here also
needs MongoDB taking writes.
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer

from hookbay_common.db import AttemptRepository, DestinationFailureRepository, EventRepository
from hookbay_common.db import client as db_client
from hookbay_common.kafka import BrokerProbe, create_consumer, ensure_configured_topics
from hookbay_common.logs import get_logger
from hookbay_forwarder.metrics import RecorderMetrics
from hookbay_forwarder.process import (
    EXIT_OK,
    MONGO_SOCKET_TIMEOUT_MS,
    OBSERVE_INTERVAL,
    closed,
    exit_status,
    report_lag,
    until_connected,
)
from hookbay_forwarder.recorder.consumer import RecorderLoop
from hookbay_forwarder.recorder.handlers import RecorderHandlers
from hookbay_forwarder.settings import ForwarderSettings

log = get_logger("hookbay.forwarder")  # the service's process logger, as in the forwarder role

STALL_WARNING = 30.0
"""Seconds without a commit, with records waiting, after which the recorder says where it is."""


class Recorder:
    def __init__(self, settings: ForwarderSettings) -> None:
        self.settings = settings
        self.metrics = RecorderMetrics()
        self.topics = settings.topics
        self._stopping = asyncio.Event()
        self._started = False
        self._broker_answers = False
        self.mongo = db_client.connect(
            settings.mongo_url, socket_timeout_ms=MONGO_SOCKET_TIMEOUT_MS
        )
        db = db_client.database(self.mongo)
        self.handlers = RecorderHandlers(
            EventRepository(db), AttemptRepository(db), self.topics, self.metrics,
            DestinationFailureRepository(db),
        )  # fmt: skip
        self.consumer: AIOKafkaConsumer = create_consumer(
            settings.kafka_bootstrap, self.topics.events, self.topics.attempts,
            group_id=f"{self.topics.namespace}.recorder", client_id="hookbay-recorder",
            session_timeout_ms=settings.kafka_session_timeout_ms,
        )  # fmt: skip
        self.loop = RecorderLoop(
            self.consumer, self.handlers, linger=settings.recorder_linger,
            commit_interval=settings.recorder_commit_interval, hold=settings.recorder_hold,
        )  # fmt: skip
        self.probe = BrokerProbe(settings.kafka_bootstrap, client_id="hookbay-recorder-probe")

    def checks(self) -> dict[str, bool]:
        return {
            "kafka": self._started and self._broker_answers,
            "consumer": self._started and not self.loop.ended,
            "mongo": self.loop.healthy,
        }

    def healthy(self) -> bool:
        return not self.loop.ended or self._stopping.is_set()

    def request_stop(self) -> None:
        self._stopping.set()
        self.loop.stop()

    async def start(self) -> None:
        async def connect() -> None:
            await ensure_configured_topics(self.settings)
            await self.consumer.start()

        await db_client.migrate(db_client.database(self.mongo))
        self._started = await until_connected(connect, self._stopping)
        self._broker_answers = self._started
        if self._started:
            log.info("recorder_started", namespace=self.topics.namespace)

    async def run(self) -> int:
        if not self._started:
            return EXIT_OK
        observer = asyncio.create_task(self._observe())
        try:
            results = await asyncio.gather(self.loop.run(), return_exceptions=True)
        finally:
            observer.cancel()
        return exit_status(results)

    async def stop(self) -> None:
        await closed(self.consumer.stop(), "consumer")
        await closed(self.probe.close(), "probe")
        await self.mongo.close()
        log.info("recorder_stopped")

    async def _observe(self) -> None:
        while True:
            self._broker_answers = await self.probe.answers()
            lags = self.loop.lag()
            report_lag(self.metrics, "recorder", self.consumer, lags)
            stalled = time.monotonic() - self.loop.last_commit
            if stalled > STALL_WARNING and any(lags.values()):
                log.warning("recorder_stalled", stage=self.loop.stage, seconds=round(stalled))
            await asyncio.sleep(OBSERVE_INTERVAL)
