"""The stats processor's process: the faust app, its two agents, and the flush to MongoDB.

The two agents: ``facts`` reads the source topics and sends each batch's facts
(``counting.facts_of``) to the facts topic; ``count`` reads the facts and applies them to the
table (``counting.BucketBook``). Both take their records through ``ordering.InOrder``.

The table is used as a changelogged store: values are written with ``table.data`` and
``table.send_changelog(partition, ...)`` once per key and batch, not ``table[key] = ...``, which
would send one changelog message per change and take the partition from the *current* event
(a batch mixes partitions).

Faust is started as a service inside this process's event loop, without its ``Worker``: the
process keeps its own signals, JSON logging and ``/healthz``, ``/readyz``, ``/metrics`` (the
README's note on the recorder's Faust spike says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import faust
from aiokafka.errors import KafkaError
from faust.types import TP, EventT
from pymongo.errors import PyMongoError

from hookbay_common.db import StatsRepository
from hookbay_common.db import client as db_client
from hookbay_common.kafka import BrokerProbe, ensure_configured_topics, topic_partitions
from hookbay_common.logs import get_logger
from hookbay_forwarder.pace import BULK, fetch_in
from hookbay_forwarder.process import EXIT_CRASHED, EXIT_OK, MONGO_SOCKET_TIMEOUT_MS
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_forwarder.stats.counting import BucketBook, facts_of, to_bucket
from hookbay_forwarder.stats.metrics import StatsMetrics
from hookbay_forwarder.stats.ordering import InOrder

log = get_logger("hookbay.stats")

BATCH: Final = 2000
"""Records one agent takes at once, or what arrived within the flush interval
(``HOOKBAY_STATS_FLUSH_INTERVAL``): MongoDB sees the buckets once an interval, so gathering
for less would only send the same facts and bucket changes to Kafka more often (a fact is one
message per webhook and batch, a changed bucket one changelog message per batch), and wake
both agents more often while nothing arrives."""
OBSERVE_INTERVAL: Final = 2.0


class StatsProcessor:
    """The ``stats`` role: the faust app in this process, its flush loop and its health."""

    def __init__(
        self, settings: ForwarderSettings, *, crash: Callable[[int], None] = os._exit
    ) -> None:
        self.settings = settings
        self.metrics = StatsMetrics()
        self.topics = settings.topics
        self._crash = crash
        self._stopping = asyncio.Event()
        self._started = False
        self._broker_answers = False
        self._last_flush_ok = time.monotonic()
        self._flush_failing = False
        self._flush_lock = asyncio.Lock()
        self.mongo = db_client.connect(
            settings.mongo_url, socket_timeout_ms=MONGO_SOCKET_TIMEOUT_MS
        )
        self.repository = StatsRepository(db_client.database(self.mongo))
        self.probe = BrokerProbe(settings.kafka_bootstrap, client_id="hookbay-stats-probe")
        self.app: faust.App | None = None
        self.book: BucketBook | None = None
        self.order: InOrder | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._exit = EXIT_OK
        self._read_topics = {self.topics.events, self.topics.attempts, self.topics.stats_facts}

    # Process protocol (see hookbay_forwarder.process) ---------------------------------------

    def checks(self) -> dict[str, bool]:
        tables: Any = self.app.tables if self.app is not None else None
        recovered = bool(tables is not None and tables.recovery.completed.is_set())
        return {
            "kafka": self._started and self._broker_answers,
            "recovered": recovered,
            "mongo": not self._flush_failing,
        }

    def healthy(self) -> bool:
        """False once faust's app crashed (an agent or its consumer thread failed for good):
        restarting the process is the cure."""
        return self.app is None or not self.app.crashed or self._stopping.is_set()

    def request_stop(self) -> None:
        self._stopping.set()

    async def start(self) -> None:
        s = self.settings

        async def connect() -> int:
            await ensure_configured_topics(s)
            return len(await topic_partitions(s.kafka_bootstrap, self.topics.stats_facts))

        await db_client.migrate(db_client.database(self.mongo))
        while not self._stopping.is_set():
            try:
                partitions = await connect()
            except (KafkaError, OSError, TimeoutError) as exc:
                log.warning("kafka_unreachable", error=type(exc).__name__)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), 2.0)
                continue
            self.app = self._create_app(partitions)
            await self.app.start()
            self._started = self._broker_answers = True
            log.info("stats_started", namespace=self.topics.namespace, partitions=partitions)
            return

    async def run(self) -> int:
        if not self._started:
            return EXIT_OK
        self._tasks = [
            asyncio.create_task(self._flush_loop()),
            asyncio.create_task(self._observe()),
        ]
        await self._stopping.wait()
        return self._exit

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.app is not None and self._started:
            await self.app.stop()  # acks are in step with the work: commits, flushes the producer
            await self._flush()  # the last changes, written before the process ends
        await self.probe.close()
        await self.mongo.close()
        log.info("stats_stopped")

    # the faust app ---------------------------------------------------------------------------

    def _create_app(self, partitions: int) -> faust.App:
        s, topics = self.settings, self.topics
        for noisy in ("faust", "mode", "aiokafka"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        app = faust.App(
            f"{topics.namespace}.stats",
            broker=[f"kafka://{server}" for server in s.kafka_bootstrap.split(",")],
            store="memory://",
            datadir=str(s.stats_data_dir),
            web_enabled=False,
            topic_partitions=partitions,
            topic_replication_factor=s.kafka_replication_factor,  # the topics faust makes itself
            table_standby_replicas=0,
            producer_acks=-1,
            broker_session_timeout=s.kafka_session_timeout_ms / 1000,
            broker_commit_interval=1.0,
            consumer_auto_offset_reset="earliest",
            broker_max_poll_records=2000,
            stream_buffer_maxsize=16_384,
            topic_allow_declare=True,
            topic_disable_leader=False,
        )
        sources = app.topic(
            topics.events, topics.attempts, key_serializer="raw", value_serializer="raw"
        )
        facts = app.topic(
            topics.stats_facts, partitions=partitions, key_serializer="raw",
            value_serializer="raw",
        )  # fmt: skip
        table = app.Table(
            "buckets", partitions=partitions,
            changelog_topic=app.topic(
                topics.stats_changelog, partitions=partitions, compacting=True, deleting=False,
                key_serializer="json", value_serializer="json",
            ),
        )  # fmt: skip

        def send(partition: int, key: str, value: Any) -> None:
            table.send_changelog(
                partition, key, value, key_serializer="json",
                value_serializer="raw" if value is None else "json",
            )  # fmt: skip

        self.book = book = BucketBook(table.data, send, s.stats_grace, late=self.metrics.late.inc)

        def forward(events: Sequence[EventT[Any]]) -> None:
            for webhook_id, value in facts_of(topics, events, self.metrics).items():
                facts.send_soon(key=webhook_id.encode(), value=value)

        self.order = order = InOrder(app.consumer, self._read_topics, self.metrics.reseeks)
        order.install()
        within = s.stats_flush_interval

        async def to_facts(stream: Any) -> None:
            async for events in stream.take_events(BATCH, within=within):
                events = await order.admit(events)
                self._guard(forward, events)

        async def count(stream: Any) -> None:
            async for events in stream.take_events(BATCH, within=within):
                events = await order.admit(events)
                batch = [(e.message.partition, e.message.value) for e in events]
                self._guard(book.apply, batch)

        app.agent(sources, name="facts")(to_facts)
        app.agent(facts, name="count")(count)

        @app.on_partitions_revoked.connect  # type: ignore[arg-type]
        async def on_revoked(_: Any, revoked: set[TP], **__: Any) -> None:
            lost = {tp.partition for tp in revoked if tp.topic == topics.stats_facts}
            async with self._flush_lock:  # a flush of them in flight finishes first
                book.forget(lost)

        return app

    def _guard(self, work: Callable[[Any], None], batch: Any) -> None:
        """Run one batch's work; if it fails, end the process before faust acks the batch (its
        offsets must not be committed): a restart reads it again."""
        try:
            work(batch)
        except Exception:
            log.exception("stats_batch_failed")
            self._crash(EXIT_CRASHED)
            raise

    # writes to MongoDB -------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.stats_flush_interval)
            await self._flush()

    def _owned(self) -> set[int]:
        if self.app is None:
            return set()
        return {
            tp.partition
            for tp in self.app.consumer.assignment()
            if tp.topic == self.topics.stats_facts
        }

    async def _flush(self) -> None:
        if self.book is None:
            return
        async with self._flush_lock:
            pending = self.book.unwritten(self._owned())
            if pending:
                started = time.perf_counter()
                try:
                    written = await self.repository.write(to_bucket(v) for _, v in pending)
                except PyMongoError as exc:
                    if not self._flush_failing:
                        log.warning("stats_write_failed", error=type(exc).__name__)
                    self._flush_failing = True
                    return
                self.metrics.write_latency.observe(time.perf_counter() - started)
                self.metrics.buckets_written.inc(written)
                for key, value in pending:
                    self.book.written[key] = value["v"]
            self._flush_failing = False
            self._last_flush_ok = time.monotonic()
            self.metrics.flushes.inc()

    @property
    def kafka_consumer(self) -> Any:
        """faust's aiokafka consumer (``None`` until faust's consumer thread made it)."""
        thread = getattr(self.app.consumer, "_thread", None) if self.app is not None else None
        return getattr(thread, "_consumer", None)

    async def _observe(self) -> None:
        while True:
            if self.app is not None and self.app.crashed and not self._stopping.is_set():
                log.error("stats_crashed", error=type(self.app.crash_reason).__name__)
                self._exit = EXIT_CRASHED
                self.request_stop()
            self._broker_answers = await self.probe.answers()
            fetch_in(self.kafka_consumer, BULK)  # on every look: faust makes it in its thread
            if self.order is not None and self.app is not None and self.checks()["recovered"]:
                self.order.watch(self.app.consumer.highwater)
                await self.order.mend()
            self.metrics.since_flush.set(time.monotonic() - self._last_flush_ok)
            if self.book is not None:
                self.metrics.open_buckets.set(sum(len(k) for k in self.book.open.values()))
            if self.app is not None:
                consumer: Any = self.app.consumer
                for tp in consumer.assignment():
                    high = consumer.highwater(tp)
                    committed = consumer._committed_offset.get(tp)  # no public view of it
                    if high is not None and tp.topic in self._read_topics:
                        lag = max(0, high - (committed or 0))
                        self.metrics.lag.labels("stats", tp.topic, str(tp.partition)).set(lag)
            await asyncio.sleep(OBSERVE_INTERVAL)
