"""The self-healing producer's reset logic, against a fake broker (fast, deterministic); the
real broker's restarts are in tests/test_kafka_recovery.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, OutOfOrderSequenceNumber
from prometheus_client import CollectorRegistry

from hookbay_common.metrics import new_registry
from hookbay_common.producer import ProducerPolicy, ProducerUnavailable, ResilientProducer
from tests.support.waiting import until

FAST = ProducerPolicy(
    reset_after=0.3, wedged_after=1.0, answer_grace=0.1, probe_interval=0.05, probe_timeout=0.2,
    start_timeout=1.0, close_timeout=0.5, backoff_min=0.05, backoff_max=0.2,
    reconnect_interval=0.05,
)  # fmt: skip


class FakeBroker:
    """``up``: answers at all; ``mode``: what a send of a producer in ``affected`` (all when
    None) gets: "ack", "fatal" (out of order sequence), "fail" (a timeout), "hang"."""

    def __init__(self) -> None:
        self.up = True
        self.mode = "ack"
        self.affected: set[int] | None = None
        self.producers: list[FakeProducer] = []
        self.acked: list[bytes] = []

    def create(self) -> FakeProducer:
        producer = FakeProducer(self, len(self.producers) + 1)
        self.producers.append(producer)
        return producer


class FakeClient:
    """What ``hookbay_common.kafka.ping`` uses of aiokafka's client: one known broker, node 1."""

    def __init__(self, broker: FakeBroker) -> None:
        self._broker = broker
        self.cluster = SimpleNamespace(brokers=lambda: [SimpleNamespace(nodeId=1)])

    async def send(self, node: int, request: Any) -> Any:
        if not self._broker.up:
            raise KafkaConnectionError("broker away")
        return SimpleNamespace(brokers=[node])


class FakeProducer:
    def __init__(self, broker: FakeBroker, producer_id: int) -> None:
        self.broker = broker
        self.id = producer_id
        self.client = FakeClient(broker)
        self.started = False
        self.stopped = False

    async def start(self) -> None:
        if not self.broker.up:
            raise KafkaConnectionError("broker away")
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def send(
        self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
        headers: Any = None,
    ) -> asyncio.Future[Any]:  # fmt: skip
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        broker = self.broker
        mode = broker.mode if broker.affected is None or self.id in broker.affected else "ack"
        if not broker.up or mode == "fail":
            future.set_exception(KafkaTimeoutError())
        elif mode == "fatal":
            future.set_exception(OutOfOrderSequenceNumber())
        elif mode == "ack":
            broker.acked.append(value or b"")
            future.set_result(("metadata", self.id))
        return future  # "hang": never settles


@pytest.fixture
def broker() -> FakeBroker:
    return FakeBroker()


@pytest.fixture
def registry() -> CollectorRegistry:
    return new_registry()


@pytest.fixture
async def producer(
    broker: FakeBroker, registry: CollectorRegistry
) -> AsyncIterator[ResilientProducer]:
    producer = ResilientProducer(
        "fake:9092", name="test", policy=FAST, registry=registry, factory=broker.create
    )
    await producer.start()
    await producer.wait_ready(within=5)
    yield producer
    await producer.stop()


def sample(registry: CollectorRegistry, metric: str, **labels: str) -> float:
    return registry.get_sample_value(metric, labels) or 0.0


