"""Running a command whose stderr is a terminal, to see what a person at one would see."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import sys

HOOKBAY = os.path.join(os.path.dirname(sys.executable), "hookbay-admin")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


async def run_with_terminal_stderr(
    *argv: str, env: dict[str, str], columns: int = 120, timeout: float = 60
) -> tuple[int, bytes, str]:
    """Run ``argv`` with stderr on a pseudo-terminal of ``columns`` columns; its exit status,
    its stdout, and what the terminal showed (escape sequences removed)."""
    controller, terminal = pty.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, env={**os.environ, **env, "COLUMNS": str(columns)},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal,
        )  # fmt: skip
        os.close(terminal)
        stdout, _ = await asyncio.wait_for(proc.communicate(), timeout)
        screen = await asyncio.to_thread(_read_all, controller)
    finally:
        os.close(controller)
    assert proc.returncode is not None
    return proc.returncode, stdout, _ANSI.sub("", screen)


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the other side of the terminal is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")
