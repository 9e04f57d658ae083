"""The recorder's loop with a scripted consumer: what one write holds (the linger), when the
summaries are written and what is committed after them. The loop on real Kafka and FerretDB is
in ``test_app.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, Final, cast

import pytest
from aiokafka.structs import TopicPartition
from pymongo.errors import AutoReconnect

from hookbay_common.clock import utcnow
from hookbay_common.db.events import PendingSummaries
from hookbay_forwarder.metrics import RecorderMetrics
from hookbay_forwarder.pace import BATCH, EAGER, fetch_mode
from hookbay_forwarder.recorder import consumer as consumer_module
from hookbay_forwarder.recorder.consumer import RecorderLoop
from hookbay_forwarder.recorder.hold import EventHold, Read
from tests.support.factories import create_attempt, create_event

A, B = TopicPartition("events", 0), TopicPartition("attempts", 3)
ACCEPTED: Final = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
"""When the held events of these tests were accepted (``create_event(created_at=ACCEPTED)``)."""


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int


def records(tp: TopicPartition, *offsets: int) -> list[Record]:
    return [Record(tp.topic, tp.partition, o) for o in offsets]


@dataclass
class ScriptedConsumer:
    """Answers ``getmany`` with the scripted batches (at most ``max_records`` of each, the rest
    kept for the next call); once they are spent, stops the loop and answers nothing."""

    script: list[dict[TopicPartition, list[Record]]]
    loop: RecorderLoop | None = None
    commits: list[dict[TopicPartition, int]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    waits: list[int] = field(default_factory=list)
    assigned: set[TopicPartition] = field(default_factory=lambda: {A, B})
    _fetcher: SimpleNamespace = field(
        default_factory=lambda: SimpleNamespace(_fetch_min_bytes=1, _fetch_max_wait_ms=500)
    )

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    async def getmany(self, *, timeout_ms: int, max_records: int) -> dict[Any, list[Record]]:
        self.waits.append(timeout_ms)
        if not self.script:
            assert self.loop is not None
            self.loop.stop()
            return {}
        batch, out, taken = self.script[0], {}, 0
        for tp in list(batch):
            part = batch[tp][: max_records - taken]
            if part:
                out[tp] = part
                taken += len(part)
                batch[tp] = batch[tp][len(part) :]
            if not batch[tp]:
                del batch[tp]
        if not batch:
            self.script.pop(0)
        return out

    async def commit(self, offsets: dict[TopicPartition, Any]) -> None:
        self.commits.append({tp: meta.offset for tp, meta in offsets.items()})
        self.log.append("commit")


@dataclass
class Repository:
    forgotten: int = 0

    def forget_writes(self) -> None:
        self.forgotten += 1


@dataclass
class Written:
    """The handlers: each batch written tallies one event on page ``len(batches)`` and moves
    the clock a second on; ``summarise`` fails ``failures`` times first. A record decodes to
    what ``items`` gives it (``None``: nothing the hold keeps)."""

    log: list[str]
    metrics: RecorderMetrics = field(default_factory=RecorderMetrics)
    events: Repository = field(default_factory=Repository)
    batches: list[list[Record]] = field(default_factory=list)
    summarised: list[tuple[list[tuple[str, int]], list[tuple[str, int]]]] = field(
        default_factory=list
    )
    failures: int = 0
    now: float = 0.0
    items: dict[Record, Any] = field(default_factory=dict)

    def decode(self, batch: list[Record]) -> list[Read]:
        return [Read(record, self.items.get(record)) for record in batch]

    async def record(self, reads: list[Read], pending: PendingSummaries) -> None:
        self.batches.append([read.record for read in reads])
        pending.tally("wh", len(self.batches)).add("success", utcnow())
        self.now += 1.0
        self.log.append("write")

    async def summarise(self, pending: PendingSummaries) -> None:
        if self.failures:
            self.failures -= 1
            raise AutoReconnect("store restarting")
        self.summarised.append((sorted(pending.tallies), sorted(pending.exact)))
        self.log.append("summarise")


def run_loop(
    script: list[dict[TopicPartition, list[Record]]], linger: float = 0.0,
    commit_interval: float = 0.0, failures: int = 0, hold: float = 0.0,
    items: dict[Record, Any] | None = None,
) -> tuple[Written, ScriptedConsumer, RecorderLoop]:  # fmt: skip
    consumer = ScriptedConsumer(script)
    written = Written(consumer.log, failures=failures, items=items or {})
    loop = RecorderLoop(
        cast(Any, consumer), cast(Any, written), linger=linger, commit_interval=commit_interval,
        hold=hold, clock=lambda: written.now, retry_delay=0.0,
    )  # fmt: skip
    loop.hold = EventHold(hold, wall=lambda: ACCEPTED.timestamp())  # events accepted just now
    consumer.loop = loop
    return written, consumer, loop


class TestLinger:
    async def test_what_arrives_within_the_linger_is_one_write(self) -> None:
        script = [{A: records(A, 0)}, {A: records(A, 1), B: records(B, 7)}, {A: records(A, 2)}]
        written, consumer, loop = run_loop(script, linger=60.0)
        await loop.run()
        assert written.batches == [[*records(A, 0, 1, 2), *records(B, 7)]]
        assert consumer.commits == [{A: 3, B: 8}]

    async def test_without_linger_each_read_is_its_own_write(self) -> None:
        script = [{A: records(A, 0)}, {A: records(A, 1), B: records(B, 7)}]
        written, consumer, loop = run_loop(script, linger=0.0)
        await loop.run()
        assert written.batches == [records(A, 0), [*records(A, 1), *records(B, 7)]]
        assert consumer.commits == [{A: 1}, {A: 2, B: 8}]

    async def test_a_full_batch_is_written_at_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(consumer_module, "MAX_RECORDS", 3)
        script = [{A: records(A, 0, 1)}, {A: records(A, 2, 3)}, {B: records(B, 5)}]
        written, consumer, loop = run_loop(script, linger=60.0)
        await loop.run()
        assert written.batches == [records(A, 0, 1, 2), [*records(A, 3), *records(B, 5)]]
        assert consumer.commits == [{A: 3}, {A: 4, B: 6}]


class TestHeldEvents:
    """An event kept back until its attempt is read (``EventHold``): the loop writes it with
    the attempt, or when its time runs out, or when stopping, and never commits past it."""

    async def test_an_event_is_written_with_its_attempt_and_committed_after(self) -> None:
        (event_at,), (attempt_at,) = records(A, 0), records(B, 7)
        event = create_event(created_at=ACCEPTED)
        written, consumer, loop = run_loop(
            [{A: [event_at]}, {B: [attempt_at]}], hold=60.0,
            items={event_at: event, attempt_at: create_attempt(event)},
        )  # fmt: skip
        await loop.run()
        assert written.batches == [[event_at, attempt_at]]
        assert consumer.commits == [{A: 0}, {A: 1, B: 8}]  # never past the held event

    async def test_a_held_event_is_written_when_its_time_runs_out(self) -> None:
        (event_at, other_at) = records(A, 0, 1)
        written, consumer, loop = run_loop(
            [{A: [event_at]}, {A: [other_at]}, {}],
            hold=0.125,
            items={event_at: create_event(created_at=ACCEPTED)},
        )
        await loop.run()
        # the other record's write moved the clock a second on: the event is due by then
        assert written.batches == [[other_at], [event_at]]
        assert consumer.waits[:2] == [200, 125]  # the fetch waits no longer than the hold
        assert consumer.commits[-1] == {A: 2}

    async def test_stopping_writes_what_is_held_then_commits(self) -> None:
        (event_at,) = records(A, 0)
        written, consumer, loop = run_loop(
            [{A: [event_at]}], hold=60.0, items={event_at: create_event(created_at=ACCEPTED)}
        )
        await loop.run()
        assert written.batches == [[event_at]]
        assert consumer.commits == [{A: 0}, {A: 1}]
        assert len(loop.hold) == 0


class TestFetchPace:
    async def test_a_busy_recorder_fetches_in_batches(self) -> None:
        """300 records in the first second of the loop's clock (each write moves it a second
        on): the next read is asked of the broker in batches."""
        script = [{A: records(A, *range(300))}, {B: records(B, 0)}]
        written, consumer, loop = run_loop(script)
        original, seen = written.record, []

        async def record(reads: list[Read], pending: PendingSummaries) -> None:
            seen.append(fetch_mode(consumer))
            await original(reads, pending)

        written.record = record  # type: ignore[method-assign]
        await loop.run()
        assert seen == [EAGER, BATCH]


class TestSummariesThenCommit:
    async def test_summaries_are_written_once_an_interval_then_committed(self) -> None:
        script = [{A: records(A, 0)}, {B: records(B, 7)}, {A: records(A, 1)}, {A: records(A, 2)}]
        written, consumer, loop = run_loop(script, commit_interval=1.5)
        await loop.run()
        # batches at 1 s, 2 s, 3 s: the third is 2 s after the first unsettled one; the
        # fourth is settled when nothing more comes
        assert consumer.log == [*["write"] * 3, "summarise", "commit", "write", "summarise", "commit"]  # fmt: skip
        assert written.summarised == [([("wh", 1), ("wh", 2), ("wh", 3)], []), ([("wh", 4)], [])]
        assert consumer.commits == [{A: 2, B: 8}, {A: 3}]

    async def test_a_failed_summary_write_recounts_its_pages_then_commits(self) -> None:
        """A write of the summaries that fails part-way may have added some tallies already:
        the retry recounts every page instead of adding them again."""
        script = [{A: records(A, 0)}, {A: records(A, 1)}, {A: records(A, 2)}]
        written, consumer, loop = run_loop(script, commit_interval=1.5, failures=1)
        await loop.run()
        assert written.summarised == [([], [("wh", 1), ("wh", 2), ("wh", 3)])]
        assert consumer.commits == [{A: 3}]
        assert loop.healthy

    async def test_moved_partitions_forget_what_the_writes_taught(self) -> None:
        script = [{A: records(A, 0)}, {A: records(A, 1)}, {A: records(A, 2)}]
        written, consumer, loop = run_loop(script)
        original = written.record

        async def record(reads: list[Read], pending: PendingSummaries) -> None:
            await original(reads, pending)
            if len(written.batches) == 2:
                consumer.assigned = {A}  # B moved to another recorder meanwhile

        written.record = record  # type: ignore[method-assign]
        await loop.run()
        assert written.events.forgotten == 2  # the first assignment, then the move
