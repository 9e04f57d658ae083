"""One HTTP attempt: POST the event's bytes and headers to the destination, capture the answer.

The SSRF guard sits in the connection layer: the destination host is resolved when the
connection is opened, every address is checked, and the connection goes to a checked address
(aiohttp: a guarded resolver, IP literals checked before; httpx: a guarded network backend).
A DNS answer that changes between a check and the connect (rebinding) cannot slip through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import httpcore
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from hookbay_common.clock import utcnow
from hookbay_common.headers import forwardable, join_headers
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Attempt, DeliveryTask, TransformTrace
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

    def attempt(
        self, task: DeliveryTask, delay: float | None, *,
        transform: TransformTrace | None = None, **routing: str | None,
    ) -> Attempt:  # fmt: skip
        """The attempt record of ``task`` that saw this outcome; ``delay``: seconds until the
        next attempt (``None``: the chain ends); ``routing``: a routed delivery's
        ``delivery_id``, ``route`` and ``destination``; ``transform``: what its route's
        transformation did."""
        return Attempt(
            id=new_id(IdPrefix.ATTEMPT), event_id=task.event.id, username=task.event.username,
            webhook_id=task.event.webhook_id, chain_id=task.chain_id, number=task.number,
            trigger=task.trigger, url=task.url, started_at=self.started_at,
            status_code=self.status_code, response_headers=self.headers,
            response_body=self.body, response_body_truncated=self.truncated,
            latency_ms=self.latency_ms, error=self.error, will_retry=delay is not None,
            next_retry_at=self.started_at + timedelta(seconds=delay) if delay is not None else None,
            transform=transform, **routing,
        )  # fmt: skip


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
    # An idle connection is closed after 4 s, before the 5 s after which the commonest servers
    # close it (Node.js, uvicorn, gunicorn's 2 s aside): reusing one the destination is closing
    # at that very moment fails the attempt with a read error, and costs the owner a retry.
    limits = httpx.Limits(
        max_connections=per_pool, max_keepalive_connections=per_pool, keepalive_expiry=4.0
    )
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


class _GuardedResolver(AbstractResolver):
    """aiohttp's resolver with the SSRF check: every address of the host must be public."""

    def __init__(self) -> None:
        self._inner = ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        blocked = sorted({r["host"] for r in results if not is_public(r["host"])})
        if blocked:
            raise DestinationBlocked(
                f"destination not allowed: {host!r} resolves to a non-public address "
                f"({', '.join(blocked)})"
            )
        return results

    async def close(self) -> None:
        await self._inner.close()


def create_session(*, allow_private: bool, max_connections: int) -> aiohttp.ClientSession:
    """The pooled aiohttp session: no redirects (per request), no proxies or ``.netrc`` from the
    environment, no cookies kept, DNS answers cached 10 s, the SSRF guard in the resolver."""
    connector = aiohttp.TCPConnector(
        limit=max_connections, limit_per_host=0, ttl_dns_cache=10,
        resolver=None if allow_private else _GuardedResolver(),
    )  # fmt: skip
    return aiohttp.ClientSession(
        connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(total=None), auto_decompress=True,
    )  # fmt: skip


_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")


