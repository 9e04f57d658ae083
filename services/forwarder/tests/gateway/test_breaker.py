"""The breaker's timing on a manual clock: nothing sleeps, every time asserted is simulated."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from hookbay_common.models import Breaker as BreakerModel
from hookbay_forwarder.gateway.breaker import (
    Action,
    Breaker,
    Breakers,
    BreakerSettings,
    BreakerState,
    Outcome,
    Transition,
    TransitionKind,
    Window,
    bucket_width,
    classify,
)
from hookbay_forwarder.gateway.clock import ManualClock
from hookbay_forwarder.metrics import BreakerMetrics


class TickClock(ManualClock):
    """``ManualClock`` moved synchronously: the breaker never sleeps, so ticking a simulated
    day second by second needs no event loop round per second."""

    def tick(self, seconds: float) -> None:
        self._t += seconds

    async def advance(self, seconds: float) -> None:
        self.tick(seconds)


class Recorded:
    def __init__(self) -> None:
        self.transitions: list[Transition] = []

    def __call__(self, transition: Transition) -> None:
        self.transitions.append(transition)

    @property
    def kinds(self) -> list[TransitionKind]:
        return [t.kind for t in self.transitions]


def create_breaker(
    settings: BreakerSettings | None = None,
) -> tuple[Breaker, TickClock, Recorded]:
    clock, seen = TickClock(), Recorded()
    return Breaker("dst-a", settings, clock=clock, on_transition=seen), clock, seen


async def attempts(breaker: Breaker, clock: TickClock, statuses: Sequence[int | None]) -> None:
    """One attempt a second, each answered with the next status."""
    for status in statuses:
        permit = breaker.admit()
        assert permit is not None
        breaker.record(permit, status)
        await clock.advance(1)


async def trip(breaker: Breaker, clock: TickClock) -> None:
    await attempts(breaker, clock, [503] * breaker.settings.min_attempts)
    assert breaker.state is BreakerState.OPEN


async def probes_within(breaker: Breaker, clock: TickClock, seconds: int) -> list[float]:
    """Ask to deliver every second for ``seconds``; the times a probe was admitted (each
    fails with a 503)."""
    start, admitted = clock.monotonic(), []
    for _ in range(seconds):
        permit = breaker.admit()
        if permit is not None:
            assert permit.probe
            admitted.append(clock.monotonic() - start)
            breaker.record(permit, 503)
        await clock.advance(1)
    return admitted


class TestClassify:
    @pytest.mark.parametrize(
        ("status", "outcome"),
        [
            (None, Outcome.FAILURE), (500, Outcome.FAILURE), (503, Outcome.FAILURE),
            (429, Outcome.FAILURE), (408, Outcome.FAILURE), (410, Outcome.GONE),
            (400, Outcome.NEUTRAL), (404, Outcome.NEUTRAL), (422, Outcome.NEUTRAL),
            (200, Outcome.SUCCESS), (204, Outcome.SUCCESS), (301, Outcome.SUCCESS),
        ],
    )  # fmt: skip
    def test_what_counts(self, status: int | None, outcome: Outcome) -> None:
        assert classify(status) is outcome


class TestTrip:
    async def test_opens_at_the_failure_share_within_the_window(self) -> None:
        breaker, clock, seen = create_breaker()
        await attempts(breaker, clock, [200, 200, 200] + [503] * 6)
        assert breaker.state == "closed"  # 9 attempts: below min_attempts
        await attempts(breaker, clock, [503])  # 10 attempts, 7 failed: 70 %
        assert breaker.state == "open"
        assert seen.kinds == [TransitionKind.OPENED]
        opened = seen.transitions[0]
        assert (opened.action, opened.reason, opened.cooldown_s) == (Action.PAUSE, "breaker", 30)
        assert opened.next_probe_at == clock.now() - timedelta(seconds=1) + timedelta(seconds=30)
        assert breaker.admit() is None

    async def test_failures_older_than_the_window_do_not_count(self) -> None:
        breaker, clock, _ = create_breaker(BreakerSettings(window_s=10, min_attempts=5))
        await attempts(breaker, clock, [503] * 4)
        await clock.advance(20)
        await attempts(breaker, clock, [200, 200, 503])
        assert breaker.state is BreakerState.CLOSED

    async def test_below_the_share_stays_closed(self) -> None:
        breaker, clock, _ = create_breaker()
        await attempts(breaker, clock, [503, 200, 503, 200] * 10)
        assert breaker.state is BreakerState.CLOSED

    async def test_consecutive_failures_trip_whatever_the_share(self) -> None:
        breaker, clock, seen = create_breaker(BreakerSettings(window_s=10, consecutive=20))
        # one attempt every 5 s: the window never holds min_attempts
        for _ in range(19):
            permit = breaker.admit()
            assert permit is not None
            breaker.record(permit, None)
            await clock.advance(5)
        assert breaker.state is BreakerState.CLOSED
        permit = breaker.admit()
        assert permit is not None
        breaker.record(permit, None)
        assert seen.kinds == [TransitionKind.OPENED]

    async def test_other_4xx_never_trip(self) -> None:
        breaker, clock, _ = create_breaker()
        await attempts(breaker, clock, [400, 404, 422, 401] * 10)
        assert breaker.state is BreakerState.CLOSED

    async def test_a_success_ends_the_run_of_consecutive_failures(self) -> None:
        breaker, clock, _ = create_breaker(BreakerSettings(window_s=1, consecutive=5))
        await attempts(breaker, clock, [503] * 4 + [200] + [503] * 4)
        assert breaker.state is BreakerState.CLOSED

    async def test_a_429_retry_after_lengthens_the_cool_down(self) -> None:
        breaker, _, seen = create_breaker(BreakerSettings(consecutive=1))
        permit = breaker.admit()
        assert permit is not None
        breaker.record(permit, 429, retry_after_s=300)
        assert seen.transitions[-1].cooldown_s == 300
        assert breaker.probe_in() == 300


class TestWindow:
    async def test_memory_is_bounded_by_buckets_not_attempts(self) -> None:
        """1,024 results a second for five minutes: the window keeps one bucket per second of
        its 120 s, and counts exactly the results of the last 120 s."""
        breaker, clock, seen = create_breaker(BreakerSettings(min_attempts=1_000_000))
        for _ in range(300):
            for n in range(1024):
                permit = breaker.admit()
                assert permit is not None
                breaker.record(permit, 503 if n % 2 else 200)
                clock.tick(1 / 1024)  # exact in binary: bucket edges fall on whole seconds
        window = breaker.window
        assert window.buckets == 120
        assert (window.total, window.failures) == (120 * 1024, 60 * 1024)
        assert (breaker.state, seen.kinds) == (BreakerState.CLOSED, [])

    def test_counts_equal_an_exact_window_on_whole_seconds(self) -> None:
        """Results at whole seconds, several in some seconds, none in others: after each, the
        bucketed counts are those of every result kept with its time (what the trip judges)."""
        rng, clock, window = random.Random(7), TickClock(), Window()
        exact: list[tuple[float, bool]] = []
        for _ in range(5000):
            clock.tick(rng.choice([0, 0, 1, 1, 2, 5]))
            now, failed = clock.monotonic(), rng.random() < 0.6
            window.add(now, failed, 30)
            exact = [(t, f) for t, f in [*exact, (now, failed)] if t > now - 30]
            assert (window.total, window.failures) == (len(exact), sum(f for _, f in exact))

    async def test_a_long_window_is_divided_into_at_most_120_buckets(self) -> None:
        breaker, clock, _ = create_breaker(BreakerSettings(window_s=86_400, min_attempts=10_000))
        assert bucket_width(86_400) == 720
        for _ in range(2 * 86_400 // 60):  # one result a minute for two days
            permit = breaker.admit()
            assert permit is not None
            breaker.record(permit, 200)
            clock.tick(60)
        assert breaker.window.buckets <= 121

    def test_a_bucket_leaves_when_its_start_is_a_window_old(self) -> None:
        window, clock = Window(), TickClock()
        window.add(clock.monotonic(), True, 10)  # bucket [0, 1)
        clock.tick(0.5)
        window.add(clock.monotonic(), True, 10)  # the same bucket
        clock.tick(3)
        window.add(clock.monotonic(), False, 10)  # bucket [3, 4)
        assert (window.buckets, window.total, window.failures) == (2, 3, 2)
        clock.tick(6.4)  # 9.9: the first bucket's start is not yet 10 s old
        window.expire(clock.monotonic(), 10)
        assert (window.buckets, window.total, window.failures) == (2, 3, 2)
        clock.tick(0.1)  # 10.0
        window.expire(clock.monotonic(), 10)
        assert (window.buckets, window.total, window.failures) == (1, 1, 0)
        clock.tick(3)  # 13.0: the second bucket's start is 10 s old
        window.expire(clock.monotonic(), 10)
        assert (window.buckets, window.total, window.failures) == (0, 0, 0)

    async def test_expired_buckets_do_not_count_towards_a_trip(self) -> None:
        """Nine failures, then 15 s later (past the 10 s window) nine successes and one
        failure: 10 % of ten, not 50 % of twenty."""
        breaker, clock, _ = create_breaker(BreakerSettings(window_s=10, min_attempts=10))
        await attempts(breaker, clock, [503] * 9)
        assert breaker.window.total == 9
        await clock.advance(15)
        await attempts(breaker, clock, [200] * 9 + [503])
        assert breaker.state is BreakerState.CLOSED
        assert (breaker.window.total, breaker.window.failures) == (10, 1)


class TestCause:
    def record(self, breaker: Breaker, status: int, event_id: str) -> None:
        permit = breaker.admit()
        assert permit is not None
        breaker.record(permit, status, event_id=event_id)

    async def test_the_attempt_that_trips_is_named(self) -> None:
        breaker, _, seen = create_breaker(BreakerSettings(consecutive=3))
        for n in range(3):
            self.record(breaker, 503, f"evt_{n}")
        assert [(t.kind, t.event_id) for t in seen.transitions] == [
            (TransitionKind.OPENED, "evt_2"),
        ]  # fmt: skip

    async def test_the_failed_probe_and_the_410_are_named(self) -> None:
        breaker, clock, seen = create_breaker(BreakerSettings(consecutive=1, cooldown_s=10))
        self.record(breaker, 503, "evt_trip")
        await clock.advance(10)
        self.record(breaker, 503, "evt_probe")
        await clock.advance(20)
        self.record(breaker, 410, "evt_gone")
        named = [(t.kind, t.event_id) for t in seen.transitions if t.kind != "probing"]
        assert named == [
            (TransitionKind.OPENED, "evt_trip"), (TransitionKind.REOPENED, "evt_probe"),
            (TransitionKind.DISABLED, "evt_gone"),
        ]  # fmt: skip

    async def test_sustained_failure_names_the_last_failed_probe(self) -> None:
        settings = BreakerSettings(consecutive=1, cooldown_s=10, max_cooldown_s=10,
                                   disable_after_s=60)  # fmt: skip
        breaker, clock, seen = create_breaker(settings)
        self.record(breaker, 503, "evt_trip")
        for n in range(5):
            await clock.advance(10)
            self.record(breaker, 503, f"evt_probe_{n}")
        await clock.advance(10)
        breaker.poll()
        assert (seen.transitions[-1].kind, seen.transitions[-1].event_id) == (
            TransitionKind.DISABLED, "evt_probe_4",
        )  # fmt: skip

    async def test_a_closing_forgets_the_cause(self) -> None:
        breaker, clock, seen = create_breaker(BreakerSettings(consecutive=1, cooldown_s=10))
        self.record(breaker, 503, "evt_trip")
        await clock.advance(10)
        self.record(breaker, 200, "evt_ok")
        assert seen.transitions[-1].kind is TransitionKind.CLOSED
        permit = breaker.admit()
        assert permit is not None
        breaker.record(permit, 503)  # an attempt that names no event
        assert (seen.transitions[-1].kind, seen.transitions[-1].event_id) == (
            TransitionKind.OPENED, None,
        )  # fmt: skip


class TestOpen:
    async def test_at_most_one_probe_per_cool_down_growing_to_the_cap(self) -> None:
        breaker, clock, seen = create_breaker()
        await trip(breaker, clock)
        admitted = await probes_within(breaker, clock, 4000)
        gaps = [b - a for a, b in itertools.pairwise([-1.0, *admitted])]
        # after the trip at t=-1: 30, 60, 120, 240, 480, 960, 1800, 1800 ...
        assert gaps[:8] == [30, 60, 120, 240, 480, 960, 1800]
        assert all(kind in (TransitionKind.PROBING, TransitionKind.REOPENED)
                   for kind in seen.kinds[1:])  # fmt: skip
        cooldowns = [t.cooldown_s for t in seen.transitions if t.kind is TransitionKind.REOPENED]
        assert cooldowns[:7] == [60, 120, 240, 480, 960, 1800, 1800]

    async def test_no_second_attempt_while_the_probe_is_out(self) -> None:
        breaker, clock, seen = create_breaker()
        await trip(breaker, clock)
        await clock.advance(29)
        probe = breaker.admit()
        assert probe is not None
        assert probe.probe
        assert breaker.state is BreakerState.HALF_OPEN
        for _ in range(120):
            assert breaker.admit() is None
            await clock.advance(1)
        assert seen.kinds == [TransitionKind.OPENED, TransitionKind.PROBING]

    async def test_the_probes_success_closes_and_resumes(self) -> None:
        breaker, clock, seen = create_breaker()
        await trip(breaker, clock)
        await clock.advance(30)
        probe = breaker.admit()
        assert probe is not None
        breaker.record(probe, 200)
        assert breaker.state is BreakerState.CLOSED
        assert seen.transitions[-1].kind is TransitionKind.CLOSED
        assert seen.transitions[-1].action is Action.RESUME
        assert (breaker.opened_at, breaker.next_probe_at) == (None, None)
        # a fresh start: the window is empty, the cool-down back to 30 s
        await attempts(breaker, clock, [200] * 5)
        await clock.advance(120)
        await trip(breaker, clock)
        assert seen.transitions[-1].cooldown_s == 30

    async def test_results_of_attempts_admitted_before_the_trip_change_nothing(self) -> None:
        breaker, clock, seen = create_breaker(BreakerSettings(consecutive=2, min_attempts=50))
        early = breaker.admit()
        assert early is not None
        await attempts(breaker, clock, [503, 503])
        breaker.record(early, 200)
        assert breaker.state is BreakerState.OPEN
        assert seen.kinds == [TransitionKind.OPENED]


class TestDisable:
    async def test_410_disables_at_once(self) -> None:
        breaker, clock, seen = create_breaker()
        permit = breaker.admit()
        assert permit is not None
        breaker.record(permit, 410)
        assert seen.kinds == [TransitionKind.DISABLED]
        gone = seen.transitions[0]
        assert (gone.action, gone.reason) == (Action.DISABLE, "gone")
        await clock.advance(3600)
        assert breaker.admit() is None

    async def test_open_for_the_configured_time_disables(self) -> None:
        settings = BreakerSettings(disable_after_s=3 * 3600)
        breaker, clock, seen = create_breaker(settings)
        await trip(breaker, clock)
        await probes_within(breaker, clock, 3 * 3600 - 20)
        assert not breaker.disabled
        await probes_within(breaker, clock, 3600)
        assert breaker.disabled_reason == "sustained_failure"
        assert seen.kinds[-1] is TransitionKind.DISABLED
        assert seen.kinds.count(TransitionKind.DISABLED) == 1

    async def test_the_default_is_72_hours_and_poll_notices_it_without_attempts(self) -> None:
        breaker, clock, _ = create_breaker()
        await trip(breaker, clock)
        await clock.advance(72 * 3600 - 20)
        breaker.poll()
        assert not breaker.disabled
        await clock.advance(20)
        breaker.poll()
        assert breaker.disabled_reason == "sustained_failure"

    async def test_reset_closes_a_disabled_breaker(self) -> None:
        breaker, _, _ = create_breaker()
        permit = breaker.admit()
        assert permit is not None
        breaker.record(permit, 410)
        breaker.reset()
        assert breaker.state is BreakerState.CLOSED
        assert breaker.admit() is not None


class TestBreakers:
    async def test_one_breaker_per_destination_with_its_settings(self) -> None:
        clock, seen = ManualClock(), Recorded()
        settings = {"a": BreakerSettings(consecutive=1), "b": None}
        book = Breakers(settings.get, clock=clock, on_transition=seen)
        for name in ("a", "b"):
            permit = book.get(name).admit()
            assert permit is not None
            book.get(name).record(permit, 500)
        assert [(t.destination, t.kind) for t in seen.transitions] == [("a", TransitionKind.OPENED)]
        assert book.get("b").settings == BreakerSettings()

    async def test_transitions_counted_by_kind(self) -> None:
        registry = CollectorRegistry()
        book = Breakers(lambda _: BreakerSettings(consecutive=1), clock=TickClock(),
                        metrics=BreakerMetrics(registry))  # fmt: skip
        permit = book.get("a").admit()
        assert permit is not None
        book.get("a").record(permit, 503)
        opened = registry.get_sample_value("hookbay_breaker_transitions_total", {"kind": "opened"})
        assert opened == 1


class TestSettingsOfTheDestination:
    def test_the_models_defaults_are_the_breakers(self) -> None:
        assert BreakerSettings.of(BreakerModel()) == BreakerSettings()


class TestSettings:
    @pytest.mark.parametrize(
        "fields",
        [{"failure_pct": 0}, {"failure_pct": 101}, {"window_s": 0},
         {"cooldown_s": 60, "max_cooldown_s": 30}, {"cooldown_s": 60, "disable_after_s": 30}],
    )  # fmt: skip
    def test_refused(self, fields: dict[str, int]) -> None:
        with pytest.raises(ValueError, match="must"):
            BreakerSettings(**fields)


class TestRestore:
    async def test_open_as_stored_probe_when_it_was_due(self) -> None:
        breaker, clock, seen = create_breaker(BreakerSettings(disable_after_s=3600))
        breaker.restore(clock.now() - timedelta(seconds=600), clock.now() + timedelta(seconds=20))
        assert (breaker.state, breaker.probe_in()) == (BreakerState.OPEN, 20.0)
        assert breaker.admit() is None
        await clock.advance(20)
        permit = breaker.admit()
        assert permit is not None
        assert permit.probe
        assert seen.kinds == [TransitionKind.PROBING]  # restoring reports nothing

    async def test_sustained_failure_counts_from_the_stored_opening(self) -> None:
        breaker, clock, seen = create_breaker(BreakerSettings(disable_after_s=3600))
        breaker.restore(clock.now() - timedelta(seconds=3500), None)
        await clock.advance(100)
        breaker.poll()
        assert seen.kinds == [TransitionKind.DISABLED]

    def test_a_breaker_already_open_is_left_alone(self) -> None:
        breaker, clock, _ = create_breaker(BreakerSettings(consecutive=1))
        permit = breaker.admit()
        assert permit is not None
        breaker.record(permit, 503)
        probe_at = breaker.next_probe_at
        breaker.restore(clock.now() - timedelta(days=1), clock.now())
        assert breaker.next_probe_at == probe_at
