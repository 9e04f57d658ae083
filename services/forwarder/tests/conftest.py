"""Forwarder fixtures: a real local destination, and a forwarder and recorder running in this
process on real Kafka and FerretDB, each with a topic namespace of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from hookbay_common.kafka import create_producer, ensure_topics
from hookbay_common.settings import Settings
from hookbay_forwarder.app import Forwarder, Recorder
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.forwarder import forwarder_settings, running
from tests.support.receiver import Receiver, serve_receiver


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
async def rec_settings(settings: Settings) -> ForwarderSettings:
    """A namespace of the recorder's own: no forwarder adds attempts to what its tests produce."""
    rs = forwarder_settings(settings)
    await ensure_topics(rs.kafka_bootstrap, partitions=rs.kafka_partitions, specs=rs.topic_specs())
    return rs


@pytest.fixture(scope="session")
async def recorder(rec_settings: ForwarderSettings, db: Any) -> AsyncIterator[Recorder]:
    process = Recorder(rec_settings)
    async with running(process):
        yield process


@pytest.fixture(scope="session")
async def producer(kafka_bootstrap: str) -> AsyncIterator[AIOKafkaProducer]:
    producer = create_producer(kafka_bootstrap)
    await producer.start()
    yield producer
    await producer.stop()
