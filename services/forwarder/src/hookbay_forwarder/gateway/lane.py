"""One destination's lane (``Lane``): its FIFO, its tasks waiting for their time, its rate, its
concurrency, its mode (live or holding) and its breaker's timer. What a lane does is described
in ``lanes``'s module docstring; ``Lanes`` builds the lanes and is their ``LaneHost``: it runs
the attempts a lane starts, writes what a lane holds and drains the hold store into it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Coroutine, Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from hookbay_common.db.held import HeldTask
from hookbay_common.logs import get_logger
from hookbay_common.routing.tasks import DestinationTask
from hookbay_common.wire import WireError, decode_destination_task
from hookbay_forwarder.gateway.breaker import (
    Breaker,
    Breakers,
    BreakerState,
    Permit,
    Transition,
    TransitionKind,
)
from hookbay_forwarder.gateway.bucket import TokenBucket
from hookbay_forwarder.gateway.clock import Clock
from hookbay_forwarder.gateway.config import LaneConfig
from hookbay_forwarder.offsets import PartitionOffsets

log = get_logger("hookbay.lanes")


class LaneHost(Protocol):
    """What a lane asks of the lanes that own it (``Lanes``)."""

    clock: Clock
    breakers: Breakers
    closing: bool

    def start_attempt(self, lane: Lane, entry: LaneEntry, permit: Permit) -> None:
        """Run one attempt of ``entry``; the lane counted it as running."""

    def hold_entries(self, lane: Lane, entries: list[LaneEntry]) -> None:
        """Write ``entries`` to the hold store, after what the lane held before."""

    def advance(self, lane: Lane) -> None:
        """Forget, in the hold store, the drained tasks the lane has handled."""

    def drain(self, lane: Lane) -> Coroutine[Any, Any, None]:
        """Feed the lane from the hold store until it is empty (the lane's drainer task)."""

    def note_rate_limited(self, wait: float) -> None:
        """A start waits ``wait`` s for its rate (metrics)."""


class LaneMode(StrEnum):
    LIVE = "live"
    """New tasks go to the FIFO."""
    HOLDING = "holding"
    """New tasks go to the hold store; an active lane drains it."""


@dataclass(eq=False, slots=True)
class LaneEntry:
    """A task waiting in a lane."""

    task: DestinationTask
    partition: Hashable | None
    """Where it was read; ``None``: drained from the hold store."""
    offset: int
    """Its record's offset, or its seq in the hold store."""
    held_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class LaneSnapshot:
    """One destination's lane at a glance (for the API and tests)."""

    destination: str
    mode: LaneMode
    config: LaneConfig
    waiting: int
    running: int
    held: int
    oldest_held_at: datetime | None


class Lane:
    """The lane of one destination. Built and driven by ``Lanes``; not used on its own."""

    def __init__(self, destination: str, config: LaneConfig, lanes: LaneHost) -> None:
        self.destination = destination
        self.config = config
        self._lanes = lanes
        self._clock = lanes.clock
        self.mode = LaneMode.LIVE
        self.queue: deque[LaneEntry] = deque()
        self.later: list[tuple[float, int, LaneEntry]] = []
        self.running = 0
        self.bucket = TokenBucket(config.rate, self._clock.monotonic()) if config.rate else None
        self.pending_holds = 0
        self.hold_generation = 0
        self.held = 0
        self.oldest_held_at: datetime | None = None
        self.cursor: int | None = None
        """The last seq fed from the store; ``None``: not read from the store yet."""
        self.released = PartitionOffsets()
        """Drained seqs: which are handled; its committable offset is the store's new head."""
        self.advanced = 0
        self.advancing = False
        self.held_changed = asyncio.Event()
        self.space = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._timer_due = 0.0
        self._probe_timer: asyncio.Task[None] | None = None
        self._drainer: asyncio.Task[None] | None = None
        self._order = itertools.count()

    # --- taking tasks -----------------------------------------------------------------------

    def accept(self, entry: LaneEntry) -> None:
        if self.mode is LaneMode.HOLDING or not self.config.active or not self.closed:
            self.hold([entry])
            return
        self._enqueue(entry)
        self.pump()

    # --- the breaker ------------------------------------------------------------------------

    @property
    def breaker(self) -> Breaker:
        return self._lanes.breakers.get(self.destination)

    @property
    def closed(self) -> bool:
        """The breaker lets attempts out."""
        breaker = self.breaker
        return breaker.state is BreakerState.CLOSED and not breaker.disabled

    def _probe_due(self) -> bool:
        return self.breaker.probe_in() == 0

    def breaker_moved(self, transition: Transition) -> None:
        """Opened (again) or disabled: hold like a paused lane, and wait for the probe's time.
        Closed: drain what was held."""
        if transition.kind in (
            TransitionKind.OPENED, TransitionKind.REOPENED, TransitionKind.DISABLED,
        ):  # fmt: skip
            self.hold_for_breaker()
        elif transition.kind is TransitionKind.CLOSED:
            self.reopen()

    def hold_for_breaker(self) -> None:
        """Everything not started goes to the hold store, and so does every newer task, until
        the breaker closes; the probe timer is armed."""
        self._cancel_probe()
        self._stop_drain()
        self.spill()  # arms the probe timer

    def reopen(self) -> None:
        """The breaker closed (a probe succeeded, or the owner resumed the destination)."""
        self._cancel_probe()
        if self.mode is LaneMode.HOLDING:
            self._ensure_drain()
        self.space.set()
        self.pump()

    def _arm_probe(self) -> None:
        """A timer for the probe's time, or (when it is due but nothing waits to be the probe)
        for the moment the breaker has been open ``disable_after_s``."""
        wait = self.breaker.probe_in()
        if wait == 0:
            wait = self._until_disabled()
        if wait is None or self._lanes.closing:
            return
        if self._probe_timer is not None and not self._probe_timer.done():
            return
        self._probe_timer = asyncio.create_task(self._probe_after(wait))

    def _until_disabled(self) -> float | None:
        breaker = self.breaker
        if breaker.opened_at is None or breaker.disabled:
            return None
        ahead = (breaker.opened_at - self._clock.now()).total_seconds()
        return max(1.0, ahead + breaker.settings.disable_after_s)  # never a busy loop

    async def _probe_after(self, seconds: float) -> None:
        await self._clock.sleep(seconds)
        self._probe_timer = None
        self._lanes.breakers.poll()  # open too long: disabled (the lane holds on)
        if not self.config.active:
            return
        if not self._probe_due():
            # woken a hair before the probe's time (an event loop may run a timer up to its
            # clock's resolution early): wait again, or nothing would ever send the probe
            self._arm_probe()
            return
        if self.mode is LaneMode.HOLDING:
            self._ensure_drain()  # the oldest held task comes first: it is the probe
        self.pump()
        if self.breaker.state is BreakerState.OPEN:  # nothing to probe with yet
            self._arm_probe()

    def _cancel_probe(self) -> None:
        if self._probe_timer is not None:
            self._probe_timer.cancel()
            self._probe_timer = None

    def _enqueue(self, entry: LaneEntry) -> None:
        due = self._due(entry.task)
        if due > self._clock.monotonic():
            heapq.heappush(self.later, (due, next(self._order), entry))
        else:
            self.queue.append(entry)

    def _due(self, task: DestinationTask) -> float:
        ahead = (task.not_before - self._clock.now()).total_seconds()
        return self._clock.monotonic() + max(0.0, ahead)

    def hold(self, entries: list[LaneEntry]) -> None:
        """Send ``entries`` (read from Kafka) to the hold store, after everything held before."""
        self.mode = LaneMode.HOLDING
        if entries:
            self.pending_holds += len(entries)
            self._lanes.hold_entries(self, entries)
        self._ensure_drain()

    def spill(self) -> None:
        """Hold everything not started (the backlog leaves memory) and from now on, until the
        store is drained."""
        waiting = [e for e in self.queue if e.partition is not None]
        waiting += [e for _, _, e in sorted(self.later) if e.partition is not None]
        fed = [e.offset for e in self.queue if e.partition is None]
        fed += [e.offset for _, _, e in self.later if e.partition is None]
        self.queue.clear()
        self.later.clear()
        if fed:  # drained but not started: still in the store, read again later
            self.cursor = min(fed) - 1
            self.released.rewind(min(fed))
        self._cancel_timer()
        self.hold(waiting)

    # --- starting ---------------------------------------------------------------------------

    def pump(self) -> None:
        """Start what the limits allow; arm the timer for the next start that must wait."""
        if not self.config.active or self._lanes.closing:
            return
        now = self._clock.monotonic()
        while self.later and self.later[0][0] <= now:
            self.queue.append(heapq.heappop(self.later)[2])
        while self.queue and self.running < self.config.max_concurrency:
            if not self.closed and not self._probe_due():
                break  # open (a probe is out, or not due yet), or disabled: what waits is held
            if self.bucket is not None:
                wait = self.bucket.take(now)
                if wait > 0:
                    self._wake(now + wait, rate_limited=True)
                    return
            permit = self.breaker.admit()
            if permit is None:  # disabled just now (sustained failure): the lane holds
                break
            self.running += 1
            self._lanes.start_attempt(self, self.queue.popleft(), permit)
        if self.later:
            self._wake(self.later[0][0], rate_limited=False)

    def _wake(self, due: float, *, rate_limited: bool) -> None:
        if self._timer is not None and not self._timer.done():
            if self._timer_due <= due:
                return
            self._timer.cancel()
        if rate_limited:
            self._lanes.note_rate_limited(due - self._clock.monotonic())
        self._timer_due = due
        self._timer = asyncio.create_task(self._sleep_then_pump(due - self._clock.monotonic()))

    async def _sleep_then_pump(self, seconds: float) -> None:
        await self._clock.sleep(seconds)
        self._timer = None
        self.pump()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def finished(self) -> None:
        self.running -= 1
        self.space.set()
        self.pump()

    # --- configuration ----------------------------------------------------------------------

    def configure(self, config: LaneConfig) -> None:
        self.config = config
        now = self._clock.monotonic()
        if config.rate is None:
            self.bucket = None
        elif self.bucket is None:
            self.bucket = TokenBucket(config.rate, now)
        else:
            self.bucket.configure(config.rate, now)
        self._cancel_timer()
        if not config.active:
            self._stop_drain()
            self.spill()
            return
        if self.mode is LaneMode.HOLDING:
            self._ensure_drain()
        self.space.set()
        self.pump()

    # --- the drain --------------------------------------------------------------------------

    def _ensure_drain(self) -> None:
        if not self.config.active or self._lanes.closing:
            return
        if not self.closed and not self._probe_due():
            self._arm_probe()  # no drain before the probe's time
            return
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._lanes.drain(self))

    def _stop_drain(self) -> None:
        if self._drainer is not None:
            self._drainer.cancel()
            self._drainer = None

    def feed(self, batch: Iterable[HeldTask]) -> None:
        for held in batch:
            self.cursor = held.seq
            self.released.add(held.seq)
            try:
                task = decode_destination_task(held.task)
            except WireError as exc:  # cannot be delivered by anyone: let it go
                log.error("held_task_unreadable", destination=self.destination, seq=held.seq,
                          problem=str(exc))  # fmt: skip
                self.released_one(held.seq)
                continue
            self._enqueue(LaneEntry(task, None, held.seq, held.held_at))
        self.pump()

    def released_one(self, seq: int) -> None:
        self.released.finish(seq)
        self.held = max(0, self.held - 1)
        if self.held == 0:
            self.oldest_held_at = None
        else:
            head = self.released.committable()
            for entry in self.queue:
                if entry.partition is None and entry.offset == head:
                    self.oldest_held_at = entry.held_at
        self._lanes.advance(self)

    def disown(self) -> None:
        """Another consumer owns the destination now: stop draining, forget what was fed and
        not started (it stays in the store), read the store's state again if it comes back."""
        self._stop_drain()
        fed = [e.offset for e in self.queue if e.partition is None]
        fed += [e.offset for _, _, e in self.later if e.partition is None]
        self.queue = deque(e for e in self.queue if e.partition is not None)
        self.later = [item for item in self.later if item[2].partition is not None]
        heapq.heapify(self.later)
        if fed:  # running drained tasks still release their seqs when they finish
            self.released.rewind(min(fed))
        self.cursor = None

    @property
    def idle(self) -> bool:
        return (
            self.mode is LaneMode.LIVE and not self.queue and not self.later
            and self.running == 0 and self.pending_holds == 0 and not self.advancing
        )  # fmt: skip

    def close(self) -> None:
        self._stop_drain()
        self._cancel_timer()
        self._cancel_probe()

    def snapshot(self) -> LaneSnapshot:
        return LaneSnapshot(
            self.destination, self.mode, self.config, len(self.queue) + len(self.later),
            self.running, self.held, self.oldest_held_at,
        )  # fmt: skip
