"""Helpers shared by the benchmark scripts (run as ``python scripts/<bench>.py``, so this module
is importable as ``benchlib``). Processes are started by the launcher shared with the tests
(``hookbay_dev.processes``); the doc write-up helpers come from ``hookbay_dev.reports``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import os
import platform
import re
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from hookbay_common.localenv import local_defaults
from hookbay_dev.processes import ServiceProcess, launch, running
from hookbay_dev.reports import machine, write_doc_block

__all__ = [
    "HOST",
    "ROOT",
    "SEND_ERRORS",
    "KeepAlivePool",
    "bench_env",
    "drop_database",
    "ferretdb_version",
    "free_port",
    "kafka_version",
    "local_env",
    "machine",
    "make_body",
    "on_sigterm",
    "package_versions",
    "percentile",
    "read_response",
    "service",
    "write_doc_block",
]

HOST = "127.0.0.1"  # benchmarks send traffic to loopback only
ROOT = Path(__file__).resolve().parent.parent


def make_body(size: int = 1024) -> bytes:
    """A JSON object of exactly ``size`` bytes."""
    head = b'{"event":"bench","id":1,"pad":"'
    tail = b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[index]


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Read one HTTP/1.1 response (Content-Length framed); return its status code and body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return status, body


CLOCK_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (all its threads) so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) * CLOCK_TICK_S  # utime, stime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def package_versions(*dists: str) -> dict[str, str]:
    """``{"Python": ..., dist: version}`` for the installed ones of ``dists``."""
    out = {"Python": platform.python_version()}
    for dist in dists:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[dist] = importlib.metadata.version(dist)
    return out


def kafka_version() -> str:
    pom = (ROOT / "deploy/local/kafka/pom.xml").read_text(errors="replace")
    found = re.search(r"<kafka.version>(.*?)</kafka.version>", pom)
    return found[1] if found else "?"


def ferretdb_version() -> str:
    gomod = (ROOT / "deploy/local/ferretdb/go.mod").read_text(errors="replace")
    found = re.search(r"^require github.com/FerretDB/FerretDB (v[\d.]+)$", gomod, re.M)
    return found[1] if found else "?"


SEND_ERRORS = (
    OSError,
    RuntimeError,
    TimeoutError,
    ValueError,
    IndexError,
    asyncio.IncompleteReadError,
)
"""What ``KeepAlivePool.send`` raises when a request got no status."""


class KeepAlivePool:
    """HTTP/1.1 keep-alive connections to ``HOST:port`` for an open-loop load generator.

    uvicorn closes a keep-alive connection idle for 5 s, and a request written into one being
    closed gets no answer, so connections idle for ``keepalive`` seconds are retired first (as
    HTTP clients do). More than ``max_connections`` in flight is an error, not a queue: an
    open-loop client must not wait for the server."""

    def __init__(
        self, port: int, *, max_connections: int, keepalive: float, timeout: float,
        clock: Callable[[], float],
    ) -> None:  # fmt: skip
        self._port = port
        self._max = max_connections
        self._keepalive = keepalive
        self._timeout = timeout
        self._clock = clock
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []
        """Idle connections, oldest first, with the time each was last used."""
        self._open = 0

    async def send(self, request: bytes) -> tuple[int, float, bytes]:
        """Send ``request`` and read the response; (status, when it was read, body). Raises
        one of ``SEND_ERRORS`` (the connection is closed then)."""
        stale = self._clock() - self._keepalive
        while self._idle and self._idle[0][2] < stale:
            self._idle.pop(0)[1].close()
            self._open -= 1
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            async with asyncio.timeout(self._timeout):
                if self._idle:
                    reader, writer, _ = self._idle.pop()
                    conn = (reader, writer)
                elif self._open < self._max:
                    self._open += 1
                    try:
                        conn = await asyncio.open_connection(HOST, self._port)
                    except BaseException:
                        self._open -= 1
                        raise
                else:
                    raise RuntimeError("connection pool exhausted")
                conn[1].write(request)
                status, body = await read_response(conn[0])
        except SEND_ERRORS:
            if conn is not None:
                conn[1].close()
                self._open -= 1
            raise
        done = self._clock()
        self._idle.append((*conn, done))
        return status, done, body

    def close(self) -> None:
        for _, writer, _ in self._idle:
            writer.close()
        self._idle.clear()


def local_env() -> dict[str, str]:
    """This process's environment without its ``HOOKBAY_*`` settings (the ``HOOKBAY_INFRA_*``
    ports kept), plus the local infrastructure's defaults, as ``make run`` has them."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HOOKBAY_") or k.startswith("HOOKBAY_INFRA_")
    }
    env.update(local_defaults(ROOT, env, create_key=True))
    return env


def bench_env(db: str, name: str) -> dict[str, str]:
    """``local_env`` for one benchmark run: database ``db``, a topic namespace of its own
    (``bench.<name>.<random>``), warnings only in the services' logs, ops ports on loopback."""
    env = local_env()
    mongo = env["HOOKBAY_MONGO_URL"].rsplit("/", 1)[0]
    env.update(
        HOOKBAY_MONGO_URL=f"{mongo}/{db}",
        HOOKBAY_KAFKA_NAMESPACE=f"bench.{name}.{uuid.uuid4().hex[:8]}",
        HOOKBAY_LOG_LEVEL="WARNING",
        HOOKBAY_OPS_HOST=HOST,
    )
    return env


def add_settings_option(parser: argparse.ArgumentParser) -> None:
    """``--set HOOKBAY_NAME=VALUE`` (repeatable): a setting for the services a benchmark starts,
    to measure one value against another; ``apply_settings`` puts them in its environment."""
    parser.add_argument(
        "--set", action="append", default=[], metavar="HOOKBAY_NAME=VALUE",
        help="a setting for the stack's services (repeatable): to set one value against another",
    )  # fmt: skip


def apply_settings(
    parser: argparse.ArgumentParser, settings: list[str], env: dict[str, str]
) -> None:
    """Put the ``--set`` settings in ``env``; a malformed one ends the run with a usage error."""
    for setting in settings:
        name, sep, value = setting.partition("=")
        if not name.startswith("HOOKBAY_") or not sep:
            parser.error(f"--set {setting}: give HOOKBAY_NAME=VALUE")
        env[name] = value


def drop_database(env: dict[str, str]) -> None:
    """Drop the database ``HOOKBAY_MONGO_URL`` of ``env`` names (a benchmark's own)."""
    from pymongo import MongoClient

    base, name = env["HOOKBAY_MONGO_URL"].rsplit("/", 1)
    client: MongoClient[dict[str, object]]
    with MongoClient(base) as client:
        client.drop_database(name)


@contextlib.contextmanager
def service(argv: list[str], env: dict[str, str], ready_url: str) -> Iterator[ServiceProcess]:
    """Run ``argv`` (output discarded) until the block ends; enter once ``ready_url`` answers."""
    with running(launch(argv, env, Path(os.devnull)), ready_url) as process:
        yield process
