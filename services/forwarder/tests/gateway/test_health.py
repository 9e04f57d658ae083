"""Breaker transitions become the destination's stored state (through the owner's pause and
resume code path, published to the change log), and the change log moves the breakers of
other replicas, and open and resolve the owner's issues with one notification per issue
transition: in-memory destinations, store, change log and issues, on a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookbay_common.alerts import IssueTracker
from hookbay_common.configlog import ConfigPublisher, decode_change
from hookbay_common.destination_state import DestinationStates
from hookbay_common.models import (
    Breaker,
    BreakerState,
    Destination,
    DestinationState,
    IssueStatus,
    IssueType,
    Notified,
    StateReason,
)
from hookbay_common.secrets_box import SecretBox
from hookbay_forwarder.gateway import BreakerState as LaneBreakerState
from hookbay_forwarder.gateway import Lanes, ManualClock
from hookbay_forwarder.gateway.config import lane_config
from hookbay_forwarder.gateway.health import DestinationHealth
from tests.support.factories import (
    TEST_SECRET_KEY,
    create_destination,
    create_destination_task,
    create_event,
)
from tests.support.issues import MemoryIssues, Told
from tests.support.lanes import FakeDestinations, MemoryDestinations, MemoryHoldStore

P = ("deliveries", 0)
BOX = SecretBox(TEST_SECRET_KEY)
TRIP = Breaker(consecutive=3, cooldown_s=10, max_cooldown_s=40, disable_after_s=600)

RIGS: list[Replica] = []


@pytest.fixture(autouse=True)
async def _close_rigs() -> AsyncIterator[None]:
    yield
    while RIGS:
        replica = RIGS.pop()
        await replica.lanes.close(0)
        await replica.health.close(0)


class ChangeLog:
    """The configuration change log in memory: what was published, in order."""

    def __init__(self) -> None:
        self.published: list[Destination] = []

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        change = decode_change(value, BOX)
        assert change.destination is not None
        self.published.append(change.destination)

    def states(self) -> list[tuple[DestinationState, StateReason | None]]:
        return [(d.state, d.state_reason) for d in self.published]


class Replica:
    """One forwarder's lanes and destination health over the shared store and change log."""

    def __init__(
        self, store: MemoryDestinations, log: ChangeLog, clock: ManualClock,
        issues: MemoryIssues | None = None, told: Told | None = None, **lanes: Any,
    ) -> None:  # fmt: skip
        RIGS.append(self)
        self.clock = clock
        self.store = store
        self.dests = FakeDestinations(clock)
        self.held = MemoryHoldStore()
        states = DestinationStates(store, ConfigPublisher(log.send, "config", BOX))
        tracker = IssueTracker(
            issues or MemoryIssues(), told or Told(),  # type: ignore[arg-type]
            now=clock.now,
        )  # fmt: skip
        self.health = DestinationHealth(store, states, issues=tracker, clock=clock)
        self.lanes = Lanes(
            self.dests.deliver, lambda d: lane_config(store.destination_by_id(d)), self.held,
            clock=clock, on_transition=self.health.transitioned, **lanes,
        )  # fmt: skip
        self.offset = 0
        self.events: list[str] = []
        """The ids of the events fed, in order."""

    def feed(self, destination: Destination, count: int) -> list[str]:
        ids = []
        for _ in range(count):
            event = create_event(created_at=self.clock.now())
            self.events.append(event.id)
            task = create_destination_task(event=event, destination=destination.id)
            self.lanes.submit(P, self.offset, [task])
            self.offset += 1
            ids.append(task.delivery_id)
        return ids

    def follow(self, destination: Destination) -> None:
        """What the forwarder does with a change the routing view applied."""
        config = lane_config(destination)
        assert config is not None
        self.lanes.configure(destination.id, config)
        self.health.changed(destination, self.lanes)

    def started(self, destination: Destination) -> list[str]:
        return [d for d, _ in self.dests.started(destination.id)]


class World:
    def __init__(self, **destination: Any) -> None:
        self.clock = ManualClock()
        self.store = MemoryDestinations()
        self.log = ChangeLog()
        self.issues = MemoryIssues()
        self.told = Told()
        fields: dict[str, Any] = {"max_concurrency": 1, "breaker": TRIP, **destination}
        self.billing = self.store.add(create_destination(**fields))
        self.one = Replica(self.store, self.log, self.clock, self.issues, self.told)

    @property
    def stored(self) -> Destination:
        found = self.store.destination_by_id(self.billing.id)
        assert found is not None
        return found

    async def settle(self, seconds: float = 0) -> None:
        await self.clock.advance(seconds)
        await self.one.health.idle()


