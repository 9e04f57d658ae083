"""The one launcher for processes that tests, benchmarks, the chaos suite and ``make run`` start:
hookbay's services (``python -m hookbay_forwarder forwarder|recorder|stats``, ``python -m
hookbay_dashboard``, ``python -m hookbay_ingest``) and their helpers (a destination, a load
client).

A process is started by ``launch`` (any argv) or ``launch_role`` (a service by role, its HTTP
endpoints on a given loopback port), its output appended to a log file (or inherited), and then
waited for (``wait_ready`` from plain code, ``wait_until_answering`` from async code), stopped
(``stop``: SIGTERM, then SIGKILL after a grace period) or killed. Sync and async callers share the
same ``subprocess.Popen`` underneath (or, for a service forked from the zygote, a
``hookbay_dev.zygote.ZygoteChild`` answering the same calls); async code never blocks on it
(``wait`` polls).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from hookbay_dev.http import async_client
from hookbay_dev.waiting import until
from hookbay_dev.zygote import ZygoteChild, zygote

ROOT = Path(__file__).resolve().parents[4]
"""The repository (this file is ``tools/dev/src/hookbay_dev/processes.py``, installed editable)."""

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
    """One started process. ``base`` is its HTTP base URL (empty when it serves none); its output
    goes to ``log_path`` (JSON log lines for a service)."""

    role: str
    proc: subprocess.Popen[bytes] | ZygoteChild
    base: str
    log_path: Path
    _terminated: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def exited(self) -> bool:
        return self.proc.poll() is not None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""

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
        async with async_client(base_url=self.base, timeout=5) as client:
            return await client.get(path, follow_redirects=True)

    async def answers(self, path: str, status: int) -> bool:
        try:
            return (await self.get(path)).status_code == status
        except httpx.TransportError:
            return False

    async def wait_until_answering(self, path: str, status: int, timeout: float = 60) -> None:
        """Poll ``path`` until it answers ``status``; an ``AssertionError`` (with the log's tail)
        when the process exits first or the time runs out."""

        async def answered() -> bool:
            assert not self.exited, (
                f"{self.role} exited ({self.proc.returncode}) while starting:\n{self.tail()}"
            )
            return await self.answers(path, status)

        await until(answered, timeout, interval=0.2, what=f"{self.role} {path} {status}")

    def wait_ready(self, url: str = "/readyz", timeout: float = 60.0) -> None:
        """Block until ``url`` (a path under ``base``, or a whole URL) answers 200; a
        ``RuntimeError`` naming the log when the process exits first or the time runs out."""
        url = self.base + url if url.startswith("/") else url
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.exited:
                raise RuntimeError(
                    f"{url}: {self.role} exited ({self.proc.returncode}); see {self.log_path}"
                )
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(url, timeout=2) as answer,  # noqa: S310 - loopback http
            ):
                if answer.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{url}: not ready after {timeout:.0f} s; see {self.log_path}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self._terminated = True
        self.proc.send_signal(signal.SIGTERM)

    async def wait(self, timeout: float = 30) -> int:
        """The exit status (negative: the signal that ended it)."""
        async with asyncio.timeout(timeout):
            while (status := self.proc.poll()) is None:
                await asyncio.sleep(0.05)
        return status

    def stop(self, grace: float = 30.0) -> bool:
        """SIGTERM (unless ``terminate`` already sent it: a second one makes some servers skip
        their graceful shutdown), then SIGKILL when it has not exited within ``grace`` seconds.
        Blocks until it has exited; True when it had to be killed."""
        if self.exited:
            return False
        if not self._terminated:
            self.terminate()
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait(timeout=10)
            return True
        return False


def launch(
    argv: list[str],
    env: dict[str, str],
    log_path: Path | None,
    *,
    role: str = "",
    base: str = "",
    stdout: bool = True,
    cwd: Path = ROOT,
    die_with_parent: bool = False,
    stderr_pipe: bool = False,
) -> ServiceProcess:
    """Start ``argv`` with exactly ``env`` in ``cwd``. Its stderr (and stdout unless ``stdout`` is
    False, when that is discarded) is appended to ``log_path``; ``None`` lets it inherit this
    process's. ``stderr_pipe``: its stderr is a pipe instead (``proc.stderr``, for the caller to
    read once it has exited; ``log_path`` then only takes stdout). ``die_with_parent``: the kernel sends it SIGTERM when this process dies, however
    it dies (for a script without threads: it runs between fork and exec)."""
    role = role or Path(argv[0]).name
    with contextlib.ExitStack() as files:
        log = files.enter_context(log_path.open("ab")) if log_path is not None else None
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=(log if stdout else subprocess.DEVNULL),
            stderr=subprocess.PIPE if stderr_pipe else log,
            preexec_fn=_sigterm_with_parent if die_with_parent else None,
        )  # fmt: skip
    # inherited output has no file to read back: ``log()`` is then empty, errors say "/dev/stderr"
    return ServiceProcess(role, proc, base, log_path or Path("/dev/stderr"))


def launch_role(
    role: str,
    env: dict[str, str],
    log_path: Path | None,
    port: int,
    *,
    stdout: bool = False,
    stderr_pipe: bool = False,
    forked: bool = False,
) -> ServiceProcess:
    """The service ``role`` (see ``COMMANDS``) with ``env`` and its HTTP endpoints on
    ``127.0.0.1:port``; its stdout discarded unless ``stdout`` (``stderr_pipe``: see
    ``launch``). ``forked``: forked from this process's zygote (``hookbay_dev.zygote``: the
    service's imports already done) instead of ``exec``'d, unless its output is inherited or
    piped, or ``env`` changes the interpreter's settings."""
    port_variable, host_variable = LISTEN_VARIABLES[role]
    env = {**env, port_variable: str(port), host_variable: "127.0.0.1"}
    base = f"http://127.0.0.1:{port}"
    if forked and log_path is not None and not stderr_pipe and _forkable(env):
        module, *args = COMMANDS[role][2:]
        child = zygote(os.environ.copy(), ROOT).spawn(
            module, args, env, ROOT, log_path if stdout else None, log_path
        )
        return ServiceProcess(role, child, base, log_path)
    return launch(
        COMMANDS[role], env, log_path, role=role, base=base, stdout=stdout, stderr_pipe=stderr_pipe
    )


