"""The worker process alone, without the pool's deadline around it."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO, cast

from hookbay_sandbox import Limits, protocol
from hookbay_sandbox.pool import worker_env

ESCAPES_THE_INTERRUPT = (
    "addHandler('transform', (r) => { for(;;){ try { const a = [];"
    " for(;;) a.push(new Array(1e6).fill(1)) } catch (e) {} } })"
)


def run_worker(frame: bytes, timeout: float) -> subprocess.CompletedProcess[bytes]:
    argv = [sys.executable, "-m", "hookbay_sandbox.worker"]
    argv += ["--address-space", str(512 * 1024 * 1024)]
    return subprocess.run(
        argv, input=frame, capture_output=True, env=worker_env(), timeout=timeout, check=False
    )


class TestWorker:
    def test_answers_a_call_and_exits_at_the_end_of_its_input(self) -> None:
        code = b"addHandler('transform', (r) => { r.path = '/x'; return r })"
        request = b'{"headers":{},"body":1,"query":"","path":"/"}'
        frame = protocol.encode({"op": "run", "limits": Limits().to_wire()}, (code, request, b"{}"))

        done = run_worker(frame, timeout=60)

        assert done.returncode == 0
        assert done.stderr == b""
        stream = io.BytesIO(done.stdout)
        assert protocol.read_blocking(stream)[0]["op"] == "ready"
        header, parts = protocol.read_blocking(stream)
        assert header["ok"] is True
        assert parts == [b'{"headers":{},"query":"","path":"/x"}', b"1"]

    def test_the_cpu_rlimit_ends_a_call_nothing_else_stops(self) -> None:
        # no pool, so no deadline: the engine's interrupt is too rarely polled for this code,
        # and the CPU rlimit armed for the call (its budget + margin + 2 s) kills the process
        limits = Limits(cpu_s=0.2, margin_s=0.1)
        request = b'{"headers":{},"body":1,"query":"","path":"/"}'
        frame = protocol.encode(
            {"op": "run", "limits": limits.to_wire()},
            (ESCAPES_THE_INTERRUPT.encode(), request, b"{}"),
        )

        done = run_worker(frame, timeout=120)

        assert done.returncode == -signal.SIGXCPU

    def test_runs_in_its_hosts_session_in_a_process_group_of_its_own(self) -> None:
        """Its host's session, so its host's scheduling autogroup (where its idle class yields
        to the services); a group of its own, so that the pool kills it whole."""
        argv = [sys.executable, "-m", "hookbay_sandbox.worker"]
        argv += ["--address-space", str(512 * 1024 * 1024)]
        worker = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_env()
        )
        try:
            stdout = cast("BinaryIO", worker.stdout)
            assert protocol.read_blocking(stdout)[0]["op"] == "ready"
            assert os.getsid(worker.pid) == os.getsid(0)
            assert os.getpgid(worker.pid) == worker.pid != os.getpgid(0)
            autogroup = Path(f"/proc/{worker.pid}/autogroup").read_text()
            assert autogroup == Path("/proc/self/autogroup").read_text()
        finally:
            worker.kill()
            worker.wait(timeout=30)

    def test_runs_at_its_hosts_priority_or_in_the_idle_class_when_told(self) -> None:
        for idle in (False, True):
            argv = [sys.executable, "-m", "hookbay_sandbox.worker"]
            argv += ["--address-space", str(512 * 1024 * 1024)] + (["--idle"] if idle else [])
            worker = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_env()
            )
            try:
                stdout = cast("BinaryIO", worker.stdout)
                assert protocol.read_blocking(stdout)[0]["op"] == "ready"  # confined by now
                policy = os.sched_getscheduler(worker.pid)
                niceness = os.getpriority(os.PRIO_PROCESS, worker.pid)
            finally:
                worker.kill()
                worker.wait(timeout=30)
            assert policy == (os.SCHED_IDLE if idle else os.sched_getscheduler(0))
            assert niceness == os.getpriority(os.PRIO_PROCESS, 0)
