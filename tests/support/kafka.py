"""Reading what a test caused on a topic, from the topic's end as it was when reading began."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from hookbay_common.topics import MAX_MESSAGE_BYTES
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
                batch = await self._consumer.getmany(timeout_ms=200)
                for records in batch.values():
                    for r in records:
                        headers = {k: v for k, v in (r.headers or ())}
                        self.messages.append(Message(self._decode(r.value), r.key, headers))
        return self.messages

    async def stop(self) -> None:
        await self._consumer.stop()


def matching(messages: list[Message[Any]], test: Callable[[Any], bool]) -> list[Message[Any]]:
    return [m for m in messages if test(m.value)]
