"""Real service processes for tests — ``python -m hookbay_forwarder forwarder|recorder|stats``,
``python -m hookbay_dashboard`` and ``python -m hookbay_ingest`` — started by the shared launcher
(``hookbay_dev.processes``) on ports of this pytest worker."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from hookbay_dev.processes import ServiceProcess, launch_role
from tests.support.net import free_port

__all__ = ["FORKED", "ServiceProcess", "service_process"]

FORKED = os.environ.get("HOOKBAY_TEST_FORK", "1") != "0"
"""Services are forked from the test worker's zygote (``hookbay_dev.zygote``: their imports
done once), unless ``HOOKBAY_TEST_FORK=0`` (each ``exec``'d, as in production)."""


@contextlib.asynccontextmanager
async def service_process(
    role: str, env: dict[str, str], log_path: Path, *, ready: bool = True, port: int | None = None
) -> AsyncIterator[ServiceProcess]:
    """The ``role``'s process (see ``hookbay_dev.processes.COMMANDS``) with ``env`` and its HTTP endpoints on a free
    loopback port (or ``port``: a replica restarted where its clients know it); yielded once
    ``/readyz`` answers 200 (or, with ``ready=False``, once ``/healthz`` does). Killed on exit
    unless the test ended it."""
    process = launch_role(role, {**os.environ, **env}, log_path, port or free_port(), forked=FORKED)
    try:
        await process.wait_until_answering("/readyz" if ready else "/healthz", 200)
        yield process
    finally:
        if not process.exited:
            process.kill()
        await process.wait()
