from __future__ import annotations

from types import SimpleNamespace

from aiokafka import AIOKafkaProducer

from hookbay_common.kafka import create_consumer, ensure_topics
from hookbay_common.topics import TopicSpec
from hookbay_forwarder.pace import BATCH, BUSY_PER_S, EAGER, FetchPace, fetch_mode
from tests.support.factories import unique_name


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _consumer() -> SimpleNamespace:
    return SimpleNamespace(_fetcher=SimpleNamespace(_fetch_min_bytes=1, _fetch_max_wait_ms=500))


class TestPace:
    def test_busy_batches_then_quiet_is_eager_again(self) -> None:
        consumer, clock = _consumer(), Clock()
        pace = FetchPace(consumer, clock=clock)
        for _ in range(8):  # 8 reads of 40 in a second: 320/s
            clock.now += 0.125
            pace.observe(40)
        assert pace.mode == BATCH
        assert fetch_mode(consumer) == BATCH
        for _ in range(8):  # then 8 a second
            clock.now += 0.125
            pace.observe(1)
        assert pace.mode == EAGER
        assert fetch_mode(consumer) == EAGER

    def test_below_the_threshold_nothing_changes(self) -> None:
        consumer, clock = _consumer(), Clock()
        pace = FetchPace(consumer, clock=clock)
        for _ in range(5):
            clock.now += 1.0
            pace.observe(BUSY_PER_S - 1)
        assert pace.mode == EAGER
        assert fetch_mode(consumer) == EAGER

    def test_decides_once_a_second_not_on_one_big_read(self) -> None:
        consumer, clock = _consumer(), Clock()
        pace = FetchPace(consumer, clock=clock)
        clock.now = 0.5
        pace.observe(500)
        assert fetch_mode(consumer) == EAGER
        clock.now = 1.0
        pace.observe(0)
        assert fetch_mode(consumer) == BATCH

    def test_a_fetcher_without_the_parameters_keeps_its_own(self) -> None:
        consumer, clock = SimpleNamespace(_fetcher=SimpleNamespace()), Clock()
        pace = FetchPace(consumer, clock=clock)
        clock.now = 1.0
        pace.observe(1000)
        assert pace.mode == EAGER
        assert vars(consumer._fetcher) == {}
        assert fetch_mode(consumer) is None


class TestOnARealConsumer:
    async def test_batched_fetches_still_read_every_record(
        self, kafka_bootstrap: str, producer: AIOKafkaProducer
    ) -> None:
        topic = unique_name("pace.")
        await ensure_topics(kafka_bootstrap, partitions=1, specs=[TopicSpec(topic)])
        consumer = create_consumer(kafka_bootstrap, topic, group_id=unique_name("g"))
        await consumer.start()
        try:
            clock = Clock()
            pace = FetchPace(consumer, clock=clock)
            clock.now = 1.0
            pace.observe(BUSY_PER_S)
            assert pace.mode == BATCH
            assert fetch_mode(consumer) == BATCH
            for n in range(5):
                await producer.send_and_wait(topic, str(n).encode())
            read: list[bytes] = []
            while len(read) < 5:
                batch = await consumer.getmany(timeout_ms=1000)
                read += [r.value for records in batch.values() for r in records]
            assert read == [str(n).encode() for n in range(5)]
        finally:
            await consumer.stop()
