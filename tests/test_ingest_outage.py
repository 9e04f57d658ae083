"""Ingest against failures: a Kafka outage (503, then recovery with nothing 200'd lost) and
SIGTERM with requests in flight (they finish with 200 and are in Kafka)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from hookbay_common.db import Database, UserRepository, WebhookRepository
from hookbay_common.kafka import ensure_configured_topics, ensure_topics
from hookbay_common.models import Event
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_common.wire import decode_event
from hookbay_dev.http import async_client
from hookbay_ingest.app import Ingest, create_app
from tests.support.broker import PrivateBroker
from tests.support.factories import TEST_SECRET_KEY, create_user, create_webhook
from tests.support.ingest import Probe, ingest_process, ingest_settings
from tests.support.net import accepts_connections, free_port
from tests.support.waiting import until


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[PrivateBroker]:
    broker = PrivateBroker(tmp_path)
    await broker.up()
    yield broker
    await broker.down()


async def read_topic(
    bootstrap: str, topic: str, partitions: int, expected: set[str]
) -> list[Event]:
    """Every event on ``topic`` from the start, until the ``expected`` ids are all seen."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    seen: list[Event] = []
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        async with asyncio.timeout(30):
            while not expected <= {event.request_id for event in seen}:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    seen.extend(decode_event(r.value) for r in records)
        for records in (await consumer.getmany(timeout_ms=500)).values():  # and nothing more after
            seen.extend(decode_event(r.value) for r in records)
    finally:
        await consumer.stop()
    return seen


async def owner(db: Database) -> tuple[str, str]:
    user = await UserRepository(db).create(create_user(plan="pro"))
    hook = await WebhookRepository(db, SecretBox(TEST_SECRET_KEY)).create(
        create_webhook(username=user.username)
    )
    return user.username, hook.name


class TestKafkaOutage:
    async def test_503_while_down_and_nothing_200d_is_lost(
        self, broker: PrivateBroker, settings: Settings, db: Database
    ) -> None:
        await ensure_topics(broker.bootstrap, partitions=2, specs=settings.topic_specs())
        username, name = await owner(db)
        app = create_app(
            ingest_settings(
                settings, kafka_bootstrap=broker.bootstrap, kafka_partitions=2, produce_timeout=2
            )
        )
        ingest: Ingest = app.state.ingest
        accepted: dict[str, bytes] = {}
        async with app.router.lifespan_context(app):
            async with asyncio.timeout(30):
                await ingest.kafka_connected.wait()
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
                url = f"/w/{username}/{name}"
                for i in range(10):
                    response = await client.post(url, content=f"before-{i}".encode())
                    assert response.status_code == 200
                    accepted[response.json()["requestId"]] = f"before-{i}".encode()

                await broker.down()
                refused = await client.post(url, content=b"during")
                assert refused.status_code == 503
                body = refused.json()
                assert body["error"] == "Service unavailable"
                assert isinstance(body["retryAfter"], int)
                assert refused.headers["retry-after"] == str(body["retryAfter"])

                await broker.up()
                async with asyncio.timeout(60):  # the producer reconnects by itself
                    while True:
                        response = await client.post(url, content=b"after")
                        if response.status_code == 200:
                            accepted[response.json()["requestId"]] = b"after"
                            break
                        assert response.status_code == 503
                        await asyncio.sleep(0.5)
                for i in range(10):
                    response = await client.post(url, content=f"again-{i}".encode())
                    assert response.status_code == 200
                    accepted[response.json()["requestId"]] = f"again-{i}".encode()
        on_topic = await read_topic(broker.bootstrap, settings.topics.events, 2, set(accepted))
        ids = [event.request_id for event in on_topic]
        assert all(ids.count(rid) == 1 for rid in accepted)  # idempotent producer: no duplicates
        bodies = {event.request_id: event.body for event in on_topic}
        assert {rid: bodies[rid] for rid in accepted} == accepted  # exactly as sent


