"""The stats processor as a real process on real Kafka and FerretDB: the stats equal exactly
what was sent, minute by minute; late records within the grace count, beyond it they are
dropped and counted; kill -9 and SIGTERM mid-stream change no total, whatever the quantity;
through the whole pipeline (ingest, the forwarder, a destination, the recorder, a replay), the
stats API shows exactly what was sent and answered."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from faust.transport.consumer import Consumer

from hookbay_common.db import Database, EventRepository, StatsRepository
from hookbay_common.db.stats import Counts, Point
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Attempt, AttemptTrigger, Event, RejectedReason
from hookbay_common.wire import encode_attempt, encode_event
from hookbay_dashboard.settings import DashboardSettings
from hookbay_dev.http import async_client
from hookbay_forwarder.pace import BULK, fetch_mode
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_forwarder.stats import StatsProcessor
from tests.support.dashboard import serve_dashboard
from tests.support.factories import create_attempt, create_event, unique_name
from tests.support.forwarder import running
from tests.support.ingest import ingest_process
from tests.support.kafka import partitions_of
from tests.support.processes import ServiceProcess, service_process
from tests.support.receiver import Receiver, Reply
from tests.support.settings import settings_of
from tests.support.waiting import until
from tests.test_forwarder_process import (
    group_offsets,
    has,
    parse_metrics,
    process_env,
)

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

LEAD = 200
"""Events the restart test's stream runs ahead of what has been counted."""
MINUTE = timedelta(minutes=1)


@pytest.fixture
async def penv(env: dict[str, str]) -> dict[str, str]:
    return await process_env(env, HOOKBAY_STATS_GRACE="60", HOOKBAY_STATS_FLUSH_INTERVAL="0.2")


@pytest.fixture
def fs(penv: dict[str, str]) -> ForwarderSettings:
    return settings_of(penv, ForwarderSettings)


@pytest.fixture
def stats(db: Database) -> StatsRepository:
    return StatsRepository(db)


async def send(
    producer: AIOKafkaProducer, fs: ForwarderSettings, records: Sequence[Event | Attempt]
) -> None:
    """Events and attempts in this order (each kind keyed as ingest and the forwarder key it)."""
    pending = []
    for r in records:
        if isinstance(r, Event):
            pending.append(
                await producer.send(fs.topics.events, encode_event(r), key=r.username.encode())
            )
        else:
            pending.append(
                await producer.send(fs.topics.attempts, encode_attempt(r), key=r.event_id.encode())
            )
    await asyncio.gather(*pending)


async def minutes(
    stats: StatsRepository, webhook_id: str, since: datetime, count: int
) -> list[Point]:
    return await stats.series(webhook_id, since, since + count * MINUTE, MINUTE)


async def total(
    stats: StatsRepository, webhook_id: str, since: datetime, until: datetime
) -> Counts:
    counts = Counts()
    for point in await stats.series(webhook_id, since, until, timedelta(hours=1)):
        counts.add(point.counts)
    return counts


async def minutes_total(stats: StatsRepository, webhook_id: str) -> Counts:
    """The sum of the webhook's minute buckets from 10:00 to 10:05 (minute documents, counted
    apart from the hour buckets)."""
    counts = Counts()
    for point in await minutes(stats, webhook_id, T0, 5):
        counts.add(point.counts)
    return counts


async def counted_events(stats: StatsRepository, webhooks: Iterable[str]) -> int:
    """Events (received and rejected) counted in the webhooks' 10:00 hour buckets."""
    hours = [await total(stats, w, T0, T0 + timedelta(hours=1)) for w in webhooks]
    return sum(c.received + c.rejected for c in hours)


async def counted_more_than(
    stats: StatsRepository, webhooks: Iterable[str], more_than: int
) -> bool:
    return await counted_events(stats, webhooks) > more_than


async def flushed_after(process: ServiceProcess) -> None:
    """Return once a flush that began after this call has finished (the processor's own
    counter), so what MongoDB shows includes everything read so far."""
    samples = parse_metrics((await process.get("/metrics")).text)
    before = next(v for n, _, v in samples if n == "hookbay_stats_flushes_total")

    async def later() -> bool:
        now = parse_metrics((await process.get("/metrics")).text)
        return next(v for n, _, v in now if n == "hookbay_stats_flushes_total") >= before + 2

    await until(later, 30, what="a later flush")


