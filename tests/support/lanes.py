"""In-memory fakes for the delivery lanes' tests: destinations that record what started when,
a hold store with ``HoldRepository``'s contract that can refuse writes on demand, and a
destination store with ``DestinationRepository``'s ``require`` and ``update``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hookbay_common.clock import utcnow
from hookbay_common.db.held import HeldTask, HoldState, HoldStoreError
from hookbay_common.errors import DestinationNotFound
from hookbay_common.models import Destination
from hookbay_common.routing.tasks import DestinationTask
from hookbay_forwarder.gateway import Clock, Delivered


@dataclass(frozen=True)
class Start:
    at: float
    destination: str
    delivery_id: str
    attempt: int


@dataclass
class FakeDestinations:
    """``deliver`` for the lanes: records every start, keeps the attempt running for the
    destination's ``latency`` on the clock, or until its ``gate`` opens (``hang``), and answers
    with the destination's status in ``answers`` (200 when absent; ``None``: no answer) and its
    ``retry_after`` seconds."""

    clock: Clock
    latency: dict[str, float] = field(default_factory=dict)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    outcome: str = "success"
    starts: list[Start] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    active: dict[str, int] = field(default_factory=dict)
    most_active: dict[str, int] = field(default_factory=dict)
    answers: dict[str, int | None] = field(default_factory=dict)
    retry_after: dict[str, float] = field(default_factory=dict)

    async def deliver(self, task: DestinationTask) -> Delivered:
        dest = task.destination
        self.starts.append(Start(self.clock.monotonic(), dest, task.delivery_id, task.attempt))
        self.active[dest] = self.active.get(dest, 0) + 1
        self.most_active[dest] = max(self.most_active.get(dest, 0), self.active[dest])
        try:
            if self.latency.get(dest):
                await self.clock.sleep(self.latency[dest])
            if dest in self.gates:
                await self.gates[dest].wait()
        finally:
            self.active[dest] -= 1
        self.finished.append(task.delivery_id)
        status = self.answers.get(dest, 200)
        outcome = self.outcome if status is not None and status < 400 else "retry"
        return Delivered(outcome, status=status, retry_after_s=self.retry_after.get(dest, 0.0))

    def hang(self, destination: str) -> asyncio.Event:
        gate = self.gates[destination] = asyncio.Event()
        return gate

    def started(self, destination: str) -> list[tuple[str, int]]:
        return [(s.delivery_id, s.attempt) for s in self.starts if s.destination == destination]


@dataclass
class MemoryHoldStore:
    """``HoldRepository``'s contract in memory. ``fail_writes``: how many next writes raise
    ``HoldStoreError`` (nothing written). Asserts writes never overlap."""

    held: dict[str, dict[int, HeldTask]] = field(default_factory=dict)
    next: dict[str, int] = field(default_factory=dict)
    head: dict[str, int] = field(default_factory=dict)
    fail_writes: int = 0
    writes: int = 0
    _writing: bool = False

    async def _write(self) -> None:
        assert not self._writing, "hold-store writes overlapped"
        self._writing = True
        try:
            await asyncio.sleep(0)
            if self.fail_writes:
                self.fail_writes -= 1
                raise HoldStoreError("refused (test)")
            self.writes += 1
        finally:
            self._writing = False

    async def append(self, destination: str, tasks: Sequence[bytes], *, held_at: datetime) -> int:
        await self._write()
        first = self.next.get(destination, 0)
        lane = self.held.setdefault(destination, {})
        for i, task in enumerate(tasks):
            lane[first + i] = HeldTask(first + i, held_at, task)
        self.next[destination] = first + len(tasks)
        self.head.setdefault(destination, 0)
        return first

    async def read(self, destination: str, *, after: int, limit: int) -> list[HeldTask]:
        await asyncio.sleep(0)
        lane = self.held.get(destination, {})
        return [lane[s] for s in sorted(lane) if s > after][:limit]

    async def advance(self, destination: str, head: int) -> None:
        await self._write()
        self.head[destination] = max(self.head.get(destination, 0), head)
        lane = self.held.get(destination, {})
        for seq in [s for s in lane if s < head]:
            del lane[seq]

    async def state(self, destination: str) -> HoldState:
        lane = self.held.get(destination, {})
        head = self.head.get(destination, 0)
        oldest = lane[min(lane)].held_at if lane else None
        return HoldState(head, self.next.get(destination, 0), oldest)

    async def holding(self) -> list[str]:
        return [d for d, lane in self.held.items() if lane]

    def count(self, destination: str) -> int:
        return len(self.held.get(destination, {}))


@dataclass
class MemoryDestinations:
    """``DestinationRepository.require`` and ``update`` in memory, and the routing view's
    ``destination_by_id``; ``updated_at`` moves by at least a millisecond at every update.
    ``fail_writes``: how many next updates raise ``OSError``."""

    by_id: dict[str, Destination] = field(default_factory=dict)
    fail_writes: int = 0

    def add(self, destination: Destination) -> Destination:
        self.by_id[destination.id] = destination
        return destination

    def destination_by_id(self, destination_id: str) -> Destination | None:
        return self.by_id.get(destination_id)

    def named(self, username: str, name: str) -> Destination | None:
        return next(
            (d for d in self.by_id.values() if (d.username, d.name) == (username, name)), None
        )

    async def require(self, username: str, name: str) -> Destination:
        await asyncio.sleep(0)
        found = self.named(username, name)
        if found is None:
            raise DestinationNotFound(username, name)
        return found

    async def update(self, username: str, name: str, changes: dict[str, Any]) -> Destination:
        current = await self.require(username, name)
        if self.fail_writes:
            self.fail_writes -= 1
            raise OSError("refused (test)")
        breaker = {k.removeprefix("breaker."): v for k, v in changes.items() if "." in k}
        fields = {k: v for k, v in changes.items() if "." not in k}
        fields["updated_at"] = max(utcnow(), current.updated_at + timedelta(milliseconds=1))
        fields["breaker"] = current.breaker.model_validate(
            {**current.breaker.model_dump(), **breaker}
        )
        updated = current.model_validate({**current.model_dump(), **fields})
        self.by_id[updated.id] = updated
        return updated
