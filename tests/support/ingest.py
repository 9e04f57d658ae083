"""Helpers for tests that drive the ingest app: a stack handle and a Kafka probe."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import SecretStr

from hookbay_common import topics
from hookbay_common.db import UserRepository, WebhookRepository
from hookbay_common.models import Event, User, Webhook
from hookbay_common.settings import Settings
from hookbay_common.wire import decode_event
from hookbay_dev.processes import launch_role
from hookbay_dev.zygote import ZygoteChild
from hookbay_ingest.app import Ingest
from hookbay_ingest.settings import IngestSettings
from tests.support.factories import create_user, create_webhook
from tests.support.kafka import partitions_of
from tests.support.net import free_port
from tests.support.processes import FORKED


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
) -> AsyncIterator[tuple[subprocess.Popen[bytes] | ZygoteChild, str]]:
    """A real ``python -m hookbay_ingest`` (started by ``hookbay_dev.processes``) on a free
    loopback port, ready (``/readyz`` 200) when yielded with its base URL; killed on exit if the
    test has not stopped it itself. ``capture_stderr``: its stderr is ``proc.stderr``, a pipe."""
    process = launch_role(
        "ingest", {**os.environ, **env}, Path(os.devnull), free_port(),
        stderr_pipe=capture_stderr, forked=FORKED,
    )  # fmt: skip
    try:
        await process.wait_until_answering("/readyz", 200)
        yield process.proc, process.base
    finally:
        if not process.exited:
            process.kill()
            process.proc.wait(timeout=30)


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def raw_exchange(base: str, data: bytes, *, timeout: float = 30) -> RawResponse:
    """Send ``data`` exactly as given on a new connection to ``base`` (``http://host:port``)
    and read one response, while still sending (the server may answer before reading all)."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))

    async def send() -> None:
        with contextlib.suppress(ConnectionError):
            writer.write(data)
            await writer.drain()

    sending = asyncio.create_task(send())
    try:
        async with asyncio.timeout(timeout):
            head = await reader.readuntil(b"\r\n\r\n")
            status_line, *lines = head.decode("latin-1").split("\r\n")
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sending
        writer.close()
    return RawResponse(int(status_line.split(" ")[1]), headers, body)
