"""Following the configuration change log on the real broker: ``sync`` is not held behind the
follower's waiting fetch. (The views built on it: ``services/ingest/tests/test_view.py``,
``services/forwarder/tests/routing/test_view.py``.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge

from hookbay_common import changelog
from hookbay_common.changelog import ChangeLog
from hookbay_common.configlog import ConfigChange, ConfigPublisher, webhook_key
from hookbay_common.kafka import create_producer
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_common.topics import Topics
from tests.support.factories import TEST_SECRET_KEY, unique_name


def metrics() -> SimpleNamespace:
    """What ``follow`` reports to, in a registry of the test's own."""
    registry = CollectorRegistry()
    return SimpleNamespace(
        unreadable=Counter("unreadable", "records not read", registry=registry),
        lag=Gauge("lag", "records not read yet", registry=registry),
    )


@pytest.fixture
async def publisher(settings: Settings) -> AsyncIterator[tuple[ConfigPublisher, Topics]]:
    topics = Topics(unique_name("changelog"))
    producer = create_producer(settings.kafka_bootstrap)
    await producer.start()

    async def send(topic: str, key: bytes, value: bytes) -> None:
        await producer.send_and_wait(topic, value, key=key)

    yield ConfigPublisher(send, topics.config, SecretBox(TEST_SECRET_KEY)), topics
    await producer.stop()


class TestSync:
    async def test_sync_answers_while_the_follower_waits_for_news(
        self, settings: Settings, publisher: tuple[ConfigPublisher, Topics],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        """The broker holds an idle follower's fetch for the fetch wait (a minute here) and
        answers a connection's requests in order: ``sync`` asks for the log's end on a
        connection of its own, so it returns once the log is applied, not when the wait runs
        out (nor at its own timeout, a minute here too)."""
        monkeypatch.setattr(changelog, "FETCH_WAIT_MS", 60_000)
        monkeypatch.setattr(changelog, "SYNC_TIMEOUT", 60.0)
        publish, topics = publisher
        log = ChangeLog(
            settings.kafka_bootstrap, topics.config_spec(), SecretBox(TEST_SECRET_KEY),
            client_id="test-changelog",
        )  # fmt: skip
        await log.connect()
        seen: list[ConfigChange] = []

        async def follow() -> None:
            async for change in log.follow(metrics()):
                seen.append(change)

        following = asyncio.create_task(follow())
        try:
            deleted = webhook_key("alice", unique_name("hook"))
            assert await publish.publish(ConfigChange.deletion(deleted))
            async with asyncio.timeout(20):  # a deadline for the test, not a measurement
                await log.sync()
                assert [c.key for c in seen] == [deleted]
                for _ in range(3):  # the follower's next fetch now waits on an idle log
                    await log.sync()
        finally:
            following.cancel()
            await log.stop()
