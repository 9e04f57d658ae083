"""The lanes on a manual clock with in-memory destinations and hold store: no network, no
sleeps; every time asserted is simulated time."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from hookbay_common.models import AttemptTrigger
from hookbay_common.routing.tasks import DestinationTask
from hookbay_common.wire import encode_destination_task
from hookbay_forwarder.gateway import (
    Delivered,
    DestinationState,
    LaneConfig,
    LaneMode,
    Lanes,
    ManualClock,
    Rate,
    RatePeriod,
)
from hookbay_forwarder.gateway.clock import settle
from hookbay_forwarder.metrics import LaneMetrics
from tests.support.factories import create_destination_task, create_event
from tests.support.lanes import FakeDestinations, MemoryHoldStore

P = ("deliveries", 0)
Q = ("deliveries", 1)
PAUSED = LaneConfig(state=DestinationState.PAUSED)


RIGS: list[Rig] = []


@pytest.fixture(autouse=True)
async def _close_rigs() -> AsyncIterator[None]:
    yield
    while RIGS:
        await RIGS.pop().lanes.close(0)


class Rig:
    """Lanes wired to fakes; ``configs`` is the destinations' configuration view."""

    def __init__(self, **lanes_options: Any) -> None:
        RIGS.append(self)
        self.registry = CollectorRegistry()
        self.clock = ManualClock()
        self.dests = FakeDestinations(self.clock)
        self.store = MemoryHoldStore()
        self.configs: dict[str, LaneConfig] = {}
        self.metrics = LaneMetrics(self.registry)
        self.lanes = Lanes(
            self.dests.deliver, self.configs.get, self.store, clock=self.clock,
            metrics=self.metrics, **lanes_options,
        )  # fmt: skip
        self.offset = 0

    def task(self, destination: str = "dst_a", **overrides: Any) -> DestinationTask:
        event = create_event(created_at=self.clock.now())
        return create_destination_task(event=event, destination=destination, **overrides)

    def submit(self, *tasks: DestinationTask, partition: Any = P) -> int:
        offset = self.offset
        self.lanes.submit(partition, offset, tasks)
        self.offset += 1
        return offset

    def feed(self, count: int, destination: str = "dst_a", partition: Any = P) -> list[str]:
        ids = []
        for _ in range(count):
            task = self.task(destination)
            self.submit(task, partition=partition)
            ids.append(task.delivery_id)
        return ids

    def sample(self, name: str) -> float | None:
        return self.registry.get_sample_value(f"hookbay_{name}")

    def configure(self, destination: str, config: LaneConfig) -> None:
        self.configs[destination] = config
        self.lanes.configure(destination, config)


def retry_of(task: DestinationTask, rig: Rig, *, after: float = 0.0) -> DestinationTask:
    return DestinationTask(
        delivery_id=task.delivery_id, chain_id=task.chain_id, destination=task.destination,
        route=task.route, trigger=AttemptTrigger.RETRY, attempt=task.attempt + 1,
        not_before=rig.clock.now() + timedelta(seconds=after), event=task.event,
    )  # fmt: skip


class TestConcurrency:
    async def test_one_at_a_time_in_arrival_order(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=1)
        rig.dests.latency["dst_a"] = 0.5
        ids = rig.feed(20)
        await rig.clock.advance(30)
        assert [d for d, _ in rig.dests.started("dst_a")] == ids
        assert rig.dests.most_active["dst_a"] == 1
        starts = [s.at for s in rig.dests.starts]
        assert all(b - a >= 0.5 for a, b in itertools.pairwise(starts))
        assert rig.lanes.committable(P) == 20

    async def test_retries_rejoin_the_same_serial_order(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=1)
        rig.dests.latency["dst_a"] = 1.0
        first = [rig.task() for _ in range(6)]
        arrivals: list[tuple[str, int]] = []
        for i, task in enumerate(first):
            rig.submit(task)
            arrivals.append((task.delivery_id, 1))
            if i % 2 == 1:  # a retry of an earlier delivery arrives between first attempts
                retry = retry_of(first[i - 1], rig)
                rig.submit(retry)
                arrivals.append((retry.delivery_id, 2))
        await rig.clock.advance(60)
        assert rig.dests.started("dst_a") == arrivals
        assert rig.dests.most_active["dst_a"] == 1

    async def test_never_more_than_max_concurrency(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=4)
        rig.dests.latency["dst_a"] = 1.0
        ids = rig.feed(50)
        await rig.clock.advance(0)
        assert rig.dests.active["dst_a"] == 4
        await rig.clock.advance(20)
        assert rig.dests.most_active["dst_a"] == 4
        assert sorted(rig.dests.finished) == sorted(ids)
        assert [d for d, _ in rig.dests.started("dst_a")] == ids  # starts in arrival order

    async def test_a_hung_destination_delays_no_other(self) -> None:
        rig = Rig()
        rig.configs["dst_slow"] = LaneConfig(max_concurrency=1)
        gate = rig.dests.hang("dst_slow")
        stuck = rig.feed(1, "dst_slow")
        rig.feed(3, "dst_slow")
        fast = rig.feed(30, "dst_fast")  # the same partition, behind the hung destination
        await rig.clock.advance(0)
        assert rig.dests.finished == fast  # all of them at t=0, none waited
        assert {s.at for s in rig.dests.starts if s.destination == "dst_fast"} == {0.0}
        assert rig.dests.started("dst_slow") == [(stuck[0], 1)]
        assert rig.lanes.committable(P) == 0  # the hung record is not done: nothing past it
        gate.set()
        await rig.clock.advance(1)
        assert rig.lanes.committable(P) == 34


