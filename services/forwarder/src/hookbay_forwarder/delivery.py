"""One HTTP attempt: POST the event's bytes and headers to the destination, capture the answer.

The SSRF guard sits in the connection layer: the destination host is resolved when the
connection is opened, every address is checked, and the connection goes to a checked address.
A DNS answer that changes between a check and the connect (rebinding) cannot slip through.
"""

from __future__ import annotations

import asyncio
import socket
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpcore
import httpx

from hookbay_common.clock import utcnow
from hookbay_common.headers import forwardable, join_headers
from hookbay_common.models import DeliveryTask
from hookbay_common.netguard import DestinationNotAllowed, check_url_shape, is_public

RESPONSE_BODY_LIMIT = 64 * 1024
USER_AGENT = "hookbay-forwarder/0.1"


class DestinationBlocked(Exception):
    """The destination resolves to an address hookbay must not connect to."""


@dataclass(frozen=True)
class Outcome:
    """What one attempt saw; ``error`` is set when no HTTP answer arrived."""

    started_at: datetime
    status_code: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    truncated: bool = False
    latency_ms: float | None = None
    error: str | None = None
    blocked: bool = False


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks every address, then connects to a checked one."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except socket.gaierror:
            raise httpcore.ConnectError(f"host {host!r} does not resolve") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        blocked = [a for a in addresses if not is_public(a)]
        if blocked:
            raise DestinationBlocked(
                f"destination not allowed: {host!r} resolves to a non-public address "
                f"({', '.join(blocked)})"
            )
        return await self._inner.connect_tcp(
            addresses[0], port, timeout=timeout, local_address=local_address,
            socket_options=socket_options,
        )  # fmt: skip

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise DestinationBlocked("unix sockets are not destinations")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def create_clients(
    count: int, *, allow_private: bool, max_connections: int
) -> list[httpx.AsyncClient]:
    """``count`` pooled clients sharing one TLS context and ``max_connections`` between them:
    no redirects, no proxies or ``.netrc`` from the environment, and the SSRF guard unless
    private destinations are allowed."""
    ssl_context = httpx.create_ssl_context(trust_env=False)
    per_pool = max(1, max_connections // count)
    limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
    clients = []
    for _ in range(count):
        transport = httpx.AsyncHTTPTransport(verify=ssl_context, limits=limits, trust_env=False)
        if not allow_private:
            # httpx does not expose httpcore's network_backend; rebuild its pool with the guard
            transport._pool = httpcore.AsyncConnectionPool(
                ssl_context=ssl_context,
                max_connections=limits.max_connections,
                max_keepalive_connections=limits.max_keepalive_connections,
                keepalive_expiry=limits.keepalive_expiry,
                network_backend=_GuardedBackend(httpcore.AnyIOBackend()),
            )
        clients.append(
            httpx.AsyncClient(
                transport=transport,
                follow_redirects=False,
                trust_env=False,
                timeout=None,  # noqa: S113 - every attempt runs under asyncio.timeout
            )
        )
    return clients


class Deliverer:
    """Sends attempts through a set of pooled clients, one chosen per owner.

    Several small pools rather than one big one: httpcore's pool matches every waiting request
    against every connection on each change, so its cost grows with waiting requests times
    connections (encode/httpcore#1035); ``n`` pools cut that by ``n`` (docs/benchmarks.md)."""

    def __init__(self, clients: Sequence[httpx.AsyncClient], *, timeout: float) -> None:
        self._clients = list(clients)
        self._timeout = timeout

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()

    async def attempt(self, task: DeliveryTask) -> Outcome:
        """POST the event to ``task.url``; never raises for anything the destination does."""
        started_at = utcnow()
        clock = time.perf_counter()
        try:
            check_url_shape(task.url)
        except DestinationNotAllowed as exc:
            return Outcome(started_at, error=f"destination not allowed: {exc}", blocked=True)
        event = task.event
        headers = forwardable(event.request_headers)
        headers += [
            (b"x-hookbay-event-id", event.id.encode()),
            (b"x-hookbay-request-id", event.request_id.encode()),
            (b"x-hookbay-attempt", str(task.number).encode()),
        ]
        if not any(name == b"user-agent" for name, _ in headers):
            headers.append((b"user-agent", USER_AGENT.encode()))
        try:
            async with asyncio.timeout(self._timeout):
                # a bare Request: the sender's headers only, not the client's defaults
                request = httpx.Request("POST", task.url, content=event.body, headers=headers)
                client = self._clients[zlib.crc32(event.username.encode()) % len(self._clients)]
                response = await client.send(request, stream=True)
                try:
                    body, truncated = await _read_limited(response)
                finally:
                    await response.aclose()
        except TimeoutError:
            return Outcome(
                started_at, error=f"timeout: no complete answer within {self._timeout:g} s",
                latency_ms=_ms(clock),
            )  # fmt: skip
        except DestinationBlocked as exc:
            return Outcome(started_at, error=str(exc), blocked=True, latency_ms=_ms(clock))
        except httpx.HTTPError as exc:
            return Outcome(started_at, error=_describe(exc), latency_ms=_ms(clock))
        return Outcome(
            started_at,
            status_code=response.status_code,
            headers=join_headers(response.headers.raw),
            body=body,
            truncated=truncated,
            latency_ms=_ms(clock),
        )


async def _read_limited(response: httpx.Response) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > RESPONSE_BODY_LIMIT:
            return b"".join(chunks)[:RESPONSE_BODY_LIMIT], True
    return b"".join(chunks), False


def _describe(exc: httpx.HTTPError) -> str:
    detail = str(exc) or type(exc).__name__
    kinds: dict[type[Exception], str] = {
        httpx.ConnectError: "connection failed",
        httpx.ReadError: "connection lost while reading",
        httpx.WriteError: "connection lost while sending",
        httpx.RemoteProtocolError: "protocol error",
    }
    kind = kinds.get(type(exc), type(exc).__name__)
    return f"{kind}: {detail}"[:500]


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
