"""Helpers for tests that run the forwarder, the recorder or the stats processor in the test's
own process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.settings import Settings
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.recorder import Recorder
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_forwarder.stats import StatsProcessor
from tests.support.factories import unique_name


def forwarder_settings(settings: Settings, **overrides: Any) -> ForwarderSettings:
    """The test settings in a fresh topic namespace, so consumer groups start empty."""
    fields = {
        **settings.model_dump(),
        "kafka_namespace": f"{settings.kafka_namespace}.{unique_name('f')}",
        "forward_timeout": 2.0,
        "forwarder_metrics_port": 0,
        "recorder_metrics_port": 0,
        "kafka_session_timeout_ms": 6000,
        "shutdown_grace": 5.0,
        **overrides,
    }
    return ForwarderSettings(**fields)


@contextlib.asynccontextmanager
async def running(
    process: Forwarder | Recorder | StatsProcessor,
) -> AsyncIterator[asyncio.Task[int]]:
    await process.start()
    task = asyncio.create_task(process.run())
    try:
        yield task
    finally:
        process.request_stop()
        with contextlib.suppress(Exception):
            await task
        await process.stop()


async def forwarder_namespace(settings: Settings, **overrides: Any) -> ForwarderSettings:
    """``forwarder_settings`` with the namespace's topics created."""
    fs = forwarder_settings(settings, **overrides)
    await ensure_configured_topics(fs)
    return fs
