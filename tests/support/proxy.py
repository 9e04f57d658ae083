"""A loopback TCP proxy a test can break: pass bytes through, black-hole them (connections stay
open, nothing moves either way: a dead network path or a suspended laptop), cut every
connection, or point at another upstream (a server restarted on another port)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from tests.support.net import free_port


class BreakableProxy:
    def __init__(self, upstream_port: int) -> None:
        self.port = free_port()
        self.upstream_port = upstream_port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.connections = 0
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def black_hole(self) -> None:
        """From now on no byte moves (new connections are accepted, and hang)."""
        self.flowing.clear()

    def restore(self) -> None:
        self.flowing.set()

    def cut(self) -> None:
        """Close every open connection (a reset network path, a restarted server)."""
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            await self.flowing.wait()
            up_reader, upstream = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            self._writers.add(upstream)
            await asyncio.gather(self._pump(reader, upstream), self._pump(up_reader, writer))
        except OSError:
            pass
        finally:
            for end in (writer, upstream):
                if end is not None:
                    self._writers.discard(end)
                    end.transport.abort()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(65536):
                await self.flowing.wait()  # a black hole holds what it got
                sink.write(chunk)
                await sink.drain()
        except OSError:
            pass
        finally:
            sink.transport.abort()


@contextlib.asynccontextmanager
async def serve_proxy(upstream_port: int) -> AsyncIterator[BreakableProxy]:
    proxy = BreakableProxy(upstream_port)
    server = await asyncio.start_server(proxy._serve, "127.0.0.1", proxy.port)
    try:
        yield proxy
    finally:
        proxy.restore()
        proxy.cut()
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)
