"""Where a routed delivery's task waits: the delay tier that fits the wait left, due at the
tier's own time or the task's, whichever is first; the deliveries topic once less than the
shortest tier is left. Hop by hop, a day's wait never reaches a lane before its last seconds."""

from __future__ import annotations

from hookbay_common.topics import DELAY_TIERS, Topics, delay_tiers, fitting_tier
from hookbay_forwarder.delivery.consumer import NOT_BEFORE_HEADER
from hookbay_forwarder.waiting import Waiting
from hookbay_forwarder.writes import Message

TOPICS = Topics("unit")
NOW = 1_800_000_000_000
HOUR = 3_600_000


def due(message: Message) -> int:
    ((name, value),) = message.headers or ()
    assert name == NOT_BEFORE_HEADER
    return int(value)


class TestTiers:
    def test_every_installation_has_the_delay_tiers_beside_its_retry_delays(self) -> None:
        assert delay_tiers(()) == DELAY_TIERS == (10.0, 60.0, 600.0, 3600.0, 21600.0)
        assert delay_tiers((0.0, 1.0, 60.0, 120.0)) == (1.0, 10.0, 60.0, 120.0, 600.0, 3600.0,
                                                        21600.0)  # fmt: skip

    def test_the_longest_tier_not_longer_than_the_wait(self) -> None:
        assert fitting_tier(9.9, DELAY_TIERS) is None
        assert fitting_tier(10.0, DELAY_TIERS) == 10.0
        assert fitting_tier(599.0, DELAY_TIERS) == 60.0
        assert fitting_tier(86_400.0, DELAY_TIERS) == 21600.0


class TestWaiting:
    def test_a_wait_shorter_than_every_tier_goes_to_the_deliveries_topic(self) -> None:
        message = Waiting(TOPICS, DELAY_TIERS).message(b"task", "dst_1", NOW + 9_000, NOW)
        assert (message.topic, message.key, message.headers) == (
            TOPICS.deliveries, b"dst_1", None,
        )  # fmt: skip

    def test_a_wait_goes_to_its_fitting_tier_due_at_the_tiers_time(self) -> None:
        message = Waiting(TOPICS, DELAY_TIERS).message(b"task", "dst_1", NOW + 90_000, NOW)
        assert (message.topic, message.value, message.key) == (TOPICS.retry(60.0), b"task",
                                                                b"dst_1")  # fmt: skip
        assert due(message) == NOW + 60_000  # the tier's own time: its partition stays in order

    def test_a_task_due_before_the_tiers_time_is_due_at_its_own(self) -> None:
        message = Waiting(TOPICS, DELAY_TIERS).message(b"task", "dst_1", NOW + 10_000, NOW)
        assert (message.topic, due(message)) == (TOPICS.retry(10.0), NOW + 10_000)

    def test_a_day_takes_hops_through_the_longest_tier_then_shorter_ones(self) -> None:
        waiting = Waiting(TOPICS, DELAY_TIERS)
        not_before, now, hops = NOW + 24 * HOUR + 75_000, NOW, []
        message = waiting.message(b"task", "dst_1", not_before, now)
        while message.topic != TOPICS.deliveries:
            hops.append(message.topic)
            now = due(message) + 40  # the task consumer reads it a moment after it is due
            message = waiting.message(b"task", "dst_1", not_before, now)
        assert hops == [TOPICS.retry(21600.0)] * 4 + [TOPICS.retry(60.0), TOPICS.retry(10.0)]
        assert 0 < not_before - now < 10_000  # what the lane waits out: under the shortest tier

    def test_a_task_already_due_goes_to_the_deliveries_topic(self) -> None:
        message = Waiting(TOPICS, DELAY_TIERS).message(b"task", "dst_1", NOW - HOUR, NOW)
        assert message.topic == TOPICS.deliveries
