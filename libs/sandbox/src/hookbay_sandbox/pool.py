"""The pool of sandbox workers a service awaits: the event loop never runs JavaScript."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hookbay_sandbox import protocol
from hookbay_sandbox.gates import OwnerGates
from hookbay_sandbox.limits import (
    CODE_MAX_BYTES,
    MIB,
    REQUEST_MAX_BYTES,
    REQUEST_MEMORY_FACTOR,
    Limits,
)
from hookbay_sandbox.model import TransformError, TransformRequest, TransformResult
from hookbay_sandbox.output import validate

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 2.0
RESPAWN_BACKOFF_S = 0.5
WORKER_BASE_ADDRESS_SPACE = 384 * MIB
"""The worker's address space before the engine's heap: the interpreter, its libraries and
the frames in transit (measured: ~40 MiB mapped at rest; the rest is headroom)."""

DEMOTE_AFTER_S = 0.02
"""A call that has used this much of its worker's CPU moves the worker to the kernel's idle
scheduling class (``SCHED_IDLE``), where it gets only the CPU the services leave, and the worker
retires when the call ends (a process cannot come back from the idle class unprivileged; its
successor starts at its host's priority). CPU time, not wall time: on a busy machine an ordinary
call waits for a core, and that wait must not demote it. A transformation's ordinary call takes
about a millisecond of CPU at 1 KiB and three at 100 KiB, so a busy host still gets its answers
at full speed; one spinning to its CPU limit spends all but its first 20 to 30 ms (the kernel counts
CPU in 10 ms ticks) in the idle class, so the services keep their pace (``docs/decisions.md``, the
sandbox; 50 ms let the other owners' p99 move by 24 to 26 ms in the transform-spins chaos
scenario)."""
DEMOTE_CHECK_MIN_S = 0.01
"""The shortest wait before the worker's CPU is read again (the kernel counts it in ticks)."""
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")

_CRASH_ERRORS = (asyncio.IncompleteReadError, protocol.ProtocolError, ConnectionError, OSError)


class PoolClosed(Exception):
    """``run`` after ``close``, or a call still waiting for a worker when the pool closed."""


class _Worker:
    """One sandbox process and its pipes; one call at a time."""

    def __init__(self, process: asyncio.subprocess.Process, demote_after_s: float | None) -> None:
        self.process = process
        self.pid = process.pid
        self.busy = False
        self.demoted = False
        """Moved to the idle scheduling class by a long call (``DEMOTE_AFTER_S``): it retires."""
        self._demote_after_s = demote_after_s
        self._timer: asyncio.TimerHandle | None = None

    async def call(self, frame: bytes, deadline_s: float) -> tuple[dict[str, Any], list[bytes]]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.busy = True
        if self._demote_after_s is not None:
            started = cpu_seconds(self.pid)
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._demote_after_s, self._watch, started)
        try:
            async with asyncio.timeout(deadline_s):
                self.process.stdin.write(frame)
                await self.process.stdin.drain()
                reply = await protocol.read(self.process.stdout)
        finally:
            if self._timer is not None:
                self._timer.cancel()
        self.busy = False
        return reply

    def _watch(self, started: float | None) -> None:
        """Demote once the call has used ``DEMOTE_AFTER_S`` of CPU; until then look again when it
        could have (where the CPU cannot be read, after ``DEMOTE_AFTER_S`` of wall time)."""
        after = self._demote_after_s
        assert after is not None
        now = cpu_seconds(self.pid)
        used = after if now is None or started is None else now - started
        if used >= after:
            self._demote()
            return
        wait = max(after - used, DEMOTE_CHECK_MIN_S)
        self._timer = asyncio.get_running_loop().call_later(wait, self._watch, started)

    def _demote(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.sched_setscheduler(self.pid, os.SCHED_IDLE, os.sched_param(0))
        self.demoted = True

    async def kill(self) -> int:
        """SIGKILL (its whole process group: the worker and anything it started); its exit
        status."""
        _kill_group(self.process)
        return await self.process.wait()

    async def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self.process.wait()
        except TimeoutError:
            await self.kill()


class TransformPool:
    """``size`` worker subprocesses (default: the machine's cores, at least 2) running owners'
    transformations under ``limits``.

    Concurrency: at most ``size`` calls run at once (one per worker); calls wait for a worker
    in arrival order. One owner holds at most ``per_owner`` workers at once (default
    ``max(1, size // 2)``), so an owner whose transformations spin until their limit leaves
    the other half of the pool to everyone else; its further calls wait behind its own.

    Failures: a call the engine stops (CPU, memory, stack, output) returns its error and the
    worker serves the next call. A call not answered within ``limits.deadline_s`` has its worker
    SIGKILLed and replaced and ends as ``timeout``. A worker that dies mid-call is replaced and
    the call is tried once more on another worker; a second death ends it as ``crashed``
    (death by its CPU rlimit ends it as ``timeout`` at once). ``run`` never raises for what the
    owner's code does; it raises ``PoolClosed`` after ``close``."""

    def __init__(
        self,
        size: int | None = None,
        limits: Limits | None = None,
        *,
        per_owner: int | None = None,
        engine: str = "quickjs",
        demote_after_s: float | None = DEMOTE_AFTER_S,
    ) -> None:
        """``demote_after_s``: the CPU a call uses before its worker moves to the idle class
        (``DEMOTE_AFTER_S``); ``None`` never demotes, so a call reaches its engine limits at
        its host's priority however busy the machine is."""
        self.size = size if size is not None else max(2, os.cpu_count() or 2)
        if self.size < 1:
            raise ValueError("size must be at least 1")
        self.limits = limits or Limits()
        self.engine = engine
        self._demote_after_s = demote_after_s
        self._gates = OwnerGates(per_owner or max(1, self.size // 2))
        self._idle: asyncio.Queue[_Worker | None] = asyncio.Queue()
        self._workers: set[_Worker] = set()
        self._respawns: set[asyncio.Task[None]] = set()
        self._waiting = 0
        self._closed = False
        self.address_space = (
            WORKER_BASE_ADDRESS_SPACE
            + self.limits.memory_mb * MIB
            + REQUEST_MEMORY_FACTOR * REQUEST_MAX_BYTES
        )

    @property
    def per_owner(self) -> int:
        return self._gates.per_owner

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def busy_pids(self) -> frozenset[int]:
        """The workers running a call now."""
        return frozenset(w.pid for w in self._workers if w.busy)

    @property
    def pids(self) -> frozenset[int]:
        return frozenset(w.pid for w in self._workers)

    async def settled(self) -> None:
        """Returns when every retired worker's successor has started (or the pool closed)."""
        while self._respawns:
            await asyncio.gather(*self._respawns)

    async def start(self) -> None:
        workers = await asyncio.gather(*(self._spawn() for _ in range(self.size)))
        for worker in workers:
            self._idle.put_nowait(worker)

    async def close(self) -> None:
        """Stop every worker (calls in flight end as ``crashed``; calls waiting raise
        ``PoolClosed``)."""
        self._closed = True
        for task in list(self._respawns):
            task.cancel()
        await asyncio.gather(*self._respawns, return_exceptions=True)
        for _ in range(self._waiting):
            self._idle.put_nowait(None)
        await asyncio.gather(*(w.stop() for w in list(self._workers)))
        self._workers.clear()

    async def __aenter__(self) -> TransformPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run(
        self,
        owner: str,
        code: str,
        request: TransformRequest,
        env: Mapping[str, str],
        *,
        limits: Limits | None = None,
    ) -> TransformResult:
        """Run ``code``'s handler on ``request`` with ``context.env = env``, on behalf of
        ``owner`` (the fairness key). A request made with ``body_json`` is sent without
        encoding its body; the result's body arrives as JSON text, parsed only when
        ``request.body`` is read. A request that is not JSON (a ``NaN``, a set) raises
        ``ValueError`` / ``TypeError``: that is the caller's mistake, not the owner's."""
        started = time.monotonic()
        limits = self._within(limits)
        code_bytes = code.encode()
        request_bytes = request.to_json().encode()
        refused = _refuse(code_bytes, request_bytes)
        if refused is not None:
            return _result(None, refused, [], 0.0, started)
        env_bytes = json.dumps(dict(env), ensure_ascii=False).encode()
        header = {"op": "run", "limits": limits.to_wire()}
        frame = protocol.encode(header, (code_bytes, request_bytes, env_bytes))
        async with self._gates.hold(owner):
            reply = await self._dispatch(frame, limits)
        if isinstance(reply, TransformError):
            return _result(None, reply, [], 0.0, started)
        return _answer(*reply, limits, started)

    def _within(self, limits: Limits | None) -> Limits:
        if limits is None:
            return self.limits
        if limits.memory_mb > self.limits.memory_mb:
            raise ValueError("a call's memory_mb cannot exceed the pool's")
        return limits

    async def _dispatch(
        self, frame: bytes, limits: Limits
    ) -> tuple[dict[str, Any], list[bytes]] | TransformError:
        for _attempt in range(2):
            worker = await self._acquire()
            try:
                reply = await worker.call(frame, limits.deadline_s)
            except TimeoutError:
                self._replace(worker)
                message = f"no answer within {limits.deadline_s:g} s: the sandbox was stopped"
                return TransformError("timeout", message)
            except _CRASH_ERRORS:
                status = await worker.kill()
                self._replace(worker)
                if status == -signal.SIGXCPU and not self._closed:
                    return TransformError("timeout", "the sandbox's CPU rlimit was reached")
                if self._closed:
                    return TransformError("crashed", "the pool closed during the call")
                continue
            except BaseException:
                self._replace(worker)  # cancelled mid-call: its answer would be read by the next
                raise
            if reply[0].get("recycle") or worker.demoted:
                self._replace(worker)
            else:
                self._idle.put_nowait(worker)
            return reply
        return TransformError("crashed", "the sandbox stopped without an answer, twice")

    async def _acquire(self) -> _Worker:
        if self._closed:
            raise PoolClosed
        self._waiting += 1
        try:
            worker = await self._idle.get()
        finally:
            self._waiting -= 1
        if worker is None:
            raise PoolClosed
        return worker

    def _replace(self, worker: _Worker) -> None:
        self._workers.discard(worker)
        if worker.process.returncode is None:
            _kill_group(worker.process)
        if self._closed:
            return
        task = asyncio.create_task(self._respawn(worker))
        self._respawns.add(task)
        task.add_done_callback(self._respawns.discard)

    async def _respawn(self, old: _Worker) -> None:
        await old.process.wait()
        while not self._closed:
            try:
                worker = await self._spawn()
            except (OSError, TimeoutError, *_CRASH_ERRORS):
                await asyncio.sleep(RESPAWN_BACKOFF_S)
                continue
            if self.closed:  # closed while it started
                await worker.kill()
                return
            self._idle.put_nowait(worker)
            return

    async def _spawn(self) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "hookbay_sandbox.worker",
            "--engine",
            self.engine,
            "--address-space",
            str(self.address_space),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=worker_env(),
            close_fds=True,
        )
        worker = _Worker(process, self._demote_after_s)
        self._workers.add(worker)
        try:
            assert process.stdout is not None
            async with asyncio.timeout(START_TIMEOUT_S):
                header, _ = await protocol.read(process.stdout)
            if header.get("op") != "ready":
                raise protocol.ProtocolError("the worker did not say it was ready")
        except BaseException:
            self._workers.discard(worker)
            await worker.kill()
            raise
        return worker


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the worker's process group (it makes one of its own first thing, in its host's
    session: ``hookbay_sandbox.worker``); the worker alone if it has not made it yet."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU a live process has used (``/proc/<pid>/stat``); ``None`` where it
    cannot be read (no procfs, or the process is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def worker_env() -> dict[str, str]:
    """What a worker inherits: where Python finds its modules, nothing else (no settings, no
    secrets; the engine exposes no environment to code anyway)."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONDONTWRITEBYTECODE": "1"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _answer(
    head: dict[str, Any], parts: list[bytes], limits: Limits, started: float
) -> TransformResult:
    """A worker's answer as the call's result, the returned request checked."""
    logs = [str(line) for line in head.get("logs") or []]
    cpu_ms = float(head.get("cpu_ms") or 0.0)
    error = head.get("error")
    if error:
        failed = TransformError(
            error["kind"], error["message"], error.get("line"), error.get("column")
        )
        return _result(None, failed, logs, cpu_ms, started)
    if len(parts) != 2:
        cut = TransformError("crashed", "the sandbox's answer was cut")
        return _result(None, cut, logs, cpu_ms, started)
    checked = validate(parts[0].decode(), parts[1].decode(), limits.output_bytes)
    if isinstance(checked, TransformError):
        return _result(None, checked, logs, cpu_ms, started)
    return _result(checked, None, logs, cpu_ms, started)


def _refuse(code: bytes, request: bytes) -> TransformError | None:
    if len(code) > CODE_MAX_BYTES:
        return TransformError(
            "too_large", f"the code is {len(code)} bytes; the limit is {CODE_MAX_BYTES}"
        )
    if len(request) > REQUEST_MAX_BYTES:
        return TransformError(
            "too_large", f"the request is {len(request)} bytes; the limit is {REQUEST_MAX_BYTES}"
        )
    return None


def _result(
    request: TransformRequest | None,
    error: TransformError | None,
    logs: list[str],
    cpu_ms: float,
    started: float,
) -> TransformResult:
    duration_ms = (time.monotonic() - started) * 1000
    return TransformResult(error is None, request, logs, error, cpu_ms, duration_ms)
