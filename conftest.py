"""Fixtures shared by every test: real Kafka, FerretDB and Redis, started by `make test`.

Each pytest-xdist worker gets its own database (``hookbay_test_<worker>_<run>``); all workers share one
broker and make their own topic names where a test needs a topic to itself.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from pymongo import AsyncMongoClient, MongoClient
from sse_starlette.sse import AppStatus

from hookbay_common.db import client as db_client
from hookbay_common.kafka import create_producer, ensure_configured_topics
from hookbay_common.settings import Settings
from tests.support.factories import TEST_SECRET_KEY
from tests.support.receiver import Receiver, serve_receiver

KAFKA = os.environ.get("HOOKBAY_TEST_KAFKA", "127.0.0.1:9092")
MONGO = os.environ.get("HOOKBAY_TEST_MONGO", "mongodb://127.0.0.1:27017")
REDIS = os.environ.get("HOOKBAY_TEST_REDIS", "redis://127.0.0.1:6379")


@pytest.fixture(autouse=True)
def sse_streams_open() -> None:
    """sse-starlette ends every stream of the process once any uvicorn server's ``handle_exit``
    ran (it patches the method to set the process-global ``AppStatus.should_exit``). A process
    serves one dashboard, so that is its shutdown; a test worker runs many servers, and a test
    stopping one must not end the streams of every test after it on the same worker."""
    AppStatus.should_exit = False


@pytest.fixture(scope="session")
def mongo_url(worker_id: str) -> Iterator[str]:
    """A database of this worker's own for this run (two runs at once never share one)."""
    name = f"hookbay_test_{worker_id}_{uuid.uuid4().hex[:8]}"
    yield f"{MONGO}/{name}"
    with MongoClient(MONGO, serverSelectionTimeoutMS=5000) as client:
        client.drop_database(name)


@pytest.fixture(scope="session")
def env(mongo_url: str, worker_id: str) -> dict[str, str]:
    """The ``HOOKBAY_*`` environment of a process under test (CLI, services). Each worker of
    each run has its own topic namespace: no test consumes another test's messages. Its
    topics are made here, as ``hookbay-admin migrate`` makes them for a deployment: a configuration
    change published to a topic that does not exist waits out the publisher's 5 s timeout
    (every CLI command and API call that changes a user or a webhook did)."""
    values = {
        "HOOKBAY_KAFKA_NAMESPACE": f"test.{worker_id}.{uuid.uuid4().hex[:8]}",
        "HOOKBAY_SECRET_KEY": TEST_SECRET_KEY,
        "HOOKBAY_MONGO_URL": mongo_url,
        "HOOKBAY_KAFKA_BOOTSTRAP": KAFKA,
        "HOOKBAY_REDIS_URL": REDIS,
        "HOOKBAY_ALLOW_PRIVATE_DESTINATIONS": "true",
        "HOOKBAY_RETRY_SCHEDULE": "0,1s,2s",
    }
    asyncio.run(ensure_configured_topics(_settings_of(values)))
    return values


def _settings_of(env: dict[str, str]) -> Settings:
    return Settings(**{key.removeprefix("HOOKBAY_").lower(): value for key, value in env.items()})


@pytest.fixture(scope="session")
def settings(env: dict[str, str]) -> Settings:
    return _settings_of(env)


@pytest.fixture(scope="session")
async def db(settings: Settings) -> AsyncIterator[db_client.Database]:
    mongo: AsyncMongoClient[dict[str, Any]] = db_client.connect(settings.mongo_url)
    database = db_client.database(mongo)
    await db_client.migrate(database)
    yield database
    await mongo.close()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    return KAFKA


@pytest.fixture(scope="session")
async def producer(kafka_bootstrap: str) -> AsyncIterator[AIOKafkaProducer]:
    """A plain producer for tests that write to topics themselves."""
    producer = create_producer(kafka_bootstrap)
    await producer.start()
    yield producer
    await producer.stop()


@pytest.fixture(scope="session")
async def receiver() -> AsyncIterator[Receiver]:
    """A real local HTTP destination (``tests.support.receiver``)."""
    async with serve_receiver() as receiver:
        yield receiver


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``heavy`` first (in their order, the rest in theirs): each is a long
    chain of broker outages that cannot be shortened by more workers, so it starts at once and
    runs beside the others instead of finishing alone at the end of the run."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)
