"""The lanes with their destinations' circuit breakers, on a manual clock with in-memory
destinations and hold store: every time asserted is simulated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookbay_forwarder.gateway import (
    BreakerSettings,
    BreakerState,
    LaneConfig,
    LaneMode,
    Lanes,
    ManualClock,
    Rate,
    RatePeriod,
    Transition,
    TransitionKind,
)
from tests.support.factories import create_destination_task, create_event
from tests.support.lanes import FakeDestinations, MemoryHoldStore

P = ("deliveries", 0)
TRIP = BreakerSettings(consecutive=3, cooldown_s=10, max_cooldown_s=40, disable_after_s=600)
"""Three failures in a row open it; probes after 10 s, 20 s, 40 s, 40 s, ...; disabled after
ten minutes open."""

RIGS: list[Rig] = []


@pytest.fixture(autouse=True)
async def _close_rigs() -> AsyncIterator[None]:
    yield
    while RIGS:
        await RIGS.pop().lanes.close(0)


class Rig:
    """Lanes with breakers wired to fakes; every destination delivers one at a time with the
    ``TRIP`` thresholds unless configured otherwise."""

    def __init__(self, **config: Any) -> None:
        RIGS.append(self)
        self.clock = ManualClock()
        self.dests = FakeDestinations(self.clock)
        self.store = MemoryHoldStore()
        self.config = LaneConfig(**{"max_concurrency": 1, "breaker": TRIP, **config})
        self.transitions: list[Transition] = []
        self.lanes = Lanes(
            self.dests.deliver, lambda _: self.config, self.store, clock=self.clock,
            on_transition=self.transitions.append,
        )  # fmt: skip
        self.offset = 0

    def feed(self, count: int, destination: str = "dst_a") -> list[str]:
        ids = []
        for _ in range(count):
            event = create_event(created_at=self.clock.now())
            task = create_destination_task(event=event, destination=destination)
            self.lanes.submit(P, self.offset, [task])
            self.offset += 1
            ids.append(task.delivery_id)
        return ids

    def started(self, destination: str = "dst_a") -> list[str]:
        return [d for d, _ in self.dests.started(destination)]

    def kinds(self) -> list[TransitionKind]:
        return [t.kind for t in self.transitions]

    def state(self, destination: str = "dst_a") -> BreakerState:
        return self.lanes.breakers.get(destination).state


async def opened(rig: Rig, count: int = 10, *, within: float = 0) -> list[str]:
    """``count`` tasks to a destination answering 503: the first three open the breaker."""
    rig.dests.answers["dst_a"] = 503
    ids = rig.feed(count)
    await rig.clock.advance(within)
    assert rig.kinds() == [TransitionKind.OPENED]
    return ids


class TestOpening:
    async def test_failures_in_a_row_open_it_and_the_next_tasks_are_held(self) -> None:
        rig = Rig()
        ids = await opened(rig)
        await rig.clock.advance(9.9)
        assert rig.started() == ids[:3]  # not one attempt while open
        assert rig.store.count("dst_a") == 7
        assert rig.lanes.committable(P) == 10  # held durably: the offsets may be committed
        snapshot = rig.lanes.snapshot("dst_a")
        assert snapshot is not None
        assert snapshot.mode is LaneMode.HOLDING

    async def test_tasks_arriving_while_open_are_held_behind(self) -> None:
        rig = Rig()
        await opened(rig)
        rig.feed(5)
        await rig.clock.advance(5)
        assert len(rig.started()) == 3
        assert rig.store.count("dst_a") == 12

    async def test_a_neutral_4xx_neither_opens_nor_closes(self) -> None:
        rig = Rig()
        rig.dests.answers["dst_a"] = 400
        ids = rig.feed(10)
        await rig.clock.advance(1)
        assert rig.started() == ids  # ten bad events, a healthy destination
        assert rig.transitions == []
        assert rig.state() is BreakerState.CLOSED

    async def test_another_destination_keeps_delivering_while_one_is_open(self) -> None:
        rig = Rig()
        await opened(rig)
        other = rig.feed(20, "dst_b")
        await rig.clock.advance(5)
        assert rig.started("dst_b") == other
        assert rig.state("dst_b") is BreakerState.CLOSED
        assert rig.store.count("dst_b") == 0


class TestProbe:
    async def test_one_probe_after_the_cool_down_the_oldest_held(self) -> None:
        rig = Rig()
        ids = await opened(rig)
        await rig.clock.advance(10)
        assert rig.started() == ids[:4]  # exactly one more: the oldest held
        assert rig.dests.starts[-1].at == 10.0
        assert rig.kinds() == [
            TransitionKind.OPENED, TransitionKind.PROBING, TransitionKind.REOPENED,
        ]  # fmt: skip

    async def test_its_success_closes_and_drains_every_held_task_in_order(self) -> None:
        rig = Rig()
        ids = await opened(rig)
        later = rig.feed(3)
        rig.dests.answers["dst_a"] = 200
        await rig.clock.advance(10)
        assert rig.started() == ids + later
        assert rig.kinds()[-1] is TransitionKind.CLOSED
        assert rig.store.count("dst_a") == 0
        newest = rig.feed(1)
        await rig.clock.advance(0)
        assert rig.started()[-1] == newest[0]  # live again

    async def test_the_drain_after_closing_keeps_the_destination_rate(self) -> None:
        rig = Rig(max_concurrency=4, rate=Rate(2, RatePeriod.SECOND))
        ids = await opened(rig, count=43, within=0.5)  # t=0, 0, 0.5: opened at 0.5
        rig.dests.answers["dst_a"] = 200
        await rig.clock.advance(10)  # t=10.5: the probe closes it
        await rig.clock.advance(10)
        assert 20 <= len(rig.started()) - 4 <= 23  # 2 a second (plus a burst), not all at once
        await rig.clock.advance(30)
        assert rig.started() == ids  # started in order

    async def test_nothing_else_goes_out_while_the_probe_runs(self) -> None:
        rig = Rig(max_concurrency=4)
        ids = await opened(rig, count=20)
        rig.dests.answers["dst_a"] = 200
        rig.dests.latency["dst_a"] = 2.0
        first = len(rig.started())  # up to four were running when it opened
        await rig.clock.advance(11)  # the probe went out at t=10 and runs until t=12
        assert len(rig.started()) == first + 1
        assert rig.dests.most_active["dst_a"] == 1
        await rig.clock.advance(1)  # closed at t=12: four at a time again
        assert rig.dests.active["dst_a"] == 4
        await rig.clock.advance(20)
        assert sorted(rig.started()) == sorted(ids)

    async def test_a_failed_probe_reopens_with_twice_the_cool_down(self) -> None:
        rig = Rig()
        ids = await opened(rig)
        await rig.clock.advance(10)  # probe 1 fails: next in 20 s
        await rig.clock.advance(19.9)
        assert len(rig.started()) == 4
        await rig.clock.advance(0.1)  # probe 2 at t=30 fails: next in 40 s (the maximum)
        assert len(rig.started()) == 5
        await rig.clock.advance(40)
        assert [s.at for s in rig.dests.starts[3:]] == [10.0, 30.0, 70.0]
        reopened = [t for t in rig.transitions if t.kind is TransitionKind.REOPENED]
        assert [t.cooldown_s for t in reopened] == [20.0, 40.0, 40.0]
        rig.dests.answers["dst_a"] = 200
        await rig.clock.advance(40)
        assert rig.started() == ids  # each once, in order: the failed probes were the oldest

    async def test_the_probe_respects_retry_after(self) -> None:
        rig = Rig()
        rig.dests.retry_after["dst_a"] = 25
        await opened(rig)
        await rig.clock.advance(24.9)
        assert len(rig.started()) == 3
        await rig.clock.advance(0.1)
        assert len(rig.started()) == 4

    async def test_opened_with_nothing_held_the_next_task_is_the_probe(self) -> None:
        rig = Rig()
        await opened(rig, count=3)
        await rig.clock.advance(30)
        assert len(rig.started()) == 3  # nothing to probe with
        rig.dests.answers["dst_a"] = 200
        later = rig.feed(4)
        await rig.clock.advance(0)
        assert rig.started()[3:] == later
        assert rig.state() is BreakerState.CLOSED


class EarlyClock(ManualClock):
    """Wakes every sleeper a microsecond before its time, as an event loop may (it runs a timer
    up to its clock's resolution early)."""

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds - 1e-6 if seconds > 1e-6 else seconds)


