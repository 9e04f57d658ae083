"""Delivery lanes: one lane per destination, so a slow, paused or failing destination never
delays another destination sharing a partition.

``Lanes`` is fed by one consumer: ``submit(partition, offset, tasks)`` for every record read (a
record may carry several tasks, or none). Each task goes to its destination's ``Lane``:

- **Concurrency**: at most ``max_concurrency`` attempts of a lane run at once (1: strictly one
  after another). Tasks *start* in the order they reached the lane (a FIFO); a retry rejoins the
  same FIFO when it arrives and counts against the same limits.
- **Rate**: every start (first attempts, retries and drained tasks alike) takes a token from the
  lane's bucket (``TokenBucket``); with none left the lane arms one timer on the injected clock
  for when the next is due. A task whose ``not_before`` (a ``Retry-After``, a retry's delay) is
  in the future waits beside the FIFO until it is due, never at its head.
- **Hold**: while the destination is paused or disabled, or after its backlog spilled out of
  memory, the lane *holds*: its waiting tasks and every newer task go, in order, to the hold
  store; once a task is durably held its offset is handled. An active lane that holds drains the
  store in seq order through its FIFO (at its rate and concurrency) while newer tasks keep being
  held behind, and goes live again when the store is empty and no hold is on its way.
- **Breaker**: every start asks the destination's circuit breaker (``breaker``) first, and
  every attempt's answer is recorded on it. When it opens (or disables the destination) the
  lane holds exactly as a paused lane does: what waits goes to the hold store, newer tasks are
  held behind it. A timer on the clock wakes the lane when the cool-down is over; then exactly
  one task goes out, the oldest held (the *probe*). Its success closes the breaker and the lane
  drains what it held, in order, at its rate; its failure opens it again with the next
  cool-down. The same timer checks for sustained failure (``Breakers.poll``). Transitions are
  passed on to ``on_transition`` (the destination's stored state, issues) after the lane
  reacted to them.
- **Offsets**: ``committable(partition)`` is the first offset of which some task is neither
  finished by the deliver function (which must have written any retry durably before it
  returns), nor durably held: committing it never skips a task.
- **Memory**: at most ``max_buffered`` tasks read from one partition wait in memory; a task
  beyond it makes the lane with the most waiting tasks of that partition spill into the hold.
  ``pressure(partition)`` turns true only when nothing can be spilled (every buffered task is
  running or on its way to the hold): the consume loop then pauses fetching that partition.
  Draining lanes add at most ``drain_window`` tasks each.

Configuration (``configure``) applies to a live lane at once: a lower concurrency lets running
attempts finish and starts no more until below it, a new rate keeps the tokens saved up to the
new burst, a pause holds everything not yet started, a resume starts the drain.

Every hold-store write goes through one writer task, in order (FerretDB v1 wedges under
concurrent bulk commands); a store error is retried with back-off for as long as it takes, and
meanwhile the tasks concerned stay uncommitted. A task drained from the store is forgotten
there only after it was handled; a crash in between delivers it again (at-least-once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from hookbay_common.db.held import HeldTask, HoldState, HoldStoreError
from hookbay_common.logs import get_logger
from hookbay_common.routing.tasks import DestinationTask
from hookbay_common.wire import encode_destination_task
from hookbay_forwarder.gateway.breaker import (
    Breakers,
    BreakerState,
    OnTransition,
    Permit,
    Transition,
)
from hookbay_forwarder.gateway.clock import Clock, SystemClock
from hookbay_forwarder.gateway.config import LaneConfig
from hookbay_forwarder.gateway.lane import Lane, LaneEntry, LaneMode, LaneSnapshot
from hookbay_forwarder.metrics import BreakerMetrics, LaneMetrics
from hookbay_forwarder.offsets import PartitionOffsets

log = get_logger("hookbay.lanes")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Delivered:
    """What one call of the deliver function did."""

    outcome: str
    """For metrics: ``success``, ``retry``, ``failed`` or ``transform_failed``."""
    status: int | None = 200
    """The destination's answer; ``None``: none came (a network error, a timeout, a refused
    address)."""
    retry_after_s: float = 0.0
    """A 429's or 503's ``Retry-After``, in seconds (0: none)."""
    attempted: bool = True
    """False when no request went out (the destination was deleted): the breaker hears
    nothing of it."""


Deliver = Callable[[DestinationTask], Awaitable[Delivered]]
"""Make one attempt and write down durably what follows (the attempt record, a retry, a dead
letter); return what the destination answered (``Delivered``). It looks the destination's URL,
timeout and headers up itself, at the time of the attempt. Raising is a bug: the task stays
unhandled (its offset is never committed) and ``Lanes.crashed`` is set."""
ConfigOf = Callable[[str], LaneConfig | None]
"""The destination's current controls; ``None`` (unknown destination): the defaults, and the
deliver function decides what an unknown destination means."""

DEFAULT_MAX_BUFFERED = 1000
STORE_BACKOFF_MIN = 0.2
STORE_BACKOFF_MAX = 5.0
SWEEP_EVERY = 1024
"""Submissions between two sweeps of idle lanes (a lane idle with a full bucket is dropped)."""
HOLD_BATCH = 16
"""Held tasks of one lane written in one store call, at most."""


class HoldStore(Protocol):
    """``hookbay_common.db.HoldRepository``'s contract, as the lanes use it."""

    async def append(
        self, destination: str, tasks: Sequence[bytes], *, held_at: datetime
    ) -> int: ...

    async def read(self, destination: str, *, after: int, limit: int) -> list[HeldTask]: ...

    async def advance(self, destination: str, head: int) -> None: ...

    async def state(self, destination: str) -> HoldState: ...

    async def holding(self) -> list[str]: ...


