"""Forwarder fixtures: a real local destination, and a forwarder and recorder running in this
process on real Kafka and FerretDB, each with a topic namespace of its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from hookbay_common.kafka import create_producer, ensure_topics
from hookbay_common.settings import Settings
from hookbay_forwarder.app import Forwarder, Recorder
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.factories import unique_name
from tests.support.receiver import Receiver, serve_receiver


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
async def running(process: Forwarder | Recorder) -> AsyncIterator[asyncio.Task[int]]:
    await process.start()
    task = asyncio.create_task(process.run())
    try:
        yield task
    finally:
        process.request_stop()
        with contextlib.suppress(Exception):
            await task
        await process.stop()


@pytest.fixture(scope="session")
async def receiver() -> AsyncIterator[Receiver]:
    async with serve_receiver() as receiver:
        yield receiver


@pytest.fixture(scope="session")
async def fwd_settings(settings: Settings) -> ForwarderSettings:
    fs = forwarder_settings(settings)
    await ensure_topics(fs.kafka_bootstrap, partitions=fs.kafka_partitions, specs=fs.topic_specs())
    return fs


@pytest.fixture(scope="session")
async def forwarder(
    fwd_settings: ForwarderSettings, receiver: Receiver
) -> AsyncIterator[Forwarder]:
    process = Forwarder(fwd_settings)
    async with running(process):
        yield process


@pytest.fixture(scope="session")
async def recorder(fwd_settings: ForwarderSettings, db: Any) -> AsyncIterator[Recorder]:
    process = Recorder(fwd_settings)
    async with running(process):
        yield process


@pytest.fixture(scope="session")
async def producer(kafka_bootstrap: str) -> AsyncIterator[AIOKafkaProducer]:
    producer = create_producer(kafka_bootstrap)
    await producer.start()
    yield producer
    await producer.stop()
