"""A webhook's delivery stats over a window or a date range, from the buckets the stats
processor writes (``hookbay_common.db.stats``). The cost of a request depends on its span and
bucket (at most 48 minute documents, or one hour document per day), never on the number of
events. Another owner's webhook is reported exactly like a missing one (``WebhookNotFound``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from hookbay_common.clock import utcnow
from hookbay_common.db import StatsRepository, WebhookRepository
from hookbay_common.db.stats import Counts, Point
from hookbay_common.errors import HookbayError
from hookbay_dashboard.stats.schemas import (
    BucketRead,
    BucketSize,
    StatsPoint,
    StatsTotals,
    StatsWindow,
    WebhookStats,
)

MAX_POINTS: Final = 1500
"""The most buckets one answer holds."""
MAX_MINUTE_SPAN: Final = timedelta(hours=48)
"""The longest span minute-sized buckets may cover (each hour is one minute document)."""


class InvalidStatsQuery(HookbayError):
    """A stats query the schema admits but that makes no sense together (422, the body of every
    other invalid parameter: ``detail`` names the parameter)."""

    status_code = 422
    error = "Invalid request"

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(
            f"{parameter}: {message}",
            detail=[{"loc": ["query", parameter], "msg": message, "type": "value_error"}],
        )


@dataclass(frozen=True)
class Span:
    """``count`` buckets of ``bucket`` from ``first`` (Unix seconds, a multiple of its size)."""

    first: int
    count: int
    bucket: BucketSize

    @property
    def since(self) -> datetime:
        return datetime.fromtimestamp(self.first, UTC)

    @property
    def until(self) -> datetime:
        return datetime.fromtimestamp(self.first + self.count * self.bucket.seconds, UTC)

    @classmethod
    def of_window(
        cls, window: StatsWindow, end: datetime, bucket: BucketSize | None = None
    ) -> Span:
        """The window's buckets, the last one holding the instant before ``end``: ``1h`` is the
        current minute and the 59 before it, ``24h`` the current hour and the 23 before it."""
        size = bucket or window.bucket
        _check_size(size, timedelta(seconds=window.seconds))
        step = size.seconds
        count = math.ceil(window.seconds / step)
        _check_count(count)
        last = (math.ceil(end.timestamp()) - 1) // step * step
        return cls(last - (count - 1) * step, count, size)

    @classmethod
    def of_range(cls, since: datetime, until: datetime, bucket: BucketSize | None = None) -> Span:
        """The buckets from the one holding ``since`` to the one holding the instant before
        ``until``; without ``bucket`` the smallest allowed one that gives at most
        ``MAX_POINTS``."""
        if until <= since:
            raise InvalidStatsQuery("until", "must be later than since")
        if bucket is None:
            for size in BucketSize:
                span = cls._range(since, until, size)
                if span.count <= MAX_POINTS and _size_fits(size, until - since):
                    return span
            raise InvalidStatsQuery("since", f"the range holds more than {MAX_POINTS} days")
        _check_size(bucket, until - since)
        span = cls._range(since, until, bucket)
        _check_count(span.count)
        return span

    @classmethod
    def _range(cls, since: datetime, until: datetime, size: BucketSize) -> Span:
        step = size.seconds
        first = math.floor(since.timestamp()) // step * step
        last = (math.ceil(until.timestamp()) - 1) // step * step
        return cls(first, (last - first) // step + 1, size)


def _size_fits(bucket: BucketSize, span: timedelta) -> bool:
    return not (bucket.minute_sized and span > MAX_MINUTE_SPAN)


def _check_size(bucket: BucketSize, span: timedelta) -> None:
    if not _size_fits(bucket, span):
        raise InvalidStatsQuery(
            "bucket",
            f"{bucket.value} buckets cover at most 48 hours; use 1h or larger for longer spans",
        )


def _check_count(count: int) -> None:
    if count > MAX_POINTS:
        raise InvalidStatsQuery(
            "bucket",
            f"the span holds {count} buckets of this size, more than {MAX_POINTS}: "
            "use a larger bucket or a shorter span",
        )


def totals(points: list[Point]) -> Counts:
    total = Counts()
    for point in points:
        total.add(point.counts)
    return total


class StatsService:
    def __init__(
        self,
        webhooks: WebhookRepository,
        stats: StatsRepository,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._webhooks = webhooks
        self._stats = stats
        self._clock = clock

    async def for_webhook(
        self,
        username: str,
        name: str,
        *,
        window: StatsWindow | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        bucket: BucketSize | None = None,
    ) -> WebhookStats:
        """``window`` (``24h`` when neither it nor ``since`` is given) ending at ``until`` (now
        by default), or ``since`` to ``until``; ``InvalidStatsQuery`` for both at once, an empty
        range, over ``MAX_POINTS`` buckets, or minute-sized buckets over more than 48 hours."""
        span = self.span(window=window, since=since, until=until, bucket=bucket)
        webhook = await self._webhooks.require(username, name)
        points = await self._stats.series(
            webhook.id, span.since, span.until, timedelta(seconds=span.bucket.seconds)
        )
        return WebhookStats(
            webhook=webhook.name, since=span.since, until=span.until,
            bucket=BucketRead(seconds=span.bucket.seconds, label=span.bucket),
            totals=StatsTotals.of_counts(totals(points)),
            series=[StatsPoint.of_point(p) for p in points],
        )  # fmt: skip

    def span(
        self,
        *,
        window: StatsWindow | None,
        since: datetime | None,
        until: datetime | None,
        bucket: BucketSize | None,
    ) -> Span:
        if since is not None:
            if window is not None:
                raise InvalidStatsQuery(
                    "window", "give either window or since (with until), not both"
                )
            return Span.of_range(since, until or self._clock(), bucket)
        return Span.of_window(window or StatsWindow.H24, until or self._clock(), bucket)
