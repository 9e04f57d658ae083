"""Real service processes for tests — ``python -m hookbay_forwarder forwarder|recorder|stats`` and
``python -m hookbay_dashboard`` — and a deadline-bound poll for conditions they bring about."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.net import free_port
from tests.support.waiting import until

COMMANDS = {
    "forwarder": [sys.executable, "-m", "hookbay_forwarder", "forwarder"],
    "recorder": [sys.executable, "-m", "hookbay_forwarder", "recorder"],
    "stats": [sys.executable, "-m", "hookbay_forwarder", "stats"],
    "dashboard": [sys.executable, "-m", "hookbay_dashboard"],
    "ingest": [sys.executable, "-m", "hookbay_ingest"],
}
LISTEN_VARIABLES = {  # (port, host) of what answers /healthz, /readyz and /metrics
    "forwarder": ("HOOKBAY_FORWARDER_METRICS_PORT", "HOOKBAY_OPS_HOST"),
    "recorder": ("HOOKBAY_RECORDER_METRICS_PORT", "HOOKBAY_OPS_HOST"),
    "stats": ("HOOKBAY_STATS_METRICS_PORT", "HOOKBAY_OPS_HOST"),
    "dashboard": ("HOOKBAY_DASHBOARD_PORT", "HOOKBAY_DASHBOARD_HOST"),
    "ingest": ("HOOKBAY_INGEST_PORT", "HOOKBAY_INGEST_HOST"),
}


@dataclass
class ServiceProcess:
    """One running process; its stderr (JSON log lines) goes to ``log_path``."""

    role: str
    proc: asyncio.subprocess.Process
    base: str
    log_path: Path

    @property
    def exited(self) -> bool:
        return self.proc.returncode is not None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_events(self) -> list[str]:
        """The ``event`` of every JSON log line, in order."""
        events = []
        for line in self.log().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and "event" in entry:
                    events.append(str(entry["event"]))
        return events

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    async def get(self, path: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.base, timeout=5) as client:
            return await client.get(path, follow_redirects=True)

    async def answers(self, path: str, status: int) -> bool:
        try:
            return (await self.get(path)).status_code == status
        except httpx.TransportError:
            return False

    async def wait_until_answering(self, path: str, status: int, timeout: float = 60) -> None:
        async def answered() -> bool:
            assert not self.exited, (
                f"{self.role} exited ({self.proc.returncode}) while starting:\n{self.tail()}"
            )
            return await self.answers(path, status)

        await until(answered, timeout, interval=0.2, what=f"{self.role} {path} {status}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    async def wait(self, timeout: float = 30) -> int:
        """The exit status (negative: the signal that ended it)."""
        async with asyncio.timeout(timeout):
            return await self.proc.wait()


@contextlib.asynccontextmanager
async def service_process(
    role: str, env: dict[str, str], log_path: Path, *, ready: bool = True, port: int | None = None
) -> AsyncIterator[ServiceProcess]:
    """The ``role``'s process (see ``COMMANDS``) with ``env`` and its HTTP endpoints on a free
    loopback port (or ``port``: a replica restarted where its clients know it); yielded once
    ``/readyz`` answers 200 (or, with ``ready=False``, once ``/healthz`` does). Killed on exit
    unless the test ended it."""
    port = port or free_port()
    port_variable, host_variable = LISTEN_VARIABLES[role]
    with log_path.open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            *COMMANDS[role],
            env={**os.environ, **env, port_variable: str(port), host_variable: "127.0.0.1"},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    process = ServiceProcess(role, proc, f"http://127.0.0.1:{port}", log_path)
    try:
        if ready:
            await process.wait_until_answering("/readyz", 200)
        else:
            await process.wait_until_answering("/healthz", 200)
        yield process
    finally:
        if proc.returncode is None:
            proc.kill()
        await process.wait()