async def failing(world: World, count: int = 10, status: int = 503) -> list[str]:
    world.one.dests.answers[world.billing.id] = status
    ids = world.one.feed(world.billing, count)
    await world.settle()
    return ids


class TestStoredState:
    async def test_opened_is_paused_by_the_breaker_with_its_state(self) -> None:
        world = World()
        await failing(world)
        stored = world.stored
        assert (stored.state, stored.state_reason) == (
            DestinationState.PAUSED, StateReason.BREAKER,
        )  # fmt: skip
        assert stored.breaker.state is BreakerState.OPEN
        assert stored.breaker.opened_at == world.clock.now()
        assert stored.breaker.next_probe_at is not None
        assert (stored.breaker.next_probe_at - world.clock.now()).total_seconds() == 10
        assert stored.breaker.consecutive == 3  # the owner's thresholds are left alone
        assert world.log.states() == [(DestinationState.PAUSED, StateReason.BREAKER)]

    async def test_a_failed_probe_writes_the_next_probe_time(self) -> None:
        world = World()
        await failing(world)
        await world.settle(10)
        assert world.stored.breaker.next_probe_at is not None
        assert (world.stored.breaker.next_probe_at - world.clock.now()).total_seconds() == 20

    async def test_closed_is_active_again(self) -> None:
        world = World()
        ids = await failing(world)
        world.one.dests.answers[world.billing.id] = 200
        await world.settle(10)
        stored = world.stored
        assert (stored.state, stored.state_reason) == (DestinationState.ACTIVE, None)
        assert (stored.breaker.state, stored.breaker.opened_at) == (BreakerState.CLOSED, None)
        assert world.log.states()[-1] == (DestinationState.ACTIVE, None)
        assert world.one.started(world.billing) == ids

    async def test_410_is_disabled_gone(self) -> None:
        world = World()
        await failing(world, status=410)
        stored = world.stored
        assert (stored.state, stored.state_reason) == (DestinationState.DISABLED, StateReason.GONE)

    async def test_open_too_long_is_disabled_for_sustained_failure(self) -> None:
        world = World()
        await failing(world)
        await world.settle(700)
        stored = world.stored
        assert (stored.state, stored.state_reason) == (
            DestinationState.DISABLED, StateReason.SUSTAINED_FAILURE,
        )  # fmt: skip

    async def test_the_owners_pause_is_never_overridden(self) -> None:
        world = World()
        await failing(world)
        owner = DestinationStates(world.store)
        await owner.pause(world.billing.username, world.billing.name)
        world.one.dests.answers[world.billing.id] = 200
        world.one.lanes.configure(world.billing.id, lane_config(world.stored))  # type: ignore[arg-type]
        await world.settle(60)
        stored = world.stored
        assert (stored.state, stored.state_reason) == (DestinationState.PAUSED, StateReason.MANUAL)

    async def test_a_store_error_is_tried_again(self) -> None:
        world = World()
        world.store.fail_writes = 2
        world.one.dests.answers[world.billing.id] = 503
        world.one.feed(world.billing, 10)
        await world.clock.advance(5.9)  # tried at 0, 1 (the back-off: 1 s, then 5 s)
        assert world.stored.state is DestinationState.ACTIVE
        await world.clock.advance(0.1)
        assert world.stored.state_reason is StateReason.BREAKER


