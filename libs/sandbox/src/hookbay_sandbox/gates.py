"""Per-owner admission: at most ``per_owner`` calls of one owner hold or wait for a worker at
once; the others of that owner queue here, behind their own owner only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class OwnerGates:
    """A semaphore per owner, made on first use and dropped when no call of that owner holds
    or waits for it (so the table is as large as the owners active now)."""

    def __init__(self, per_owner: int) -> None:
        if per_owner < 1:
            raise ValueError("per_owner must be at least 1")
        self.per_owner = per_owner
        self._gates: dict[str, tuple[asyncio.Semaphore, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, owner: str) -> AsyncIterator[None]:
        gate, users = self._gates.setdefault(owner, (asyncio.Semaphore(self.per_owner), [0]))
        users[0] += 1
        try:
            async with gate:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._gates[owner]

    def active(self) -> int:
        """Owners with a call holding or waiting for a worker."""
        return len(self._gates)
