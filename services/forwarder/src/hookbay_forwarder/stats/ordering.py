"""Offset order for faust-streaming 0.15.3: every record handed to an agent once, in order, and
commits that never pass a record not handed over (``InOrder``).

faust-streaming 0.15.3 can lose a record at a seek and then commit past it; ``InOrder`` says
how, and what it does instead. Importing this module also replaces faust's gap marking
(``_no_gaps``), for the same reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from aiokafka.errors import KafkaError
from faust.transport.consumer import Consumer as FaustConsumer
from faust.types import TP, EventT
from prometheus_client import Counter

from hookbay_common.logs import get_logger

log = get_logger("hookbay.stats")

STALL_AFTER: Final = 10.0
"""Seconds a partition's next record may exist unread before it is sought (``InOrder.watch``)."""


async def _no_gaps(*_: Any) -> None:
    """Replaces faust's ``Consumer._add_gap``, which marks skipped offsets (compacted topics,
    transaction markers) as acknowledged. Right after a rebalance its read offset is reset to
    the committed one while records fetched before are still coming in, so it took records
    751-1243 of a partition for a gap (measured here, faust-streaming 0.15.3): they counted as
    acknowledged before they were processed. The topics read here are neither compacted nor
    transactional, so they have no gaps, and commits follow ``InOrder``, not faust's acks."""


FaustConsumer._add_gap = _no_gaps  # type: ignore[method-assign,assignment]


