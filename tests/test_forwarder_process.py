"""The forwarder and the recorder as real processes on real Kafka and FerretDB: kill -9
mid-stream loses nothing, SIGTERM lets the attempt in flight finish, and the ops endpoints tell
liveness from readiness."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import RecordMetadata
from prometheus_client.parser import text_string_to_metric_families

from hookbay_common.db import Collections, Database
from hookbay_common.db.events import EventRepository
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.models import Attempt, Event, EventStatus
from hookbay_common.wire import decode_attempt, encode_attempt, encode_event
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.factories import create_attempt, create_event, unique_name
from tests.support.kafka import Message, TopicReader
from tests.support.net import free_port
from tests.support.processes import ServiceProcess, service_process
from tests.support.receiver import Receiver, Reply
from tests.support.settings import settings_of
from tests.support.waiting import until

EVENT_COUNT = 2000
KILL_AFTER = 400


async def process_env(env: dict[str, str], **settings: str) -> dict[str, str]:
    """Processes' environment in a topic namespace of the calling test's own (consumer groups
    start empty), its topics created: ``env`` plus ``settings`` (``HOOKBAY_`` names)."""
    penv = {
        **env,
        "HOOKBAY_KAFKA_NAMESPACE": f"{env['HOOKBAY_KAFKA_NAMESPACE']}.{unique_name('p')}",
        "HOOKBAY_KAFKA_SESSION_TIMEOUT_MS": "6000",
        **settings,
    }
    await ensure_configured_topics(settings_of(penv, ForwarderSettings))
    return penv


@pytest.fixture
async def penv(env: dict[str, str]) -> dict[str, str]:
    return await process_env(env, HOOKBAY_FORWARD_TIMEOUT="5")


@pytest.fixture
def fs(penv: dict[str, str]) -> ForwarderSettings:
    return settings_of(penv, ForwarderSettings)


@pytest.fixture
async def attempts(fs: ForwarderSettings) -> AsyncIterator[TopicReader[Attempt]]:
    reader = TopicReader(fs.kafka_bootstrap, fs.topics.attempts, decode_attempt)
    await reader.start()
    yield reader
    await reader.stop()


async def produce(
    producer: AIOKafkaProducer, topic: str, records: Sequence[tuple[bytes, bytes]]
) -> list[RecordMetadata]:
    """Send ``(key, value)`` records; return once every one is acknowledged."""
    pending = [await producer.send(topic, value, key=key) for key, value in records]
    return list(await asyncio.gather(*pending))


async def produce_events(
    producer: AIOKafkaProducer, fs: ForwarderSettings, events: Sequence[Event]
) -> list[RecordMetadata]:
    records = [(event.username.encode(), encode_event(event)) for event in events]
    return await produce(producer, fs.topics.events, records)


def succeeded(messages: list[Message[Attempt]]) -> set[str]:
    return {m.value.event_id for m in messages if m.value.status_code == 200}


Sample = tuple[str, dict[str, str], float]


def parse_metrics(text: str) -> list[Sample]:
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def has(samples: list[Sample], name: str, value: float | None = None, **labels: str) -> bool:
    """Whether a sample ``name`` carries ``labels`` (and, when given, ``value``)."""
    return any(
        n == name and labels.items() <= have.items() and (value is None or v == value)
        for n, have, v in samples
    )


class TestForwarderKilled:
    async def test_kill_9_mid_stream_then_a_successor_delivers_every_event(
        self, penv: dict[str, str], fs: ForwarderSettings, receiver: Receiver,
        producer: AIOKafkaProducer, attempts: TopicReader[Attempt], tmp_path: Path,
    ) -> None:  # fmt: skip
        """At-least-once: what the killed forwarder had not committed, its successor redoes;
        each owner's events still first arrive in the order they were captured."""
        owners = [unique_name("u") for _ in range(8)]
        urls = {owner: receiver.url() for owner in owners}
        events = [
            create_event(
                username=owners[i % len(owners)],
                forward_url=urls[owners[i % len(owners)]],
                body=f'{{"n": {i}}}'.encode(),
            )
            for i in range(EVENT_COUNT)
        ]
        expected = {event.id for event in events}

        def requests() -> list[str | None]:
            return [r.header("x-hookbay-event-id") for url in urls.values() for r in receiver.received(url)]  # fmt: skip

        async with service_process("forwarder", penv, tmp_path / "first.log") as first:
            await produce_events(producer, fs, events)
            await until(lambda: len(set(requests())) >= KILL_AFTER, 60, what="first deliveries")
            first.kill()
            assert await first.wait() == -signal.SIGKILL
        delivered_before_kill = len(set(requests()))
        assert delivered_before_kill < EVENT_COUNT, "killed too late: nothing left to redo"

        async with service_process("forwarder", penv, tmp_path / "second.log") as second:
            await until(lambda: set(requests()) >= expected, 120, what="every event delivered")
            messages = await attempts.until(lambda ms: succeeded(ms) >= expected, timeout=60)
            assert not second.exited

        seen = requests()
        duplicates = len(seen) - len(set(seen))
        assert set(seen) == expected, f"{duplicates} duplicate deliveries"
        assert succeeded(messages) >= expected
        for owner, url in urls.items():
            first_arrivals = list(dict.fromkeys(r.header("x-hookbay-event-id") for r in receiver.received(url)))  # fmt: skip
            assert first_arrivals == [e.id for e in events if e.username == owner]


