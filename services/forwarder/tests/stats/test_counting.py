"""What the stats count of each source record (``hookbay_forwarder.stats.counting``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import msgpack

from hookbay_common.topics import Topics
from hookbay_common.wire import encode_attempt, encode_delivery
from hookbay_forwarder.stats.counting import facts_of
from hookbay_forwarder.stats.metrics import StatsMetrics
from tests.support.factories import create_attempt, create_delivery, create_event

TOPICS = Topics("test.counting")


def _record(value: bytes, offset: int) -> Any:
    return SimpleNamespace(
        message=SimpleNamespace(topic=TOPICS.attempts, value=value, partition=0, offset=offset)
    )


class TestFactsOf:
    def test_delivery_records_are_skipped_not_unreadable(self) -> None:
        """Delivery records share the attempts topic; their attempts are what is counted, so
        a delivery record adds nothing and is no unreadable record either."""
        event = create_event()
        metrics = StatsMetrics()
        records = [
            _record(encode_delivery(create_delivery(event)), 0),
            _record(encode_attempt(create_attempt(event, status_code=200)), 1),
        ]
        facts = facts_of(TOPICS, records, metrics)
        (bundle,) = (msgpack.unpackb(v) for v in facts.values())
        assert [r[1] for r in bundle["r"]] == [1]  # the attempt's offset only
        assert metrics.unreadable.labels(TOPICS.attempts)._value.get() == 0
        assert metrics.records.labels(TOPICS.attempts)._value.get() == 1
