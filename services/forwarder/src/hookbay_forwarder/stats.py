"""The stats processor: live per-webhook delivery stats, computed by faust-streaming.

One faust app, ``<namespace>.stats`` (also its consumer group), in three steps:

1. **Facts.** Two agents read ``<ns>.events`` (keyed by owner) and ``<ns>.attempts`` (keyed by
   event id). Every record becomes a *fact*: what it adds to its webhook's ``Counts`` (received or
   rejected; an attempt, delivered, failed, retried, a replay, its latency and answer class), at
   which event time (an event's ``created_at``, an attempt's ``started_at``), from which source
   partition and offset. The facts of a batch are sent to ``<ns>.stats.facts`` keyed by webhook
   id, one message per webhook: a repartition, so every fact of one webhook is counted in one
   partition by one worker.
2. **Buckets.** An agent reads the facts and keeps each webhook's minute and hour buckets in a
   faust table whose changelog (``<ns>.stats.buckets-changelog``, compacted) holds the open
   buckets; a restarted or new worker restores them from it. Windows close on event time: each
   facts partition keeps a clock, the newest event time it has seen (Kafka Streams' "stream
   time"); a record whose minute ended more than ``HOOKBAY_STATS_GRACE`` before the clock is late
   — dropped and counted (``hookbay_stats_late_records_total``) — and a bucket that far behind
   is closed: written a last time, then removed from the table. The grace is long (1 hour by
   default) because the clock is shared by every source partition the facts came from: catching
   up on a backlog, faust reads some partitions ahead of others (with a 2-minute grace, 77 % of a
   20,000-event backlog was dropped as late), and right after a rebalance it can hand a
   partition's records over out of order. Judging lateness per source partition instead was
   tried and dropped 224 of 100,000 records of a backlog for that second reason.
3. **Writes.** Every ``HOOKBAY_STATS_FLUSH_INTERVAL`` the changed buckets are written whole to
   MongoDB (``StatsRepository.write``: one ``$set`` per webhook-hour and webhook-day document),
   so a bucket written again changes nothing.

**Exactly the same totals after a crash**, without Kafka transactions: every bucket remembers,
per source partition, the offset of the last record it counted, and a fact at or below it is
skipped. A crash re-reads from the last commit and re-sends facts; the ones already counted are
recognised and skipped, the others counted. This holds because faust flushes the producer (the
facts and the changelog) before it commits offsets, a bucket is only ever changed from its facts
partition (its changelog goes to that partition number, written in order: buckets, then the
clocks), and the clocks move only forward with the facts — so a replay meets the same clocks at
each fact and drops exactly the facts the first pass dropped.

**Nothing lost in between**: faust-streaming 0.15.3 can lose a record at a seek and then commit
past it (``InOrder`` says how). ``InOrder`` hands both agents their records in offset order,
each once; a record missing is read again from where it went missing (counted in
``hookbay_stats_reseeks_total``), and commits never pass a record not handed over.

The table is used as a changelogged store: values are written with ``table.data`` and
``table.send_changelog(partition, ...)`` once per key and batch, not ``table[key] = ...``, which
would send one changelog message per change and take the partition from the *current* event
(a batch mixes partitions).

Faust is started as a service inside this process's event loop, without its ``Worker``: the
process keeps its own signals, JSON logging and ``/healthz``, ``/readyz``, ``/metrics`` (the
README's note on the recorder's Faust spike says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import faust
import msgpack
from aiokafka.errors import KafkaError
from faust.transport.consumer import Consumer as FaustConsumer
from faust.types import TP, EventT
from prometheus_client import Counter, Gauge, Histogram
from pymongo.errors import PyMongoError

from hookbay_common.db import StatsRepository
from hookbay_common.db import client as db_client
from hookbay_common.db.stats import HOUR, MINUTE, Bucket, Counts, Size
from hookbay_common.kafka import BrokerProbe, ensure_configured_topics, topic_partitions
from hookbay_common.logs import get_logger
from hookbay_common.metrics import LATENCY_BUCKETS, name
from hookbay_common.models import AttemptTrigger
from hookbay_common.topics import Topics
from hookbay_common.wire import WireError, peek_attempt, peek_event
from hookbay_forwarder.app import MONGO_SOCKET_TIMEOUT_MS
from hookbay_forwarder.metrics import ConsumerMetrics
from hookbay_forwarder.settings import ForwarderSettings

log = get_logger("hookbay.stats")

BATCH: Final = 2000
"""Records one agent takes at once (or what arrived within ``BATCH_WITHIN``)."""
BATCH_WITHIN: Final = 0.05
CLOCK_KEY: Final = "~clock"
OBSERVE_INTERVAL: Final = 2.0
STALL_AFTER: Final = 10.0
"""Seconds a partition's next record may exist unread before it is sought (``InOrder.watch``)."""
EXIT_OK: Final = 0
EXIT_CRASHED: Final = 1


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
    the partition is sought back to ``next`` (``mend``, every ``OBSERVE_INTERVAL`` while records
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


class StatsMetrics(ConsumerMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.records = Counter(
            name("stats_records"), "Source records turned into facts.", ["topic"], registry=r
        )
        self.late = Counter(
            name("stats_late_records"),
            "Records dropped as late: their minute ended more than the grace before the newest "
            "record of their facts partition.",
            registry=r,
        )
        self.unreadable = Counter(
            name("stats_unreadable"), "Source records that could not be read.", ["topic"],
            registry=r,
        )  # fmt: skip
        self.buckets_written = Counter(
            name("stats_buckets_written"), "Bucket documents upserted to MongoDB.", registry=r
        )
        self.write_latency = Histogram(
            name("stats_write_duration_seconds"), "Time to write one flush to MongoDB.",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.flushes = Counter(
            name("stats_flushes"),
            "Flushes to MongoDB that wrote every changed bucket.",
            registry=r,
        )
        self.since_flush = Gauge(
            name("stats_seconds_since_flush"),
            "Seconds since the changed buckets were last all written to MongoDB.",
            registry=r,
        )
        self.reseeks = Counter(
            name("stats_reseeks"),
            "Partitions read again from a record faust lost or handed over out of order.",
            ["topic"], registry=r,
        )  # fmt: skip
        self.open_buckets = Gauge(
            name("stats_open_buckets"), "Buckets held in the table (open or awaiting removal).",
            registry=r,
        )  # fmt: skip


# --- facts: what one record adds -------------------------------------------------------------


def event_counts(fields: dict[str, Any]) -> Counts:
    return Counts(rejected=1) if fields.get("rejected_reason") else Counts(received=1)


def attempt_counts(fields: dict[str, Any]) -> Counts:
    counts = Counts(attempts=1)
    code = fields.get("status_code")
    trigger = fields.get("trigger")
    if trigger == AttemptTrigger.RETRY:
        counts.retried = 1
    elif trigger == AttemptTrigger.REPLAY and fields.get("number") == 1:
        counts.replays = 1
    if code is not None and 200 <= code < 300:
        counts.delivered = 1
    elif not fields.get("will_retry"):
        counts.failed = 1
    if fields.get("latency_ms") is not None:
        counts.observe_latency(float(fields["latency_ms"]))
    counts.observe_code(code)
    return counts


def facts_of(
    topics: Topics, events: Sequence[EventT[Any]], metrics: StatsMetrics
) -> dict[str, bytes]:
    """The facts of a batch of source records: one message per webhook, keyed by its id."""
    bundles: dict[str, dict[str, Any]] = {}
    read: dict[str, int] = defaultdict(int)
    for event in events:
        message = event.message
        topic = message.topic
        try:
            if topic == topics.events:
                fields, at_field, src = peek_event(message.value or b""), "created_at", "e"
                counts = event_counts(fields)
            else:
                fields, at_field, src = peek_attempt(message.value or b""), "started_at", "a"
                counts = attempt_counts(fields)
            webhook_id, username, at = fields["webhook_id"], fields["username"], fields[at_field]
            if not (isinstance(webhook_id, str) and isinstance(username, str)):
                raise WireError("no webhook")
            at = int(at)
        except (WireError, KeyError, TypeError, ValueError):
            metrics.unreadable.labels(topic).inc()
            log.error(
                "unreadable_message", topic=topic, partition=message.partition,
                offset=message.offset,
            )  # fmt: skip
            continue
        bundle = bundles.setdefault(webhook_id, {"w": webhook_id, "u": username, "r": []})
        bundle["r"].append([f"{src}{message.partition}", message.offset, at, counts.to_text()])
        read[topic] += 1
    for topic, n in read.items():
        metrics.records.labels(topic).inc(n)
    return {w: _pack(b) for w, b in bundles.items()}


def _pack(value: Any) -> bytes:
    packed = msgpack.packb(value, use_bin_type=True)
    assert isinstance(packed, bytes)
    return packed


# --- buckets: the table ----------------------------------------------------------------------


def bucket_key(webhook_id: str, size: str, start: int) -> str:
    return f"{webhook_id}|{size}|{start}"


def clock_key(partition: int) -> str:
    return f"{CLOCK_KEY}|{partition}"


@dataclass
class BucketBook:
    """The buckets of the table, as the facts agent and the flush loop see them.

    ``data`` is the faust table's store: ``bucket_key -> {"w", "u", "z" ("m"|"h"), "t" (start,
    Unix seconds), "p" (facts partition), "c" (counts, ``Counts.to_text``), "o" ({source partition: last
    offset counted}), "v" (version)}`` and ``clock_key(p) -> newest event time of the
    partition`` (Unix seconds).
    ``send`` writes one key's new value (``None``: removed) to the changelog of a partition.
    """

    data: Any
    send: Callable[[int, str, Any], None]
    grace: float
    late: Callable[[], None] = lambda: None
    open: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Bucket keys per facts partition (rebuilt from ``data`` when a partition is first seen)."""
    indexed: set[int] = field(default_factory=set)
    written: dict[str, int] = field(default_factory=dict)
    """Version of each bucket last written to MongoDB."""

    def apply(self, batch: Iterable[tuple[int, bytes]]) -> None:
        """Count a batch of fact messages ``(facts partition, value)``. Synchronous on purpose:
        nothing else runs on the loop between reading the batch and queueing its changelog, so
        no commit can fall in between."""
        touched: dict[int, dict[str, tuple[dict[str, Any], Counts]]] = defaultdict(dict)
        clocks: dict[int, float] = {}
        for partition, value in batch:
            self._index(partition)
            bundle = msgpack.unpackb(value, raw=False)
            webhook_id, username = bundle["w"], bundle["u"]
            clock = clocks.get(partition, self.data.get(clock_key(partition), 0))
            mine = touched[partition]
            for src, offset, at_ms, counts_text in bundle["r"]:
                at = at_ms // 1000
                if at // MINUTE * MINUTE + MINUTE + self.grace <= clock:
                    self.late()
                    continue
                for size, unit in (("m", MINUTE), ("h", HOUR)):
                    key = bucket_key(webhook_id, size, at // unit * unit)
                    work = mine.get(key)
                    if work is None:
                        work = mine[key] = self._copy(
                            key, webhook_id, username, size, at, unit, partition
                        )
                    bucket, counts = work
                    if offset <= bucket["o"].get(src, -1):
                        continue  # counted before a restart: the fact was sent again
                    counts.add_text(counts_text)
                    bucket["o"][src] = offset
                clock = max(clock, at)
            clocks[partition] = clock
        for partition, buckets in touched.items():
            for key, (bucket, counts) in buckets.items():
                bucket["c"] = counts.to_text()
                bucket["v"] += 1
                self.data[key] = bucket
                self.open[partition].add(key)
                self.send(partition, key, bucket)
        for partition, clock in clocks.items():
            if clock != self.data.get(clock_key(partition)):
                self.data[clock_key(partition)] = clock
                self.send(partition, clock_key(partition), clock)
            self._remove_closed(partition, clock)

    def _copy(
        self, key: str, webhook_id: str, username: str, size: str, at: int, unit: int, p: int
    ) -> tuple[dict[str, Any], Counts]:
        """A bucket to change in this batch: a copy of the stored one (or a new one) and its
        counts, folded back into it once at the end of the batch."""
        stored = self.data.get(key)
        if stored is None:
            bucket = {"w": webhook_id, "u": username, "z": size, "t": at // unit * unit, "p": p,
                      "c": "", "o": {}, "v": 0}  # fmt: skip
            return bucket, Counts()
        return {**stored, "o": dict(stored["o"])}, Counts().add_text(stored["c"])

    def closed(self, bucket: dict[str, Any], newest: float) -> bool:
        unit = MINUTE if bucket["z"] == "m" else HOUR
        return bool(bucket["t"] + unit + self.grace <= newest)

    def _remove_closed(self, partition: int, newest: float) -> None:
        """Remove the closed buckets of ``partition`` that were written to MongoDB as they are."""
        for key in list(self.open[partition]):
            bucket = self.data.get(key)
            if bucket is None:
                self.open[partition].discard(key)
            elif self.closed(bucket, newest) and self.written.get(key) == bucket["v"]:
                del self.data[key]
                self.send(partition, key, None)
                self.open[partition].discard(key)
                self.written.pop(key, None)

    def _index(self, partition: int) -> None:
        if partition in self.indexed:
            return
        for key, value in list(self.data.items()):
            if not key.startswith(CLOCK_KEY) and value.get("p") == partition:
                self.open[partition].add(key)
        self.indexed.add(partition)

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions this worker no longer owns: their buckets are another worker's now."""
        for partition in partitions:
            for key in self.open.pop(partition, set()):
                self.data.pop(key, None)
                self.written.pop(key, None)
            self.data.pop(clock_key(partition), None)
            self.indexed.discard(partition)

    def unwritten(self, partitions: Iterable[int]) -> list[tuple[str, dict[str, Any]]]:
        """Buckets of ``partitions`` changed since they were last written (all of them after a
        restart)."""
        wanted = set(partitions)
        return [
            (key, value)
            for key, value in list(self.data.items())
            if not key.startswith(CLOCK_KEY)
            and value["p"] in wanted
            and self.written.get(key) != value["v"]
        ]


def to_bucket(value: dict[str, Any]) -> Bucket:
    size: Size = "minute" if value["z"] == "m" else "hour"
    return Bucket(value["w"], value["u"], size, value["t"], Counts().add_text(value["c"]))


# --- the process -----------------------------------------------------------------------------


class StatsProcessor:
    """The ``stats`` role: the faust app in this process, its flush loop and its health."""

    def __init__(
        self, settings: ForwarderSettings, *, crash: Callable[[int], None] = os._exit
    ) -> None:
        self.settings = settings
        self.metrics = StatsMetrics()
        self.topics = settings.topics
        self._crash = crash
        self._stopping = asyncio.Event()
        self._started = False
        self._broker_answers = False
        self._last_flush_ok = time.monotonic()
        self._flush_failing = False
        self._flush_lock = asyncio.Lock()
        self.mongo = db_client.connect(
            settings.mongo_url, socket_timeout_ms=MONGO_SOCKET_TIMEOUT_MS
        )
        self.repository = StatsRepository(db_client.database(self.mongo))
        self.probe = BrokerProbe(settings.kafka_bootstrap, client_id="hookbay-stats-probe")
        self.app: faust.App | None = None
        self.book: BucketBook | None = None
        self.order: InOrder | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._exit = EXIT_OK
        self._read_topics = {self.topics.events, self.topics.attempts, self.topics.stats_facts}

    # Process protocol (see app.py) -----------------------------------------------------------

    def checks(self) -> dict[str, bool]:
        tables: Any = self.app.tables if self.app is not None else None
        recovered = bool(tables is not None and tables.recovery.completed.is_set())
        return {
            "kafka": self._started and self._broker_answers,
            "recovered": recovered,
            "mongo": not self._flush_failing,
        }

    def healthy(self) -> bool:
        """False once faust's app crashed (an agent or its consumer thread failed for good):
        restarting the process is the cure."""
        return self.app is None or not self.app.crashed or self._stopping.is_set()

    def request_stop(self) -> None:
        self._stopping.set()

    async def start(self) -> None:
        s = self.settings

        async def connect() -> int:
            await ensure_configured_topics(s)
            return len(await topic_partitions(s.kafka_bootstrap, self.topics.stats_facts))

        await db_client.migrate(db_client.database(self.mongo))
        while not self._stopping.is_set():
            try:
                partitions = await connect()
            except (KafkaError, OSError, TimeoutError) as exc:
                log.warning("kafka_unreachable", error=type(exc).__name__)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), 2.0)
                continue
            self.app = self._create_app(partitions)
            await self.app.start()
            self._started = self._broker_answers = True
            log.info("stats_started", namespace=self.topics.namespace, partitions=partitions)
            return

    async def run(self) -> int:
        if not self._started:
            return EXIT_OK
        self._tasks = [
            asyncio.create_task(self._flush_loop()),
            asyncio.create_task(self._observe()),
        ]
        await self._stopping.wait()
        return self._exit

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.app is not None and self._started:
            await self.app.stop()  # acks are in step with the work: commits, flushes the producer
            await self._flush()  # the last changes, written before the process ends
        await self.probe.close()
        await self.mongo.close()
        log.info("stats_stopped")

    # the faust app ---------------------------------------------------------------------------

    def _create_app(self, partitions: int) -> faust.App:
        s, topics = self.settings, self.topics
        for noisy in ("faust", "mode", "aiokafka"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        app = faust.App(
            f"{topics.namespace}.stats",
            broker=[f"kafka://{server}" for server in s.kafka_bootstrap.split(",")],
            store="memory://",
            datadir=str(s.stats_data_dir),
            web_enabled=False,
            topic_partitions=partitions,
            topic_replication_factor=s.kafka_replication_factor,  # the topics faust makes itself
            table_standby_replicas=0,
            producer_acks=-1,
            broker_session_timeout=s.kafka_session_timeout_ms / 1000,
            broker_commit_interval=1.0,
            consumer_auto_offset_reset="earliest",
            broker_max_poll_records=2000,
            stream_buffer_maxsize=16_384,
            topic_allow_declare=True,
            topic_disable_leader=False,
        )
        sources = app.topic(
            topics.events, topics.attempts, key_serializer="raw", value_serializer="raw"
        )
        facts = app.topic(
            topics.stats_facts, partitions=partitions, key_serializer="raw",
            value_serializer="raw",
        )  # fmt: skip
        table = app.Table(
            "buckets", partitions=partitions,
            changelog_topic=app.topic(
                topics.stats_changelog, partitions=partitions, compacting=True, deleting=False,
                key_serializer="json", value_serializer="json",
            ),
        )  # fmt: skip

        def send(partition: int, key: str, value: Any) -> None:
            table.send_changelog(
                partition, key, value, key_serializer="json",
                value_serializer="raw" if value is None else "json",
            )  # fmt: skip

        self.book = book = BucketBook(table.data, send, s.stats_grace, late=self.metrics.late.inc)

        def forward(events: Sequence[EventT[Any]]) -> None:
            for webhook_id, value in facts_of(topics, events, self.metrics).items():
                facts.send_soon(key=webhook_id.encode(), value=value)

        self.order = order = InOrder(app.consumer, self._read_topics, self.metrics.reseeks)
        order.install()

        async def to_facts(stream: Any) -> None:
            async for events in stream.take_events(BATCH, within=BATCH_WITHIN):
                events = await order.admit(events)
                self._guard(forward, events)

        async def count(stream: Any) -> None:
            async for events in stream.take_events(BATCH, within=BATCH_WITHIN):
                events = await order.admit(events)
                batch = [(e.message.partition, e.message.value) for e in events]
                self._guard(book.apply, batch)

        app.agent(sources, name="facts")(to_facts)
        app.agent(facts, name="count")(count)

        @app.on_partitions_revoked.connect  # type: ignore[arg-type]
        async def on_revoked(_: Any, revoked: set[TP], **__: Any) -> None:
            lost = {tp.partition for tp in revoked if tp.topic == topics.stats_facts}
            async with self._flush_lock:  # a flush of them in flight finishes first
                book.forget(lost)

        return app

    def _guard(self, work: Callable[[Any], None], batch: Any) -> None:
        """Run one batch's work; if it fails, end the process before faust acks the batch (its
        offsets must not be committed): a restart reads it again."""
        try:
            work(batch)
        except Exception:
            log.exception("stats_batch_failed")
            self._crash(EXIT_CRASHED)
            raise

    # writes to MongoDB -------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.stats_flush_interval)
            await self._flush()

    def _owned(self) -> set[int]:
        if self.app is None:
            return set()
        return {
            tp.partition
            for tp in self.app.consumer.assignment()
            if tp.topic == self.topics.stats_facts
        }

    async def _flush(self) -> None:
        if self.book is None:
            return
        async with self._flush_lock:
            pending = self.book.unwritten(self._owned())
            if pending:
                started = time.perf_counter()
                try:
                    written = await self.repository.write(to_bucket(v) for _, v in pending)
                except PyMongoError as exc:
                    if not self._flush_failing:
                        log.warning("stats_write_failed", error=type(exc).__name__)
                    self._flush_failing = True
                    return
                self.metrics.write_latency.observe(time.perf_counter() - started)
                self.metrics.buckets_written.inc(written)
                for key, value in pending:
                    self.book.written[key] = value["v"]
            self._flush_failing = False
            self._last_flush_ok = time.monotonic()
            self.metrics.flushes.inc()

    async def _observe(self) -> None:
        while True:
            if self.app is not None and self.app.crashed and not self._stopping.is_set():
                log.error("stats_crashed", error=type(self.app.crash_reason).__name__)
                self._exit = EXIT_CRASHED
                self.request_stop()
            self._broker_answers = await self.probe.answers()
            if self.order is not None and self.app is not None and self.checks()["recovered"]:
                self.order.watch(self.app.consumer.highwater)
                await self.order.mend()
            self.metrics.since_flush.set(time.monotonic() - self._last_flush_ok)
            if self.book is not None:
                self.metrics.open_buckets.set(sum(len(k) for k in self.book.open.values()))
            if self.app is not None:
                consumer: Any = self.app.consumer
                for tp in consumer.assignment():
                    high = consumer.highwater(tp)
                    committed = consumer._committed_offset.get(tp)  # no public view of it
                    if high is not None and tp.topic in self._read_topics:
                        lag = max(0, high - (committed or 0))
                        self.metrics.lag.labels("stats", tp.topic, str(tp.partition)).set(lag)
            await asyncio.sleep(OBSERVE_INTERVAL)
