"""A real local HTTP destination for forwarding tests: scripted answers, every request kept."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tests.support.factories import unique_name
from tests.support.net import free_port


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    gate: asyncio.Event | None = None
    """When set, the answer waits until the event is set (a hanging destination)."""


@dataclass(frozen=True)
class Received:
    path: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    at: float

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.decode("latin-1").lower() == name:
                return value.decode("latin-1")
        return None


class Receiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.requests: dict[str, list[Received]] = defaultdict(list)
        self._scripts: dict[str, deque[Reply]] = {}
        self._defaults: dict[str, Reply] = {}
        self._changed = asyncio.Condition()

    def url(self, *replies: Reply, then: Reply | None = None) -> str:
        """A fresh path answering ``replies`` in turn, then ``then`` (default 200 "ok")."""
        path = f"/{unique_name('r')}"
        self._scripts[path] = deque(replies)
        self._defaults[path] = then or Reply()
        return self.base + path

    def received(self, url: str) -> list[Received]:
        return self.requests[url.removeprefix(self.base)]

    async def wait_for(self, url: str, count: int, timeout: float = 30) -> list[Received]:
        path = url.removeprefix(self.base)
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.requests[path]) >= count)
        return self.requests[path]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        body = await request.body()
        path = request.url.path
        async with self._changed:
            self.requests[path].append(
                Received(path, list(request.headers.raw), body, time.monotonic())
            )
            self._changed.notify_all()
        script = self._scripts.get(path)
        reply = script.popleft() if script else self._defaults.get(path, Reply(404, b"unknown"))
        if reply.gate is not None:
            await reply.gate.wait()
        await Response(reply.body, reply.status, headers=reply.headers)(scope, receive, send)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serve_receiver(receiver: Receiver | None = None) -> AsyncIterator[Receiver]:
    """Serve ``receiver`` (a new one by default; one made earlier keeps its port and paths)."""
    receiver = receiver or Receiver()
    config = uvicorn.Config(
        receiver, host="127.0.0.1", port=receiver.port, log_config=None, access_log=False,
        lifespan="off", timeout_graceful_shutdown=1,
        timeout_keep_alive=75,  # a destination like nginx: the forwarder's pool closes first
    )  # fmt: skip
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.01)
    try:
        yield receiver
    finally:
        server.should_exit = True
        await task
