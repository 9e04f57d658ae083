"""Reading what a test caused on a topic, from the topic's end as it was when reading began."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from hookbay_common.topics import MAX_MESSAGE_BYTES
from hookbay_common.wire import decode_event
from tests.support.waiting import until

T = TypeVar("T")


async def partitions_of(bootstrap: str, topic: str) -> list[int]:
    """The partition numbers of ``topic``; a topic created a moment ago may not list them yet,
    so this waits (10 s at most) until it does."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    partitions: list[int] = []
    try:

        async def listed() -> bool:
            (described,) = await admin.describe_topics([topic])
            partitions[:] = [p["partition"] for p in described["partitions"]]
            return bool(partitions)

        await until(listed, timeout=10, what=f"partitions of {topic}")
    finally:
        await admin.close()
    return partitions


@dataclass(frozen=True)
class Message(Generic[T]):
    value: T
    key: bytes | None
    headers: dict[str, bytes]


class TopicReader(Generic[T]):
    def __init__(self, bootstrap: str, topic: str, decode: Callable[[bytes], T]) -> None:
        self._bootstrap = bootstrap
        self.topic = topic
        self._decode = decode
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False,
            fetch_max_bytes=32 * 1024 * 1024, max_partition_fetch_bytes=MAX_MESSAGE_BYTES,
        )  # fmt: skip
        self.messages: list[Message[T]] = []

    async def start(self, *, from_beginning: bool = False) -> None:
        partitions = await partitions_of(self._bootstrap, self.topic)
        await self._consumer.start()
        assigned = [TopicPartition(self.topic, p) for p in partitions]
        self._consumer.assign(assigned)
        if from_beginning:
            await self._consumer.seek_to_beginning(*assigned)
        else:
            await self._consumer.seek_to_end(*assigned)
        for tp in assigned:  # resolve the offsets now, before the test produces
            await self._consumer.position(tp)

    async def until(
        self, done: Callable[[list[Message[T]]], bool], timeout: float = 30
    ) -> list[Message[T]]:
        """Read until ``done(messages)`` holds; every message read so far is kept."""
        async with asyncio.timeout(timeout):
            while not done(self.messages):
                await self._read(timeout_ms=200)
        return self.messages

    async def to_end(self, timeout: float = 300) -> list[Message[T]]:
        """Read up to the end offsets the topic has at this call; every message read so far is
        kept."""
        assigned = list(self._consumer.assignment())
        ends = await self._consumer.end_offsets(assigned)

        async def behind() -> bool:
            return any([await self._consumer.position(tp) < end for tp, end in ends.items()])

        async with asyncio.timeout(timeout):
            while await behind():
                await self._read(timeout_ms=500)
        return self.messages

    async def _read(self, timeout_ms: int) -> None:
        batch = await self._consumer.getmany(timeout_ms=timeout_ms)
        for records in batch.values():
            for r in records:
                headers = {k: v for k, v in (r.headers or ())}
                self.messages.append(Message(self._decode(r.value), r.key, headers))

    async def stop(self) -> None:
        await self._consumer.stop()


async def bodies_on_topic(bootstrap: str, topic: str) -> dict[str, str]:
    """Request id → body SHA-256 of every event on the events topic ``topic``, read from its
    beginning to its end as of the call (only the digests are kept: a soak's topic holds GBs)."""

    def digest(raw: bytes) -> tuple[str, str]:
        event = decode_event(raw)
        return event.request_id, hashlib.sha256(event.body).hexdigest()

    reader = TopicReader(bootstrap, topic, digest)
    await reader.start(from_beginning=True)
    try:
        return dict(m.value for m in await reader.to_end())
    finally:
        await reader.stop()


def matching(messages: list[Message[Any]], test: Callable[[Any], bool]) -> list[Message[Any]]:
    return [m for m in messages if test(m.value)]
