"""The two long-running processes of this service, wired from settings.

``Forwarder``: consumer group ``<namespace>.forwarder`` on the events topic (first attempts,
ordered per owner) and ``<namespace>.forwarder-tasks`` on the retry tiers and replays.
``Recorder``: consumer group ``<namespace>.recorder`` on events and attempts, into MongoDB.

Both: ``start()`` (waits for Kafka, never gives up until stopped), ``run()`` (returns an exit
status), ``stop()`` (graceful: hand back or finish in-flight work, commit, flush).

``checks()`` is readiness (``/readyz``): started, every consume loop running, the broker answering
(and, for the forwarder, its producer able to send; for the recorder, MongoDB taking writes).
``healthy()`` is liveness (``/healthz``): False only when restarting the process is the cure —
a consume loop ended on its own, or the producer is wedged beyond replacement (see
``hookbay_common.producer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from hookbay_common.db import AttemptRepository, EventRepository
from hookbay_common.db import client as db_client
from hookbay_common.kafka import BrokerProbe, create_consumer, ensure_configured_topics
from hookbay_common.logs import get_logger
from hookbay_common.producer import ResilientProducer
from hookbay_forwarder.consumer import HandlerCrashed, OrderedConsumer
from hookbay_forwarder.deadletter import DeadLetterLimit, DeadLetterLimitExceeded
from hookbay_forwarder.delivery import Deliverer, create_clients, create_session
from hookbay_forwarder.handlers import ForwarderHandlers
from hookbay_forwarder.metrics import ConsumerMetrics, ForwarderMetrics, RecorderMetrics
from hookbay_forwarder.recorder import RecorderHandlers, RecorderLoop
from hookbay_forwarder.retry import RetryPolicy
from hookbay_forwarder.settings import ForwarderSettings

log = get_logger("hookbay.forwarder")

EXIT_OK = 0
EXIT_CRASHED = 1
EXIT_DEAD_LETTER_LIMIT = 3
OBSERVE_INTERVAL = 2.0
STALL_WARNING = 30.0
"""Seconds without a commit, with records waiting, after which the recorder says where it is."""
MONGO_SOCKET_TIMEOUT_MS = 30_000
"""One MongoDB operation of the recorder (and the stats processor) waits at most this for its
answer: a FerretDB restarted under load once left a write unanswered, and the recorder, bound
only by its 300 s batch deadline, sat still for minutes with everything it had read. No single
upsert or look-up of theirs takes seconds; the batch is then written again (idempotent)."""
FALLBACK_POOLS = 4
"""httpx pools for the rare request whose header bytes are not UTF-8 (see ``Deliverer``)."""


class Process(Protocol):
    @property
    def metrics(self) -> ConsumerMetrics: ...

    def checks(self) -> dict[str, bool]: ...
    def healthy(self) -> bool: ...
    async def start(self) -> None: ...
    async def run(self) -> int: ...
    async def stop(self) -> None: ...
    def request_stop(self) -> None: ...


async def _until_connected(attempt: Callable[[], Awaitable[Any]], stopping: asyncio.Event) -> bool:
    """Retry ``attempt`` until it succeeds (True) or a stop is requested (False)."""
    while not stopping.is_set():
        try:
            await attempt()
        except (KafkaError, OSError, TimeoutError) as exc:
            log.warning("kafka_unreachable", error=type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 2.0)
        else:
            return True
    return False


class Forwarder:
    def __init__(self, settings: ForwarderSettings) -> None:
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
        )
        self.events = self._ordered(f"{self.topics.namespace}.forwarder", self.handlers.on_event)
        self.tasks = self._ordered(
            f"{self.topics.namespace}.forwarder-tasks", self.handlers.on_task
        )

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
        }

    def healthy(self) -> bool:
        loops_alive = not (self.events.ended or self.tasks.ended) or self._stopping.is_set()
        return loops_alive and self.producer.healthy

    def request_stop(self) -> None:
        self._stopping.set()
        self.events.stop()
        self.tasks.stop()

    async def start(self) -> None:
        async def connect() -> None:
            await ensure_configured_topics(self.settings)
            await self.producer.start()  # connects in the background, replaces itself if wedged
            await self.producer.wait_ready(within=5.0)
            self.events.consumer.subscribe([self.topics.events], listener=self.events)
            self.tasks.consumer.subscribe(pattern=self.topics.task_pattern, listener=self.tasks)
            await self.events.consumer.start()
            await self.tasks.consumer.start()

        self._started = await _until_connected(connect, self._stopping)
        if self._started:
            log.info("forwarder_started", namespace=self.topics.namespace)

    async def run(self) -> int:
        if not self._started:
            return EXIT_OK
        observer = asyncio.create_task(self._observe())
        loops = [asyncio.create_task(c.run()) for c in (self.events, self.tasks)]
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
            await asyncio.gather(self.events.drain(grace), self.tasks.drain(grace))
        for consumer in (self.events.consumer, self.tasks.consumer):
            await _closed(consumer.stop(), "consumer")
        await self.producer.stop()  # flushes what is still queued (bounded)
        await self.deliverer.aclose()
        log.info("forwarder_stopped")

    async def _observe(self) -> None:
        while True:
            waiting = 0
            for ordered in (self.events, self.tasks):
                _report_lag(self.metrics, ordered.name, ordered.consumer, ordered.lag())
                self.metrics.buffered.labels(ordered.name).set(ordered.buffered)
            for tp, lag in self.tasks.lag().items():
                if tp.topic != self.topics.replays:
                    waiting += lag
            self.metrics.retries_waiting.set(waiting)
            await asyncio.sleep(OBSERVE_INTERVAL)


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
            EventRepository(db), AttemptRepository(db), self.topics, self.metrics
        )
        self.consumer: AIOKafkaConsumer = create_consumer(
            settings.kafka_bootstrap, self.topics.events, self.topics.attempts,
            group_id=f"{self.topics.namespace}.recorder", client_id="hookbay-recorder",
            session_timeout_ms=settings.kafka_session_timeout_ms,
        )  # fmt: skip
        self.loop = RecorderLoop(self.consumer, self.handlers)
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
        self._started = await _until_connected(connect, self._stopping)
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
        return _exit_status(results)

    async def stop(self) -> None:
        await _closed(self.consumer.stop(), "consumer")
        await _closed(self.probe.close(), "probe")
        await self.mongo.close()
        log.info("recorder_stopped")

    async def _observe(self) -> None:
        while True:
            self._broker_answers = await self.probe.answers()
            lags = self.loop.lag()
            _report_lag(self.metrics, "recorder", self.consumer, lags)
            stalled = time.monotonic() - self.loop.last_commit
            if stalled > STALL_WARNING and any(lags.values()):
                log.warning("recorder_stalled", stage=self.loop.stage, seconds=round(stalled))
            await asyncio.sleep(OBSERVE_INTERVAL)


CLOSE_TIMEOUT = 10.0


async def _closed(closing: Awaitable[None], what: str) -> None:
    """Close a Kafka client, but never hang a shutdown on it: offsets are committed by then."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await closing
    except TimeoutError:
        log.warning("kafka_close_timed_out", client=what, seconds=CLOSE_TIMEOUT)
    except KafkaError as exc:
        log.warning("kafka_close_failed", client=what, error=type(exc).__name__)


def _report_lag(
    metrics: ConsumerMetrics, name: str, _: AIOKafkaConsumer, lags: dict[Any, int]
) -> None:
    for tp, lag in lags.items():
        metrics.lag.labels(name, tp.topic, str(tp.partition)).set(lag)


def _exit_status(results: Sequence[Any]) -> int:
    for result in results:
        if isinstance(result, BaseException):
            cause = result.__cause__ if isinstance(result, HandlerCrashed) else result
            if isinstance(cause, DeadLetterLimitExceeded):
                log.critical("dead_letter_limit_exceeded", reason=str(cause))
                return EXIT_DEAD_LETTER_LIMIT
            log.error("consumer_failed", error=type(cause).__name__, detail=str(cause)[:500])
            return EXIT_CRASHED
    return EXIT_OK