class TestGracefulShutdown:
    async def test_sigterm_finishes_in_flight_requests(
        self, env: dict[str, str], db: Database, settings: Settings
    ) -> None:
        username, name = await owner(db)
        await ensure_configured_topics(settings)  # run alone, no earlier test has made them
        probe = Probe(settings.kafka_bootstrap, settings.topics.events)
        await probe.start()  # reads from the current end: only what this test produces
        async with ingest_process(env, capture_stderr=True) as (proc, base):
            async with async_client(base_url=base, timeout=30) as client:
                first_chunk_sent = asyncio.Event()
                release = asyncio.Event()

                async def slow_body() -> AsyncIterator[bytes]:
                    yield b'{"part": 1,'
                    first_chunk_sent.set()
                    await release.wait()
                    yield b' "part2": 2}'

                in_flight = asyncio.create_task(
                    client.post(f"/w/{username}/{name}", content=slow_body())
                )
                await first_chunk_sent.wait()
                # sent is not received: SIGTERM must find the request in the app (a connection
                # whose head uvicorn has not read yet is closed at once, measured under load)
                await until(partial(request_in_flight, client), 10, what="the request in flight")
                proc.send_signal(signal.SIGTERM)
                port = int(base.rsplit(":", 1)[1])
                async with asyncio.timeout(10):  # shutdown has begun: the listener is closed
                    while accepts_connections(port):
                        await asyncio.sleep(0.05)
                release.set()  # only now does the in-flight request finish its body
                response = await in_flight
            assert response.status_code == 200
            request_id = response.json()["requestId"]
            # uvicorn re-raises SIGTERM once its graceful shutdown (and our lifespan) completed
            assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
            stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert "Traceback" not in stderr
        # the lifespan ran to its end: the producer was flushed and closed
        assert '"event": "ingest_stopped"' in stderr
        try:
            (event,) = await probe.events(request_id)
        finally:
            await probe.stop()
        assert event.body == b'{"part": 1, "part2": 2}'


class TestDrainDelay:
    async def test_sigterm_first_turns_unready_while_serving_then_stops(
        self, env: dict[str, str], db: Database, settings: Settings
    ) -> None:
        username, name = await owner(db)
        await ensure_configured_topics(settings)
        probe = Probe(settings.kafka_bootstrap, settings.topics.events)
        await probe.start()
        drained = {**env, "HOOKBAY_DRAIN_DELAY": "3"}
        async with ingest_process(drained, capture_stderr=True) as (proc, base):
            port = int(base.rsplit(":", 1)[1])
            async with async_client(base_url=base, timeout=30) as client:
                proc.send_signal(signal.SIGTERM)

                async def draining() -> bool:
                    return (await client.get("/readyz")).status_code == 503

                await until(draining, 10, what="/readyz 503 after SIGTERM")
                ready = (await client.get("/readyz")).json()
                assert ready["ready"] is False
                assert ready["draining"] is True
                # still serving: the balancer may send until it has seen the 503
                response = await client.post(f"/w/{username}/{name}", content=b"draining")
                assert response.status_code == 200
                assert accepts_connections(port)
            request_id = response.json()["requestId"]
            assert proc.wait(timeout=30) in (0, -signal.SIGTERM)  # then the usual shutdown
            stderr = proc.stderr.read().decode() if proc.stderr else ""
        events = [json.loads(line)["event"] for line in stderr.splitlines() if line.startswith("{")]
        assert events.index("ingest_draining") < events.index("ingest_stopped")
        try:
            (event,) = await probe.events(request_id)
        finally:
            await probe.stop()
        assert event.body == b"draining"


class TestRedisOutage:
    async def test_rate_limiter_fails_open_and_readiness_reports_it_without_failing(
        self, tmp_path: Path, settings: Settings, db: Database
    ) -> None:
        port = free_port()
        redis = subprocess.Popen(  # noqa: ASYNC220 - started once, then only signalled
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async with asyncio.timeout(10):
                while not accepts_connections(port):
                    await asyncio.sleep(0.05)
            await ensure_configured_topics(settings)
            username, name = await owner(db)
            app = create_app(ingest_settings(settings, redis_url=f"redis://127.0.0.1:{port}/0"))
            ingest: Ingest = app.state.ingest
            async with app.router.lifespan_context(app):
                async with asyncio.timeout(30):
                    await ingest.kafka_connected.wait()
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://i") as client:
                    assert (
                        await client.post(f"/w/{username}/{name}", content=b"a")
                    ).status_code == 200

                    async def ready() -> bool:
                        return (await client.get("/readyz")).status_code == 200

                    await until(ready, 30, what="ingest ready (configuration view caught up)")
                    assert (await client.get("/readyz")).json()["redis"] is True
                    redis.terminate()
                    redis.wait(timeout=10)
                    accepted = await client.post(f"/w/{username}/{name}", content=b"b")
                    assert accepted.status_code == 200  # fails open: the event is not refused
                    readiness = await client.get("/readyz")
                    assert readiness.status_code == 200  # still ready: intake goes on
                    assert readiness.json() == {
                        "ready": True, "kafka": True, "config_view": True, "redis": False
                    }  # fmt: skip
        finally:
            if redis.poll() is None:
                redis.kill()
                redis.wait(timeout=10)


async def request_in_flight(client: httpx.AsyncClient) -> bool:
    metrics = (await client.get("/metrics")).text
    return "hookbay_ingest_requests_in_flight 1.0" in metrics
