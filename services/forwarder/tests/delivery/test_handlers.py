"""The task consumer's handler for a routed delivery's task whose delay tier is due: on to the
deliveries topic, or another hop through the tier that fits what is left of its wait.
(End to end: services/dashboard-api/tests/test_delayed_delivery.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from hookbay_common.clock import utcnow
from hookbay_common.topics import DELAY_TIERS, Topics
from hookbay_common.wire import encode_destination_task
from hookbay_forwarder.delivery.deadletter import DeadLetterLimit
from hookbay_forwarder.delivery.handlers import ForwarderHandlers
from hookbay_forwarder.delivery.retry import RetryPolicy
from hookbay_forwarder.metrics import ForwarderMetrics
from hookbay_forwarder.writes import Message
from tests.support.factories import create_destination_task

TOPICS = Topics("unit")


@dataclass
class Record:
    value: bytes
    topic: str = "unit.retry.6h"
    partition: int = 0
    offset: int = 7
    key: bytes | None = b"dst_1"


class Written:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, messages: Sequence[Message]) -> None:
        self.messages.extend(messages)


def handlers() -> tuple[ForwarderHandlers, Written]:
    made = ForwarderHandlers(
        deliverer=None, producer=None, topics=TOPICS,  # type: ignore[arg-type]
        policy=RetryPolicy((0.0, 10.0)),
        limit=DeadLetterLimit(window=10, ratio=0.5, min_hosts=1, max_invalid=10),
        metrics=ForwarderMetrics(), tiers=DELAY_TIERS,
    )  # fmt: skip
    written = Written()
    made.write = written
    return made, written


class TestRequeue:
    async def test_a_task_still_hours_away_takes_another_hop(self) -> None:
        made, written = handlers()
        task = create_destination_task(not_before=utcnow() + timedelta(hours=7))
        await made.on_task(Record(encode_destination_task(task)))
        (message,) = written.messages
        assert (message.topic, message.key) == (TOPICS.retry(21600.0), b"dst_1")
        assert message.value == encode_destination_task(task)

    async def test_a_task_due_within_the_shortest_tier_goes_to_its_lane(self) -> None:
        made, written = handlers()
        task = create_destination_task(not_before=utcnow() + timedelta(seconds=3))
        await made.on_task(Record(encode_destination_task(task)))
        (message,) = written.messages
        assert (message.topic, message.key, message.headers) == (TOPICS.deliveries, b"dst_1",
                                                                 None)  # fmt: skip
