"""``RdkafkaProducer`` (librdkafka) on the real broker, alone and behind ``ResilientProducer``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest
from aiokafka.errors import KafkaError
from confluent_kafka import KafkaError as RdError
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from hookbay_common.kafka import create_consumer, create_producer, ensure_topics
from hookbay_common.metrics import new_registry
from hookbay_common.producer import ProducerPolicy, ResilientProducer, is_retriable
from hookbay_common.rdkafka import (
    Delivered,
    RdkafkaFatal,
    RdkafkaProducer,
    RdkafkaSendError,
    send_error,
)
from hookbay_common.settings import Settings
from hookbay_common.topics import MAX_MESSAGE_BYTES, TopicSpec
from tests.support.factories import TEST_SECRET_KEY, unique_name
from tests.support.net import free_port
from tests.support.waiting import until

PARTITIONS = 12
Record = tuple[bytes, bytes, list[tuple[str, bytes]]]
"""A record read back: key, value, headers."""


async def new_topic(bootstrap: str, partitions: int = 3) -> str:
    topic = f"test.{unique_name()}"
    spec = TopicSpec(topic, {"max.message.bytes": str(MAX_MESSAGE_BYTES)})
    await ensure_topics(bootstrap, partitions=partitions, specs=[spec])
    return topic


@pytest.fixture
async def producer(kafka_bootstrap: str) -> AsyncIterator[RdkafkaProducer]:
    producer = RdkafkaProducer(kafka_bootstrap, client_id="test", delivery_timeout=5.0)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


async def read_back(bootstrap: str, topic: str, count: int) -> list[Record]:
    """(key, value, headers) of the topic's first ``count`` records, in partition order."""
    consumer = create_consumer(bootstrap, topic, group_id=unique_name("g"))
    await consumer.start()
    got: list[Record] = []
    try:
        async with asyncio.timeout(30):
            while len(got) < count:
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    got.extend((r.key, r.value, list(r.headers)) for r in records)
    finally:
        await consumer.stop()
    return got


class TestSending:
    async def test_acknowledged_messages_are_written_byte_exact_in_key_order(
        self, producer: RdkafkaProducer, kafka_bootstrap: str
    ) -> None:
        topic = await new_topic(kafka_bootstrap)
        values = [os.urandom(size) for size in (0, 1024, 4_500_000, 7)]
        places = []
        for value in values:
            future = await producer.send(topic, value, b"alice", headers=[("h", b"\x00\xff")])
            places.append(await future)
        assert all(isinstance(p, Delivered) and p.topic == topic for p in places)
        assert len({p.partition for p in places}) == 1  # one key, one partition
        assert [p.offset for p in places] == sorted(p.offset for p in places)
        got = await read_back(kafka_bootstrap, topic, len(values))
        assert got == [(b"alice", v, [("h", b"\x00\xff")]) for v in values]

    async def test_keys_go_to_the_partitions_aiokafka_sends_them_to(
        self, producer: RdkafkaProducer, kafka_bootstrap: str
    ) -> None:
        """An owner's events stay on one partition (their order) across the switch of client,
        and in a mixed fleet: murmur2, as Java's and aiokafka's default partitioner."""
        topic = await new_topic(kafka_bootstrap, PARTITIONS)
        keys = [f"owner-{n}".encode() for n in range(64)] + [b"", b"\xff" * 40]
        ours = [await (await producer.send(topic, b"x", key)) for key in keys]
        theirs = create_producer(kafka_bootstrap)
        await theirs.start()
        try:
            aiokafka = [await theirs.send_and_wait(topic, b"x", key=key) for key in keys]
        finally:
            await theirs.stop()
        assert [p.partition for p in ours] == [m.partition for m in aiokafka]
        assert len({p.partition for p in ours}) > PARTITIONS // 2  # spread, not all on one

    async def test_concurrent_sends_are_each_acknowledged(
        self, producer: RdkafkaProducer, kafka_bootstrap: str
    ) -> None:
        topic = await new_topic(kafka_bootstrap)
        futures = [await producer.send(topic, str(n).encode(), b"k") for n in range(500)]
        places = await asyncio.gather(*futures)
        assert sorted(p.offset for p in places) == list(range(500))  # a fresh topic: 0..499