class TestResilientProducer:
    async def test_sends_are_acknowledged(
        self, producer: ResilientProducer, broker: FakeBroker
    ) -> None:
        assert await producer.send_and_wait("t", b"a", key=b"k") == ("metadata", 1)
        assert broker.acked == [b"a"]
        assert producer.ready
        assert producer.healthy

    async def test_fatal_error_replaces_the_producer(
        self, producer: ResilientProducer, broker: FakeBroker, registry: CollectorRegistry
    ) -> None:
        broker.mode, broker.affected = "fatal", {1}  # the broker forgot producer 1's sequence
        with pytest.raises(OutOfOrderSequenceNumber):
            await producer.send_and_wait("t", b"lost")
        await until(lambda: len(broker.producers) == 2 and producer.ready, 5, what="replaced")
        assert broker.producers[0].stopped
        assert await producer.send_and_wait("t", b"again") == ("metadata", 2)
        assert broker.acked == [b"again"]  # never reported written: b"lost"
        assert sample(
            registry, "hookbay_producer_resets_total", producer="test",
            reason="OutOfOrderSequenceNumber",
        ) == 1  # fmt: skip
        assert sample(
            registry, "hookbay_producer_send_failures_total", producer="test",
            reason="OutOfOrderSequenceNumber",
        ) == 1  # fmt: skip

    async def test_sends_during_a_replacement_are_refused_not_lost(
        self, producer: ResilientProducer, broker: FakeBroker
    ) -> None:
        broker.mode, broker.affected = "fatal", {1}
        broker.up = True
        with pytest.raises(OutOfOrderSequenceNumber):
            await producer.send_and_wait("t", b"x")
        await until(lambda: not producer.ready, 5, what="replacement under way")
        with pytest.raises(ProducerUnavailable):
            await producer.send("t", b"during")
        await until(lambda: producer.ready, 5, what="ready again")
        assert b"during" not in broker.acked

    async def test_stalled_producer_is_replaced_and_its_waiting_sends_fail(
        self, producer: ResilientProducer, broker: FakeBroker
    ) -> None:
        broker.mode, broker.affected = "hang", {1}  # no answer, while metadata answers
        waiting = await producer.send("t", b"stuck")
        with pytest.raises(ProducerUnavailable):
            async with asyncio.timeout(5):
                await waiting
        await until(lambda: producer.ready, 5, what="ready again")
        assert len(broker.producers) == 2
        assert await producer.send_and_wait("t", b"fresh") == ("metadata", 2)

    async def test_broker_away_is_not_a_reason_to_replace(
        self, producer: ResilientProducer, broker: FakeBroker, registry: CollectorRegistry
    ) -> None:
        broker.up = False
        await until(lambda: not producer.ready, 5, what="not ready while away")
        deadline = time.monotonic() + 2 * FAST.reset_after
        while time.monotonic() < deadline:  # sends failing all along, the broker away
            with pytest.raises(KafkaTimeoutError):
                await producer.send_and_wait("t", b"away")
            await asyncio.sleep(0.02)
        assert len(broker.producers) == 1
        broker.up = True
        assert await producer.send_and_wait("t", b"back") == ("metadata", 1)  # the same one
        await until(lambda: producer.ready, 5, what="ready when back")
        assert len(broker.producers) == 1
        assert sample(registry, "hookbay_producer_send_failures_total", producer="test",
                      reason="KafkaTimeoutError") > 0  # fmt: skip

    async def test_starts_while_the_broker_is_away(
        self, broker: FakeBroker, registry: CollectorRegistry
    ) -> None:
        broker.up = False
        producer = ResilientProducer("fake", policy=FAST, registry=registry, factory=broker.create)
        await producer.start()
        try:
            with pytest.raises(ProducerUnavailable):
                await producer.send("t", b"early")
            assert not producer.ready
            broker.up = True
            await producer.wait_ready(within=5)
            assert await producer.send_and_wait("t", b"late") is not None
            assert broker.acked == [b"late"]
        finally:
            await producer.stop()

    async def test_wedged_beyond_replacement_is_unhealthy_and_heals(
        self, producer: ResilientProducer, broker: FakeBroker, registry: CollectorRegistry
    ) -> None:
        broker.mode = "fail"  # every producer fails every send, the broker answering metadata

        async def failing() -> bool:
            with pytest.raises(KafkaTimeoutError):
                await producer.send_and_wait("t", b"x")
            return not producer.healthy

        async def sending() -> bool:
            try:
                return await failing()
            except ProducerUnavailable:  # between two producers
                return False

        await until(sending, 10, interval=0.02, what="unhealthy")
        assert len(broker.producers) >= 2  # it was replaced, and that did not help
        resets = sample(registry, "hookbay_producer_resets_total", producer="test",
                        reason="stalled")  # fmt: skip
        assert resets >= 1
        broker.mode = "ack"
        await until(lambda: producer.ready, 5, what="ready again")
        assert await producer.send_and_wait("t", b"ok") is not None
        assert producer.healthy

    async def test_replacements_back_off(
        self, producer: ResilientProducer, broker: FakeBroker
    ) -> None:
        broker.mode = "fatal"  # every producer, every send
        started = time.monotonic()

        async def three_producers() -> bool:
            with contextlib.suppress(OutOfOrderSequenceNumber, ProducerUnavailable):
                await producer.send_and_wait("t", b"x")
            return len(broker.producers) >= 4

        await until(three_producers, 10, interval=0.01, what="three replacements")
        # back-off 0.05, 0.1, 0.2 s between them: at least their sum
        assert time.monotonic() - started >= 0.05 + 0.1 + 0.2
        assert all(p.stopped for p in broker.producers[:-1])
