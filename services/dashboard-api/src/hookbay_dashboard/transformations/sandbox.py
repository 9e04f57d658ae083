"""The dashboard's own small sandbox: the pool test runs use, and the bound on save-time
checks. Started on first use (a dashboard whose owners never test a transformation runs no
worker), closed with the app."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Final

from hookbay_common.errors import ServiceUnavailable
from hookbay_sandbox import (
    Limits,
    TransformError,
    TransformPool,
    TransformRequest,
    TransformResult,
    check_transformation,
)

SANDBOX_WORKERS: Final = 2
"""Two workers, at most one per owner: an owner whose test spins to its CPU limit leaves the
other worker to everyone else (``TransformPool``'s fairness)."""
CONCURRENT_CHECKS: Final = 2
"""Save-time checks at once (each a process of its own, up to the CPU limit); more wait."""


class Sandbox:
    """Runs test calls on a lazily started ``TransformPool`` with the default ``Limits``, and
    save-time checks in threads, at most ``CONCURRENT_CHECKS`` at once. Neither blocks the
    event loop."""

    def __init__(self, size: int = SANDBOX_WORKERS, limits: Limits | None = None) -> None:
        self._size = size
        self._limits = limits or Limits()
        self._pool: TransformPool | None = None
        self._starting = asyncio.Lock()
        self._checks = asyncio.Semaphore(CONCURRENT_CHECKS)
        self._closed = False

    @property
    def started(self) -> bool:
        """Whether the pool's workers run (after the first test call, until ``close``)."""
        return self._pool is not None

    @property
    def busy(self) -> int:
        """Calls running now (0 before the first test call)."""
        return len(self._pool.busy_pids) if self._pool is not None else 0

    async def _running(self) -> TransformPool:
        if self._pool is None:
            async with self._starting:
                if self._closed:
                    raise ServiceUnavailable("the dashboard is stopping; try again shortly")
                if self._pool is None:
                    pool = TransformPool(size=self._size, limits=self._limits, per_owner=1)
                    await pool.start()
                    self._pool = pool
        return self._pool

    async def run(
        self, owner: str, code: str, request: TransformRequest, env: Mapping[str, str]
    ) -> TransformResult:
        pool = await self._running()
        return await pool.run(owner, code, request, env)

    async def check(self, code: str) -> TransformError | None:
        """``check_transformation`` in a thread: ``None`` when ``code`` may be saved."""
        async with self._checks:
            return await asyncio.to_thread(check_transformation, code)

    async def close(self) -> None:
        async with self._starting:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
