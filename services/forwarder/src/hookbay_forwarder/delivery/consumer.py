"""The consume loop: read, hand each record to a handler, commit offsets after the work.

It knows no business. Records sharing a key (within a partition) are handled one at a time in
offset order; records with different keys run concurrently, so one slow key never delays
another. An offset is committed only once every record at or below it has been handled, so a
crash at any point re-delivers work (at-least-once) and never skips it.

A record may carry a ``not-before`` header (milliseconds since the epoch): its partition is
paused until then and read again from that record, which is how retry tiers wait without
holding records in memory.

Broker blips are ridden out, never fatal: a handler that raises a retriable Kafka error
(``hookbay_common.producer.is_retriable``) or ``TryAgainLater`` (a store it reads is away) is
called again for the same record after a back-off
(0.2 s doubling to 5 s), and a commit or fetch that fails that way, or a commit unanswered for
``COMMIT_TIMEOUT``, is tried again at the next round. Any other exception from a handler is a bug: the loop stops (``HandlerCrashed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata

from hookbay_common.logs import get_logger
from hookbay_common.producer import is_retriable
from hookbay_forwarder.metrics import ConsumerMetrics
from hookbay_forwarder.offsets import PartitionOffsets

log = get_logger("hookbay.consumer")

Record = ConsumerRecord  # ConsumerRecord[bytes, bytes]
Handler = Callable[[Any], Awaitable[None]]
NOT_BEFORE_HEADER = "not-before"
RETRY_BACKOFF_MIN = 0.2
RETRY_BACKOFF_MAX = 5.0
COMMIT_TIMEOUT = 15.0
"""aiokafka retries a commit until the group coordinator answers; past this, read on."""


def not_before_ms(record: Any) -> int | None:
    for name, value in record.headers or ():
        if name == NOT_BEFORE_HEADER:
            return int(value)
    return None


class HandlerCrashed(RuntimeError):
    """A handler raised: a bug. The loop stops without committing the record."""


class TryAgainLater(Exception):
    """Raised by a handler whose record succeeds later (a store it reads is away): the record
    is handled again after a back-off, like a retriable Kafka error, never a crash."""


async def ride_out_blip(
    consumer: str, what: str, error: KafkaError, stopping: asyncio.Event
) -> None:
    """A consume loop's fetch or commit failed: retriable (or a commit refused after a
    rebalance, whose records the partitions' new owner redoes) → log, wait a little (less when
    ``stopping`` is set), go on; else raise."""
    if not (is_retriable(error) or isinstance(error, CommitFailedError)):
        raise error
    log.warning("kafka_blip", consumer=consumer, operation=what, error=type(error).__name__)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), RETRY_BACKOFF_MIN)


def _again_later(error: BaseException) -> bool:
    return is_retriable(error) or isinstance(error, TryAgainLater)


@dataclass
class _Lane:
    """The queue of one key in one partition and the task draining it."""

    records: deque[Any] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None


class OrderedConsumer(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        handler: Handler,
        *,
        name: str,
        max_buffered: int = 10_000,
        max_buffered_bytes: int = 256 * 1024 * 1024,
        commit_interval: float = 1.0,
        revoke_grace: float = 15.0,
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        self.consumer = consumer
        self.name = name
        self._handler = handler
        self._max_buffered = max_buffered
        self._max_bytes = max_buffered_bytes
        self._commit_interval = commit_interval
        self._revoke_grace = revoke_grace
        self._partitions: dict[TopicPartition, PartitionOffsets] = {}
        self._lanes: dict[tuple[TopicPartition, bytes | None], _Lane] = {}
        self._held: dict[TopicPartition, float] = {}  # paused until (monotonic seconds)
        self._paused: set[TopicPartition] = set()
        self._buffered = 0
        self._buffered_bytes = 0
        self._pressure = False
        self._stopping = asyncio.Event()
        self._crash: BaseException | None = None
        self.running = False
        self.ended = False
        """Set once ``run`` returned (stopped or crashed)."""
        self._metrics = metrics
        self.last_commit = time.monotonic()
        """When offsets were last committed, or the consumer last owed no commit."""
        if metrics is not None:
            metrics.since_commit.labels(name).set_function(
                lambda: time.monotonic() - self.last_commit
            )
        self.assigned = asyncio.Event()
        """Set once the group gave this consumer its partitions (readiness)."""

    # --- rebalance --------------------------------------------------------------------------

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        """Hand the partitions back cleanly: drop what has not started, let what is running
        finish (bounded), commit what is done."""
        revoked_set = set(revoked)
        running = []
        for (tp, _), lane in list(self._lanes.items()):
            if tp in revoked_set:
                self._drop_waiting(lane)
                if lane.task is not None:
                    running.append(lane.task)
        if running:
            await asyncio.wait(running, timeout=self._revoke_grace)
        await self._commit(only=revoked_set)
        for tp in revoked_set:
            self._partitions.pop(tp, None)
            self._held.pop(tp, None)
            self._paused.discard(tp)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        for tp in assigned:
            self._partitions.setdefault(tp, PartitionOffsets())
        self.assigned.set()
        log.info("partitions_assigned", consumer=self.name, partitions=len(assigned))

    # --- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until ``stop()``; raise ``HandlerCrashed`` if a handler raised."""
        self.running = True
        last_commit = time.monotonic()
        try:
            while not self._stopping.is_set():
                self._apply_pauses()
                try:
                    batch = await self.consumer.getmany(timeout_ms=self._poll_ms(), max_records=500)
                except KafkaError as exc:
                    await self._blip("fetch", exc)
                    continue
                for tp, records in batch.items():
                    self._take(tp, records)
                if self._crash is not None:
                    raise HandlerCrashed(self.name) from self._crash
                if time.monotonic() - last_commit >= self._commit_interval:
                    try:
                        async with asyncio.timeout(COMMIT_TIMEOUT):
                            await self._commit()
                    except TimeoutError:  # the next round commits these offsets (or later ones)
                        self._count_retry(TimeoutError())
                        log.warning("kafka_blip", consumer=self.name, operation="commit",
                                    error="timeout")  # fmt: skip
                    except KafkaError as exc:
                        await self._blip("commit", exc)
                    last_commit = time.monotonic()
        finally:
            self.running = False
            self.ended = True

    async def _blip(self, what: str, error: KafkaError) -> None:
        self._count_retry(error)
        await ride_out_blip(self.name, what, error, self._stopping)

    def _count_retry(self, error: BaseException) -> None:
        if self._metrics is not None:
            self._metrics.handler_retries.labels(self.name, type(error).__name__).inc()

    def stop(self) -> None:
        self._stopping.set()

    async def drain(self, grace: float) -> None:
        """After ``run`` returned: wait up to ``grace`` for running handlers, cancel the rest
        (their records are not committed, so whoever gets the partition redoes them), commit."""
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        for lane in list(self._lanes.values()):
            self._drop_waiting(lane)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._crash is None:
            try:
                await self._commit()
            except KafkaError as exc:  # e.g. a rebalance under way: the new owner redoes them
                log.warning("final_commit_failed", consumer=self.name, error=type(exc).__name__)

    def _poll_ms(self) -> int:
        if not self._held:
            return 200
        wait = min(self._held.values()) - time.monotonic()
        return max(10, min(200, int(wait * 1000)))

    def _take(self, tp: TopicPartition, records: list[Any]) -> None:
        partition = self._partitions.setdefault(tp, PartitionOffsets())
        now_ms = time.time() * 1000
        for record in records:
            due = not_before_ms(record)
            if due is not None and due > now_ms:
                # not due: read this partition again from here once it is
                self.consumer.seek(tp, record.offset)
                self._held[tp] = time.monotonic() + (due - now_ms) / 1000
                return
            partition.add(record.offset)
            lane = self._lanes.setdefault((tp, record.key), _Lane())
            lane.records.append(record)
            self._buffered += 1
            self._buffered_bytes += _size(record)
            if lane.task is None:
                lane.task = asyncio.create_task(self._drain_lane(tp, record.key, lane))

    async def _drain_lane(self, tp: TopicPartition, key: bytes | None, lane: _Lane) -> None:
        try:
            delay = RETRY_BACKOFF_MIN
            while lane.records:
                record = lane.records[0]
                try:
                    await self._handler(record)
                except Exception as exc:
                    if _again_later(exc):
                        if self._stopping.is_set():
                            return  # not committed: whoever reads the partition next redoes it
                        self._count_retry(exc)
                        log.warning(
                            "handler_retry", consumer=self.name, topic=tp.topic,
                            partition=tp.partition, offset=record.offset,
                            error=type(exc).__name__, delay=delay,
                        )  # fmt: skip
                        await asyncio.sleep(delay)
                        delay = min(RETRY_BACKOFF_MAX, delay * 2)
                        continue
                    log.exception(
                        "handler_crashed", consumer=self.name, topic=tp.topic,
                        partition=tp.partition, offset=record.offset,
                    )  # fmt: skip
                    self._crash = exc
                    self._stopping.set()
                    return
                delay = RETRY_BACKOFF_MIN
                lane.records.popleft()
                self._release(1, _size(record))
                partition = self._partitions.get(tp)
                if partition is not None:
                    partition.finish(record.offset)
        finally:
            lane.task = None
            if not lane.records and self._lanes.get((tp, key)) is lane:
                del self._lanes[(tp, key)]

    def _drop_waiting(self, lane: _Lane) -> None:
        """Forget a lane's records that have not started; the running one (the head, while the
        lane's task lives) finishes and is committed as usual."""
        keep = 1 if lane.task is not None and lane.records else 0
        dropped = list(lane.records)[keep:]
        for _ in dropped:
            lane.records.pop()
        self._release(len(dropped), sum(_size(r) for r in dropped))

    def _release(self, count: int, size: int) -> None:
        self._buffered -= count
        self._buffered_bytes -= size

    def _apply_pauses(self) -> None:
        now = time.monotonic()
        for tp, until in list(self._held.items()):
            if until <= now:
                del self._held[tp]
        if self._buffered >= self._max_buffered or self._buffered_bytes >= self._max_bytes:
            self._pressure = True
        elif self._buffered <= self._max_buffered // 2 and (
            self._buffered_bytes <= self._max_bytes // 2
        ):
            self._pressure = False
        assignment = self.consumer.assignment()
        wanted = set(assignment) if self._pressure else set(self._held) & assignment
        if wanted - self._paused:
            self.consumer.pause(*(wanted - self._paused))
        if self._paused - wanted:
            self.consumer.resume(*((self._paused - wanted) & assignment))
        self._paused = wanted

    async def _commit(self, only: set[TopicPartition] | None = None) -> None:
        offsets = {}
        for tp, partition in self._partitions.items():
            if only is not None and tp not in only:
                continue
            offset = partition.committable()
            if offset is not None and offset != partition.committed:
                offsets[tp] = OffsetAndMetadata(offset, "")
        if not offsets:
            if self._buffered == 0:
                self.last_commit = time.monotonic()
            return
        await self.consumer.commit(offsets)
        self.last_commit = time.monotonic()
        for tp, meta in offsets.items():
            if tp in self._partitions:
                self._partitions[tp].committed = meta.offset

    # --- observation ------------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        return self._buffered

    def lag(self) -> dict[TopicPartition, int]:
        """Records in each assigned partition not yet handled and committed."""
        lags = {}
        for tp, partition in self._partitions.items():
            highwater = self.consumer.highwater(tp)
            position = partition.committed
            if highwater is not None and position is not None:
                lags[tp] = max(0, highwater - position)
        return lags


def _size(record: Any) -> int:
    return len(record.value or b"")
