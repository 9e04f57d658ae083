"""Kafka clients and topic creation against the real broker."""

from __future__ import annotations

import asyncio
import os

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from hookbay_common import topics
from hookbay_common.kafka import create_consumer, create_producer, ensure_topics
from hookbay_common.topics import TopicSpec
from hookbay_common.wire import decode_event, encode_event
from tests.support.factories import create_event, unique_name


def test_topic_names() -> None:
    assert topics.EVENTS == "hookbay.events"
    assert topics.ATTEMPTS == "hookbay.attempts"
    assert topics.EVENTS_DLQ == "hookbay.events.dlq"
    assert {spec.name for spec in topics.TOPICS} == {
        topics.EVENTS,
        topics.ATTEMPTS,
        topics.EVENTS_DLQ,
    }


class TestEnsureTopics:
    async def test_creates_once_with_size_limit(self, kafka_bootstrap: str) -> None:
        spec = TopicSpec(
            f"test.{unique_name()}", {"max.message.bytes": str(topics.MAX_MESSAGE_BYTES)}
        )
        assert await ensure_topics(kafka_bootstrap, partitions=3, specs=[spec]) == [spec.name]
        assert await ensure_topics(kafka_bootstrap, partitions=3, specs=[spec]) == []
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            described = await admin.describe_topics([spec.name])
            assert len(described[0]["partitions"]) == 3
            configs = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, spec.name)]
            )
            entries = {entry[0]: entry[1] for entry in configs[0].resources[0][4]}
            assert entries["max.message.bytes"] == str(topics.MAX_MESSAGE_BYTES)
        finally:
            await admin.close()

    async def test_concurrent_creation(self, kafka_bootstrap: str) -> None:
        spec = TopicSpec(f"test.{unique_name()}")
        results = await asyncio.gather(
            *(ensure_topics(kafka_bootstrap, partitions=1, specs=[spec]) for _ in range(3))
        )
        assert sorted(len(r) for r in results) == [0, 0, 1]

    async def test_hookbay_topics(self, kafka_bootstrap: str) -> None:
        await ensure_topics(kafka_bootstrap, partitions=6)
        assert await ensure_topics(kafka_bootstrap, partitions=6) == []


class TestRoundTrip:
    @pytest.mark.parametrize("size", [0, 1024, 4_500_000])
    async def test_event_round_trip_keeps_bytes_and_key_order(
        self, kafka_bootstrap: str, size: int
    ) -> None:
        topic = f"test.{unique_name()}"
        await ensure_topics(
            kafka_bootstrap,
            partitions=3,
            specs=[TopicSpec(topic, {"max.message.bytes": str(topics.MAX_MESSAGE_BYTES)})],
        )
        sent = [create_event(username="alice", body=os.urandom(size)) for _ in range(3)]
        producer = create_producer(kafka_bootstrap)
        await producer.start()
        try:
            for event in sent:
                metadata = await producer.send_and_wait(topic, encode_event(event), key=b"alice")
                assert metadata.offset >= 0
        finally:
            await producer.stop()
        consumer = create_consumer(kafka_bootstrap, topic, group_id=unique_name("g"))
        await consumer.start()
        received = []
        try:
            async with asyncio.timeout(30):
                while len(received) < len(sent):
                    batch = await consumer.getmany(timeout_ms=1000)
                    for records in batch.values():
                        received.extend(decode_event(r.value) for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        assert received == sent  # one key → one partition → arrival order
