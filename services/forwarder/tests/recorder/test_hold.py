"""``EventHold``: which events the recorder keeps back until their first attempt is read, and
for how long (times are the caller's clock). Its place in the loop (offsets, stopping) is in
``test_consumer.py``; on real Kafka and FerretDB in ``test_app.py``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from hookbay_common.models import Attempt, Delivery, DeliveryStatus, Event
from hookbay_forwarder.recorder.hold import EventHold, Read
from tests.support.factories import create_attempt, create_delivery, create_event


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int


class Feed:
    """Reads with offsets in the order made: events on ``events``/0, the rest on ``attempts``/0."""

    def __init__(self) -> None:
        self.offsets = {"events": 0, "attempts": 0}

    def __call__(self, *items: Event | Attempt | Delivery | None) -> list[Read]:
        reads = []
        for item in items:
            topic = "events" if isinstance(item, Event) else "attempts"
            reads.append(Read(Record(topic, 0, self.offsets[topic]), item))
            self.offsets[topic] += 1
        return reads


AT: Final = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
"""When the events of these tests were accepted."""


def accepted() -> float:
    """The wall clock of the hold: the events were accepted just now."""
    return AT.timestamp()


def accepted_event(**overrides: Any) -> Event:
    return create_event(**{"created_at": AT, **overrides})


def items(reads: list[Read]) -> list[object]:
    return [read.item for read in reads]


class TestHolding:
    def test_an_event_waits_for_its_attempt_and_both_are_written_together(self) -> None:
        hold, feed, event = EventHold(0.5, wall=accepted), Feed(), accepted_event()
        attempt = create_attempt(event)
        assert hold.sort(feed(event), now=0.0) == []
        assert len(hold) == 1
        assert items(hold.sort(feed(attempt), now=0.1)) == [event, attempt]
        assert len(hold) == 0

    def test_an_event_and_its_attempt_read_together_are_not_held(self) -> None:
        hold, feed, event = EventHold(0.5, wall=accepted), Feed(), accepted_event()
        attempt = create_attempt(event)
        assert items(hold.sort(feed(attempt, event), now=0.0)) == [attempt, event]

    def test_a_routed_event_waits_with_its_scheduled_delivery_for_the_attempt(self) -> None:
        hold, feed = EventHold(0.5, wall=accepted), Feed()
        event = accepted_event(routed=True, forward_url=None)
        scheduled = create_delivery(event, status=DeliveryStatus.SCHEDULED)
        assert hold.sort(feed(scheduled, event), now=0.0) == []  # the promise waits with it
        attempt = create_attempt(event, delivery_id=scheduled.id, route="billing")
        assert items(hold.sort(feed(attempt), now=0.2)) == [event, scheduled, attempt]
        assert hold.first_offsets() == {}

    def test_a_finished_delivery_record_settles_a_routed_event(self) -> None:
        hold, feed = EventHold(0.5, wall=accepted), Feed()
        event = accepted_event(routed=True, forward_url=None)
        assert hold.sort(feed(event), now=0.0) == []
        filtered = create_delivery(event, status=DeliveryStatus.FILTERED, reason="no match")
        assert items(hold.sort(feed(filtered), now=0.1)) == [event, filtered]

    def test_an_event_read_again_while_held_waits_with_the_first_copy(self) -> None:
        hold, feed, event = EventHold(0.5, wall=accepted), Feed(), accepted_event()
        hold.sort(feed(event), now=0.0)
        assert hold.sort(feed(event), now=0.1) == []
        assert items(hold.release()) == [event, event]

    def test_an_event_whose_attempt_was_read_first_is_not_held(self) -> None:
        hold, feed, event = EventHold(0.5, wall=accepted), Feed(), accepted_event()
        attempt = create_attempt(event)
        assert items(hold.sort(feed(attempt), now=0.0)) == [attempt]
        assert items(hold.sort(feed(event), now=0.1)) == [event]

    def test_an_event_without_attempts_to_come_is_not_held(self) -> None:
        hold, feed = EventHold(0.5, wall=accepted), Feed()
        rejected = accepted_event(rejected_reason="invalid_signature")
        nowhere = accepted_event(forward_url=None)
        assert items(hold.sort(feed(rejected, nowhere, None), now=0.0)) == [
            rejected, nowhere, None,
        ]  # fmt: skip

    def test_a_held_event_is_written_when_its_time_runs_out(self) -> None:
        hold, feed = EventHold(0.5, wall=accepted), Feed()
        first, second = accepted_event(), accepted_event()
        hold.sort(feed(first), now=0.0)
        hold.sort(feed(second), now=0.25)
        assert hold.due_in(0.125) == 0.375
        assert hold.sort([], now=0.375) == []
        assert items(hold.sort([], now=0.5)) == [first]
        assert hold.due_in(0.5) == 0.25
        assert items(hold.sort([], now=0.75)) == [second]
        assert hold.due_in(0.75) is None

    def test_an_event_waits_until_the_hold_after_it_was_accepted(self) -> None:
        """Read 0.375 s after ingest accepted it, an event waits 0.125 s more; read after the
        hold, not at all. A wall clock behind ingest's never makes it wait longer than the
        hold."""
        feed, late = Feed(), accepted_event()
        hold = EventHold(0.5, wall=lambda: AT.timestamp() + 0.375)
        assert hold.sort(feed(late), now=10.0) == []
        assert hold.due_in(10.0) == 0.125
        hold = EventHold(0.5, wall=lambda: AT.timestamp() + 0.5)
        assert items(hold.sort(feed(late), now=10.0)) == [late]
        hold = EventHold(0.5, wall=lambda: AT.timestamp() - 60)
        hold.sort(feed(late), now=10.0)
        assert hold.due_in(10.0) == 0.5

    def test_past_the_limit_the_oldest_are_written(self) -> None:
        hold, feed = EventHold(0.5, limit=2, wall=accepted), Feed()
        events = [accepted_event() for _ in range(3)]
        assert items(hold.sort(feed(*events), now=0.0)) == [events[0]]
        assert len(hold) == 2

    def test_no_hold_writes_everything_at_once(self) -> None:
        hold, feed, event = EventHold(0.0, wall=accepted), Feed(), accepted_event()
        assert items(hold.sort(feed(event), now=0.0)) == [event]
        assert hold.due_in(0.0) is None


class TestOffsets:
    def test_the_first_held_record_of_each_partition(self) -> None:
        hold, feed = EventHold(0.5, wall=accepted), Feed()
        done = accepted_event()
        hold.sort(feed(done, accepted_event(), accepted_event()), now=0.0)
        assert hold.first_offsets() == {("events", 0): 0}
        hold.sort(feed(create_attempt(done)), now=0.1)  # offset 0 written
        assert hold.first_offsets() == {("events", 0): 1}

    def test_release_hands_back_every_held_event_oldest_first(self) -> None:
        hold, feed = EventHold(0.5, wall=accepted), Feed()
        events = [accepted_event() for _ in range(3)]
        hold.sort(feed(*events), now=0.0)
        assert items(hold.release()) == events
        assert len(hold) == 0
        assert hold.first_offsets() == {}
