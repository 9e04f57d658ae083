"""Time for the lanes, injected: the system's, or a manual one that tests move by hand.

Nothing in the lanes calls ``time`` or ``asyncio.sleep`` directly; with ``ManualClock`` a test
runs a simulated minute in microseconds and asserts on exact simulated times."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: what waits are measured on."""

    def now(self) -> datetime:
        """The wall-clock time (UTC): what held tasks are stamped with."""

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


async def settle(rounds: int = 200) -> None:
    """Let every task that can run without time passing run (tests and ``ManualClock``)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class ManualClock:
    """A clock that moves only when ``advance`` is awaited; sleepers wake in deadline order,
    each seeing the clock at its own deadline."""

    def __init__(self, start: datetime = datetime(2026, 1, 1, tzinfo=UTC)) -> None:
        self._start = start
        self._t = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._t

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._t)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._t + seconds, next(self._order), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking every sleeper due on the way."""
        target = self._t + seconds
        await settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._t = max(self._t, deadline)
            if not future.done():
                future.set_result(None)
                await settle()
        self._t = target
        await settle()
