"""Kafka clients and topic creation against the real broker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError
from pydantic import SecretStr

from hookbay_common.kafka import (
    BrokerProbe,
    create_consumer,
    create_producer,
    ensure_configured_topics,
    ensure_topics,
    ping,
    topic_partitions,
)
from hookbay_common.models import Event
from hookbay_common.settings import Settings
from hookbay_common.topics import MAX_MESSAGE_BYTES, Topics, TopicSpec, format_delay
from hookbay_common.wire import decode_event, encode_event
from tests.support.factories import create_event, unique_name
from tests.support.net import free_port
from tests.support.waiting import until


class TestTopics:
    def test_default_names(self) -> None:
        names = Topics()
        assert names.events == "hookbay.events"
        assert names.attempts == "hookbay.attempts"
        assert names.events_dlq == "hookbay.events.dlq"
        assert names.replays == "hookbay.replays"

    def test_one_tier_per_distinct_retry_delay(self) -> None:
        specs = Topics("ns").specs([10.0, 60.0, 60.0, 0.5, 21600.0])
        assert [spec.name for spec in specs] == [
            "ns.events", "ns.attempts", "ns.events.dlq", "ns.replays", "ns.deliveries",
            "ns.retry.10s", "ns.retry.1m", "ns.retry.500ms", "ns.retry.6h", "ns.config",
            "ns.stats.facts", "ns.stats.buckets-changelog",
        ]  # fmt: skip
        *data, config, facts, changelog = specs
        assert all(s.config["max.message.bytes"] == str(MAX_MESSAGE_BYTES) for s in data)
        assert (config.config["cleanup.policy"], config.partitions) == ("compact", 1)
        # the changelog is partitioned like the facts it is kept from (the installation's default)
        assert (facts.partitions, changelog.partitions) == (None, None)
        assert changelog.config["cleanup.policy"] == "compact"

    @pytest.mark.parametrize(
        ("seconds", "label"),
        [(0.0, "0ms"), (0.25, "250ms"), (1.0, "1s"), (90.0, "90s"), (600.0, "10m"), (3600.0, "1h")],
    )
    def test_delay_labels(self, seconds: float, label: str) -> None:
        assert format_delay(seconds) == label

    def test_task_pattern_matches_tiers_and_replays_only(self) -> None:
        names = Topics("a.b")
        pattern = re.compile(names.task_pattern)
        assert pattern.match(names.retry(10.0))
        assert pattern.match(names.retry(0.5))
        assert pattern.match(names.replays)
        assert not pattern.match(names.events)
        assert not pattern.match("a.bx.replays")
        assert not pattern.match("other.retry.10s")


class TestEnsureTopics:
    async def test_creates_once_with_size_limit(self, kafka_bootstrap: str) -> None:
        spec = TopicSpec(f"test.{unique_name()}", {"max.message.bytes": str(MAX_MESSAGE_BYTES)})
        assert await ensure_topics(kafka_bootstrap, partitions=3, specs=[spec]) == [spec.name]
        assert await ensure_topics(kafka_bootstrap, partitions=3, specs=[spec]) == []
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            # a new topic's partitions reach the metadata a moment after creation returns
            async def three_partitions() -> bool:
                described = await admin.describe_topics([spec.name])
                return len(described[0]["partitions"]) == 3

            await until(three_partitions, timeout=10, what="3 partitions described")
            configs = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, spec.name)]
            )
            entries = {entry[0]: entry[1] for entry in configs[0].resources[0][4]}
            assert entries["max.message.bytes"] == str(MAX_MESSAGE_BYTES)
        finally:
            await admin.close()

    async def test_concurrent_creation(self, kafka_bootstrap: str) -> None:
        spec = TopicSpec(f"test.{unique_name()}")
        results = await asyncio.gather(
            *(ensure_topics(kafka_bootstrap, partitions=1, specs=[spec]) for _ in range(3))
        )
        assert sorted(len(r) for r in results) == [0, 0, 1]

    async def test_hookbay_topics(self, kafka_bootstrap: str) -> None:
        specs = Topics(f"test.{unique_name()}").specs([1.0, 2.0])
        assert len(await ensure_topics(kafka_bootstrap, partitions=6, specs=specs)) == 10
        assert await ensure_topics(kafka_bootstrap, partitions=6, specs=specs) == []

    async def test_configured_replication_factor_reaches_the_broker(
        self, kafka_bootstrap: str
    ) -> None:
        settings = Settings(
            kafka_bootstrap=kafka_bootstrap, kafka_namespace=f"test.{unique_name()}",
            kafka_replication_factor=2, secret_key=SecretStr("k" * 32),
        )  # fmt: skip
        # the test cluster has one broker: a factor of 2 is refused (INVALID_REPLICATION_FACTOR)
        with pytest.raises(KafkaError, match="error 38"):
            await ensure_configured_topics(settings)


class TestTopicPartitions:
    async def test_a_listed_topic_gives_its_partitions(self, kafka_bootstrap: str) -> None:
        spec = TopicSpec(f"test.{unique_name()}")
        await ensure_topics(kafka_bootstrap, partitions=3, specs=[spec])
        listed: list[int] = []

        async def all_three() -> bool:  # listed a moment after creation returns
            with contextlib.suppress(KafkaError):
                listed[:] = await topic_partitions(kafka_bootstrap, spec.name)
            return bool(listed)

        await until(all_three, timeout=10, what="the new topic listed")
        assert listed == [0, 1, 2]

    async def test_a_topic_not_listed_is_an_error_to_ask_again_on(
        self, kafka_bootstrap: str
    ) -> None:
        """Never an empty list: a caller sizing something by it (faust's topics) would get 0."""
        with pytest.raises(KafkaError, match="no partitions listed"):
            await topic_partitions(kafka_bootstrap, f"test.{unique_name()}")


class TestRoundTrip:
    @pytest.mark.parametrize("size", [0, 1024, 4_500_000])
    async def test_event_round_trip_keeps_bytes_and_key_order(
        self, kafka_bootstrap: str, size: int
    ) -> None:
        topic = f"test.{unique_name()}"
        await ensure_topics(
            kafka_bootstrap,
            partitions=3,
            specs=[TopicSpec(topic, {"max.message.bytes": str(MAX_MESSAGE_BYTES)})],
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
        received: list[Event] = []
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


class TestBrokerProbe:
    async def test_answers_while_the_broker_does(self, kafka_bootstrap: str) -> None:
        probe = BrokerProbe(kafka_bootstrap)
        try:
            assert await probe.answers()
            assert await probe.answers()  # again, on the bootstrapped client
        finally:
            await probe.close()

    async def test_no_broker_is_no_answer(self) -> None:
        probe = BrokerProbe(f"127.0.0.1:{free_port()}")
        try:
            assert not await probe.answers(within=2.0)
        finally:
            await probe.close()

    async def test_ping_asks_for_no_topic(self, kafka_bootstrap: str) -> None:
        """The probe's one request names no topic (an empty list, not "all topics"), so its cost
        does not grow with the cluster's topics, and it never auto-creates a topic."""
        await ensure_topics(kafka_bootstrap, partitions=1, specs=[TopicSpec(unique_name("t"))])
        client = AIOKafkaClient(bootstrap_servers=kafka_bootstrap)
        await client.bootstrap()
        sent: list[Any] = []
        answers: list[Any] = []
        send = client.send

        async def recording(node: int, request: Any, **options: Any) -> Any:
            sent.append(request)
            answers.append(await send(node, request, **options))
            return answers[-1]

        client.send = recording
        try:
            await ping(client)
        finally:
            await client.close()
        assert [type(r).__name__ for r in sent] == ["MetadataRequest"]
        assert answers[0].brokers
        assert answers[0].topics == []  # the cluster holds topics: none was asked for

    async def test_ping_without_a_known_broker_raises(self) -> None:
        client = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{free_port()}")
        try:
            with pytest.raises(KafkaError):
                await ping(client)
        finally:
            await client.close()
