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
from hookbay_sandbox.worker import AUTOGROUP_NICE, NICENESS

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

    def test_alone_in_its_session_its_autogroup_is_the_lowest_and_a_shared_one_is_left(
        self,
    ) -> None:
        """The pool starts workers in sessions of their own; this machine's kernel (as most)
        groups the scheduling by session, so the autogroup's niceness is what bounds a spinning
        worker. A worker in its host's session must not lower the host's."""
        host = Path("/proc/self/autogroup").read_text()
        for own_session in (True, False):
            argv = [sys.executable, "-m", "hookbay_sandbox.worker"]
            argv += ["--address-space", str(512 * 1024 * 1024)]
            worker = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_env(),
                start_new_session=own_session,
            )  # fmt: skip
            try:
                stdout = cast("BinaryIO", worker.stdout)
                assert protocol.read_blocking(stdout)[0]["op"] == "ready"  # confined by now
                autogroup = Path(f"/proc/{worker.pid}/autogroup").read_text()
            finally:
                worker.kill()
                worker.wait(timeout=30)
            if own_session:
                assert autogroup.split()[-2:] == ["nice", str(AUTOGROUP_NICE)]
            else:
                assert autogroup == host
        assert Path("/proc/self/autogroup").read_text() == host

    def test_runs_at_a_lower_cpu_priority_than_its_host_in_the_idle_class(self) -> None:
        argv = [sys.executable, "-m", "hookbay_sandbox.worker"]
        argv += ["--address-space", str(512 * 1024 * 1024)]
        worker = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_env()
        )
        try:
            stdout = cast("BinaryIO", worker.stdout)
            assert protocol.read_blocking(stdout)[0]["op"] == "ready"  # confined by now
            stat = Path(f"/proc/{worker.pid}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            assert int(fields[16]) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)
            assert os.sched_getscheduler(worker.pid) == os.SCHED_IDLE
        finally:
            worker.kill()
            worker.wait(timeout=30)
