from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    LeaderNotAvailableError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
)

from hookbay_common.kafka import create_consumer, ensure_topics
from hookbay_common.topics import TopicSpec
from hookbay_forwarder.delivery.consumer import Handler, HandlerCrashed, OrderedConsumer
from hookbay_forwarder.metrics import ConsumerMetrics
from hookbay_forwarder.routing.view import RoutingViewUnavailable
from tests.support.factories import unique_name
from tests.support.waiting import until


async def _topic(bootstrap: str) -> str:
    name = unique_name("blip.")
    await ensure_topics(bootstrap, partitions=1, specs=[TopicSpec(name)])
    return name


@contextlib.asynccontextmanager
async def _consuming(
    bootstrap: str, topic: str, handler: Handler, metrics: ConsumerMetrics
) -> AsyncIterator[tuple[OrderedConsumer, asyncio.Task[None]]]:
    consumer = create_consumer(bootstrap, topic, group_id=unique_name("g"))
    ordered = OrderedConsumer(consumer, handler, name="blips", metrics=metrics)
    await consumer.start()
    task = asyncio.create_task(ordered.run())
    try:
        yield ordered, task
    finally:
        ordered.stop()
        with contextlib.suppress(HandlerCrashed):
            await task
        await consumer.stop()


class TestBrokerBlips:
    async def test_retriable_error_is_retried_not_a_crash(
        self, kafka_bootstrap: str, producer: AIOKafkaProducer
    ) -> None:
        topic = await _topic(kafka_bootstrap)
        failures = [LeaderNotAvailableError(), RequestTimedOutError(), RoutingViewUnavailable()]
        handled: list[bytes] = []

        async def handler(record: Any) -> None:
            if failures:
                raise failures.pop(0)  # the broker moving a leader, twice; the store away
            handled.append(record.value)

        metrics = ConsumerMetrics()
        await producer.send_and_wait(topic, b"one", key=b"k")
        async with _consuming(kafka_bootstrap, topic, handler, metrics) as (ordered, task):
            await until(lambda: handled == [b"one"], 30, what="handled after the retries")
            await until(lambda: ordered.lag() == {TopicPartition(topic, 0): 0}, 30,
                        what="committed")  # fmt: skip
            assert not task.done()  # still consuming
        retries = {
            error: metrics.registry.get_sample_value(
                "hookbay_consumer_handler_retries_total", {"consumer": "blips", "error": error}
            )
            for error in (
                "LeaderNotAvailableError",
                "RequestTimedOutError",
                "RoutingViewUnavailable",
            )
        }
        assert retries == {
            "LeaderNotAvailableError": 1.0, "RequestTimedOutError": 1.0,
            "RoutingViewUnavailable": 1.0,
        }  # fmt: skip

    async def test_non_retriable_kafka_error_stops_the_loop_uncommitted(
        self, kafka_bootstrap: str, producer: AIOKafkaProducer
    ) -> None:
        topic = await _topic(kafka_bootstrap)

        async def handler(record: Any) -> None:
            raise TopicAuthorizationFailedError(topic)  # a configuration fault: stop

        await producer.send_and_wait(topic, b"one", key=b"k")
        async with _consuming(kafka_bootstrap, topic, handler, ConsumerMetrics()) as (
            ordered, task,
        ):  # fmt: skip
            with pytest.raises(HandlerCrashed):
                async with asyncio.timeout(30):
                    await task
            assert ordered.ended
            committed = await ordered.consumer.committed(TopicPartition(topic, 0))
            assert committed is None  # redone by whoever consumes next
