"""Service processes for tests, forked from a process that has already imported them.

A service's start is mostly imports (pydantic, pymongo, aiokafka, FastAPI, hookbay's own
modules: 0.7 to 1 s of CPU), and the test suite starts hundreds of them. The zygote is a
``python -m hookbay_dev.zygote`` that imports what every service's entry module imports, once,
then forks a child per request; the child takes the request's environment, working directory
and output files and runs the service's ``__main__`` as ``python -m`` would (``runpy``), so the
service's own start-up (settings, logging, servers) is exactly what it is in production — only the
imports are inherited. ``make run`` and the benchmarks still start services by ``exec``.

Protocol (one line each way, on the zygote's stdin and stdout): a request is a JSON object
``{"module", "args", "env", "cwd", "stdout", "stderr"}`` (output paths; ``null`` = /dev/null);
the answer is ``spawned <pid>`` (or ``failed <reason>``). Whenever a child ends the zygote writes
``exit <pid> <status>`` (status as ``Popen.returncode``: negative for a signal). The zygote ends
when its stdin closes (its client has gone).

The client side (``Zygote``, one per client process, started at first use) hands out
``ZygoteChild`` objects that answer the part of ``subprocess.Popen`` the harnesses use: ``pid``,
``returncode``, ``poll``, ``wait`` and ``send_signal``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import runpy
import selectors
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

PRELOAD = (
    "hookbay_ingest.app",
    "hookbay_ingest.server",
    "hookbay_ingest.settings",
    "hookbay_dashboard.app",
    "hookbay_dashboard.server",
    "hookbay_dashboard.settings",
    "hookbay_common.process",
    "hookbay_forwarder.process",
    "hookbay_forwarder.settings",
    "hookbay_forwarder.delivery",
    "hookbay_forwarder.recorder",
    "uvicorn.loops.uvloop",
    "uvicorn.lifespan.on",
    "uvicorn.protocols.http.httptools_impl",
)
"""What the zygote imports before it forks: what the services' ``__main__`` modules import (not
those modules themselves, which ``runpy`` must find unimported). The stats processor (faust)
is left out: faust
patches its event loop policy and logging at import, which the other roles must not inherit;
``stats`` children import it themselves."""


# --- the zygote process ---------------------------------------------------------------------


def _status(raw: int) -> int:
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


def _write(line: str) -> None:
    data = (line + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


def _redirect(path: str | None, fd: int, flags: int) -> None:
    target = os.open(path or os.devnull, flags, 0o644)
    os.dup2(target, fd)
    os.close(target)


def _become(request: dict[str, Any], closing: list[int]) -> None:
    """In the child: drop the zygote's signal wiring and protocol pipes, take the request's
    environment, directory and output files."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in closing:
        with contextlib.suppress(OSError):
            os.close(fd)
    _redirect(None, 0, os.O_RDONLY)
    append = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    _redirect(request["stdout"], 1, append)
    _redirect(request["stderr"], 2, append)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if request["env"].get("PYTHONUNBUFFERED") and isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    sys.argv = ["-m", *request["args"]]


def _serve() -> dict[str, Any] | None:
    """Fork a child per request until stdin closes (``None``); in a child, its request."""
    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wakeup_w)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wakeup_r, selectors.EVENT_READ)
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.fd == wakeup_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wakeup_r, 4096)
                while True:
                    try:
                        pid, raw = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    _write(f"exit {pid} {_status(raw)}")
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                return None
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request: dict[str, Any] = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    _become(request, [wakeup_r, wakeup_w])
                    return request
                _write(f"spawned {pid}")


def main() -> None:
    for module in PRELOAD:
        importlib.import_module(module)
    request = _serve()
    if request is None:
        return
    # the child: run the service as ``python -m`` does; its SystemExit ends this interpreter
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


# --- the client side ------------------------------------------------------------------------


class ZygoteChild:
    """A child of the zygote, seen as much like ``subprocess.Popen`` as the harnesses need."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self._zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self.stderr: None = None  # its output goes to files, never to a pipe

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            status = self._zygote.wait(self.pid, timeout)
            if status is None:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            self.returncode = status
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Zygote:
    """The client of one zygote process: ``spawn`` forks a service from it."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "hookbay_dev.zygote"],
            cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._spawned: list[str] = []
        self._exits: dict[int, int] = {}
        self._reader = threading.Thread(target=self._read, name="zygote-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            kind, _, rest = raw.decode().strip().partition(" ")
            with self._changed:
                if kind == "exit":
                    pid, status = rest.split()
                    self._exits[int(pid)] = int(status)
                else:
                    self._spawned.append(raw.decode().strip())
                self._changed.notify_all()
        with self._changed:
            self._spawned.append("failed the zygote has exited")
            self._changed.notify_all()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def spawn(
        self,
        module: str,
        args: list[str],
        env: dict[str, str],
        cwd: Path,
        stdout: Path | None,
        stderr: Path | None,
    ) -> ZygoteChild:
        request = {
            "module": module, "args": args, "env": env, "cwd": str(cwd),
            "stdout": str(stdout) if stdout else None, "stderr": str(stderr) if stderr else None,
        }  # fmt: skip
        assert self._proc.stdin is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
            with self._changed:
                self._changed.wait_for(lambda: bool(self._spawned), timeout=60)
                answer = self._spawned.pop(0) if self._spawned else "failed no answer in 60 s"
        kind, _, rest = answer.partition(" ")
        if kind != "spawned":
            raise RuntimeError(f"the zygote could not start {module}: {rest}")
        return ZygoteChild(self, int(rest))

    def status(self, pid: int) -> int | None:
        with self._changed:
            return self._exits.get(pid)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits, timeout=timeout)
            return self._exits.get(pid)


_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def zygote(env: dict[str, str], cwd: Path) -> Zygote:
    """This process's zygote, started (with ``env``) at first use or after it has died."""
    global _zygote
    with _zygote_lock:
        if _zygote is None or not _zygote.alive:
            _zygote = Zygote(env, cwd)
        return _zygote


if __name__ == "__main__":
    main()
