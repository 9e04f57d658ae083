"""The recorder's consume loop: materialises ``hookbay.events`` and ``hookbay.attempts`` into MongoDB.

A plain loop over batches: read a batch and write its events and attempts with idempotent
upserts. What the batches change in the page summaries (counts, books, an owner's newest events)
is gathered and written once per ``commit_interval`` (``HOOKBAY_RECORDER_COMMIT_INTERVAL``) or
when no more records wait, and the offsets of the batches it covers are committed after it: the
store's work for summaries is per webhook and per page, so one write a second for a busy page
replaces one a batch. A write that fails is retried (nothing is committed meanwhile); a crash
anywhere re-reads from the last commit, and a record written twice changes nothing (the pages it
meets again are recounted from their events).

A batch is what one read returns, or, with ``linger`` (``HOOKBAY_RECORDER_LINGER``, off by
default), what arrives within that many seconds of its first records: an event then usually
meets its first attempt in the same write (stored with its status instead of updated after), at
the price of a later listing.

While busy, the consumer fetches in batches (``FetchPace``): a batch then holds more records.

A deliverable event is kept back until its first attempt (or a delivery record past
``scheduled``) is read, at most until ``hold`` seconds after ingest accepted it
(``HOOKBAY_RECORDER_HOLD``, ``EventHold``): the two are then stored in one write, the event with
its status, instead of an insert and an update. Offsets are committed up to the first record
still held, never past it; a stopping loop writes what it holds first.

A fetch or commit that fails with a retriable Kafka error (the broker or the group coordinator
away or moving) is logged and tried again; an uncommitted batch is simply read and written again.
When the consumer's partitions change, the positions and newest ids the repository remembers
from its own writes are forgotten (another recorder may have written those webhooks meanwhile).
The recorder produces nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CommitFailedError, KafkaError
from aiokafka.structs import OffsetAndMetadata
from pymongo.errors import PyMongoError

from hookbay_common.db.events import PendingSummaries
from hookbay_common.logs import get_logger
from hookbay_common.producer import is_retriable
from hookbay_forwarder.pace import FetchPace
from hookbay_forwarder.recorder.handlers import RecorderHandlers
from hookbay_forwarder.recorder.hold import EventHold, Read

log = get_logger("hookbay.recorder")
CONSUMER = "recorder"
MAX_RECORDS = 1000
"""Records written at most in one batch."""
COMMIT_TIMEOUT = 15.0
"""aiokafka retries a commit until the group coordinator answers; past this, read on."""
WRITE_TIMEOUT = 300.0
"""Longest wait for one batch's writes before they are tried again (idempotent upserts). Long:
a batch rewritten after a partial write meets duplicates and is upserted document by document,
which FerretDB does slowly; cutting that short would only start it again."""


class RecorderLoop:
    def __init__(
        self, consumer: AIOKafkaConsumer, handlers: RecorderHandlers, *, retry_delay: float = 1.0,
        linger: float = 0.0, commit_interval: float = 1.0, hold: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.consumer = consumer
        self.pace = FetchPace(consumer, clock=clock)
        self.hold = EventHold(hold)
        self._linger = linger
        self._commit_interval = commit_interval
        self._clock = clock
        self._pending = PendingSummaries()
        self._owed: dict[Any, OffsetAndMetadata] = {}
        """Offsets of the batches written since the last commit, committed after their
        summaries are."""
        self._owed_since: float | None = None
        self._assignment: frozenset[Any] = frozenset()
        self._handlers = handlers
        self._retry_delay = retry_delay
        self._stopping = asyncio.Event()
        self.healthy = True
        """False while MongoDB refuses writes (readiness)."""
        self.ended = False
        """Set once ``run`` returned (stopped or crashed)."""
        self.last_commit = time.monotonic()
        """When offsets were last committed, or the loop last read an empty batch (owed none)."""
        self.stage = "start"
        """What the loop is doing: fetch, write or commit (logged when it stalls)."""
        self.committed: dict[Any, int] = {}
        """The offset this loop last committed per partition (lag without asking the broker)."""
        handlers.metrics.since_commit.labels(CONSUMER).set_function(
            lambda: time.monotonic() - self.last_commit
        )

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self.ended = True

    async def _run(self) -> None:
        while not self._stopping.is_set():
            self.stage = "fetch"
            try:
                batch = await self.consumer.getmany(
                    timeout_ms=self._fetch_wait_ms(), max_records=MAX_RECORDS
                )
                if batch and self._linger:
                    await self._more(batch)
                self.pace.observe(sum(len(part) for part in batch.values()))
            except KafkaError as exc:
                await self._blip("fetch", exc)
                continue
            self._notice_moves()
            records = [record for part in batch.values() for record in part]
            ready = self.hold.sort(self._handlers.decode(records), self._clock())
            if ready:
                self.stage = "write"
                if not await self._write(ready):
                    return  # stopping before the batch could be written: it is not committed
            if not batch:
                if self._owed and not ready:
                    await self._settle()
                elif not self._owed:
                    self.last_commit = time.monotonic()
                continue
            self._owed.update(
                {tp: OffsetAndMetadata(part[-1].offset + 1, "") for tp, part in batch.items()}
            )
            now = self._clock()
            self._owed_since = now if self._owed_since is None else self._owed_since
            if now - self._owed_since >= self._commit_interval:
                await self._settle()
        held = self.hold.release()  # stopping: held events are written, not read again
        if held and not await self._write(held):
            return
        if self._owed:  # what was written is committed with its summaries
            await self._settle()

    def _fetch_wait_ms(self) -> int:
        """How long a fetch may wait: 200 ms, or less when a held event is due sooner."""
        due = self.hold.due_in(self._clock())
        return 200 if due is None else max(1, int(min(200.0, due * 1000)))

    def _notice_moves(self) -> None:
        assignment = frozenset(self.consumer.assignment())
        if assignment != self._assignment:
            self._assignment = assignment
            self._handlers.events.forget_writes()

    async def _settle(self) -> None:
        """Write the summaries the batches since the last commit owe, then commit their
        offsets. Summaries that cannot be written (stopping meanwhile) leave the offsets
        uncommitted: the batches are read and written again, their pages recounted."""
        self.stage = "summarise"
        if not await self._summarise():
            self._owed.clear()
            return
        held = self.hold.first_offsets()
        offsets: dict[Any, OffsetAndMetadata] = {}
        for tp, meta in self._owed.items():
            first = held.get((tp.topic, tp.partition))
            offset = meta.offset if first is None else min(meta.offset, first)
            if self.committed.get(tp) != offset:
                offsets[tp] = OffsetAndMetadata(offset, "")
        # a partition with a record held stays owed until that record is written
        self._owed = {tp: m for tp, m in self._owed.items() if (tp.topic, tp.partition) in held}
        self._owed_since = self._clock() if self._owed else None
        if not offsets:
            self.last_commit = time.monotonic()
            return
        self.stage = "commit"
        try:
            async with asyncio.timeout(COMMIT_TIMEOUT):
                await self.consumer.commit(offsets)
        except CommitFailedError:  # partitions moved meanwhile: the new owner rewrites them
            log.warning("commit_failed_after_rebalance")
        except TimeoutError:  # the next commit covers these offsets
            log.warning("kafka_blip", consumer=CONSUMER, operation="commit", error="timeout")
        except KafkaError as exc:  # not committed: read and written again, which is harmless
            await self._blip("commit", exc)
        else:
            self.last_commit = time.monotonic()
            self.committed.update({tp: meta.offset for tp, meta in offsets.items()})

    async def _more(self, batch: dict[Any, list[Any]]) -> None:
        """Add to ``batch`` what arrives within ``linger`` seconds of now (up to
        ``MAX_RECORDS`` in all), each partition's records kept in offset order."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._linger
        count = sum(len(part) for part in batch.values())
        while count < MAX_RECORDS and not self._stopping.is_set():
            left = deadline - loop.time()
            if left <= 0:
                return
            more = await self.consumer.getmany(
                timeout_ms=max(1, int(left * 1000)), max_records=MAX_RECORDS - count
            )
            for tp, part in more.items():
                batch.setdefault(tp, []).extend(part)
                count += len(part)

    def lag(self) -> dict[Any, int]:
        """Records of each assigned partition past this loop's last commit."""
        lags = {}
        for tp in self.consumer.assignment():
            highwater = self.consumer.highwater(tp)
            committed = self.committed.get(tp)
            if highwater is not None and committed is not None:
                lags[tp] = max(0, highwater - committed)
        return lags

    async def _blip(self, what: str, error: KafkaError) -> None:
        if not is_retriable(error):
            raise error
        self._handlers.metrics.handler_retries.labels(CONSUMER, type(error).__name__).inc()
        log.warning("kafka_blip", consumer=CONSUMER, operation=what, error=type(error).__name__)
        try:
            await asyncio.wait_for(self._stopping.wait(), self._retry_delay)
        except TimeoutError:
            return

    async def _write(self, reads: list[Read]) -> bool:
        """Write the batch; False when a stop came first (``_retrying``)."""
        return await self._retrying(
            lambda: self._handlers.record(reads, self._pending), records=len(reads)
        )

    async def _summarise(self) -> bool:
        """Write the pending summaries; False when a stop came first (``_retrying``)."""

        async def once() -> None:
            try:
                await self._handlers.summarise(self._pending)
            except BaseException:
                self._pending.recount_all()  # some tallies may be written: recount instead
                raise
            self._pending = PendingSummaries()

        return await self._retrying(once, records=0)

    async def _retrying(self, write: Callable[[], Awaitable[None]], *, records: int) -> bool:
        """Run ``write``, again every ``retry_delay`` while MongoDB refuses, an operation gets
        no answer within the client's socket timeout (``process.MONGO_SOCKET_TIMEOUT_MS``: a
        restarted server may leave a request unanswered) or the whole write takes longer than
        ``WRITE_TIMEOUT``; False when a stop came first."""
        while True:
            try:
                async with asyncio.timeout(WRITE_TIMEOUT):
                    await write()
            except (PyMongoError, TimeoutError) as exc:
                self.healthy = False
                log.warning("write_failed", error=type(exc).__name__, records=records)
                try:
                    await asyncio.wait_for(self._stopping.wait(), self._retry_delay)
                except TimeoutError:
                    continue
                return False
            else:
                self.healthy = True
                return True
