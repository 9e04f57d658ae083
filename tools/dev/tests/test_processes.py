"""The shared launcher on small stand-in processes (``python -c``): logs, readiness, stopping."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from hookbay_dev.processes import Processes, launch, running
from tests.support.net import free_port

SERVE = """
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *args):
        pass
print("serving", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
"""
IGNORES_SIGTERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("stubborn", flush=True)
time.sleep(60)
"""


class TestLaunch:
    def test_output_goes_to_the_log_and_the_status_is_kept(self, tmp_path: Path) -> None:
        log = tmp_path / "out.log"
        code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
        process = launch([sys.executable, "-c", code], dict(os.environ), log)
        process.proc.wait(timeout=30)
        assert process.exited
        assert process.proc.returncode == 3
        assert sorted(process.log().split()) == ["err", "out"]

    def test_stdout_can_be_discarded(self, tmp_path: Path) -> None:
        log = tmp_path / "out.log"
        code = "import sys; print('out'); print('err', file=sys.stderr)"
        process = launch([sys.executable, "-c", code], dict(os.environ), log, stdout=False)
        process.proc.wait(timeout=30)
        assert process.log().split() == ["err"]

    def test_json_log_events_in_order(self, tmp_path: Path) -> None:
        code = 'print(\'{"event": "a"}\'); print("not json"); print(\'{"event": "b"}\')'
        process = launch([sys.executable, "-c", code], dict(os.environ), tmp_path / "l.log")
        process.proc.wait(timeout=30)
        assert process.log_events() == ["a", "b"]


class TestReadiness:
    def test_ready_once_the_url_answers_200(self, tmp_path: Path) -> None:
        port = free_port()
        argv = [sys.executable, "-c", SERVE, str(port)]
        process = launch(
            argv, dict(os.environ), tmp_path / "s.log", base=f"http://127.0.0.1:{port}"
        )
        with running(process, "/readyz", grace=10):
            assert not process.exited
        assert process.proc.returncode == -signal.SIGTERM

    def test_a_process_that_exits_while_starting_fails_at_once(self, tmp_path: Path) -> None:
        argv = [sys.executable, "-c", "raise SystemExit(2)"]
        process = launch(argv, dict(os.environ), tmp_path / "x.log", base="http://127.0.0.1:9")
        with pytest.raises(RuntimeError, match=r"exited \(2\)"):
            process.wait_ready(timeout=30)

    async def test_async_wait_until_answering_names_the_exit(self, tmp_path: Path) -> None:
        argv = [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(1)"]
        process = launch(argv, dict(os.environ), tmp_path / "x.log", base="http://127.0.0.1:9")
        with pytest.raises(AssertionError, match="boom"):
            await process.wait_until_answering("/readyz", 200, timeout=30)


class TestStop:
    def test_sigterm_then_sigkill_after_the_grace(self, tmp_path: Path) -> None:
        log = tmp_path / "s.log"
        process = launch([sys.executable, "-c", IGNORES_SIGTERM], dict(os.environ), log)
        while "stubborn" not in process.log():  # its SIGTERM handler is in place
            assert not process.exited
            time.sleep(0.02)
        assert process.stop(grace=0.5) is True
        assert process.proc.returncode == -signal.SIGKILL

    async def test_async_wait_returns_the_signal(self, tmp_path: Path) -> None:
        argv = [sys.executable, "-c", "import time; time.sleep(60)"]
        process = launch(argv, dict(os.environ), tmp_path / "w.log")
        process.terminate()
        assert await process.wait(30) == -signal.SIGTERM

    def test_stop_all_ends_every_started_process(self, tmp_path: Path) -> None:
        processes = Processes()
        argv = [sys.executable, "-c", "import time; time.sleep(60)"]
        started = [
            processes.launch(argv, dict(os.environ), tmp_path / f"{i}.log") for i in range(2)
        ]
        processes.stop_all()
        assert all(p.exited for p in started)
        assert processes.started == []
