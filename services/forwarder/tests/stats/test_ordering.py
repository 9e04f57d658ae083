"""``InOrder``'s rules over a consumer kept in memory (records faust loses on real Kafka are
tested end to end in tests/test_stats_process.py)."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError
from faust.types import TP

from hookbay_forwarder.stats.metrics import StatsMetrics
from hookbay_forwarder.stats.ordering import STALL_AFTER, InOrder

# --- InOrder: records handed over in order, each once; commits only what was handed over ----


EVENTS, OTHER = "ns.events", "ns.other"


class Consumer:
    """What ``InOrder`` uses of faust's consumer, kept in memory: the committed offsets a seek
    restarts from, the read offsets, faust's own commit rule and the seeks asked for."""

    def __init__(self, committed: dict[TP, int | None], starts: dict[TP, int]) -> None:
        self.committed, self.starts = committed, starts
        self._read_offset: dict[TP, int | None] = {}
        self._acked: dict[TP, list[int]] = defaultdict(list)
        self._acked_index: dict[TP, set[int]] = defaultdict(set)
        self.sought: list[dict[TP, int]] = []
        self.asked: list[set[TP]] = []
        self.broker_away = False
        self.ends: dict[TP, int] = {}

    def assignment(self) -> set[TP]:
        return set(self.committed)

    async def perform_seek(self) -> None:
        self._read_offset.update(self.committed)

    def _new_offset(self, tp: TP) -> int | None:
        return 999  # faust's rule: acked offsets, whatever was handed over

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        self.asked.append(set(tps))
        if self.broker_away:
            raise KafkaConnectionError()
        return {tp: self.starts[tp] for tp in tps}

    async def seek_wait(self, offsets: dict[TP, int]) -> None:
        self.sought.append(offsets)

    def highwater(self, tp: TP) -> int | None:
        return self.ends.get(tp)


def records(tp: TP, *offsets: int) -> list[Any]:
    return [SimpleNamespace(message=SimpleNamespace(tp=tp, offset=o)) for o in offsets]


def offsets(events: list[Any]) -> list[int]:
    return [e.message.offset for e in events]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def in_order(consumer: Consumer, clock: Clock) -> InOrder:
    order = InOrder(consumer, {EVENTS}, StatsMetrics().reseeks, clock=clock)
    order.install()
    return order


A, B, X = TP(EVENTS, 0), TP(EVENTS, 1), TP(OTHER, 0)


