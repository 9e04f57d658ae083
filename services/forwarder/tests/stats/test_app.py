"""The stats processor in this process: liveness and exit status once faust's app has crashed
(the counting, and records faust loses on real Kafka, are tested end to end in
tests/test_stats_process.py)."""

from __future__ import annotations

import asyncio

from hookbay_forwarder.process import EXIT_CRASHED
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_forwarder.stats import StatsProcessor


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