class TestEarlyWake:
    async def test_a_probe_timer_woken_early_still_sends_the_probe(self) -> None:
        rig = Rig()
        rig.clock = EarlyClock()
        rig.dests = FakeDestinations(rig.clock)
        rig.lanes = Lanes(
            rig.dests.deliver, lambda _: rig.config, rig.store, clock=rig.clock,
            on_transition=rig.transitions.append,
        )  # fmt: skip
        ids = await opened(rig)
        rig.dests.answers["dst_a"] = 200
        await rig.clock.advance(11)
        assert rig.state() is BreakerState.CLOSED
        assert rig.started() == ids  # the probe, then every held task


class TestDisabled:
    async def test_410_disables_and_holds(self) -> None:
        rig = Rig()
        rig.dests.answers["dst_a"] = 410
        ids = rig.feed(5)
        await rig.clock.advance(0)
        assert rig.started() == ids[:1]
        assert rig.kinds() == [TransitionKind.DISABLED]
        assert rig.transitions[0].reason == "gone"
        await rig.clock.advance(3600)
        assert rig.started() == ids[:1]  # no probe: disabled until the owner resumes it
        assert rig.store.count("dst_a") == 4

    async def test_open_too_long_disables_from_the_probe_timer(self) -> None:
        rig = Rig()
        await opened(rig)
        await rig.clock.advance(700)
        disabled = [t for t in rig.transitions if t.kind is TransitionKind.DISABLED]
        assert [t.reason for t in disabled] == ["sustained_failure"]
        attempts = len(rig.started())
        await rig.clock.advance(3600)
        assert len(rig.started()) == attempts

    async def test_the_owner_resuming_resets_it_and_the_held_tasks_go_out_in_order(self) -> None:
        rig = Rig()
        rig.dests.answers["dst_a"] = 410
        ids = rig.feed(5)
        await rig.clock.advance(0)
        rig.dests.answers["dst_a"] = 200
        rig.lanes.reset_breaker("dst_a")
        await rig.clock.advance(1)
        assert rig.started() == ids[:1] + ids[1:]
        assert rig.state() is BreakerState.CLOSED
        assert rig.kinds() == [TransitionKind.DISABLED]  # the owner's write says it already


class TestDeleted:
    async def test_a_deleted_destination_forgets_its_breaker_and_drains(self) -> None:
        rig = Rig()
        ids = await opened(rig)
        rig.dests.answers["dst_a"] = 200
        rig.lanes.forget_breaker("dst_a")
        await rig.clock.advance(1)
        assert rig.started() == ids
