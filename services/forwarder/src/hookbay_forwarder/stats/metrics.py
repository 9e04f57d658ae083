"""Prometheus metrics of the stats processor (its own registry, beside the consumer ones)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from hookbay_common.metrics import LATENCY_BUCKETS, name
from hookbay_forwarder.metrics import ConsumerMetrics


class StatsMetrics(ConsumerMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.records = Counter(
            name("stats_records"), "Source records turned into facts.", ["topic"], registry=r
        )
        self.late = Counter(
            name("stats_late_records"),
            "Records dropped as late: their minute ended more than the grace before the newest "
            "record of their facts partition.",
            registry=r,
        )
        self.unreadable = Counter(
            name("stats_unreadable"), "Source records that could not be read.", ["topic"],
            registry=r,
        )  # fmt: skip
        self.buckets_written = Counter(
            name("stats_buckets_written"), "Bucket documents upserted to MongoDB.", registry=r
        )
        self.write_latency = Histogram(
            name("stats_write_duration_seconds"), "Time to write one flush to MongoDB.",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.flushes = Counter(
            name("stats_flushes"),
            "Flushes to MongoDB that wrote every changed bucket.",
            registry=r,
        )
        self.since_flush = Gauge(
            name("stats_seconds_since_flush"),
            "Seconds since the changed buckets were last all written to MongoDB.",
            registry=r,
        )
        self.reseeks = Counter(
            name("stats_reseeks"),
            "Partitions read again from a record faust lost or handed over out of order.",
            ["topic"], registry=r,
        )  # fmt: skip
        self.open_buckets = Gauge(
            name("stats_open_buckets"), "Buckets held in the table (open or awaiting removal).",
            registry=r,
        )  # fmt: skip