class TestInOrder:
    async def test_records_after_the_seek_pass_in_order_and_commits_follow_them(
        self, clock: Clock
    ) -> None:
        consumer = Consumer({A: 10, X: 3}, {})
        order = in_order(consumer, clock)
        assert offsets(await order.admit(records(A, 9))) == []  # before the seek: not yet
        await consumer.perform_seek()
        assert consumer._new_offset(A) == 10  # the committed offset: nothing new to commit
        ready = await order.admit(records(A, 8, 10, 11, 11, 12))
        assert offsets(ready) == [10, 11, 12]  # 8 was handed over before; 11 once
        assert consumer._new_offset(A) == 13
        assert consumer._new_offset(X) == 999  # a topic it does not read: faust's rule

    async def test_a_record_lost_leaves_a_hole_sought_back_and_no_commit_past_it(
        self, clock: Clock
    ) -> None:
        consumer = Consumer({A: 10, B: 0}, {A: 0, B: 0})
        order = in_order(consumer, clock)
        await consumer.perform_seek()
        assert offsets(await order.admit(records(A, 10, 12, 13) + records(B, 0, 1))) == [10, 0, 1]
        assert consumer._new_offset(A) == 11  # 11 never came: nothing past it is committed
        assert consumer._new_offset(B) == 2
        await order.mend()
        assert consumer.sought == [{A: 11}]
        assert order.reseeks.labels(EVENTS)._value.get() == 1
        await order.admit(records(A, 14))  # a batch fetched before the seek, still coming
        await order.mend()
        assert consumer.sought == [{A: 11}, {A: 11}]  # the first seek did not take: again
        assert offsets(await order.admit(records(A, 11, 12, 13, 14))) == [11, 12, 13, 14]
        await order.mend()
        assert len(consumer.sought) == 2  # mended
        assert consumer._new_offset(A) == 15

    async def test_nothing_committed_starts_at_the_log_start(self, clock: Clock) -> None:
        consumer = Consumer({A: None, B: None}, {A: 0, B: 40})
        order = in_order(consumer, clock)
        await consumer.perform_seek()
        assert consumer.asked == [{A, B}]  # at the seek, for every partition at once
        ready = await order.admit(records(A, 1, 2) + records(B, 40, 41))
        assert offsets(ready) == [40, 41]  # A's first record, 0, was lost
        assert len(consumer.asked) == 1
        await order.mend()
        assert consumer.sought == [{A: 0}]

    async def test_log_starts_unknown_at_the_seek_are_asked_again(self, clock: Clock) -> None:
        """The broker away when faust seeks: the records wait, and the next mend (every 2 s
        at least) asks again; a record that came meanwhile is read again."""
        consumer = Consumer({A: None}, {A: 0})
        order = in_order(consumer, clock)
        consumer.broker_away = True
        await consumer.perform_seek()
        assert offsets(await order.admit(records(A, 0, 1))) == []
        consumer.broker_away = False
        await order.mend()
        assert order.next[A] == 0
        assert offsets(await order.admit(records(A, 2))) == []  # 0 and 1 went by
        await order.mend()
        assert consumer.sought == [{A: 0}]

    async def test_a_hole_below_the_log_start_is_skipped(self, clock: Clock) -> None:
        """Records deleted by the topic's retention before they were read are not waited for."""
        consumer = Consumer({A: 5}, {A: 20})
        order = in_order(consumer, clock)
        await consumer.perform_seek()
        assert offsets(await order.admit(records(A, 20, 21))) == []
        await order.mend()
        assert consumer.sought == [{A: 5}]  # at first, a record faust lost
        assert offsets(await order.admit(records(A, 20, 21))) == []
        await order.mend()
        assert consumer.sought == [{A: 5}, {A: 20}]  # still missing: asked where the log starts
        assert offsets(await order.admit(records(A, 20, 21))) == [20, 21]

    async def test_a_seek_starts_again_from_the_committed_offset(self, clock: Clock) -> None:
        """After a rebalance faust reads again from the committed offsets; what was handed over
        past them comes again and is handed over again (the buckets skip facts counted)."""
        consumer = Consumer({A: 10}, {A: 0})
        order = in_order(consumer, clock)
        await consumer.perform_seek()
        await order.admit(records(A, 10, 11, 12))
        await consumer.perform_seek()
        assert consumer._new_offset(A) == 10
        assert offsets(await order.admit(records(A, 10, 11))) == [10, 11]

    async def test_a_record_lost_last_in_its_partition_is_sought_once_it_stalls(
        self, clock: Clock
    ) -> None:
        consumer = Consumer({A: 10, B: 0}, {A: 0, B: 0})
        order = in_order(consumer, clock)
        await consumer.perform_seek()
        await order.admit(records(A, 10))
        consumer.ends = {A: 12, B: 0}  # 11 exists, never came; B has nothing to read
        order.watch(consumer.highwater)
        clock.now += STALL_AFTER - 1
        order.watch(consumer.highwater)
        await order.mend()
        assert consumer.sought == []  # not stalled long enough
        clock.now += 1
        order.watch(consumer.highwater)
        await order.mend()
        assert consumer.sought == [{A: 11}]
        await order.admit(records(A, 11))  # came: nothing left to read
        clock.now += STALL_AFTER
        order.watch(consumer.highwater)
        assert order.holes == set()