class TestRate:
    async def rate_over_a_minute(self, rate: Rate, *, retries: bool) -> int:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=64, rate=rate)
        tasks = [rig.task() for _ in range(2000)]
        for i, task in enumerate(tasks):
            rig.submit(retry_of(task, rig) if retries and i % 3 == 0 else task)
        await rig.clock.advance(60)
        return sum(1 for s in rig.dests.starts if s.at < 60)

    async def test_five_a_second_within_ten_percent_over_a_minute(self) -> None:
        started = await self.rate_over_a_minute(Rate(5, RatePeriod.SECOND), retries=True)
        assert 270 <= started <= 330

    async def test_per_minute_rate_within_ten_percent(self) -> None:
        started = await self.rate_over_a_minute(Rate(120, RatePeriod.MINUTE), retries=True)
        assert 108 <= started <= 132

    async def test_per_hour_rate_spreads_evenly(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(rate=Rate(60, RatePeriod.HOUR))
        rig.feed(10)
        await rig.clock.advance(300)
        assert [s.at for s in rig.dests.starts] == [0.0, 60.0, 120.0, 180.0, 240.0, 300.0]

    async def test_waits_are_counted(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(rate=Rate(1, RatePeriod.SECOND))
        rig.feed(3)
        await rig.clock.advance(5)
        assert rig.sample("lanes_rate_limited_waits_total") == 2
        assert (
            rig.registry.get_sample_value("hookbay_lanes_deliveries_total", {"outcome": "success"})
            == 3
        )

    async def test_a_rate_limited_lane_delays_no_other(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(rate=Rate(1, RatePeriod.MINUTE))
        rig.feed(5, "dst_a")
        other = rig.feed(5, "dst_b")
        await rig.clock.advance(0)
        assert [s.delivery_id for s in rig.dests.starts if s.destination == "dst_b"] == other


class TestNotBefore:
    async def test_a_retry_after_waits_beside_the_queue(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=1)
        waiting = retry_of(rig.task(), rig, after=30)
        rig.submit(waiting)
        later = rig.feed(3)
        await rig.clock.advance(29)
        assert [d for d, _ in rig.dests.started("dst_a")] == later
        await rig.clock.advance(1)
        assert rig.dests.starts[-1] == rig.dests.starts[-1].__class__(
            30.0, "dst_a", waiting.delivery_id, 2
        )


class TestHold:
    async def test_paused_starts_nothing_and_holds_everything(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = PAUSED
        rig.feed(25)
        await rig.clock.advance(60)
        assert rig.dests.starts == []
        assert rig.store.count("dst_a") == 25
        assert rig.lanes.committable(P) == 25  # held durably: the offsets may be committed
        snapshot = rig.lanes.snapshot("dst_a")
        assert snapshot is not None
        assert snapshot.held == 25
        assert snapshot.mode is LaneMode.HOLDING
        assert rig.sample("lanes_held_deliveries") == 25
        assert rig.sample("lanes_oldest_held_age_seconds") == 60

    async def test_resume_delivers_all_in_order_then_goes_live(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = PAUSED
        held = rig.feed(40)
        await rig.clock.advance(1)
        rig.configure("dst_a", LaneConfig(max_concurrency=1))
        newer = rig.feed(5)  # arrive during the drain: held behind, to keep the order
        await rig.clock.advance(10)
        assert [d for d, _ in rig.dests.started("dst_a")] == held + newer
        assert rig.store.count("dst_a") == 0
        snapshot = rig.lanes.snapshot("dst_a")
        assert snapshot is None or (snapshot.mode is LaneMode.LIVE and snapshot.held == 0)
        last = rig.feed(1)
        await rig.clock.advance(0)
        assert rig.dests.finished[-1] == last[0]

    async def test_resume_drains_at_the_destination_rate(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = PAUSED
        rig.feed(100)
        await rig.clock.advance(1)
        rig.configure("dst_a", LaneConfig(rate=Rate(2, RatePeriod.SECOND)))
        await rig.clock.advance(20)
        assert 40 <= len(rig.dests.starts) <= 44

    async def test_pause_mid_stream_holds_what_has_not_started(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=2)
        rig.dests.latency["dst_a"] = 1.0
        ids = rig.feed(10)
        await rig.clock.advance(0.5)
        rig.configure("dst_a", PAUSED)
        await rig.clock.advance(30)
        assert [d for d, _ in rig.dests.started("dst_a")] == ids[:2]  # the running two finish
        assert rig.store.count("dst_a") == 8
        rig.configure("dst_a", LaneConfig(max_concurrency=2))
        await rig.clock.advance(30)
        assert [d for d, _ in rig.dests.started("dst_a")] == ids

    async def test_pause_during_a_drain_keeps_the_order(self) -> None:
        rig = Rig(drain_window=4)
        rig.configs["dst_a"] = PAUSED
        rig.dests.latency["dst_a"] = 1.0
        ids = rig.feed(20)
        await rig.clock.advance(0)
        rig.configure("dst_a", LaneConfig(max_concurrency=1))
        await rig.clock.advance(2.5)
        rig.configure("dst_a", PAUSED)
        more = rig.feed(3)
        await rig.clock.advance(10)
        started = [d for d, _ in rig.dests.started("dst_a")]
        assert started == ids[:3]
        rig.configure("dst_a", LaneConfig(max_concurrency=1))
        await rig.clock.advance(60)
        assert [d for d, _ in rig.dests.started("dst_a")] == ids + more

    async def test_a_hold_store_error_is_retried_and_commits_wait(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = PAUSED
        rig.store.fail_writes = 3
        rig.feed(5)
        await rig.clock.advance(0)
        assert rig.lanes.committable(P) == 0
        await rig.clock.advance(10)
        assert rig.store.count("dst_a") == 5
        assert rig.lanes.committable(P) == 5

    async def test_disabled_holds_like_paused(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(state=DestinationState.DISABLED)
        rig.feed(3)
        await rig.clock.advance(1)
        assert rig.dests.starts == []
        assert rig.store.count("dst_a") == 3


class TestMemory:
    async def test_a_backlog_spills_to_the_hold_and_memory_stays_bounded(self) -> None:
        rig = Rig(max_buffered=10)
        rig.configs["dst_slow"] = LaneConfig(max_concurrency=1)
        rig.dests.latency["dst_slow"] = 1.0
        slow = rig.feed(50, "dst_slow")
        fast = rig.feed(5, "dst_fast")
        await rig.clock.advance(0)
        buffered = rig.sample("lanes_buffered")
        assert buffered is not None
        assert buffered <= 10
        assert rig.store.count("dst_slow") >= 40
        assert [s.delivery_id for s in rig.dests.starts if s.destination == "dst_fast"] == fast
        assert rig.lanes.committable(P) == 0  # the running slow task; the rest are held
        await rig.clock.advance(1)
        assert rig.lanes.committable(P) == 55
        await rig.clock.advance(60)
        assert [d for d, _ in rig.dests.started("dst_slow")] == slow
        assert rig.lanes.committable(P) == 55


class TestOffsets:
    async def test_a_record_with_no_task_or_several(self) -> None:
        rig = Rig()
        gate = rig.dests.hang("dst_b")
        rig.lanes.submit(P, 0, [])
        rig.lanes.submit(P, 1, [rig.task("dst_a"), rig.task("dst_b")])
        rig.lanes.submit(P, 2, [])
        await rig.clock.advance(0)
        assert rig.lanes.committable(P) == 1  # one of its two deliveries still runs
        gate.set()
        await rig.clock.advance(0)
        assert rig.lanes.committable(P) == 3

    async def test_partitions_are_tracked_apart(self) -> None:
        rig = Rig()
        rig.dests.hang("dst_a")
        rig.feed(1, "dst_a", partition=P)
        rig.feed(1, "dst_b", partition=Q)
        await rig.clock.advance(0)
        assert (rig.lanes.committable(P), rig.lanes.committable(Q)) == (0, 2)

    async def test_a_crashing_deliver_leaves_its_offset_uncommitted(self) -> None:
        rig = Rig()

        async def crash(task: DestinationTask) -> Delivered:
            raise RuntimeError("bug")

        lanes = Lanes(crash, rig.configs.get, rig.store, clock=rig.clock)
        lanes.submit(P, 0, [rig.task()])
        await settle()
        assert isinstance(lanes.crashed, RuntimeError)
        assert lanes.committable(P) == 0

    async def test_revoke_forgets_waiting_tasks_and_returns_the_offsets(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=1)
        rig.dests.latency["dst_a"] = 1.0
        ids = rig.feed(5)
        await rig.clock.advance(0)
        revoking = asyncio.create_task(rig.lanes.revoke([P], grace=5))
        await rig.clock.advance(1)
        assert await revoking == {P: 1}
        await rig.clock.advance(10)
        assert [d for d, _ in rig.dests.started("dst_a")] == ids[:1]


class TestLiveConfiguration:
    async def test_more_concurrency_applies_to_a_running_lane(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=1)
        rig.dests.latency["dst_a"] = 10.0
        rig.feed(10)
        await rig.clock.advance(1)
        assert rig.dests.active["dst_a"] == 1
        rig.configure("dst_a", LaneConfig(max_concurrency=5))
        await rig.clock.advance(0)
        assert rig.dests.active["dst_a"] == 5

    async def test_less_concurrency_starts_nothing_until_below(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(max_concurrency=4)
        rig.dests.latency["dst_a"] = 10.0
        rig.feed(10)
        await rig.clock.advance(1)
        rig.configure("dst_a", LaneConfig(max_concurrency=1))
        await rig.clock.advance(10)  # the four finish at t=10; one starts
        assert rig.dests.active["dst_a"] == 1
        assert len(rig.dests.starts) == 5

    async def test_a_new_rate_applies_at_once(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = LaneConfig(rate=Rate(1, RatePeriod.SECOND))
        rig.feed(200)
        await rig.clock.advance(10)
        before = len(rig.dests.starts)
        rig.configure("dst_a", LaneConfig(rate=Rate(10, RatePeriod.SECOND)))
        await rig.clock.advance(10)
        assert 10 <= before <= 11
        assert 95 <= len(rig.dests.starts) - before <= 110
        rig.configure("dst_a", LaneConfig(rate=None))
        await rig.clock.advance(0)
        assert len(rig.dests.starts) == 200


class TestHeldRetries:
    async def test_a_held_retry_keeps_its_not_before_when_drained(self) -> None:
        rig = Rig()
        rig.configs["dst_a"] = PAUSED
        waiting = retry_of(rig.task(), rig, after=100)
        rig.submit(waiting)
        others = rig.feed(3)
        await rig.clock.advance(1)
        rig.configure("dst_a", LaneConfig())
        await rig.clock.advance(1)
        assert [d for d, _ in rig.dests.started("dst_a")] == others
        await rig.clock.advance(98)
        assert rig.dests.starts[-1].delivery_id == waiting.delivery_id
        assert rig.dests.starts[-1].at == 100.0
        assert rig.store.count("dst_a") == 0


class TestRebalance:
    async def test_adopt_drains_what_another_process_held(self) -> None:
        rig = Rig()
        earlier = [rig.task("dst_a") for _ in range(5)]
        await rig.store.append(
            "dst_a", [encode_destination_task(t) for t in earlier], held_at=rig.clock.now()
        )
        await rig.lanes.adopt(lambda d: d == "dst_b")
        await rig.clock.advance(1)
        assert rig.dests.starts == []  # not this consumer's destination
        await rig.lanes.adopt(lambda d: True)
        newer = rig.feed(2, "dst_a")  # submitted after the adoption: behind the held ones
        await rig.clock.advance(1)
        assert [d for d, _ in rig.dests.started("dst_a")] == [
            t.delivery_id for t in earlier
        ] + newer

    async def test_revoke_stops_draining_what_is_no_longer_owned(self) -> None:
        rig = Rig(drain_window=2)
        rig.configs["dst_a"] = PAUSED
        rig.dests.latency["dst_a"] = 1.0
        ids = rig.feed(10)
        await rig.clock.advance(0)
        rig.configure("dst_a", LaneConfig(max_concurrency=1))
        await rig.clock.advance(0.5)
        revoking = asyncio.create_task(rig.lanes.revoke([P], grace=5, owns=lambda d: False))
        await rig.clock.advance(5)
        assert await revoking == {P: 10}
        await rig.clock.advance(30)
        assert [d for d, _ in rig.dests.started("dst_a")] == ids[:1]
        assert rig.store.count("dst_a") == 9  # left for the next owner to drain