class TestRecorderKilled:
    async def test_kill_9_mid_stream_then_a_successor_records_every_event(
        self, penv: dict[str, str], fs: ForwarderSettings, producer: AIOKafkaProducer,
        db: Database, tmp_path: Path,
    ) -> None:  # fmt: skip
        """What the killed recorder had not committed, its successor writes again: every event
        recorded once, byte-exact, with the status its attempts imply."""
        webhook_id = new_id(IdPrefix.WEBHOOK)
        owners = [unique_name("u") for _ in range(5)]
        events = [
            create_event(
                username=owners[i % len(owners)],
                webhook_id=webhook_id,
                # every 7th body is not UTF-8 (stored base64): both shapes must round-trip
                body=os.urandom(64) if i % 7 == 0 else f'{{"n": {i}}}'.encode(),
            )
            for i in range(EVENT_COUNT)
        ]
        answered = {event.id for event in events[::10]}
        collection = db[Collections.EVENTS]
        recorded = {"webhook_id": webhook_id, "request_id": {"$exists": True}}

        async def feed() -> None:
            """Events in slices, each followed by the 200 attempts of some of them."""
            for start in range(0, EVENT_COUNT, 100):
                chunk = events[start : start + 100]
                await produce_events(producer, fs, chunk)
                await produce(
                    producer, fs.topics.attempts,
                    [(e.id.encode(), encode_attempt(create_attempt(e, url=e.forward_url)))
                     for e in chunk if e.id in answered],
                )  # fmt: skip

        async def at_least(minimum: int, **query: Any) -> bool:
            return await collection.count_documents({**recorded, **query}) >= minimum

        async with service_process("recorder", penv, tmp_path / "first.log") as first:
            feeding = asyncio.create_task(feed())
            await until(lambda: at_least(KILL_AFTER), 60, what="first records")
            first.kill()
            assert await first.wait() == -signal.SIGKILL
            await feeding
        recorded_before_kill = await collection.count_documents(recorded)
        assert recorded_before_kill < EVENT_COUNT, "killed too late: nothing left to redo"

        async with service_process("recorder", penv, tmp_path / "second.log") as second:
            await until(lambda: at_least(EVENT_COUNT), 120, what="every event recorded")
            await until(
                lambda: at_least(len(answered), status="success"), 60,
                what="every answered event marked success",
            )  # fmt: skip
            repository = EventRepository(db)
            expected = {
                EventStatus.PENDING: EVENT_COUNT - len(answered),
                EventStatus.SUCCESS: len(answered),
                EventStatus.FAILED: 0,
            }

            async def counted() -> bool:
                """The page summaries agree with the heads: the batch that set the last status
                recounts its pages right after (a summary the killed recorder left stale is
                rewritten by the successor's redo of that batch)."""
                return await repository.counts(webhook_id) == expected

            await until(counted, 60, what="page summaries agree with the heads")
            assert not second.exited

        docs = [event async for event, _ in repository.stream_for_webhook(webhook_id)]
        assert len(docs) == EVENT_COUNT
        assert {e.id: e.body for e in docs} == {e.id: e.body for e in events}  # byte-exact
        assert {e.id: e.request_id for e in docs} == {e.id: e.request_id for e in events}
        statuses = {e.id: e.status.value for e in docs}
        assert statuses == {e.id: "success" if e.id in answered else "pending" for e in events}


class TestForwarderSigterm:
    async def test_sigterm_lets_the_attempt_in_flight_finish_and_exits_0(
        self, penv: dict[str, str], fs: ForwarderSettings, receiver: Receiver,
        producer: AIOKafkaProducer, attempts: TopicReader[Attempt], tmp_path: Path,
    ) -> None:  # fmt: skip
        """SIGTERM: reading stops, the attempt in flight finishes and is committed, exit 0."""
        gate = asyncio.Event()
        url = receiver.url(Reply(200, b"late", gate=gate))
        event = create_event(username=unique_name("u"), forward_url=url)
        penv = {**penv, "HOOKBAY_FORWARD_TIMEOUT": "30"}
        async with service_process("forwarder", penv, tmp_path / "forwarder.log") as forwarder:
            (produced,) = await produce_events(producer, fs, [event])
            await receiver.wait_for(url, 1)
            forwarder.terminate()
            # both consume loops have ended (so the drain is under way) with the attempt in flight
            await until(lambda: consumers_stopped(forwarder), 10, what="consume loops stopped")
            gate.set()
            status = await forwarder.wait(30)
        assert status == 0, forwarder.tail()
        messages = await attempts.until(lambda ms: event.id in succeeded(ms))
        (attempt,) = [m.value for m in messages if m.value.event_id == event.id]
        assert attempt.response_body == b"late"
        assert "forwarder_stopped" in forwarder.log_events()
        assert "Traceback" not in forwarder.log()
        assert len(receiver.received(url)) == 1
        # the finished attempt was committed: a successor would not make it again
        committed = await group_offsets(fs.kafka_bootstrap, f"{fs.topics.namespace}.forwarder")
        assert (
            committed[TopicPartition(fs.topics.events, produced.partition)] == produced.offset + 1
        )