class Lanes:
    """The lanes of one consumer. Not thread-safe; one event loop. See the module docstring."""

    def __init__(
        self,
        deliver: Deliver,
        config_of: ConfigOf,
        store: HoldStore,
        *,
        clock: Clock | None = None,
        metrics: LaneMetrics | None = None,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        drain_window: int | None = None,
        on_transition: OnTransition | None = None,
        breaker_metrics: BreakerMetrics | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self._on_transition = on_transition
        self.breakers = Breakers(
            lambda destination: (config_of(destination) or LaneConfig()).breaker,
            clock=self.clock, on_transition=self._transition, metrics=breaker_metrics,
        )  # fmt: skip
        """Every destination's circuit breaker, made on first use with its lane's thresholds."""
        self._deliver = deliver
        self._config_of = config_of
        self._store = store
        self._metrics = metrics
        self._max_buffered = max_buffered
        self._drain_window = drain_window
        self._lanes: dict[str, Lane] = {}
        self._partitions: dict[Hashable, PartitionOffsets] = {}
        self._buffered: dict[Hashable, int] = {}
        self._running: dict[asyncio.Task[None], Hashable | None] = {}
        self._ops: asyncio.Queue[tuple[Lane, list[LaneEntry]] | Lane] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._submitted = 0
        self.closing = False
        self.crashed: BaseException | None = None
        """The exception a deliver function raised: a bug; the consume loop should stop."""
        if metrics is not None:
            metrics.held.set_function(lambda: sum(lane.held for lane in self._lanes.values()))
            metrics.holding.set_function(
                lambda: sum(1 for lane in self._lanes.values() if lane.held)
            )
            metrics.oldest_held_age.set_function(self._oldest_held_age)
            metrics.buffered.set_function(lambda: sum(self._buffered.values()))

    # --- the consumer's side ----------------------------------------------------------------

    def submit(self, partition: Hashable, offset: int, tasks: Sequence[DestinationTask]) -> None:
        """The record at ``offset`` of ``partition`` was read and carries ``tasks`` (in the
        order their destinations should see them; none: it is handled at once)."""
        tracker = self._partitions.setdefault(partition, PartitionOffsets())
        tracker.add(offset, len(tasks))
        for task in tasks:
            self._buffered[partition] = self._buffered.get(partition, 0) + 1
            self.lane(task.destination).accept(LaneEntry(task, partition, offset))
        if self._buffered.get(partition, 0) > self._max_buffered:
            self._spill_largest(partition)
        self._submitted += 1
        if self._submitted % SWEEP_EVERY == 0:
            for lane in list(self._lanes.values()):
                self._forget_if_idle(lane)

    def committable(self, partition: Hashable) -> int | None:
        """The offset of ``partition`` to commit: every task below it is handled or held."""
        tracker = self._partitions.get(partition)
        return tracker.committable() if tracker is not None else None

    def pressure(self, partition: Hashable) -> bool:
        """Stop fetching ``partition``: its buffer is full of tasks that cannot be spilled."""
        return self._buffered.get(partition, 0) > self._max_buffered

    def configure(self, destination: str, config: LaneConfig) -> None:
        """A destination's controls changed: apply them to its lane, if it has one, at once,
        and its breaker's thresholds to its breaker (its state is kept)."""
        self.breakers.get(destination).configure(config.breaker)
        lane = self._lanes.get(destination)
        if lane is not None:
            lane.configure(config)

    def reset_breaker(self, destination: str) -> bool:
        """The owner resumed or re-enabled the destination: its breaker closes with an empty
        window (no transition is reported: the owner's write is the destination's state) and
        the lane drains what it held. Whether it was open (or disabled)."""
        breaker = self.breakers.get(destination)
        if breaker.state is BreakerState.CLOSED and not breaker.disabled:
            return False
        breaker.reset()
        lane = self._lanes.get(destination)
        if lane is not None:
            lane.reopen()
        return True

    def restore_breaker(
        self, destination: str, opened_at: datetime, next_probe_at: datetime | None
    ) -> None:
        """The destination's stored state says its breaker is open (another process opened
        it): open this process's too (``Breaker.restore``) and hold until its probe."""
        breaker = self.breakers.get(destination)
        if breaker.state is not BreakerState.CLOSED or breaker.disabled:
            return
        breaker.restore(opened_at, next_probe_at)
        lane = self._lanes.get(destination)
        if lane is not None:
            lane.hold_for_breaker()

    def forget_breaker(self, destination: str) -> None:
        """The destination was deleted: its breaker goes, so what its lane held drains (and
        fails, "the destination was deleted")."""
        self.breakers.forget(destination)
        lane = self._lanes.get(destination)
        if lane is not None:
            lane.reopen()

    def _transition(self, transition: Transition) -> None:
        lane = self._lanes.get(transition.destination)
        if lane is not None:
            lane.breaker_moved(transition)
        if self._on_transition is not None:
            self._on_transition(transition)

    async def adopt(self, owns: Callable[[str], bool]) -> None:
        """After an assignment, before its records are submitted: every destination ``owns``
        says is this consumer's and that holds tasks gets a holding lane (which drains if
        active); lanes no longer owned stop draining. A held task is drained by one consumer
        at a time as long as the group gives each destination to one consumer."""
        holding = await self._retrying(self._store.holding)
        for destination in holding:
            if owns(destination):
                lane = self.lane(destination)
                if lane.mode is LaneMode.LIVE:
                    lane.spill()
        for destination, lane in list(self._lanes.items()):
            if not owns(destination) and lane.mode is LaneMode.HOLDING:
                lane.disown()

    async def revoke(
        self,
        partitions: Iterable[Hashable],
        grace: float,
        owns: Callable[[str], bool] | None = None,
    ) -> dict[Hashable, int]:
        """Hand ``partitions`` back: forget their tasks not started (the next owner reads them
        again), stop draining the destinations ``owns`` no longer accepts, wait up to ``grace``
        for their running attempts and for the hold-store writes under way (so the next owner's
        ``adopt`` sees every task held here), and return the offsets to commit for them; they
        are forgotten afterwards. What did not finish within ``grace`` is done again by the next
        owner (at-least-once)."""
        gone = set(partitions)
        if owns is not None:
            for destination, lane in list(self._lanes.items()):
                if not owns(destination) and lane.mode is LaneMode.HOLDING:
                    lane.disown()
        for lane in self._lanes.values():
            kept = [e for e in lane.queue if e.partition not in gone]
            later = [item for item in lane.later if item[2].partition not in gone]
            dropped = len(lane.queue) - len(kept) + len(lane.later) - len(later)
            lane.queue = deque(kept)
            lane.later = later
            heapq.heapify(lane.later)
            if dropped:
                lane.space.set()
        waiting: list[asyncio.Future[Any]] = [
            task for task, partition in self._running.items() if partition in gone
        ]
        if self._writer is not None and not self._writer.done():
            waiting.append(asyncio.ensure_future(self._ops.join()))
        if waiting:
            _, late = await asyncio.wait(waiting, timeout=grace)
            for future in late:
                if future not in self._running:
                    future.cancel()  # only the wait for the writer: running attempts go on
        offsets = {}
        for partition in gone:
            tracker = self._partitions.pop(partition, None)
            self._buffered.pop(partition, None)
            offset = tracker.committable() if tracker is not None else None
            if offset is not None:
                offsets[partition] = offset
        return offsets

    async def close(self, grace: float) -> None:
        """Start nothing more; wait up to ``grace`` for running attempts and queued hold-store
        writes, then cancel what is left (uncommitted: redone by whoever reads next)."""
        self.closing = True
        for lane in self._lanes.values():
            lane.close()
        pending: set[asyncio.Task[None]] = set(self._running)
        if self._writer is not None:
            pending.add(asyncio.create_task(self._ops.join()))
        if pending:
            _, late = await asyncio.wait(pending, timeout=grace)
            for task in late:
                task.cancel()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer

    def snapshot(self, destination: str) -> LaneSnapshot | None:
        lane = self._lanes.get(destination)
        return lane.snapshot() if lane is not None else None

    def lane(self, destination: str) -> Lane:
        lane = self._lanes.get(destination)
        if lane is None:
            config = self._config_of(destination) or LaneConfig()
            lane = self._lanes[destination] = Lane(destination, config, self)
        return lane

    # --- running attempts -------------------------------------------------------------------

    def start_attempt(self, lane: Lane, entry: LaneEntry, permit: Permit) -> None:
        task = asyncio.create_task(self._run(lane, entry, permit))
        self._running[task] = entry.partition
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)

    async def _run(self, lane: Lane, entry: LaneEntry, permit: Permit) -> None:
        try:
            delivered = await self._deliver(entry.task)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("deliver_crashed", destination=lane.destination,
                          delivery_id=entry.task.delivery_id)  # fmt: skip
            self.crashed = exc
            lane.finished()
            return
        if delivered.attempted:
            lane.breaker.record(permit, delivered.status, retry_after_s=delivered.retry_after_s,
                                event_id=entry.task.event.id)  # fmt: skip
        if self._metrics is not None:
            self._metrics.deliveries.labels(delivered.outcome).inc()
        self._handled(lane, entry)
        lane.finished()
        self._forget_if_idle(lane)

    def _handled(self, lane: Lane, entry: LaneEntry) -> None:
        if entry.partition is None:
            lane.released_one(entry.offset)
            return
        tracker = self._partitions.get(entry.partition)
        if tracker is not None:
            tracker.finish(entry.offset)
            self._buffered[entry.partition] -= 1

    def _forget_if_idle(self, lane: Lane) -> None:
        """An idle lane is dropped unless its bucket still remembers recent starts (a new lane
        starts with a full bucket)."""
        if not lane.idle or lane.held or self._lanes.get(lane.destination) is not lane:
            return
        if not lane.closed:  # its probe timer stays armed
            return
        if lane.bucket is not None and not lane.bucket.full(self.clock.monotonic()):
            return
        lane.close()
        del self._lanes[lane.destination]

    def note_rate_limited(self, wait: float) -> None:
        if self._metrics is not None:
            self._metrics.rate_limited.inc()
            self._metrics.rate_limited_seconds.inc(max(0.0, wait))

    def _spill_largest(self, partition: Hashable) -> None:
        def waiting(lane: Lane) -> int:
            return sum(1 for e in lane.queue if e.partition == partition) + sum(
                1 for _, _, e in lane.later if e.partition == partition
            )

        candidates = [(waiting(lane), lane) for lane in self._lanes.values()]
        count, largest = max(candidates, key=lambda c: c[0], default=(0, None))
        if largest is not None and count > 0:
            log.info("lane_spilled", destination=largest.destination, waiting=count)
            largest.spill()

    def _oldest_held_age(self) -> float:
        oldest = [lane.oldest_held_at for lane in self._lanes.values() if lane.oldest_held_at]
        if not oldest:
            return 0.0
        return max(0.0, (self.clock.now() - min(oldest)).total_seconds())

    # --- the hold store ---------------------------------------------------------------------

    def hold_entries(self, lane: Lane, entries: list[LaneEntry]) -> None:
        self._ops.put_nowait((lane, entries))
        self._ensure_writer()

    def advance(self, lane: Lane) -> None:
        if not lane.advancing:
            lane.advancing = True
            self._ops.put_nowait(lane)
            self._ensure_writer()

    def _ensure_writer(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_loop())

    async def _write_loop(self) -> None:
        carried: tuple[Lane, list[LaneEntry]] | Lane | None = None
        while True:
            op = carried if carried is not None else await self._ops.get()
            carried = None
            taken = 1
            if isinstance(op, tuple):  # merge the same lane's holds queued right behind
                lane, entries = op[0], list(op[1])
                while len(entries) < HOLD_BATCH and not self._ops.empty():
                    following = self._ops.get_nowait()
                    taken += 1
                    if isinstance(following, tuple) and following[0] is lane:
                        entries += following[1]
                    else:
                        carried = following
                        taken -= 1  # its task_done comes when it runs
                        break
                await self._retrying(functools.partial(self._write_hold, lane, entries))
            else:
                await self._retrying(functools.partial(self._write_advance, op))
            for _ in range(taken):
                self._ops.task_done()

    async def _write_hold(self, lane: Lane, entries: list[LaneEntry]) -> None:
        held_at = self.clock.now()
        encoded = [encode_destination_task(entry.task) for entry in entries]
        await self._store.append(lane.destination, encoded, held_at=held_at)
        lane.pending_holds -= len(entries)
        lane.hold_generation += 1
        lane.held += len(entries)
        if lane.oldest_held_at is None:
            lane.oldest_held_at = held_at
        for entry in entries:
            self._handled(lane, entry)
        lane.held_changed.set()

    async def _write_advance(self, lane: Lane) -> None:
        head = lane.released.committable()
        if head is not None and head > lane.advanced:
            await self._store.advance(lane.destination, head)
            lane.advanced = head
        lane.advancing = False
        if lane.released.committable() != head:
            self.advance(lane)
        self._forget_if_idle(lane)

    async def drain(self, lane: Lane) -> None:
        """Feed the lane from the hold store in seq order, a window at a time, until the store
        is empty and no hold is on its way; then the lane is live again."""
        window = self._drain_window or max(8, 2 * lane.config.max_concurrency)
        if lane.cursor is None:
            state = await self._retrying(functools.partial(self._store.state, lane.destination))
            lane.cursor = state.head - 1
            lane.released.rewind(state.head)  # seqs from head on are fed again
            lane.advanced = state.head
            lane.held = max(lane.held, state.count)
            lane.oldest_held_at = state.oldest_held_at or lane.oldest_held_at
        while lane.mode is LaneMode.HOLDING and lane.config.active and not self.closing:
            room = window - len(lane.queue) - len(lane.later) - lane.running
            if room <= 0:
                lane.space.clear()
                await lane.space.wait()
                continue
            lane.held_changed.clear()
            generation, pending = lane.hold_generation, lane.pending_holds
            cursor = lane.cursor
            read = functools.partial(self._store.read, lane.destination, after=cursor, limit=room)
            batch = await self._retrying(read)
            if lane.cursor != cursor:  # a spill rewound the cursor meanwhile: read again
                continue
            if batch:
                lane.feed(batch)
                continue
            if pending == 0 and lane.pending_holds == 0 and generation == lane.hold_generation:
                lane.mode = LaneMode.LIVE
                log.info("lane_drained", destination=lane.destination)
                lane.pump()
                # its last delivery may have finished before the drain saw the store empty:
                # nothing else would forget the idle lane (once this task has ended)
                asyncio.get_running_loop().call_soon(self._forget_if_idle, lane)
                return
            await lane.held_changed.wait()

    async def _retrying(self, operation: Callable[[], Awaitable[T]]) -> T:
        """``operation()``, again after a back-off on the clock while the store errs."""
        delay = STORE_BACKOFF_MIN
        while True:
            try:
                return await operation()
            except HoldStoreError as exc:
                log.warning("hold_store_retry", error=str(exc)[:200], delay=delay)
                await self.clock.sleep(delay)
                delay = min(STORE_BACKOFF_MAX, delay * 2)