class TestChangeLog:
    async def test_its_own_echo_changes_nothing(self) -> None:
        world = World()
        await failing(world)
        world.one.dests.answers[world.billing.id] = 200
        await world.settle(10)  # closed, then written active
        world.one.dests.answers[world.billing.id] = 503
        world.one.feed(world.billing, 3)
        await world.settle()  # opened again
        for echo in world.log.published:  # arriving late, the "active" among them
            world.one.follow(echo)
        assert world.one.lanes.breakers.get(world.billing.id).state is LaneBreakerState.OPEN

    async def test_the_owners_resume_resets_the_breaker_and_delivers_what_was_held(self) -> None:
        world = World()
        ids = await failing(world, status=410)
        world.one.dests.answers[world.billing.id] = 200
        resumed = await DestinationStates(world.store).resume(
            world.billing.username, world.billing.name
        )
        assert resumed.breaker.state is BreakerState.CLOSED
        world.one.follow(resumed)
        await world.settle(1)
        assert world.one.started(world.billing) == ids
        assert world.one.lanes.breakers.get(world.billing.id).state is LaneBreakerState.CLOSED

    async def test_another_replica_learns_it_and_probes_when_it_was_due(self) -> None:
        world = World()
        await failing(world, count=3)
        two = Replica(world.store, world.log, world.clock)
        for change in world.log.published:
            two.follow(change)
        breaker = two.lanes.breakers.get(world.billing.id)
        assert breaker.state is LaneBreakerState.OPEN
        assert breaker.next_probe_at == world.stored.breaker.next_probe_at
        two.dests.answers[world.billing.id] = 200
        later = two.feed(world.billing, 4)  # the destination's tasks go to this one now
        await world.clock.advance(9.9)
        assert two.started(world.billing) == []  # held until the probe's time
        await world.clock.advance(0.1)
        await two.health.idle()
        assert two.started(world.billing) == later
        assert world.stored.state is DestinationState.ACTIVE


class TestIssues:
    async def test_opening_opens_a_delivery_issue_told_once(self) -> None:
        world = World()
        await failing(world)
        await world.settle(30)  # two failed probes: counted on the issue, told nothing more
        assert world.told.kinds() == [("delivery", Notified.OPENED)]
        [issue] = world.issues.by_id.values()
        assert (issue.type, issue.status, issue.destination, issue.reason) == (
            IssueType.DELIVERY, IssueStatus.OPEN, world.billing.name, "breaker",
        )  # fmt: skip
        assert issue.count == 3

    async def test_the_issue_names_the_attempt_that_tripped_then_the_failed_probe(self) -> None:
        world = World()
        await failing(world)  # one at a time: the third tripped, the fourth is the first probe
        [issue] = world.issues.by_id.values()
        assert issue.sample_event_id == world.one.events[2]
        await world.settle(10)
        [issue] = world.issues.by_id.values()
        assert (issue.count, issue.sample_event_id) == (2, world.one.events[3])
        assert world.told.notifications[0][1].issue.sample_event_id == world.one.events[2]

    async def test_a_disabled_issue_names_the_attempt_answered_410(self) -> None:
        world = World()
        await failing(world, status=410)
        [issue] = world.issues.by_id.values()
        assert (issue.type, issue.sample_event_id) == (IssueType.DISABLED, world.one.events[0])

    async def test_closing_resolves_it(self) -> None:
        world = World()
        await failing(world)
        world.one.dests.answers[world.billing.id] = 200
        await world.settle(10)
        assert world.told.kinds() == [
            ("delivery", Notified.OPENED),
            ("delivery", Notified.RESOLVED),
        ]
        [issue] = world.issues.by_id.values()
        assert issue.status is IssueStatus.RESOLVED

    async def test_disabled_opens_a_disabled_issue(self) -> None:
        world = World()
        await failing(world, status=410)
        assert world.told.kinds() == [("disabled", Notified.OPENED)]
        [issue] = world.issues.by_id.values()
        assert (issue.type, issue.reason) == (IssueType.DISABLED, "gone")

    async def test_sustained_failure_adds_a_disabled_issue_to_the_delivery_one(self) -> None:
        world = World()
        await failing(world)
        await world.settle(700)
        assert world.told.kinds() == [
            ("delivery", Notified.OPENED), ("disabled", Notified.OPENED),
        ]  # fmt: skip
        disabled = [i for i in world.issues.by_id.values() if i.type is IssueType.DISABLED]
        assert [i.reason for i in disabled] == ["sustained_failure"]

    async def test_the_owners_resume_resolves_them(self) -> None:
        world = World()
        await failing(world, status=410)
        resumed = await DestinationStates(world.store).resume(
            world.billing.username, world.billing.name
        )
        world.one.follow(resumed)
        await world.settle()
        assert world.told.kinds() == [
            ("disabled", Notified.OPENED),
            ("disabled", Notified.RESOLVED),
        ]
        world.one.follow(resumed)  # the same change again (a reconciliation): nothing more
        await world.settle()
        assert len(world.told.notifications) == 2