async def consumers_stopped(forwarder: ServiceProcess) -> bool:
    ready = await forwarder.get("/readyz")
    checks = ready.json()
    return (
        ready.status_code == 503
        and not checks["events_consumer"]
        and not checks["tasks_consumer"]
        and not checks["deliveries_consumer"]
    )


async def group_offsets(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp: meta.offset for tp, meta in offsets.items()}


class TestOpsEndpoints:
    async def test_forwarder(
        self, penv: dict[str, str], fs: ForwarderSettings, receiver: Receiver,
        producer: AIOKafkaProducer, tmp_path: Path,
    ) -> None:  # fmt: skip
        async with service_process("forwarder", penv, tmp_path / "forwarder.log") as forwarder:
            await expect_alive_and_ready(
                forwarder,
                {"kafka": True, "producer": True, "events_consumer": True, "tasks_consumer": True,
                 "deliveries_consumer": True, "routing_view": True},
            )  # fmt: skip
            url = receiver.url()
            await produce_events(producer, fs, [create_event(username=unique_name("u"), forward_url=url)])  # fmt: skip
            await receiver.wait_for(url, 1)
            await expect_samples(
                forwarder,
                ("hookbay_forwarder_attempts_total", 1.0, {"outcome": "success"}),
                ("hookbay_consumer_lag", None,
                 {"consumer": f"{fs.topics.namespace}.forwarder", "topic": fs.topics.events}),
                ("hookbay_producer_ready", 1.0, {"producer": "hookbay-forwarder"}),
                ("hookbay_producer_seconds_since_success", None, {"producer": "hookbay-forwarder"}),
                ("hookbay_consumer_seconds_since_commit", None,
                 {"consumer": f"{fs.topics.namespace}.forwarder"}),
                ("hookbay_lanes_held_deliveries", 0.0, {}),
                ("hookbay_forwarder_routing_view_changelog_lag", 0.0, {}),
            )  # fmt: skip

    async def test_recorder(
        self, penv: dict[str, str], fs: ForwarderSettings, producer: AIOKafkaProducer,
        db: Database, tmp_path: Path,
    ) -> None:  # fmt: skip
        async with service_process("recorder", penv, tmp_path / "recorder.log") as recorder:
            await expect_alive_and_ready(recorder, {"kafka": True, "consumer": True, "mongo": True})
            await produce_events(producer, fs, [create_event(username=unique_name("u"))])
            await expect_samples(
                recorder,
                ("hookbay_recorder_records_total", 1.0, {"kind": "event"}),
                ("hookbay_consumer_lag", None, {"consumer": "recorder", "topic": fs.topics.events}),
                ("hookbay_consumer_seconds_since_commit", None, {"consumer": "recorder"}),
            )


async def expect_alive_and_ready(process: ServiceProcess, checks: dict[str, bool]) -> None:
    health = await process.get("/healthz")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    ready = await process.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"ready": True, **checks})
    metrics = await process.get("/metrics")
    assert metrics.status_code == 200
    assert "hookbay_consumer_lag" in metrics.text


Expected = tuple[str, float | None, dict[str, str]]


async def expect_samples(process: ServiceProcess, *expected: Expected) -> None:
    """Wait until ``/metrics`` holds a sample for each ``(name, value or None, labels)``."""
    text = ""

    async def satisfied() -> bool:
        nonlocal text
        text = (await process.get("/metrics")).text
        samples = parse_metrics(text)
        return all(has(samples, name, value, **labels) for name, value, labels in expected)

    try:
        await until(satisfied, 30, interval=0.2, what="metrics")
    except AssertionError:
        raise AssertionError(f"/metrics never held the expected samples:\n{text}") from None


class TestForwarderWithoutKafka:
    async def test_alive_not_ready_and_sigterm_exits_0(
        self, penv: dict[str, str], tmp_path: Path
    ) -> None:
        penv = {**penv, "HOOKBAY_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}"}
        log = tmp_path / "forwarder.log"
        async with service_process("forwarder", penv, log, ready=False) as forwarder:
            health = await forwarder.get("/healthz")
            assert (health.status_code, health.json()) == (200, {"status": "ok"})
            ready = await forwarder.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["ready"] is False
            assert ready.json()["kafka"] is False
            forwarder.terminate()
            status = await forwarder.wait(30)
        assert status == 0, forwarder.tail()
        assert "forwarder_stopped" in forwarder.log_events()
        assert "Traceback" not in forwarder.log()
