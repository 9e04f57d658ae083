"""Following the configuration change log (``hookbay_common.configlog``) from its end: what every
replica that keeps a view of the configuration reads it with (ingest's ``ConfigView``, the
forwarder's ``RoutingView``).

A view takes the log's end (``connect``), then loads MongoDB, then applies every change read from
that end on (``follow``): nothing committed before the end was taken is missed, everything after
it is read. ``sync`` waits until every record on the log at the moment of the call is applied, so a
view can tell a name that is absent from one that is on its way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Final, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from hookbay_common.configlog import ConfigChange, UnreadableChange, decode_change
from hookbay_common.kafka import ensure_topics, topic_partitions
from hookbay_common.logs import get_logger
from hookbay_common.secrets_box import SecretBox
from hookbay_common.topics import TopicSpec

log = get_logger("hookbay.changelog")

RECONNECT_INTERVAL: Final = 2.0
"""Seconds between attempts to reach Kafka (and, for the views, MongoDB) again."""
SYNC_TIMEOUT: Final = 1.0
"""Longest ``sync``: past it the view answers with what it holds."""
FETCH_WAIT_MS: Final = 1000
"""How long the broker may hold the follower's fetch while the log has nothing new: an idle
follower asks once a second. A new record ends the wait at once, so it does not delay changes;
``sync`` asks for the log's end on a connection of its own, because a broker answers a
connection's requests in order and would hold that question behind the waiting fetch (measured:
``sync`` took up to the whole wait, and so did every answer that a name is absent)."""


class _Counter(Protocol):
    def inc(self) -> None: ...


class _Gauge(Protocol):
    def set(self, value: float) -> None: ...


class ChangeLogMetrics(Protocol):
    """What ``follow`` reports: records it could not read, and records not read yet."""

    @property
    def unreadable(self) -> _Counter: ...

    @property
    def lag(self) -> _Gauge: ...


class ChangeLog:
    """Reads the change log from its end as of ``connect``; the view loads MongoDB after taking
    that end, so nothing committed before it is missed and everything after it is read."""

    def __init__(self, bootstrap: str, spec: TopicSpec, box: SecretBox, *, client_id: str) -> None:
        self._bootstrap = bootstrap
        self._spec = spec
        self._topic = spec.name
        self._box = box
        self._client_id = client_id
        self._consumer: AIOKafkaConsumer | None = None
        self._offsets: AIOKafkaConsumer | None = None
        """Asks for the log's end (``sync``) on its own connection; it fetches nothing."""
        self._start: dict[TopicPartition, int] = {}
        self._positions: dict[TopicPartition, int] = {}
        self._ends: asyncio.Task[dict[TopicPartition, int]] | None = None
        self._advanced = asyncio.Event()
        self.at_end = False

    async def connect(self) -> None:
        """Until the broker answers: create the topic if it is missing (idempotent), assign
        every partition, take the end offsets, seek there."""
        while True:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap, enable_auto_commit=False,
                client_id=self._client_id, isolation_level="read_committed",
                fetch_max_wait_ms=FETCH_WAIT_MS,
            )  # fmt: skip
            offsets = AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap, enable_auto_commit=False,
                client_id=f"{self._client_id}-ends", isolation_level="read_committed",
            )  # fmt: skip
            try:
                await ensure_topics(self._bootstrap, partitions=1, specs=[self._spec])
                partitions = await topic_partitions(self._bootstrap, self._topic)
                await consumer.start()
                await offsets.start()
                assigned = [TopicPartition(self._topic, p) for p in partitions]
                consumer.assign(assigned)
                # asked on the ends connection: it is made now, not on the first sync
                self._start = dict(await offsets.end_offsets(assigned))
                for tp, offset in self._start.items():
                    consumer.seek(tp, offset)
                    self._positions[tp] = offset
            except KafkaError as exc:
                log.warning(
                    "config_changelog_unreachable", bootstrap=self._bootstrap,
                    client_id=self._client_id, error=type(exc).__name__,
                )  # fmt: skip
                await consumer.stop()
                await offsets.stop()
                await asyncio.sleep(RECONNECT_INTERVAL)
                continue
            self._consumer, self._offsets = consumer, offsets
            self.at_end = True
            return

    async def follow(self, metrics: ChangeLogMetrics) -> AsyncIterator[ConfigChange]:
        """Every change from the end taken at ``connect`` on; unreadable records are skipped."""
        assert self._consumer is not None
        consumer = self._consumer
        while True:
            batch = await consumer.getmany(timeout_ms=500)
            for tp, records in batch.items():
                for record in records:
                    self._positions[tp] = record.offset + 1
                    try:
                        change = decode_change(record.value, self._box)
                    except UnreadableChange as exc:
                        metrics.unreadable.inc()
                        log.warning(
                            "config_change_unreadable", client_id=self._client_id,
                            offset=record.offset, error=str(exc),
                        )  # fmt: skip
                        continue
                    yield change
            lag = 0
            for tp in self._start:
                self._positions[tp] = await consumer.position(tp)
                end = consumer.highwater(tp)
                if end is not None:
                    lag += max(0, end - self._positions[tp])
            metrics.lag.set(lag)
            self.at_end = lag == 0
            self._advanced.set()  # every record of the batch is applied by now
            self._advanced = asyncio.Event()

    async def sync(self) -> None:
        """Return once every record on the log when this was called has been applied; at most
        ``SYNC_TIMEOUT`` s (Kafka away, or not followed yet: the view answers with what it holds).
        Concurrent callers share one end-offset request (a caller arriving while one is in
        flight joins it: the window is that request's round trip)."""
        offsets = self._offsets
        if offsets is None:
            return
        with contextlib.suppress(TimeoutError, KafkaError):
            async with asyncio.timeout(SYNC_TIMEOUT):
                if self._ends is None or self._ends.done():
                    self._ends = asyncio.create_task(offsets.end_offsets(list(self._start)))
                ends = await asyncio.shield(self._ends)
                while any(self._positions.get(tp, 0) < end for tp, end in ends.items()):
                    await self._advanced.wait()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
        if self._offsets is not None:
            await self._offsets.stop()
