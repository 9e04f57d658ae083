"""Helpers for tests that drive the ingest app: a stack handle and a Kafka probe."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import SecretStr

from hookbay_common import topics
from hookbay_common.db import UserRepository, WebhookRepository
from hookbay_common.models import Event, User, Webhook
from hookbay_common.settings import Settings
from hookbay_common.wire import decode_event
from hookbay_ingest.app import Ingest
from hookbay_ingest.settings import IngestSettings
from tests.support.factories import create_user, create_webhook
from tests.support.kafka import partitions_of
from tests.support.net import free_port


@dataclass
class Stack:
    client: httpx.AsyncClient
    ingest: Ingest
    users: UserRepository
    webhooks: WebhookRepository

    async def owner(self, plan: str = "pro", **webhook: Any) -> tuple[User, Webhook]:
        """A new user with one webhook, written to MongoDB only (no change-log publication): ingest
        answers it at once through its read-through."""
        user = await self.users.create(create_user(plan=plan))
        if "secret" in webhook and isinstance(webhook["secret"], str):
            webhook["secret"] = SecretStr(webhook["secret"])
        hook = await self.webhooks.create(create_webhook(username=user.username, **webhook))
        return user, hook  # ingest reads a name it does not hold through to MongoDB

    async def post(
        self, user: User, hook: Webhook, body: bytes = b"{}", **kw: Any
    ) -> httpx.Response:
        return await self.client.post(f"/w/{user.username}/{hook.name}", content=body, **kw)


def ingest_settings(settings: Settings, **overrides: Any) -> IngestSettings:
    # tests write users and webhooks straight to MongoDB (no publication) and rely on the
    # read-through; a generous bound keeps a long session within it (the bound has its own test)
    fields = {
        **settings.model_dump(), "view_read_through_rate": 1000, "view_read_through_burst": 1000,
        **overrides,
    }  # fmt: skip
    return IngestSettings(**fields)


class Probe:
    """Reads an events topic from the end as it was when the probe started."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_bytes=32 * 1024 * 1024,
            max_partition_fetch_bytes=topics.MAX_MESSAGE_BYTES,
        )  # fmt: skip
        self.seen: dict[str, Event] = {}

    async def start(self) -> None:
        partitions = await partitions_of(self._bootstrap, self._topic)
        await self._consumer.start()
        assigned = [TopicPartition(self._topic, p) for p in partitions]
        self._consumer.assign(assigned)
        await self._consumer.seek_to_end(*assigned)
        for tp in assigned:  # resolve the end offsets now, before the test produces
            await self._consumer.position(tp)

    async def events(self, *request_ids: str, timeout: float = 20) -> list[Event]:
        async with asyncio.timeout(timeout):
            while not all(rid in self.seen for rid in request_ids):
                batch = await self._consumer.getmany(timeout_ms=200)
                for records in batch.values():
                    for record in records:
                        event = decode_event(record.value)
                        self.seen[event.request_id] = event
        return [self.seen[rid] for rid in request_ids]

    async def stop(self) -> None:
        await self._consumer.stop()


@contextlib.asynccontextmanager
async def ingest_process(
    env: dict[str, str], *, capture_stderr: bool = False
) -> AsyncIterator[tuple[subprocess.Popen[bytes], str]]:
    """A real ``python -m hookbay_ingest`` on a free loopback port, ready (``/readyz`` 200) when
    yielded with its base URL; killed on exit if the test has not stopped it itself."""
    port = free_port()
    proc = subprocess.Popen(  # noqa: ASYNC220 - started once, then only signalled
        [sys.executable, "-m", "hookbay_ingest"],
        env={
            **os.environ,
            **env,
            "HOOKBAY_INGEST_PORT": str(port),
            "HOOKBAY_INGEST_HOST": "127.0.0.1",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE if capture_stderr else subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as client, asyncio.timeout(60):
            while True:
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None, "ingest exited during start-up"
                await asyncio.sleep(0.2)
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