class Deliverer:
    """Sends attempts through one pooled aiohttp session: its C parser and per-host pool cost a
    fraction of httpx's (docs/benchmarks.md, "Forwarder"). aiohttp writes header values as UTF-8,
    so a request carrying header bytes that are not UTF-8 goes through httpx instead, which sends
    them exactly as received; owners are spread over a few httpx pools by a hash (httpcore's pool
    cost grows with waiting requests times connections, encode/httpcore#1035)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        fallback: Sequence[httpx.AsyncClient],
        *,
        timeout: float,
        allow_private: bool,
    ) -> None:
        self._session = session
        self._fallback = list(fallback)
        self._timeout = timeout
        self._allow_private = allow_private

    async def aclose(self) -> None:
        await self._session.close()
        for client in self._fallback:
            await client.aclose()

    async def attempt(
        self,
        task: DeliveryTask,
        *,
        within: float | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Outcome:
        """POST the event to ``task.url``; never raises for anything the destination does.
        ``within`` (seconds; default: the deliverer's timeout) bounds the whole answer;
        ``extra_headers`` (a destination's own) replace the sender's headers of the same names."""
        timeout = self._timeout if within is None else within
        started_at = utcnow()
        clock = time.perf_counter()
        try:
            host = check_url_shape(task.url)
        except DestinationNotAllowed as exc:
            return Outcome(started_at, error=f"destination not allowed: {exc}", blocked=True)
        if not self._allow_private and _is_ip(host) and not is_public(host):
            return Outcome(
                started_at, blocked=True,
                error=f"destination not allowed: {host!r} is a non-public address",
            )  # fmt: skip
        event = task.event
        headers = forwardable(event.request_headers)
        if extra_headers:
            names = {name.lower().encode("latin-1") for name in extra_headers}
            headers = [(name, value) for name, value in headers if name not in names]
            headers += [
                (name.lower().encode("latin-1"), value.encode("latin-1"))
                for name, value in extra_headers.items()
            ]
        headers += [
            (b"x-hookbay-event-id", event.id.encode()),
            (b"x-hookbay-request-id", event.request_id.encode()),
            (b"x-hookbay-attempt", str(task.number).encode()),
        ]
        if not any(name == b"user-agent" for name, _ in headers):
            headers.append((b"user-agent", USER_AGENT.encode()))
        text = _as_text(headers)
        try:
            async with asyncio.timeout(timeout):
                if text is not None:
                    answer = await self._via_aiohttp(task.url, event.body, text)
                else:
                    answer = await self._via_httpx(task.url, event.body, headers, event.username)
        except TimeoutError:
            return Outcome(
                started_at, error=f"timeout: no complete answer within {timeout:g} s",
                latency_ms=_ms(clock),
            )  # fmt: skip
        except DestinationBlocked as exc:
            return Outcome(started_at, error=str(exc), blocked=True, latency_ms=_ms(clock))
        except (aiohttp.ClientError, httpx.HTTPError, OSError) as exc:
            return Outcome(started_at, error=_describe(exc), latency_ms=_ms(clock))
        status, response_headers, body, truncated = answer
        return Outcome(
            started_at, status_code=status, headers=response_headers, body=body,
            truncated=truncated, latency_ms=_ms(clock),
        )  # fmt: skip

    async def _via_aiohttp(
        self, url: str, body: bytes, headers: list[tuple[str, str]]
    ) -> tuple[int, dict[str, str], bytes, bool]:
        present = {name.lower() for name, _ in headers}
        skip = {name for name in _AUTO_HEADERS if name.lower() not in present}
        async with self._session.post(
            url, data=body, headers=headers, skip_auto_headers=skip, allow_redirects=False
        ) as response:
            chunks: list[bytes] = []
            size = 0
            while size <= RESPONSE_BODY_LIMIT and (chunk := await response.content.readany()):
                chunks.append(chunk)
                size += len(chunk)
            data = b"".join(chunks)
            return (
                response.status,
                join_headers(response.raw_headers),
                data[:RESPONSE_BODY_LIMIT],
                size > RESPONSE_BODY_LIMIT,
            )

    async def _via_httpx(
        self, url: str, body: bytes, headers: list[tuple[bytes, bytes]], owner: str
    ) -> tuple[int, dict[str, str], bytes, bool]:
        # a bare Request: the sender's headers only, not the client's defaults
        request = httpx.Request("POST", url, content=body, headers=headers)
        client = self._fallback[zlib.crc32(owner.encode()) % len(self._fallback)]
        response = await client.send(request, stream=True)
        try:
            data, truncated = await _read_limited(response)
        finally:
            await response.aclose()
        return response.status_code, join_headers(response.headers.raw), data, truncated


def _as_text(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]] | None:
    """The headers as aiohttp takes them, or ``None`` when a value is not UTF-8 (aiohttp would
    re-encode it as UTF-8 and change its bytes)."""
    try:
        return [(name.decode("latin-1"), value.decode("utf-8")) for name, value in headers]
    except UnicodeDecodeError:
        return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def _read_limited(response: httpx.Response) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > RESPONSE_BODY_LIMIT:
            return b"".join(chunks)[:RESPONSE_BODY_LIMIT], True
    return b"".join(chunks), False


def _describe(exc: Exception) -> str:
    detail = str(exc) or type(exc).__name__
    kinds: dict[type[Exception], str] = {
        httpx.ConnectError: "connection failed",
        httpx.ReadError: "connection lost while reading",
        httpx.WriteError: "connection lost while sending",
        httpx.RemoteProtocolError: "protocol error",
        aiohttp.ClientConnectorError: "connection failed",
        aiohttp.ClientConnectorDNSError: "connection failed",
        aiohttp.ServerDisconnectedError: "connection lost while reading",
        aiohttp.ClientPayloadError: "connection lost while reading",
        aiohttp.ClientOSError: "connection failed",
        aiohttp.ClientResponseError: "protocol error",
    }
    kind = kinds.get(type(exc), type(exc).__name__)
    return f"{kind}: {detail}"[:500]


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