class InOrder:
    """Hands each agent the records of its partitions in offset order, each once, and has
    faust commit a partition only up to the first record not yet handed over.

    faust-streaming 0.15.3 does neither by itself. After a seek to the committed offsets (at
    the end of every rebalance's recovery) the fetcher can hand a record to an agent's queue
    before faust resumes the flow, and resuming clears the queues: the record is gone, its
    read offset already passed. Then faust's commit rule (``Consumer._new_offset``) commits
    past the one-offset hole it leaves, because its guard ``min(acked) - committed > 1`` is
    off by one (the committed offset is the next to read). Traced here: event 203 of a
    partition handed over right after the seek, never in the agent, the commits moved on past
    it (1 to 5 of 3,000 events lost in 3 of 4 runs of the restart test beside other tests
    loading the broker; with this, 20 runs exact, 15 of them reading a partition again).

    So, per source partition, ``next`` is the offset the agent takes next. A record below it
    was handed over already (skipped); a record above it means faust lost the ones between:
    the partition is sought back to ``next`` (``mend``, every ``app.OBSERVE_INTERVAL`` while records
    keep arriving out of order, as the fetcher finishes batches it took before the seek), and
    the records above are skipped until it arrives. Commits are ``next``: a
    record is committed only once it and everything before it were handed over, whatever
    faust acknowledged.
    """

    def __init__(
        self, consumer: Any, topics: set[str], reseeks: Counter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.consumer = consumer
        self.topics = topics
        self.reseeks = reseeks
        self.clock = clock
        self.next: dict[TP, int | None] = {}
        """Offset to hand over next; ``None``: nothing committed (the log start, asked for)."""
        self.holes: set[TP] = set()
        """Partitions missing their next record while later ones came."""
        self.sought: set[TP] = set()
        """Partitions of ``holes`` sought back once already."""
        self.stall_after = STALL_AFTER
        self._still: dict[TP, tuple[int, float]] = {}
        self._mending = asyncio.Lock()
        self._finding = asyncio.Lock()

    def install(self) -> None:
        consumer = self.consumer
        perform_seek, new_offset = consumer.perform_seek, consumer._new_offset

        async def seek_and_restart() -> None:
            await perform_seek()
            # the read offsets now are the committed ones: where each partition starts again
            for tp in consumer.assignment():
                if tp.topic in self.topics:
                    self.next[tp] = consumer._read_offset.get(tp)
                    self._mended(tp)
            await self._find_starts()

        def commit_offset(tp: TP) -> int | None:
            if tp.topic not in self.topics:
                return new_offset(tp)  # type: ignore[no-any-return]
            consumer._acked[tp].clear()  # faust's acks are not needed: keep them from growing
            consumer._acked_index[tp].clear()
            return self.next.get(tp)

        consumer.perform_seek = seek_and_restart
        consumer._new_offset = commit_offset

    async def admit(self, events: Sequence[EventT[Any]]) -> list[EventT[Any]]:
        """The records of ``events`` to process, in order; those past a hole are held back
        (``mend`` seeks their partition back). Nothing is awaited between deciding and
        returning, so the caller's work on them is done before faust can commit."""
        if any(self.next.get(tp, 0) is None for tp in {e.message.tp for e in events}):
            await self._find_starts()
        ready = []
        for event in events:
            tp, offset = event.message.tp, event.message.offset
            expected = self.next.get(tp)
            if expected is None or offset < expected:
                continue  # before the partition's seek, or handed over already
            if offset > expected:
                self.holes.add(tp)  # sought at the next mend
                continue
            ready.append(event)
            self.next[tp] = offset + 1
            self._mended(tp)
        return ready

    def _mended(self, tp: TP) -> None:
        self.holes.discard(tp)
        self.sought.discard(tp)

    async def _find_starts(self) -> None:
        """The log start of every partition with nothing committed, asked for all at once
        (each request waits its turn on faust's consumer thread: 1.4 s apiece measured while
        a backlog is fetched)."""
        async with self._finding:
            unknown = [tp for tp, expected in self.next.items() if expected is None]
            if not unknown:
                return
            try:
                starts = await self.consumer.earliest_offsets(*unknown)
            except (KafkaError, OSError, TimeoutError) as exc:
                log.warning("stats_log_start_unknown", error=type(exc).__name__)
                return
            for tp in unknown:
                if self.next.get(tp, 0) is None:  # not sought again meanwhile
                    self.next[tp] = starts.get(tp)

    def watch(self, highwater: Callable[[TP], int | None]) -> None:
        """Take a partition whose next record exists but has not come for ``stall_after``
        seconds for one with a hole: a record faust lost last in its partition shows no
        successor to reveal it."""
        now = self.clock()
        for tp in self.consumer.assignment():
            expected, end = self.next.get(tp), highwater(tp)
            if tp.topic not in self.topics or expected is None or end is None or expected >= end:
                self._still.pop(tp, None)
                continue
            before = self._still.get(tp)
            if before is None or before[0] != expected:
                self._still[tp] = (expected, now)
            elif now - before[1] >= self.stall_after:
                self.holes.add(tp)
                self._still[tp] = (expected, now)

    async def mend(self) -> None:
        """Seek the partitions with a hole back to their next record; one sought before and
        still missing it is first checked against its log start (records deleted by the
        topic's retention are not waited for)."""
        await self._find_starts()  # if asking failed at the seek: records wait on it
        async with self._mending:
            assigned = self.consumer.assignment()
            due = [tp for tp in self.holes if tp in assigned and self.next.get(tp) is not None]
            again = [tp for tp in due if tp in self.sought]
            try:
                starts = await self.consumer.earliest_offsets(*again) if again else {}
            except (KafkaError, OSError, TimeoutError) as exc:
                log.warning("stats_seek_failed", error=type(exc).__name__)
                return
            for tp in due:
                expected = self.next.get(tp)
                if expected is None or tp not in self.holes:  # mended while we asked
                    continue
                if starts.get(tp, 0) > expected:
                    expected = self.next[tp] = starts[tp]
                self.sought.add(tp)
                log.warning(
                    "stats_partition_read_again",
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=expected,
                )
                self.reseeks.labels(tp.topic).inc()
                try:
                    await self.consumer.seek_wait({tp: expected})
                except (KafkaError, OSError, TimeoutError, AssertionError) as exc:
                    log.warning("stats_seek_failed", topic=tp.topic, error=type(exc).__name__)
