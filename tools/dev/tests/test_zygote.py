"""The zygote on standard-library modules (``python -m http.server``, ``python -m json.tool``)
and on a real service: a forked child runs its module as ``python -m`` would, with the
request's arguments, directory and output files, and reports its status as ``Popen`` does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from hookbay_dev.processes import ROOT, launch_role
from hookbay_dev.zygote import Zygote
from tests.support.net import free_port
from tests.support.waiting import until


@pytest.fixture(scope="module")
def zygote() -> Zygote:
    return Zygote(dict(os.environ), ROOT)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


class TestChild:
    async def test_runs_its_module_and_reports_the_signal_that_ended_it(
        self, zygote: Zygote, tmp_path: Path
    ) -> None:
        port = free_port()
        child = zygote.spawn(
            "http.server", [str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
            dict(os.environ), tmp_path, tmp_path / "out.log", tmp_path / "out.log",
        )  # fmt: skip
        await until(lambda: _answers(port), 30, what="http.server answers")
        assert child.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=0.1)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
        assert child.returncode == -signal.SIGKILL

    def test_takes_the_arguments_directory_and_output_files_of_its_request(
        self, zygote: Zygote, tmp_path: Path
    ) -> None:
        (tmp_path / "in.json").write_text('{"b": 1, "a": [2]}')
        child = zygote.spawn(
            "json.tool", ["--sort-keys", "--compact", "in.json", "out.json"],
            dict(os.environ), tmp_path, None, tmp_path / "err.log",
        )  # fmt: skip
        assert child.wait(timeout=30) == 0
        assert (tmp_path / "out.json").read_text() == '{"a":[2],"b":1}\n'

    def test_an_exit_status_and_its_stderr_reach_the_caller(
        self, zygote: Zygote, tmp_path: Path
    ) -> None:
        child = zygote.spawn(
            "json.tool", ["--no-such-option"], dict(os.environ), tmp_path, None,
            tmp_path / "err.log",
        )  # fmt: skip
        assert child.wait(timeout=30) == 2
        assert "unrecognized arguments: --no-such-option" in (tmp_path / "err.log").read_text()


class TestService:
    async def test_a_forked_service_reads_the_environment_of_its_request(
        self, tmp_path: Path
    ) -> None:
        env = {**os.environ, "HOOKBAY_LOG_LEVEL": "shout"}
        process = launch_role("dashboard", env, tmp_path / "d.log", free_port(), forked=True)
        assert type(process.proc).__name__ == "ZygoteChild"
        assert process.proc.wait(timeout=60) == 2  # invalid configuration, as python -m says
        assert "invalid configuration" in process.log()
        assert "log_level" in process.log()

    def test_an_interpreter_setting_in_the_environment_is_execd(self, tmp_path: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        process = launch_role("dashboard", env, tmp_path / "d.log", free_port(), forked=True)
        assert isinstance(process.proc, subprocess.Popen)
        process.kill()
        process.proc.wait(timeout=30)


def test_the_module_is_runnable() -> None:
    """``python -m hookbay_dev.zygote`` exits at once when its stdin is closed."""
    done = subprocess.run(
        [sys.executable, "-m", "hookbay_dev.zygote"], input=b"", cwd=ROOT,
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, json.dumps(done.stderr.decode())) == (0, '""')
