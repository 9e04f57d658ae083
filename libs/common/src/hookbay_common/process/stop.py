"""Graceful stop: signals request a stop; the process, not a library, decides what stopping means.

- ``stop_on_signals``: while the block runs, SIGTERM and SIGINT call the process's stop request
  (a consumer stops reading, finishes in-flight work, commits, exits 0; a job cancels its work).
- ``OpsServer`` (``serving``): uvicorn serving the probes inside the process's own event loop,
  installing no signal handlers of its own, so a signal reaches the process's stop request only.
- ``DrainingServer``: uvicorn as the process's server (it owns the signals), turning the process
  unready for a delay on SIGTERM before its graceful shutdown, so a load balancer following
  readiness stops sending first.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def stop_on_signals(
    request_stop: Callable[[], object], signals: Iterable[signal.Signals] = STOP_SIGNALS
) -> Iterator[None]:
    """Call ``request_stop`` from the running event loop on each of ``signals`` until the block
    ends; then the signals' previous handling is back. ``request_stop`` must return at once
    (it asks for the stop; the process's own code carries it out)."""
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in signals}
    for sig in previous:
        loop.add_signal_handler(sig, request_stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            if handler is not None:  # None: not set from Python; asyncio left the default
                signal.signal(sig, handler)


class OpsServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its host process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    @property
    def port(self) -> int | None:
        """The bound port (useful with port 0)."""
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return None


def create_ops_server(app: ASGIApp, host: str, port: int) -> OpsServer:
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, lifespan="off",
        loop="asyncio",
    )  # fmt: skip
    return OpsServer(config)


@contextlib.asynccontextmanager
async def serving(app: ASGIApp, host: str, port: int) -> AsyncIterator[OpsServer]:
    """Serve ``app`` (the probes) in the running loop while the block runs; it starts listening
    at the block's first await. At the end the server stops and is waited for, so the probes
    answer until the process's own stop is complete."""
    server = create_ops_server(app, host, port)
    task = asyncio.create_task(server.serve())
    try:
        yield server
    finally:
        server.should_exit = True
        await task


class DrainingServer(uvicorn.Server):
    """uvicorn's server with a drain delay before its graceful shutdown on SIGTERM: ``drain`` is
    called (the process reports itself unready from then on), the server keeps serving for
    ``delay`` seconds, then shuts down as on any signal, and re-raises the SIGTERM afterwards
    as uvicorn does (the exit status is SIGTERM's). A second SIGTERM, or SIGINT, skips what is
    left of the delay; ``delay`` <= 0 is uvicorn's own handling."""

    def __init__(self, config: uvicorn.Config, delay: float, drain: Callable[[], None]) -> None:
        super().__init__(config)
        self._delay = delay
        self._drain = drain
        self.draining = False
        self._drain_until: float | None = None  # monotonic time the delay ends

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig != signal.SIGTERM or self.draining or self._delay <= 0:
            super().handle_exit(sig, frame)
            return
        self.draining = True
        self._drain()
        self._captured_signals.append(sig)  # re-raised after the shutdown, as uvicorn does
        self._drain_until = time.monotonic() + self._delay

    async def on_tick(self, counter: int) -> bool:  # uvicorn's main loop, every 0.1 s
        if self._drain_until is not None and time.monotonic() >= self._drain_until:
            self.should_exit = True
        return await super().on_tick(counter)
