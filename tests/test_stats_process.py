"""The stats processor as a real process on real Kafka and FerretDB: the stats equal exactly
what was sent, minute by minute; late records within the grace count, beyond it they are
dropped and counted; kill -9 and SIGTERM mid-stream change no total."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from hookbay_common.db import Database, StatsRepository
from hookbay_common.db.stats import Counts, Point
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Attempt, AttemptTrigger, Event, RejectedReason
from hookbay_common.wire import encode_attempt, encode_event
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.factories import create_attempt, create_event, unique_name
from tests.support.processes import ServiceProcess, service_process
from tests.support.waiting import until
from tests.test_forwarder_process import has, parse_metrics, process_env, settings_of

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
LEAD = 200
"""Events the restart test's stream runs ahead of what has been counted."""
MINUTE = timedelta(minutes=1)


@pytest.fixture
async def penv(env: dict[str, str]) -> dict[str, str]:
    return await process_env(env, HOOKBAY_STATS_GRACE="60", HOOKBAY_STATS_FLUSH_INTERVAL="0.2")


@pytest.fixture
def fs(penv: dict[str, str]) -> ForwarderSettings:
    return settings_of(penv)


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


async def flushed_after(process: ServiceProcess) -> None:
    """Return once a flush that began after this call has finished (the processor's own
    counter), so what MongoDB shows includes everything read so far."""
    samples = parse_metrics((await process.get("/metrics")).text)
    before = next(v for n, _, v in samples if n == "hookbay_stats_flushes_total")

    async def later() -> bool:
        now = parse_metrics((await process.get("/metrics")).text)
        return next(v for n, _, v in now if n == "hookbay_stats_flushes_total") >= before + 2

    await until(later, 30, what="a later flush")


async def caught_up(process: ServiceProcess) -> bool:
    """Every partition the processor reads has no record left to handle and commit."""
    samples = parse_metrics((await process.get("/metrics")).text)
    lags = [v for n, _, v in samples if n == "hookbay_consumer_lag"]
    return bool(lags) and not any(lags)


class TestKnownMix:
    async def test_stats_equal_what_was_sent_minute_by_minute(
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

        await send(producer, fs, [*accepted, *rejected, late_in_minute_two, *attempts])
        async with service_process("stats", penv, tmp_path / "stats.log") as process:
            await until(lambda: caught_up(process), 60, what="stats caught up")
            await flushed_after(process)
            m0, m1, m2, m3 = await minutes(stats, webhook, T0, 4)

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
            await until(lambda: caught_up(process), 60, what="the clock at 10:05")
            await send(
                producer, fs,
                [event(T0 + 3 * MINUTE + timedelta(seconds=30)),  # beyond the grace
                 event(T0 + 4 * MINUTE + timedelta(seconds=59))],  # within it
            )  # fmt: skip
            await until(lambda: caught_up(process), 60, what="the late events read")
            await flushed_after(process)
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
            await until(lambda: caught_up(process), 60, what="the events ahead")
            await send(producer, fs, [
                *[create_event(username=owner, webhook_id=other, created_at=T0 + timedelta(seconds=s))
                  for s in range(5)],
                create_event(username=owner, webhook_id=same, created_at=T0),
            ])  # fmt: skip
            await until(lambda: caught_up(process), 60, what="the events behind")
            await flushed_after(process)
            samples = parse_metrics((await process.get("/metrics")).text)
        assert (await total(stats, ahead, later, later + MINUTE)).received == 5
        assert (await total(stats, other, T0, T0 + MINUTE)).received == 5
        assert (await total(stats, same, T0, T0 + MINUTE)).received == 0
        assert has(samples, "hookbay_stats_late_records_total", 1.0)


class TestRestarts:
    async def test_kill_9_and_sigterm_mid_stream_leave_the_totals_exact(
        self, penv: dict[str, str], fs: ForwarderSettings, producer: AIOKafkaProducer,
        stats: StatsRepository, tmp_path: Path,
    ) -> None:  # fmt: skip
        """Three processors in turn over one stream: the first killed with -9, the second
        stopped with SIGTERM, both while records keep coming; the third finishes. Every
        webhook's totals equal what was sent: nothing counted twice, nothing lost."""
        owners = [unique_name("u") for _ in range(4)]
        webhooks = {new_id(IdPrefix.WEBHOOK): owners[i % 4] for i in range(12)}
        records: list[Event | Attempt] = []
        for i in range(3000):
            webhook, owner = list(webhooks.items())[i % len(webhooks)]
            at = T0 + timedelta(seconds=i * 0.01)  # 30 s of event time: less than the grace, so
            # a restart that reads one partition ahead of another drops nothing as late
            e = create_event(username=owner, webhook_id=webhook, created_at=at)
            records.append(e)
            if i % 3:
                records.append(
                    create_attempt(e, started_at=at, status_code=200 if i % 3 == 1 else 500)
                )
        expected = {w: Counts() for w in webhooks}
        for r in records:
            c = expected[r.webhook_id]
            if isinstance(r, Event):
                c.received += 1
            else:
                c.attempts += 1
                c.delivered += r.status_code == 200
                c.failed += r.status_code == 500
        span = (T0, T0 + timedelta(hours=1))

        async def received_total() -> int:
            return sum([(await total(stats, w, *span)).received for w in webhooks])

        async def some_counted(more_than: int) -> bool:
            return await received_total() > more_than

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
        after_kill = await received_total()
        async with service_process("stats", penv, tmp_path / "second.log") as second:
            await until(lambda: some_counted(after_kill + 300), 60, what="more stats")
            second.terminate()
            assert await second.wait() == 0
        assert not feeding.done(), "stopped after the stream ended"
        assert "stats_stopped" in second.log_events()
        async with service_process("stats", penv, tmp_path / "third.log") as third:
            await feeding  # the rest of the stream, followed by the third
            await until(lambda: caught_up(third), 90, what="the third caught up")
            await flushed_after(third)
            totals = {w: await total(stats, w, *span) for w in webhooks}
        assert await received_total() == 3000
        for w, counts in totals.items():
            assert (counts.received, counts.attempts, counts.delivered, counts.failed) == (
                expected[w].received, expected[w].attempts, expected[w].delivered,
                expected[w].failed,
            ), w  # fmt: skip


class TestOps:
    async def test_health_readiness_and_metrics(self, penv: dict[str, str], tmp_path: Path) -> None:
        async with service_process("stats", penv, tmp_path / "stats.log") as process:
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