def _forkable(env: dict[str, str]) -> bool:
    """Whether a child of this process's zygote would start as ``python -m`` with ``env`` would:
    the interpreter's own settings (``PYTHON*``) are this process's."""
    python = {k: v for k, v in env.items() if k.startswith("PYTHON")}
    return python == {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}


@contextlib.contextmanager
def running(
    process: ServiceProcess, ready_url: str = "/readyz", grace: float = 60.0
) -> Iterator[ServiceProcess]:
    """``process``, entered once ``ready_url`` answers 200 (see ``wait_ready``) and stopped
    (``stop``) when the block ends, however it ends."""
    try:
        process.wait_ready(ready_url)
        yield process
    finally:
        process.stop(grace)


class Processes:
    """The processes a script started; ``stop_all`` ends each by its own pid, newest first."""

    def __init__(self) -> None:
        self.started: list[ServiceProcess] = []

    def launch(
        self, argv: list[str], env: dict[str, str], log_path: Path, *, die_with_parent: bool = False
    ) -> ServiceProcess:
        """``launch`` with output to ``log_path``, remembered for ``stop_all``."""
        process = launch(argv, env, log_path, die_with_parent=die_with_parent)
        self.started.append(process)
        return process

    def stop(self, process: ServiceProcess, grace: float = 30.0) -> None:
        process.stop(grace)
        self.started = [p for p in self.started if p is not process]

    def stop_all(self) -> None:
        for process in reversed(list(self.started)):
            with contextlib.suppress(Exception):
                self.stop(process)


def _sigterm_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
