"""The stats processor in this process: liveness and exit status once faust's app has crashed
(the counting, and records faust loses on real Kafka, are tested end to end in
tests/test_stats_process.py)."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import KafkaError

from hookbay_common.kafka import topic_partitions
from hookbay_forwarder.process import EXIT_CRASHED
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_forwarder.stats import StatsProcessor
from hookbay_forwarder.stats import app as stats_app


class CrashedApp:
    """What the processor looks at of faust's app (a mode ``Service``)."""

    crashed = True
    crash_reason = RuntimeError("agent failed")

    async def stop(self) -> None:
        return None


class TestCrashedApp:
    async def test_liveness_fails_and_the_process_exits_1(
        self, fwd_settings: ForwarderSettings
    ) -> None:
        processor = StatsProcessor(fwd_settings)
        assert processor.healthy()
        processor.app = CrashedApp()  # type: ignore[assignment]
        processor._started = True  # as after start(): run() watches the app
        assert not processor.healthy()
        async with asyncio.timeout(30):  # it notices within one look (every 2 s)
            assert await processor.run() == EXIT_CRASHED
        assert processor.healthy()  # stopping: a restart is under way, not wedged
        await processor.stop()


class StartedApp:
    """What ``start`` does with faust's app: start it."""

    async def start(self) -> None:
        return None


class TestStart:
    async def test_a_facts_topic_not_listed_yet_is_asked_for_again(
        self, fwd_settings: ForwarderSettings, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A topic just created may not be listed by the broker yet (``topic_partitions``
        raises): the processor asks again instead of making faust's topics without partitions."""
        unlisted = [True]

        async def listed(bootstrap: str, topic: str) -> list[int]:
            if unlisted:
                unlisted.pop()
                raise KafkaError(f"topic {topic} has no partitions listed yet")
            return await topic_partitions(bootstrap, topic)

        made: list[int] = []

        def create_app(partitions: int) -> StartedApp:
            made.append(partitions)
            return StartedApp()

        monkeypatch.setattr(stats_app, "topic_partitions", listed)
        processor = StatsProcessor(fwd_settings)
        monkeypatch.setattr(processor, "_create_app", create_app)
        try:
            async with asyncio.timeout(60):
                await processor.start()
        finally:
            await processor.probe.close()
            await processor.mongo.close()
        assert not unlisted  # the first answer was "not listed yet"
        assert made == [fwd_settings.kafka_partitions]