class TestRefusals:
    async def test_a_message_over_the_limit_is_refused_at_once_and_not_retriable(
        self, producer: RdkafkaProducer, kafka_bootstrap: str
    ) -> None:
        topic = await new_topic(kafka_bootstrap)
        with pytest.raises(RdkafkaSendError) as refused:
            await producer.send(topic, b"x" * (MAX_MESSAGE_BYTES + 1), b"k")
        assert refused.value.code == RdError.MSG_SIZE_TOO_LARGE
        assert not is_retriable(refused.value)
        assert await (await producer.send(topic, b"after", b"k"))  # the producer goes on

    async def test_an_undeliverable_message_fails_retriable_within_its_delivery_timeout(
        self, kafka_bootstrap: str
    ) -> None:
        """A topic the broker does not have (it creates none by itself): the send fails once
        the delivery timeout is over, with an error worth trying again; nothing hangs."""
        producer = RdkafkaProducer(kafka_bootstrap, client_id="test", delivery_timeout=1.0)
        await producer.start()
        try:
            future = await producer.send(f"test.absent.{unique_name()}", b"x", b"k")
            async with asyncio.timeout(20):
                with pytest.raises(KafkaError) as failed:
                    await future
            assert is_retriable(failed.value)
        finally:
            await producer.stop()

    async def test_start_fails_while_no_broker_answers(self) -> None:
        producer = RdkafkaProducer(f"127.0.0.1:{free_port()}", client_id="test")
        with pytest.raises(KafkaError):
            async with asyncio.timeout(30):
                await producer.start()
        await producer.stop()

    def test_fatal_errors_are_told_apart(self) -> None:
        fatal = RdError(RdError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True)
        assert isinstance(RdkafkaSendError(RdError(RdError._MSG_TIMED_OUT)), KafkaError)
        assert isinstance(send_error(fatal), RdkafkaFatal)
        assert isinstance(send_error(RdError(RdError._FATAL)), RdkafkaFatal)
        assert is_retriable(send_error(fatal))  # by replacing the producer
        assert is_retriable(send_error(RdError(RdError._MSG_TIMED_OUT)))
        assert is_retriable(send_error(RdError(RdError._TRANSPORT)))
        assert not is_retriable(send_error(RdError(RdError.TOPIC_AUTHORIZATION_FAILED)))


FAST = ProducerPolicy(
    reset_after=1.0, wedged_after=5.0, answer_grace=0.1, probe_interval=0.05, probe_timeout=2.0,
    start_timeout=10.0, close_timeout=5.0, backoff_min=0.05, backoff_max=0.2,
    reconnect_interval=0.1,
)  # fmt: skip


class TestBehindResilientProducer:
    async def test_a_fatal_error_replaces_the_producer_and_sending_goes_on(
        self, kafka_bootstrap: str
    ) -> None:
        registry: CollectorRegistry = new_registry()
        settings = Settings(kafka_bootstrap=kafka_bootstrap, secret_key=SecretStr(TEST_SECRET_KEY))
        resilient = ResilientProducer.from_settings(
            settings, name="test", registry=registry, librdkafka=True, delivery_timeout=5.0
        )
        resilient.policy = FAST
        topic = await new_topic(kafka_bootstrap)
        await resilient.start()
        try:
            await resilient.wait_ready(within=30)
            first = resilient._producer
            assert isinstance(first, RdkafkaProducer)
            assert isinstance(await resilient.send_and_wait(topic, b"before", key=b"k"), Delivered)
            # what librdkafka's error callback is given when the broker lost the idempotent
            # producer's sequence
            first._error(RdError(RdError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))

            async def replaced() -> bool:
                current = resilient._producer
                return current is not None and current is not first

            await until(replaced, 20, what="a new producer")
            assert registry.get_sample_value(
                "hookbay_producer_resets_total", {"producer": "test", "reason": "sender_died"}
            ) == 1.0  # fmt: skip
            await until(lambda: resilient.ready, 20, what="ready again")
            assert await resilient.send_and_wait(topic, b"after", key=b"k")
        finally:
            await resilient.stop()
        got = await read_back(kafka_bootstrap, topic, 2)
        assert [value for _, value, _ in got] == [b"before", b"after"]
