"""What the stats count, with no Kafka, faust or MongoDB in it: what one source record adds to
its webhook's ``Counts`` (a *fact*), and how a batch of facts changes the minute and hour buckets
of the table (``BucketBook``), with the lateness, the clocks and the offsets that make a replay
count nothing twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack
from faust.types import EventT

from hookbay_common.db.stats import HOUR, MINUTE, Bucket, Counts, Size
from hookbay_common.logs import get_logger
from hookbay_common.models import AttemptTrigger
from hookbay_common.topics import Topics
from hookbay_common.wire import WireError, is_delivery_record, peek_attempt, peek_event
from hookbay_forwarder.stats.metrics import StatsMetrics

log = get_logger("hookbay.stats")

CLOCK_KEY: Final = "~clock"


# --- facts: what one record adds -------------------------------------------------------------


def event_counts(fields: dict[str, Any]) -> Counts:
    return Counts(rejected=1) if fields.get("rejected_reason") else Counts(received=1)


def attempt_counts(fields: dict[str, Any]) -> Counts:
    counts = Counts(attempts=1)
    code = fields.get("status_code")
    trigger = fields.get("trigger")
    if trigger == AttemptTrigger.RETRY:
        counts.retried = 1
    elif trigger == AttemptTrigger.REPLAY and fields.get("number") == 1:
        counts.replays = 1
    if code is not None and 200 <= code < 300:
        counts.delivered = 1
    elif not fields.get("will_retry"):
        counts.failed = 1
    if fields.get("latency_ms") is not None:
        counts.observe_latency(float(fields["latency_ms"]))
    counts.observe_code(code)
    return counts


def facts_of(
    topics: Topics, events: Sequence[EventT[Any]], metrics: StatsMetrics
) -> dict[str, bytes]:
    """The facts of a batch of source records: one message per webhook, keyed by its id."""
    bundles: dict[str, dict[str, Any]] = {}
    read: dict[str, int] = defaultdict(int)
    for event in events:
        message = event.message
        topic = message.topic
        try:
            if topic == topics.events:
                fields, at_field, src = peek_event(message.value or b""), "created_at", "e"
                counts = event_counts(fields)
            elif is_delivery_record(message.value or b""):
                continue  # a delivery's status: its attempts are what the stats count
            else:
                fields, at_field, src = peek_attempt(message.value or b""), "started_at", "a"
                counts = attempt_counts(fields)
            webhook_id, username, at = fields["webhook_id"], fields["username"], fields[at_field]
            if not (isinstance(webhook_id, str) and isinstance(username, str)):
                raise WireError("no webhook")
            at = int(at)
        except (WireError, KeyError, TypeError, ValueError):
            metrics.unreadable.labels(topic).inc()
            log.error(
                "unreadable_message", topic=topic, partition=message.partition,
                offset=message.offset,
            )  # fmt: skip
            continue
        bundle = bundles.setdefault(webhook_id, {"w": webhook_id, "u": username, "r": []})
        bundle["r"].append([f"{src}{message.partition}", message.offset, at, counts.to_text()])
        read[topic] += 1
    for topic, n in read.items():
        metrics.records.labels(topic).inc(n)
    return {w: _pack(b) for w, b in bundles.items()}


def _pack(value: Any) -> bytes:
    packed = msgpack.packb(value, use_bin_type=True)
    assert isinstance(packed, bytes)
    return packed


# --- buckets: the table ----------------------------------------------------------------------


def bucket_key(webhook_id: str, size: str, start: int) -> str:
    return f"{webhook_id}|{size}|{start}"


def clock_key(partition: int) -> str:
    return f"{CLOCK_KEY}|{partition}"


@dataclass
class BucketBook:
    """The buckets of the table, as the facts agent and the flush loop see them.

    ``data`` is the faust table's store: ``bucket_key -> {"w", "u", "z" ("m"|"h"), "t" (start,
    Unix seconds), "p" (facts partition), "c" (counts, ``Counts.to_text``), "o" ({source partition: last
    offset counted}), "v" (version)}`` and ``clock_key(p) -> newest event time of the
    partition`` (Unix seconds).
    ``send`` writes one key's new value (``None``: removed) to the changelog of a partition.
    """

    data: Any
    send: Callable[[int, str, Any], None]
    grace: float
    late: Callable[[], None] = lambda: None
    open: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Bucket keys per facts partition (rebuilt from ``data`` when a partition is first seen)."""
    indexed: set[int] = field(default_factory=set)
    written: dict[str, int] = field(default_factory=dict)
    """Version of each bucket last written to MongoDB."""

    def apply(self, batch: Iterable[tuple[int, bytes]]) -> None:
        """Count a batch of fact messages ``(facts partition, value)``. Synchronous on purpose:
        nothing else runs on the loop between reading the batch and queueing its changelog, so
        no commit can fall in between."""
        touched: dict[int, dict[str, tuple[dict[str, Any], Counts]]] = defaultdict(dict)
        clocks: dict[int, float] = {}
        for partition, value in batch:
            self._index(partition)
            bundle = msgpack.unpackb(value, raw=False)
            webhook_id, username = bundle["w"], bundle["u"]
            clock = clocks.get(partition, self.data.get(clock_key(partition), 0))
            mine = touched[partition]
            for src, offset, at_ms, counts_text in bundle["r"]:
                at = at_ms // 1000
                if at // MINUTE * MINUTE + MINUTE + self.grace <= clock:
                    self.late()
                    continue
                for size, unit in (("m", MINUTE), ("h", HOUR)):
                    key = bucket_key(webhook_id, size, at // unit * unit)
                    work = mine.get(key)
                    if work is None:
                        work = mine[key] = self._copy(
                            key, webhook_id, username, size, at, unit, partition
                        )
                    bucket, counts = work
                    if offset <= bucket["o"].get(src, -1):
                        continue  # counted before a restart: the fact was sent again
                    counts.add_text(counts_text)
                    bucket["o"][src] = offset
                clock = max(clock, at)
            clocks[partition] = clock
        for partition, buckets in touched.items():
            for key, (bucket, counts) in buckets.items():
                bucket["c"] = counts.to_text()
                bucket["v"] += 1
                self.data[key] = bucket
                self.open[partition].add(key)
                self.send(partition, key, bucket)
        for partition, clock in clocks.items():
            if clock != self.data.get(clock_key(partition)):
                self.data[clock_key(partition)] = clock
                self.send(partition, clock_key(partition), clock)
            self._remove_closed(partition, clock)

    def _copy(
        self, key: str, webhook_id: str, username: str, size: str, at: int, unit: int, p: int
    ) -> tuple[dict[str, Any], Counts]:
        """A bucket to change in this batch: a copy of the stored one (or a new one) and its
        counts, folded back into it once at the end of the batch."""
        stored = self.data.get(key)
        if stored is None:
            bucket = {"w": webhook_id, "u": username, "z": size, "t": at // unit * unit, "p": p,
                      "c": "", "o": {}, "v": 0}  # fmt: skip
            return bucket, Counts()
        return {**stored, "o": dict(stored["o"])}, Counts().add_text(stored["c"])

    def closed(self, bucket: dict[str, Any], newest: float) -> bool:
        unit = MINUTE if bucket["z"] == "m" else HOUR
        return bool(bucket["t"] + unit + self.grace <= newest)

    def _remove_closed(self, partition: int, newest: float) -> None:
        """Remove the closed buckets of ``partition`` that were written to MongoDB as they are."""
        for key in list(self.open[partition]):
            bucket = self.data.get(key)
            if bucket is None:
                self.open[partition].discard(key)
            elif self.closed(bucket, newest) and self.written.get(key) == bucket["v"]:
                del self.data[key]
                self.send(partition, key, None)
                self.open[partition].discard(key)
                self.written.pop(key, None)

    def _index(self, partition: int) -> None:
        if partition in self.indexed:
            return
        for key, value in list(self.data.items()):
            if not key.startswith(CLOCK_KEY) and value.get("p") == partition:
                self.open[partition].add(key)
        self.indexed.add(partition)

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions this worker no longer owns: their buckets are another worker's now."""
        for partition in partitions:
            for key in self.open.pop(partition, set()):
                self.data.pop(key, None)
                self.written.pop(key, None)
            self.data.pop(clock_key(partition), None)
            self.indexed.discard(partition)

    def unwritten(self, partitions: Iterable[int]) -> list[tuple[str, dict[str, Any]]]:
        """Buckets of ``partitions`` changed since they were last written (all of them after a
        restart)."""
        wanted = set(partitions)
        return [
            (key, value)
            for key, value in list(self.data.items())
            if not key.startswith(CLOCK_KEY)
            and value["p"] in wanted
            and self.written.get(key) != value["v"]
        ]


def to_bucket(value: dict[str, Any]) -> Bucket:
    size: Size = "minute" if value["z"] == "m" else "hour"
    return Bucket(value["w"], value["u"], size, value["t"], Counts().add_text(value["c"]))
