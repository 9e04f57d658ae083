"""The deliveries consumer: reads the deliveries topic into the lanes and commits what they
handled.

Consumer group ``<namespace>.forwarder-deliveries`` on ``Topics.deliveries`` (keyed by
destination id, so one destination's tasks are in one partition and one consumer holds its
lane). Every record is submitted to ``Lanes`` with its partition and offset; an offset is
committed once ``Lanes.committable`` says every task below it was handled or durably held, so a
crash at any point delivers again (at-least-once) and never skips.

A partition whose buffered tasks cannot be spilled (``Lanes.pressure``) stops being fetched
until they drain. A destination belongs to the consumer that holds its partition (the default
partitioner's murmur2 of the key): on assignment the lanes adopt the held destinations that
are now this consumer's (``Lanes.adopt``), on revocation they hand back the rest
(``Lanes.revoke``).

An unreadable record is logged and skipped (its offset handled): it names no destination.
Broker blips on fetch or commit are ridden out as in the delivery consumer; a deliver function
that raised (``Lanes.crashed``) stops the loop (``HandlerCrashed``).

While busy, the consumer fetches in batches (``FetchPace``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.partitioner import murmur2
from aiokafka.structs import OffsetAndMetadata

from hookbay_common.logs import get_logger
from hookbay_common.wire import WireError, decode_destination_task
from hookbay_forwarder.delivery.consumer import COMMIT_TIMEOUT, HandlerCrashed, ride_out_blip
from hookbay_forwarder.gateway.lanes import Lanes
from hookbay_forwarder.pace import FetchPace

log = get_logger("hookbay.lanes")


def partition_of(key: bytes, partitions: int) -> int:
    """The partition the default partitioner (Java's and aiokafka's) gives a keyed record."""
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


class LaneFeed(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        lanes: Lanes,
        *,
        topic: str,
        name: str,
        commit_interval: float = 1.0,
        revoke_grace: float = 15.0,
        pace: FetchPace | None = None,
    ) -> None:
        self.consumer = consumer
        self.pace = pace or FetchPace(consumer)
        self.lanes = lanes
        self.topic = topic
        self.name = name
        self._commit_interval = commit_interval
        self._revoke_grace = revoke_grace
        self._owned: set[int] = set()
        self._committed: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._stopping = asyncio.Event()
        self.running = False
        self.ended = False

    # --- ownership ----------------------------------------------------------------------------

    def owns(self, destination: str) -> bool:
        partitions = self.consumer.partitions_for_topic(self.topic)
        if not partitions:
            return False
        return partition_of(destination.encode(), len(partitions)) in self._owned

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        gone = {tp.partition for tp in revoked if tp.topic == self.topic}
        self._owned -= gone
        offsets = await self.lanes.revoke(revoked, self._revoke_grace, owns=self.owns)
        await self._commit({tp: o for tp, o in offsets.items() if isinstance(tp, TopicPartition)})
        for tp in revoked:
            self._committed.pop(tp, None)
            self._paused.discard(tp)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self._owned = {tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic}
        await self.lanes.adopt(self.owns)
        log.info("partitions_assigned", consumer=self.name, partitions=len(assigned))

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        self.running = True
        last_commit = time.monotonic()
        try:
            while not self._stopping.is_set():
                if self.lanes.crashed is not None:
                    raise HandlerCrashed(self.name) from self.lanes.crashed
                self._apply_pressure()
                try:
                    batch = await self.consumer.getmany(timeout_ms=200, max_records=500)
                except KafkaError as exc:
                    await self._blip("fetch", exc)
                    continue
                for tp, records in batch.items():
                    for record in records:
                        self._submit(tp, record)
                self.pace.observe(sum(len(records) for records in batch.values()))
                if time.monotonic() - last_commit >= self._commit_interval:
                    last_commit = time.monotonic()
                    try:
                        async with asyncio.timeout(COMMIT_TIMEOUT):
                            await self._commit(self._committable())
                    except TimeoutError:
                        log.warning("kafka_blip", consumer=self.name, operation="commit",
                                    error="timeout")  # fmt: skip
                    except KafkaError as exc:
                        await self._blip("commit", exc)
        finally:
            self.running = False
            self.ended = True

    def stop(self) -> None:
        self._stopping.set()

    async def drain(self, grace: float) -> None:
        """After ``run`` returned: let running attempts and hold-store writes finish (up to
        ``grace``), then commit what was handled."""
        await self.lanes.close(grace)
        if self.lanes.crashed is None:
            try:
                await self._commit(self._committable())
            except KafkaError as exc:
                log.warning("final_commit_failed", consumer=self.name, error=type(exc).__name__)

    def lag(self) -> dict[TopicPartition, int]:
        """Records in each assigned partition not yet handled (or held) and committed."""
        lags = {}
        for tp in self.consumer.assignment():
            highwater = self.consumer.highwater(tp)
            position = self._committed.get(tp)
            if highwater is not None and position is not None:
                lags[tp] = max(0, highwater - position)
        return lags

    def _submit(self, tp: TopicPartition, record: Any) -> None:
        try:
            task = decode_destination_task(record.value)
        except WireError as exc:
            log.error(
                "unreadable_message", problem=str(exc), topic=tp.topic, partition=tp.partition,
                offset=record.offset,
            )  # fmt: skip
            self.lanes.submit(tp, record.offset, ())
            return
        self.lanes.submit(tp, record.offset, (task,))

    def _apply_pressure(self) -> None:
        assignment = self.consumer.assignment()
        wanted = {tp for tp in assignment if self.lanes.pressure(tp)}
        if wanted - self._paused:
            self.consumer.pause(*(wanted - self._paused))
        if self._paused - wanted:
            self.consumer.resume(*((self._paused - wanted) & assignment))
        self._paused = wanted

    def _committable(self) -> dict[TopicPartition, int]:
        offsets = {}
        for tp in self.consumer.assignment():
            offset = self.lanes.committable(tp)
            if offset is not None and offset != self._committed.get(tp):
                offsets[tp] = offset
        return offsets

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        await self.consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()})
        self._committed.update(offsets)

    async def _blip(self, what: str, error: KafkaError) -> None:
        await ride_out_blip(self.name, what, error, self._stopping)
