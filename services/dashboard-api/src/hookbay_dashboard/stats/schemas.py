"""Bodies of ``/webhooks/{name}/stats`` and the stats parts of the overview: what the stats
processor counted per webhook (``hookbay_common.db.stats.Counts``), summed over buckets."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from hookbay_common.db.stats import (
    CODE_CLASSES,
    DAY,
    HOUR,
    LATENCY_BOUNDS_MS,
    MINUTE,
    Counts,
    Point,
)
from hookbay_dashboard.schemas import Timestamp


class BucketSize(StrEnum):
    """A bucket of the series. Buckets start at whole multiples of their size in UTC (a day at
    00:00 UTC, 3 h at 00:00, 03:00, ... UTC)."""

    M1 = "1m"
    M5 = "5m"
    M15 = "15m"
    M30 = "30m"
    H1 = "1h"
    H3 = "3h"
    H6 = "6h"
    H12 = "12h"
    D1 = "1d"

    @property
    def seconds(self) -> int:
        return _BUCKET_SECONDS[self]

    @property
    def minute_sized(self) -> bool:
        """Read from the minute documents (one per webhook-hour), so bounded to short spans."""
        return self.seconds < HOUR


_BUCKET_SECONDS: Final = {
    BucketSize.M1: MINUTE, BucketSize.M5: 5 * MINUTE, BucketSize.M15: 15 * MINUTE,
    BucketSize.M30: 30 * MINUTE, BucketSize.H1: HOUR, BucketSize.H3: 3 * HOUR,
    BucketSize.H6: 6 * HOUR, BucketSize.H12: 12 * HOUR, BucketSize.D1: DAY,
}  # fmt: skip


class StatsWindow(StrEnum):
    """A window ending now (or at ``until``): the last hour in minutes, the last day or week in
    hours."""

    H1 = "1h"
    H24 = "24h"
    D7 = "7d"

    @property
    def seconds(self) -> int:
        return {StatsWindow.H1: HOUR, StatsWindow.H24: DAY, StatsWindow.D7: 7 * DAY}[self]

    @property
    def bucket(self) -> BucketSize:
        return BucketSize.M1 if self is StatsWindow.H1 else BucketSize.H1


class StatsCounters(BaseModel):
    """What happened to the webhook's events in a span (delivery chains and attempts are counted
    at the time of their attempts, events at their arrival)."""

    received: int = Field(description="Events accepted (answered 200).")
    rejected: int = Field(description="Events refused for their signature (answered 401).")
    delivered: int = Field(description="Delivery chains that ended with a 2xx.")
    failed: int = Field(
        description="Delivery chains that ended failed (retries exhausted or a non-retryable "
        "answer)."
    )
    retried: int = Field(description="Attempts that were retries.")
    replays: int = Field(description="Replay chains started.")
    attempts: int = Field(description="Delivery attempts, retries and replays included.")
    success_rate: float | None = Field(
        description="delivered / (delivered + failed); null when no chain ended."
    )

    @staticmethod
    def fields_of(counts: Counts) -> dict[str, int | float | None]:
        return dict(
            received=counts.received, rejected=counts.rejected, delivered=counts.delivered,
            failed=counts.failed, retried=counts.retried, replays=counts.replays,
            attempts=counts.attempts, success_rate=counts.success_rate,
        )  # fmt: skip

    @classmethod
    def of(cls, counts: Counts) -> StatsCounters:
        return cls.model_validate(cls.fields_of(counts))


class StatsPoint(StatsCounters):
    """One bucket of the series; a bucket without activity is all zeros."""

    start: Timestamp
    latency_mean_ms: float | None = Field(
        description="Mean destination latency of the bucket's attempts; null without any."
    )

    @classmethod
    def of_point(cls, point: Point) -> StatsPoint:
        return cls.model_validate(
            {
                **cls.fields_of(point.counts),
                "start": point.start,
                "latency_mean_ms": point.counts.latency_mean_ms,
            }
        )


class LatencyBin(BaseModel):
    le_ms: int | None = Field(
        description="Upper bound of the bin (inclusive), ms; null: the last bin, everything "
        "slower than the largest bound."
    )
    count: int


class LatencyStats(BaseModel):
    """Destination latency of the attempts that got an answer or timed out. Quantiles are read
    from the histogram: the upper bound of the bin the quantile falls in (the last bin answers
    its lower bound)."""

    count: int
    mean_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    histogram: list[LatencyBin]

    @classmethod
    def of(cls, counts: Counts) -> LatencyStats:
        bounds: list[int | None] = [*LATENCY_BOUNDS_MS, None]
        return cls(
            count=counts.latency_count, mean_ms=counts.latency_mean_ms,
            p50_ms=counts.latency_quantile_ms(0.5), p95_ms=counts.latency_quantile_ms(0.95),
            p99_ms=counts.latency_quantile_ms(0.99),
            histogram=[
                LatencyBin(le_ms=le, count=n)
                for le, n in zip(bounds, counts.latency_histogram, strict=True)
            ],
        )  # fmt: skip


class CodeClasses(BaseModel):
    """Attempts per answer class; ``error``: no HTTP answer (timeout, refused, TLS) or an odd
    status code."""

    model_config = ConfigDict(populate_by_name=True)

    c2xx: int = Field(alias="2xx")
    c3xx: int = Field(alias="3xx")
    c4xx: int = Field(alias="4xx")
    c5xx: int = Field(alias="5xx")
    error: int

    @classmethod
    def of(cls, counts: Counts) -> CodeClasses:
        return cls.model_validate(dict(zip(CODE_CLASSES, counts.codes, strict=True)))


class StatsTotals(StatsCounters):
    """The counters over the whole span, with latency and answer classes."""

    latency: LatencyStats
    codes: CodeClasses

    @classmethod
    def of_counts(cls, counts: Counts) -> StatsTotals:
        return cls.model_validate(
            {
                **cls.fields_of(counts),
                "latency": LatencyStats.of(counts),
                "codes": CodeClasses.of(counts),
            }
        )


class BucketRead(BaseModel):
    seconds: int
    label: BucketSize


class WebhookStats(BaseModel):
    """The webhook's stats over whole buckets from ``since`` to ``until``."""

    webhook: str = Field(description="The webhook's name.")
    since: Timestamp = Field(description="Start of the first bucket.")
    until: Timestamp = Field(
        description="End of the last bucket (later than now when the last bucket is the "
        "current one)."
    )
    bucket: BucketRead
    totals: StatsTotals
    series: list[StatsPoint] = Field(
        description="Every bucket from since to until, oldest first, zeros included."
    )
