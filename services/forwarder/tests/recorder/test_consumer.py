"""The recorder's loop with a scripted consumer: what one write holds (the linger), what is
committed. The loop on real Kafka and FerretDB is in ``test_app.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aiokafka.structs import TopicPartition

from hookbay_forwarder.metrics import RecorderMetrics
from hookbay_forwarder.recorder import consumer as consumer_module
from hookbay_forwarder.recorder.consumer import RecorderLoop

A, B = TopicPartition("events", 0), TopicPartition("attempts", 3)


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

    async def getmany(self, *, timeout_ms: int, max_records: int) -> dict[Any, list[Record]]:
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


@dataclass
class Written:
    metrics: RecorderMetrics = field(default_factory=RecorderMetrics)
    batches: list[list[Record]] = field(default_factory=list)

    async def record(self, batch: list[Record]) -> None:
        self.batches.append(list(batch))


def run_loop(script: list[dict[TopicPartition, list[Record]]], linger: float) -> tuple[
    Written, ScriptedConsumer, RecorderLoop
]:  # fmt: skip
    written, consumer = Written(), ScriptedConsumer(script)
    loop = RecorderLoop(cast(Any, consumer), cast(Any, written), linger=linger)
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