async def committed_to_end(fs: ForwarderSettings, *topics: str) -> bool:
    """The stats consumer group has committed every record of ``topics`` as they end now —
    asked of Kafka, not of the processor's lag gauges, which are up to 2 s old."""
    committed = await group_offsets(fs.kafka_bootstrap, f"{fs.topics.namespace}.stats")
    consumer = AIOKafkaConsumer(bootstrap_servers=fs.kafka_bootstrap)
    await consumer.start()
    try:
        tps = [
            TopicPartition(topic, p)
            for topic in topics
            for p in await partitions_of(fs.kafka_bootstrap, topic)
        ]
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return all(committed.get(tp, 0) >= end for tp, end in ends.items())


async def all_counted(fs: ForwarderSettings, process: ServiceProcess) -> None:
    """Return once every record on the source topics has been turned into facts and every fact
    counted and committed (sources first: their facts are sent before they are committed), and
    then written to MongoDB by a flush that began after that."""
    sources, facts = (fs.topics.events, fs.topics.attempts), fs.topics.stats_facts
    await until(partial(committed_to_end, fs, *sources), 90, interval=0.2, what="sources read")
    await until(partial(committed_to_end, fs, facts), 90, interval=0.2, what="facts counted")
    await flushed_after(process)


SECRET = "stats-e2e-secret"


def totals(
    *, received: int = 0, rejected: int = 0, delivered: int = 0, failed: int = 0,
    retried: int = 0, replays: int = 0, attempts: int = 0, c2xx: int = 0, c3xx: int = 0,
    c4xx: int = 0, c5xx: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """What ``api_totals`` must show: the counts, the answer classes (no attempt here goes
    unanswered) and as many latencies as attempts, each in one bin."""
    return {
        "received": received, "rejected": rejected, "delivered": delivered, "failed": failed,
        "retried": retried, "replays": replays, "attempts": attempts,
        "codes": {"2xx": c2xx, "3xx": c3xx, "4xx": c4xx, "5xx": c5xx, "error": 0},
        "latency_count": attempts, "latency_binned": attempts,
    }  # fmt: skip


async def api_totals(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    """The totals of ``GET /api/v1/webhooks/{name}/stats?window=1h`` in ``totals``'s shape."""
    answer = await client.get(f"/api/v1/webhooks/{name}/stats", params={"window": "1h"})
    assert answer.status_code == 200, answer.text
    t = answer.json()["totals"]
    return {
        **{k: t[k] for k in ("received", "rejected", "delivered", "failed", "retried", "replays",
                             "attempts", "codes")},
        "latency_count": t["latency"]["count"],
        "latency_binned": sum(b["count"] for b in t["latency"]["histogram"]),
    }  # fmt: skip


async def recorded(db: Database, request_id: str) -> Event:
    """The event once the recorder has written it to MongoDB."""
    events = EventRepository(db)

    async def found() -> bool:
        return await events.get_by_request_id(request_id) is not None

    await until(found, 60, what=f"event {request_id} recorded")
    event = await events.get_by_request_id(request_id)
    assert event is not None
    return event


class TestKnownMix:
    async def test_stats_equal_what_was_sent_minute_by_minute_then_probes_and_sigterm(
        self, penv: dict[str, str], fs: ForwarderSettings, producer: AIOKafkaProducer,
        stats: StatsRepository, tmp_path: Path,
    ) -> None:  # fmt: skip
        owner, webhook = unique_name("u"), new_id(IdPrefix.WEBHOOK)

        def event(at: datetime, **kw: Any) -> Event:
            return create_event(username=owner, webhook_id=webhook, created_at=at, **kw)

        accepted = [event(T0 + timedelta(seconds=s)) for s in (0, 10, 20, 59.999)]
        rejected = [
            event(T0 + timedelta(seconds=30), rejected_reason=RejectedReason.INVALID_SIGNATURE,
                  signature_valid=False, forward_url=None),
            event(T0 + MINUTE, rejected_reason=RejectedReason.INVALID_SIGNATURE,
                  signature_valid=False, forward_url=None),
        ]  # fmt: skip
        late_in_minute_two = event(T0 + MINUTE + timedelta(seconds=1))  # 10:01:01

        def attempt(e: Event, at: datetime, **kw: Any) -> Attempt:
            return create_attempt(e, started_at=at, **kw)

        a, b, c, d = accepted
        chain_b, chain_c = new_id(IdPrefix.CHAIN), new_id(IdPrefix.CHAIN)
        attempts = [
            # minute 10:00 — delivered at once, twice (latencies 30 and 80 ms)
            attempt(a, T0 + timedelta(seconds=1), status_code=200, latency_ms=30),
            attempt(d, T0 + timedelta(seconds=59), status_code=204, latency_ms=80),
            # b: 503 then, in minute 10:01, a retry delivered (latency 300 ms)
            attempt(b, T0 + timedelta(seconds=11), chain_id=chain_b, status_code=503,
                    latency_ms=40, will_retry=True),
            attempt(b, T0 + MINUTE + timedelta(seconds=11), chain_id=chain_b, number=2,
                    trigger=AttemptTrigger.RETRY, status_code=200, latency_ms=300),
            # c: 500 with a retry waiting, then in minute 10:01 a timeout that ends it failed
            attempt(c, T0 + timedelta(seconds=21), chain_id=chain_c, status_code=500,
                    latency_ms=20, will_retry=True),
            attempt(c, T0 + MINUTE + timedelta(seconds=21), chain_id=chain_c, number=2,
                    trigger=AttemptTrigger.RETRY, status_code=None, latency_ms=5000,
                    error="timeout"),
            # minute 10:02 — a replay of c, delivered (a 3xx never counts as delivered)
            attempt(c, T0 + 2 * MINUTE, trigger=AttemptTrigger.REPLAY, status_code=302,
                    latency_ms=12),
        ]  # fmt: skip

        # the events counted before the attempts are sent: the two topics are read in no fixed
        # order, and the 10:02 replay read first would close minute 10:00 (60 s grace) before
        # its rejected event at 10:00:30 arrived
        await send(producer, fs, [*accepted, *rejected, late_in_minute_two])
        async with service_process("stats", penv, tmp_path / "stats.log") as process:
            await until(partial(committed_to_end, fs, fs.topics.events), 90, interval=0.2,
                        what="events read")  # fmt: skip
            await send(producer, fs, attempts)
            await all_counted(fs, process)
            m0, m1, m2, m3 = await minutes(stats, webhook, T0, 4)
            await answers_its_probes(process)

        assert (m0.counts.received, m0.counts.rejected) == (4, 1)  # 10:00:59.999 is minute 0
        assert (m1.counts.received, m1.counts.rejected) == (1, 1)
        assert m0.counts.attempts == 4
        assert m0.counts.delivered == 2
        assert m0.counts.failed == 0
        assert m0.counts.codes == [2, 0, 0, 2, 0]
        assert m0.counts.latency_histogram == [3, 1, 0, 0, 0, 0, 0, 0, 0]
        assert m1.counts.attempts == 2
        assert (m1.counts.delivered, m1.counts.failed, m1.counts.retried) == (1, 1, 2)
        assert m1.counts.codes == [1, 0, 0, 0, 1]
        assert m1.counts.latency_sum_ms == 5300
        assert m2.counts == Counts(
            attempts=1, replays=1, failed=1, latency_count=1, latency_sum_ms=12,
            latency_histogram=[1, 0, 0, 0, 0, 0, 0, 0, 0], codes=[0, 1, 0, 0, 0],
        )  # fmt: skip
        assert m3.counts.empty
        hour = await total(stats, webhook, T0, T0 + timedelta(hours=1))
        assert hour == Counts().add(m0.counts).add(m1.counts).add(m2.counts)


class TestLateRecords:
    async def test_within_the_grace_counted_beyond_it_dropped_and_counted_in_a_metric(
        self, penv: dict[str, str], fs: ForwarderSettings, producer: AIOKafkaProducer,
        stats: StatsRepository, tmp_path: Path,
    ) -> None:  # fmt: skip
        """Grace 60 s: with the clock at 10:05:00, minute 10:03 (ended 10:04:00) is closed and
        minute 10:04 (ends 10:05:00) still open."""
        owner, webhook = unique_name("u"), new_id(IdPrefix.WEBHOOK)

        def event(at: datetime) -> Event:
            return create_event(username=owner, webhook_id=webhook, created_at=at)

        async with service_process("stats", penv, tmp_path / "stats.log") as process:
            await send(producer, fs, [event(T0 + 3 * MINUTE), event(T0 + 5 * MINUTE)])
            await all_counted(fs, process)
            await send(
                producer, fs,
                [event(T0 + 3 * MINUTE + timedelta(seconds=30)),  # beyond the grace
                 event(T0 + 4 * MINUTE + timedelta(seconds=59))],  # within it
            )  # fmt: skip
            await all_counted(fs, process)
            samples = parse_metrics((await process.get("/metrics")).text)
        points = await minutes(stats, webhook, T0 + 3 * MINUTE, 3)
        assert [p.counts.received for p in points] == [1, 1, 1]
        assert has(samples, "hookbay_stats_late_records_total", 1.0)


def facts_partitions(fs: ForwarderSettings) -> tuple[str, str, str]:
    """Three webhook ids: the first and third counted in one facts partition, the second in
    another (the default partitioner over the facts topic's partitions)."""
    partitioner = DefaultPartitioner()
    partitions = list(range(fs.kafka_partitions))

    def partition(webhook_id: str) -> int:
        return int(partitioner(webhook_id.encode(), partitions, partitions))

    first = new_id(IdPrefix.WEBHOOK)
    other = same = new_id(IdPrefix.WEBHOOK)
    while partition(other) == partition(first):
        other = new_id(IdPrefix.WEBHOOK)
    while partition(same) != partition(first):
        same = new_id(IdPrefix.WEBHOOK)
    return first, other, same


class TestClocks:
    async def test_each_facts_partition_keeps_its_own_clock(
        self, penv: dict[str, str], fs: ForwarderSettings, producer: AIOKafkaProducer,
        stats: StatsRepository, tmp_path: Path,
    ) -> None:  # fmt: skip
        """One webhook's events 30 minutes ahead move the clock of its facts partition only:
        another partition's webhook still counts events from 30 minutes before (grace 60 s),
        a webhook of the same partition does not."""
        ahead, other, same = facts_partitions(fs)
        owner = unique_name("u")
        later = T0 + timedelta(minutes=30)
        async with service_process("stats", penv, tmp_path / "stats.log") as process:
            await send(producer, fs, [
                create_event(username=owner, webhook_id=ahead, created_at=later + timedelta(seconds=s))
                for s in range(5)
            ])  # fmt: skip
            await all_counted(fs, process)
            await send(producer, fs, [
                *[create_event(username=owner, webhook_id=other, created_at=T0 + timedelta(seconds=s))
                  for s in range(5)],
                create_event(username=owner, webhook_id=same, created_at=T0),
            ])  # fmt: skip
            await all_counted(fs, process)
            samples = parse_metrics((await process.get("/metrics")).text)
        assert (await total(stats, ahead, later, later + MINUTE)).received == 5
        assert (await total(stats, other, T0, T0 + MINUTE)).received == 5
        assert (await total(stats, same, T0, T0 + MINUTE)).received == 0
        assert has(samples, "hookbay_stats_late_records_total", 1.0)


LATENCIES_MS = (10, 75, 180, 400, 900, 2000, 4000, 8000, 12_000)
"""One latency per bin of the histogram (``LATENCY_BOUNDS_MS`` and the slowest bin), in turn."""
TWO, THREE, FOUR, FIVE, ERROR = range(5)
"""Indexes of the answer classes in ``Counts.codes``."""


@dataclass
class Workload:
    """A stream of events and attempts and what each webhook's totals must be once it is all
    counted, written down scenario by scenario (not derived the way the processor derives
    them)."""

    webhooks: dict[str, str]  # webhook id -> owner
    records: list[Event | Attempt] = field(default_factory=list)
    expected: dict[str, Counts] = field(default_factory=dict)
    attempts: int = 0

    def event(self, webhook: str, at: datetime, *, rejected: bool = False) -> Event:
        want = self.expected.setdefault(webhook, Counts())
        if rejected:
            want.rejected += 1
            e = create_event(
                username=self.webhooks[webhook], webhook_id=webhook, created_at=at,
                rejected_reason=RejectedReason.INVALID_SIGNATURE, signature_valid=False,
                forward_url=None,
            )  # fmt: skip
        else:
            want.received += 1
            e = create_event(username=self.webhooks[webhook], webhook_id=webhook, created_at=at)
        self.records.append(e)
        return e

    def attempt(
        self, e: Event, code: int | None, answer: int, *, chain: str, number: int = 1,
        trigger: AttemptTrigger = AttemptTrigger.INITIAL, will_retry: bool = False,
        timed: bool = True,
    ) -> None:  # fmt: skip
        """One attempt of ``e`` answered ``code`` (class ``answer``); ``timed=False``: no
        latency (the connection was refused). Chain outcomes and retries are counted by the
        caller."""
        want = self.expected[e.webhook_id]
        latency = None
        if timed:
            bin_ = self.attempts % len(LATENCIES_MS)
            latency = float(LATENCIES_MS[bin_])
            want.latency_count += 1
            want.latency_sum_ms += latency
            want.latency_histogram[bin_] += 1
        want.attempts += 1
        want.codes[answer] += 1
        self.attempts += 1
        self.records.append(
            create_attempt(
                e, chain_id=chain, number=number, trigger=trigger, status_code=code,
                latency_ms=latency, will_retry=will_retry,
                error=None if code else "timeout" if timed else "connection refused",
                started_at=e.created_at + timedelta(milliseconds=number * 300),
            )
        )  # fmt: skip

    def deliveries(self, e: Event, kind: int) -> None:
        """The attempts of one accepted event, by ``kind``: delivered at once; a 503, then a
        retry delivered; a 500, then two retries timing out (failed); a 404 (failed) replayed
        with a 301 (failed: a 3xx is no delivery); a refused connection (failed, no latency)
        replayed with a 502 and a retry of the replay delivered; no destination (no attempt)."""
        want, chain = self.expected[e.webhook_id], new_id(IdPrefix.CHAIN)
        replay = new_id(IdPrefix.CHAIN)
        retry, again = AttemptTrigger.RETRY, AttemptTrigger.REPLAY
        if kind == 0:
            self.attempt(e, 200, TWO, chain=chain)
            want.delivered += 1
        elif kind == 1:
            self.attempt(e, 503, FIVE, chain=chain, will_retry=True)
            self.attempt(e, 204, TWO, chain=chain, number=2, trigger=retry)
            want.delivered += 1
            want.retried += 1
        elif kind == 2:
            self.attempt(e, 500, FIVE, chain=chain, will_retry=True)
            self.attempt(e, None, ERROR, chain=chain, number=2, trigger=retry, will_retry=True)
            self.attempt(e, None, ERROR, chain=chain, number=3, trigger=retry)
            want.failed += 1
            want.retried += 2
        elif kind == 3:
            self.attempt(e, 404, FOUR, chain=chain)
            self.attempt(e, 301, THREE, chain=replay, trigger=again)
            want.failed += 2
            want.replays += 1
        elif kind == 4:
            self.attempt(e, None, ERROR, chain=chain, timed=False)
            self.attempt(e, 502, FIVE, chain=replay, trigger=again, will_retry=True)
            self.attempt(e, 200, TWO, chain=replay, number=2, trigger=retry)
            want.failed += 1
            want.replays += 1
            want.delivered += 1
            want.retried += 1


def restart_workload(webhooks: dict[str, str], events: int) -> Workload:
    """``events`` events over ``webhooks`` and 90 s of event time (minutes 10:00 and 10:01; the
    first minute's window is open until 10:02 with the 60 s grace, so a restart that reads one
    partition ahead of another drops nothing as late). Every tenth is rejected by its
    signature; the others are delivered by turns of ``Workload.deliveries``."""
    work = Workload(webhooks)
    hooks = list(webhooks)
    for i in range(events):
        webhook, at = hooks[i % len(hooks)], T0 + timedelta(seconds=i * 0.03)
        turn = i // len(hooks)  # every webhook goes through every kind
        if turn % 10 == 9:
            work.event(webhook, at, rejected=True)
        else:
            work.deliveries(work.event(webhook, at), turn % 6)
    return work


class TestRestarts:
    async def test_kill_9_and_sigterm_mid_stream_leave_the_totals_exact(
        self, penv: dict[str, str], fs: ForwarderSettings, producer: AIOKafkaProducer,
        stats: StatsRepository, tmp_path: Path,
    ) -> None:  # fmt: skip
        """Three processors in turn over one stream: the first killed with -9, the second
        stopped with SIGTERM, both while records keep coming; the third finishes. Every
        webhook's totals — every count, the latency histogram and the answer classes — equal
        what was sent, in its hour bucket and summed over its minute buckets: nothing counted
        twice, nothing lost."""
        owners = [unique_name("u") for _ in range(4)]
        work = restart_workload({new_id(IdPrefix.WEBHOOK): owners[i % 4] for i in range(12)}, 3000)
        records, expected = work.records, work.expected
        for want in expected.values():  # every quantity occurs for every webhook
            assert all((want.received, want.rejected, want.delivered, want.failed, want.retried,
                        want.replays, *want.codes, *want.latency_histogram))  # fmt: skip
            assert 0 < want.latency_count < want.attempts  # a refused connection has none
        span = (T0, T0 + timedelta(hours=1))
        events_counted = partial(counted_events, stats, expected)
        some_counted = partial(counted_more_than, stats, expected)

        async def feed() -> None:
            """Slices of 100 records, each once the processor has counted all but ``LEAD`` of
            the events sent: the stream waits while no processor runs, so both stops fall
            mid-stream whatever the machine's speed."""
            sent = 0
            for start in range(0, len(records), 100):
                chunk = records[start : start + 100]
                await send(producer, fs, chunk)
                sent += sum(isinstance(r, Event) for r in chunk)
                await until(partial(some_counted, sent - LEAD - 1), 120, what="counting to follow")

        feeding = asyncio.create_task(feed())
        async with service_process("stats", penv, tmp_path / "first.log") as first:
            await until(lambda: some_counted(300), 60, what="first stats")
            first.kill()
            assert await first.wait() == -signal.SIGKILL
        assert not feeding.done(), "killed after the stream ended"
        after_kill = await events_counted()
        async with service_process("stats", penv, tmp_path / "second.log") as second:
            await until(lambda: some_counted(after_kill + 300), 60, what="more stats")
            second.terminate()
            assert await second.wait() == 0
        assert not feeding.done(), "stopped after the stream ended"
        assert "stats_stopped" in second.log_events()
        async with service_process("stats", penv, tmp_path / "third.log") as third:
            await feeding  # the rest of the stream, followed by the third
            await all_counted(fs, third)
            hours = {w: await total(stats, w, *span) for w in expected}
            summed = {w: await minutes_total(stats, w) for w in expected}
        assert await events_counted() == 3000
        for w, want in expected.items():
            assert hours[w] == want, w
            assert summed[w] == want, w


class TestTwoReplicas:
    async def test_partitions_moving_between_replicas_leave_the_totals_exact(
        self, penv: dict[str, str], fs: ForwarderSettings, producer: AIOKafkaProducer,
        stats: StatsRepository, tmp_path: Path,
    ) -> None:  # fmt: skip
        """Two processors in one group, as the Helm chart scales them: the second joins while
        records keep coming (partitions move to it), then the first leaves with SIGTERM while
        more come (they move back): every webhook's totals — every count, the latency
        histogram, the answer classes, in hour and minute buckets — equal what was sent."""
        owners = [unique_name("u") for _ in range(4)]
        work = restart_workload({new_id(IdPrefix.WEBHOOK): owners[i % 4] for i in range(12)}, 1200)
        records, expected = work.records, work.expected
        span = (T0, T0 + timedelta(hours=1))
        events_counted = partial(counted_events, stats, expected)
        some_counted = partial(counted_more_than, stats, expected)

        async def fed(part: Sequence[Event | Attempt]) -> None:
            for start in range(0, len(part), 100):
                await send(producer, fs, part[start : start + 100])

        third = len(records) // 3
        await fed(records[:third])
        async with service_process("stats", penv, tmp_path / "a.log") as a:
            await until(partial(some_counted, 100), 60, what="first stats")
            async with service_process("stats", penv, tmp_path / "b.log") as b:
                await fed(records[third : 2 * third])  # while the group rebalances
                await until(partial(holds_partitions, b, fs), 60, what="the second assigned")
                a.terminate()
                assert await a.wait() == 0
                await fed(records[2 * third :])
                await all_counted(fs, b)
                hours = {w: await total(stats, w, *span) for w in expected}
                summed = {w: await minutes_total(stats, w) for w in expected}
        assert await events_counted() == 1200
        for w, want in expected.items():
            assert hours[w] == want, w
            assert summed[w] == want, w


async def holds_partitions(process: ServiceProcess, fs: ForwarderSettings) -> bool:
    """The processor holds a partition of the facts topic (its lag gauge names it)."""
    samples = parse_metrics((await process.get("/metrics")).text)
    return has(samples, "hookbay_consumer_lag", topic=fs.topics.stats_facts)


class LosingStats(StatsProcessor):
    """The processor with faust's fetcher losing chosen records once each, the way
    faust-streaming 0.15.3 loses one at a seek: handed over, its read offset passed, never in
    an agent's queue. ``lose``: ``(topic, partition, offset)``; ``None`` as the partition: every
    partition of the topic."""

    def __init__(self, settings: ForwarderSettings, lose: set[tuple[str, int | None, int]]) -> None:
        super().__init__(settings)
        self.lose, self.lost = lose, set[tuple[str, int, int]]()

    def _create_app(self, partitions: int) -> Any:
        app = super()._create_app(partitions)
        assert self.order is not None
        self.order.stall_after = 1.0  # a record lost last in its partition: sought sooner
        consumer = cast(Consumer, app.consumer)  # the callback is not on the ConsumerT interface
        deliver = consumer.callback

        async def losing(message: Any) -> None:
            key = (message.topic, message.partition, message.offset)
            chosen = key in self.lose or (message.topic, None, message.offset) in self.lose
            if chosen and key not in self.lost:
                self.lost.add(key)
                return
            await deliver(message)

        consumer.callback = losing
        return app


class TestRecordsFaustLoses:
    async def test_are_read_again_and_counted_once(
        self, fs: ForwarderSettings, producer: AIOKafkaProducer, stats: StatsRepository,
        tmp_path: Path,
    ) -> None:  # fmt: skip
        """Records lost by faust's fetcher — one inside an events partition, the last of an
        attempts partition, the first fact of every facts partition (nothing committed yet) —
        are read again from where they went missing: every one counted exactly once, every
        offset committed, and the reads again in ``hookbay_stats_reseeks_total``."""
        owner, webhook = unique_name("u"), new_id(IdPrefix.WEBHOOK)
        events = [
            create_event(
                username=owner, webhook_id=webhook, created_at=T0 + i * timedelta(seconds=1)
            )
            for i in range(40)
        ]
        attempts = [
            create_attempt(e, status_code=200, latency_ms=10, started_at=e.created_at + MINUTE / 2)
            for e in events
        ]
        written = [
            await producer.send_and_wait(fs.topics.events, encode_event(e), key=owner.encode())
            for e in events
        ]
        done = [
            await producer.send_and_wait(
                fs.topics.attempts, encode_attempt(a), key=a.event_id.encode()
            )
            for a in attempts
        ]
        last_attempt = max(done, key=lambda m: (m.partition, m.offset))
        lose = {
            (fs.topics.events, written[5].partition, written[5].offset),
            (last_attempt.topic, last_attempt.partition, last_attempt.offset),
            (fs.topics.stats_facts, None, 0),
        }
        processor = LosingStats(fs.model_copy(update={"stats_data_dir": tmp_path}), lose)
        async with running(processor):
            sources = (fs.topics.events, fs.topics.attempts)
            await until(
                partial(committed_to_end, fs, *sources), 60, interval=0.2, what="sources read"
            )
            await until(partial(committed_to_end, fs, fs.topics.stats_facts), 60, interval=0.2,
                        what="facts counted")  # fmt: skip
            flushes = processor.metrics.flushes._value.get()
            await until(lambda: processor.metrics.flushes._value.get() >= flushes + 2, 30,
                        what="a later flush")  # fmt: skip
            reseeks = {
                topic: processor.metrics.reseeks.labels(topic)._value.get()
                for topic in (*sources, fs.topics.stats_facts)
            }
        hour = await total(stats, webhook, T0, T0 + timedelta(hours=1))
        assert (hour.received, hour.attempts, hour.delivered) == (40, 40, 40)
        assert hour.latency_count == 40
        assert {(t, o) for t, _, o in processor.lost} >= {
            (fs.topics.events, written[5].offset), (fs.topics.attempts, last_attempt.offset),
            (fs.topics.stats_facts, 0),
        }  # fmt: skip
        assert all(reseeks.values()), reseeks


class TestFetching:
    async def test_faust_consumer_fetches_in_bulk(
        self, fs: ForwarderSettings, tmp_path: Path
    ) -> None:
        """The counts reach MongoDB once a second, so the processor has faust's consumer ask
        the broker for 64 KiB or 1.5 s of records at a time, not for each record."""
        processor = StatsProcessor(fs.model_copy(update={"stats_data_dir": tmp_path}))
        async with running(processor):
            await until(
                lambda: fetch_mode(processor.kafka_consumer) == BULK, 30, what="bulk fetches"
            )


class TestThroughThePipeline:
    async def test_stats_equal_what_was_sent_through_ingest_and_the_forwarder(
        self, env: dict[str, str], db: Database, receiver: Receiver, tmp_path: Path
    ) -> None:
        """Real ingest, forwarder, recorder and stats processes and the dashboard API on a real
        server, a local destination: signed, forged and unsigned sends; destinations answering
        2xx, 502 twice then 2xx, always 500 (until the schedule 0, 1 s, 2 s is exhausted) and
        404; a replay through the API. The stats API's totals equal what was sent and what the
        destination answered, webhook by webhook."""
        penv = await process_env(
            env, HOOKBAY_RETRY_SCHEDULE="0,1s,2s", HOOKBAY_RETRY_JITTER="0",
            HOOKBAY_FORWARD_TIMEOUT="10", HOOKBAY_STATS_FLUSH_INTERVAL="0.2",
        )  # fmt: skip
        dashboard_settings = settings_of(
            penv, DashboardSettings,
            cookie_secure=False, redis_key_prefix=f"hookbay:test:{unique_name('s')}:",
        )  # fmt: skip
        urls = {
            "signed": receiver.url(),
            "plain": receiver.url(),
            "retried": receiver.url(Reply(502), Reply(502)),
            "failing": receiver.url(then=Reply(500, b"down")),
            "refused": receiver.url(then=Reply(404, b"no such hook")),
        }
        async with (
            serve_dashboard(dashboard_settings) as dashboard,
            ingest_process(penv) as (_, ingest_base),
            service_process("forwarder", penv, tmp_path / "forwarder.log"),
            service_process("recorder", penv, tmp_path / "recorder.log"),
            service_process("stats", penv, tmp_path / "stats.log") as stats_process,
            async_client(base_url=ingest_base, timeout=30) as ingest,
        ):
            owner = await dashboard.owner()
            for name, url in urls.items():
                hook = {"name": name, "forward_url": url}
                if name == "signed":
                    hook["secret"] = SECRET
                created = await owner.client.post("/api/v1/webhooks", json=hook)
                assert created.status_code == 201, created.text

            async def post(name: str, body: bytes, signature: str | None = None) -> str:
                headers = {} if signature is None else {"x-service-signature": signature}
                path = f"/w/{owner.username}/{name}"
                answer = await ingest.post(path, content=body, headers=headers)
                assert answer.status_code == (401 if signature == "00" else 200), answer.text
                return str(answer.json().get("requestId"))

            for i in range(6):
                body = f'{{"n": {i}}}'.encode()
                await post("signed", body, hmac.new(SECRET.encode(), body, "sha256").hexdigest())
            for i in range(3):
                await post("signed", f'{{"forged": {i}}}'.encode(), "00")
            for i in range(4):
                await post("plain", f'{{"n": {i}}}'.encode())
            retried = await post("retried", b"{}")
            for i in range(2):
                await post("failing", f'{{"n": {i}}}'.encode())
            await post("refused", b"{}")

            deliveries = {"signed": 6, "plain": 4, "retried": 3, "failing": 6, "refused": 1}
            for name, count in deliveries.items():
                await receiver.wait_for(urls[name], count, timeout=60)
            event = await recorded(db, retried)
            replay = await owner.client.post(f"/api/v1/events/{event.id}/replay")
            assert replay.status_code == 202, replay.text
            await receiver.wait_for(urls["retried"], 4, timeout=60)

            expected = {
                "signed": totals(received=6, rejected=3, delivered=6, attempts=6, c2xx=6),
                "plain": totals(received=4, delivered=4, attempts=4, c2xx=4),
                "retried": totals(
                    received=1, delivered=2, retried=2, replays=1, attempts=4, c2xx=2, c5xx=2
                ),
                "failing": totals(received=2, failed=2, retried=4, attempts=6, c5xx=6),
                "refused": totals(received=1, failed=1, attempts=1, c4xx=1),
            }

            async def observed() -> dict[str, dict[str, Any]]:
                return {name: await api_totals(owner.client, name) for name in expected}

            async def equal() -> bool:
                return await observed() == expected

            with contextlib.suppress(AssertionError):  # the assertion below tells what differs
                await until(equal, 60, interval=0.3, what="the stats as sent")
            assert await observed() == expected
            # and nothing counted later: everything read and committed, written again since
            await all_counted(settings_of(penv, ForwarderSettings), stats_process)
            assert await observed() == expected
        for name, count in {**deliveries, "retried": 4}.items():
            assert len(receiver.received(urls[name])) == count, name


async def answers_its_probes(process: ServiceProcess) -> None:
    """/healthz, /readyz and /metrics of a running stats process, then SIGTERM: exit 0."""
    assert (await process.get("/healthz")).json() == {"status": "ok"}
    ready = (await process.get("/readyz")).json()
    assert ready == {"ready": True, "kafka": True, "recovered": True, "mongo": True}
    samples = parse_metrics((await process.get("/metrics")).text)
    for metric in (
        "hookbay_stats_late_records_total", "hookbay_stats_buckets_written_total",
        "hookbay_stats_seconds_since_flush", "hookbay_stats_flushes_total",
    ):  # fmt: skip
        assert has(samples, metric), metric
    process.terminate()
    assert await process.wait() == 0
