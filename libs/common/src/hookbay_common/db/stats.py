"""Per-webhook delivery stats: minute and hour buckets written by the stats processor.

The stats processor (``hookbay_forwarder.stats``) counts, per webhook and per minute and hour of
event time, what arrived and what delivery did (``Counts``). It writes the buckets here; the
dashboard reads them. Two collections, so that every read is a handful of look-ups by ``_id``
(or one equality query per day for an owner's overview) whatever the number of events:

- ``stats_minutes``: one document per webhook and clock hour, ``_id`` ``"<webhook_id>:<hour>"``
  (``hour`` = Unix seconds // 3600), holding that hour's minutes: ``m: {"0".."59": counts}``.
- ``stats_hours``: one document per webhook and UTC day, ``_id`` ``"<webhook_id>:<day>"`` (``day``
  = Unix seconds // 86400), holding that day's hours: ``h: {"0".."23": counts}``.

Each entry's counts are one string of comma-separated numbers (``Counts.to_text``): FerretDB's
cost of returning a document follows its number of fields, and with the counts as a
sub-document (23 values each) a day's document took 1.5 ms and an hour's 5 ms to read.

Both carry ``webhook_id``, ``username`` and ``day`` (the retention and overview queries are
equalities on ``username`` and ``day``). A bucket is written whole (``$set`` of its entry) every
time it changes, so writing the same bucket again changes nothing: the processor may re-send after
a restart. Minutes without activity have no entry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.documents import gather_limited

MINUTE: Final = 60
HOUR: Final = 3600
DAY: Final = 86_400
LATENCY_BOUNDS_MS: Final = (50, 100, 250, 500, 1000, 2500, 5000, 10_000)
"""Upper bounds of the destination-latency histogram; a ninth bin holds everything slower."""
CODE_CLASSES: Final = ("2xx", "3xx", "4xx", "5xx", "error")
"""Answer classes of attempts; ``error``: no HTTP answer (timeout, refused, TLS) or an odd code."""

Size = Literal["minute", "hour"]

_SCALARS: Final = (
    "received", "rejected", "delivered", "failed", "retried", "replays", "attempts",
    "latency_count", "latency_sum_ms",
)  # fmt: skip
"""The order of ``Counts.to_text``: these, then the latency histogram, then the codes. New
counts go at the end (an older entry then simply has fewer numbers)."""


def _number(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{round(value, 3)}"
    return str(int(value))


def _zeros(n: int) -> list[int]:
    return [0] * n


@dataclass
class Counts:
    """What happened to one webhook in one bucket.

    ``received``: events accepted (answered 200). ``rejected``: events refused for their signature
    (answered 401, recorded). ``delivered``: delivery chains that ended with a 2xx; ``failed``:
    chains that ended failed (retries exhausted or a non-retryable answer); ``retried``: attempts
    that were retries; ``replays``: replay chains started; ``attempts``: all attempts. Latency is
    over attempts that got an answer or timed out (``latency_count``, ``latency_sum_ms``, the
    histogram over ``LATENCY_BOUNDS_MS``); ``codes`` counts attempts per ``CODE_CLASSES``.
    """

    received: int = 0
    rejected: int = 0
    delivered: int = 0
    failed: int = 0
    retried: int = 0
    replays: int = 0
    attempts: int = 0
    latency_count: int = 0
    latency_sum_ms: float = 0.0
    latency_histogram: list[int] = field(default_factory=lambda: _zeros(len(LATENCY_BOUNDS_MS) + 1))
    codes: list[int] = field(default_factory=lambda: _zeros(len(CODE_CLASSES)))

    def add(self, other: Counts) -> Counts:
        """Add ``other`` into this one (in place) and return it."""
        for name in _SCALARS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.latency_histogram = [
            a + b for a, b in zip(self.latency_histogram, other.latency_histogram, strict=True)
        ]
        self.codes = [a + b for a, b in zip(self.codes, other.codes, strict=True)]
        return self

    def observe_latency(self, latency_ms: float) -> None:
        self.latency_count += 1
        self.latency_sum_ms += latency_ms
        for i, bound in enumerate(LATENCY_BOUNDS_MS):
            if latency_ms <= bound:
                self.latency_histogram[i] += 1
                return
        self.latency_histogram[-1] += 1

    def observe_code(self, status_code: int | None) -> None:
        index = (status_code // 100) - 2 if status_code is not None else -1
        self.codes[index if 0 <= index < len(CODE_CLASSES) - 1 else -1] += 1

    @property
    def empty(self) -> bool:
        return self == Counts()

    @property
    def success_rate(self) -> float | None:
        """Delivered over delivered + failed chains; ``None`` when no chain ended."""
        ended = self.delivered + self.failed
        return self.delivered / ended if ended else None

    @property
    def latency_mean_ms(self) -> float | None:
        return self.latency_sum_ms / self.latency_count if self.latency_count else None

    def latency_quantile_ms(self, q: float) -> float | None:
        """The histogram bound at or below which ``q`` of the latencies fall (an upper estimate;
        the slowest bin answers its lower bound, there is no upper one)."""
        if not self.latency_count:
            return None
        rank = q * self.latency_count
        seen = 0
        for i, n in enumerate(self.latency_histogram):
            seen += n
            if n and seen >= rank:
                return float(LATENCY_BOUNDS_MS[min(i, len(LATENCY_BOUNDS_MS) - 1)])
        return float(LATENCY_BOUNDS_MS[-1])

    def to_text(self) -> str:
        """The stored and sent form (MongoDB entries, the stats processor's facts and table):
        every count in ``_SCALARS`` order, then the histogram and the codes, comma-separated,
        trailing zeros left out (``""``: nothing happened)."""
        values: list[float] = [getattr(self, name) for name in _SCALARS]
        values += self.latency_histogram + self.codes
        while values and not values[-1]:
            values.pop()
        return ",".join(_number(v) for v in values)

    def add_text(self, text: str) -> Counts:
        """Add a stored entry (``to_text``) into this one, in place: the hot path of reads and
        of the stats processor."""
        if not text:
            return self
        parts = text.split(",")
        scalars = len(_SCALARS)
        for name, part in zip(_SCALARS, parts, strict=False):
            setattr(self, name, getattr(self, name) + (float(part) if "." in part else int(part)))
        rest = [int(p) for p in parts[scalars:]]
        bins = len(self.latency_histogram)
        for i, n in enumerate(rest[:bins]):
            self.latency_histogram[i] += n
        for i, n in enumerate(rest[bins:]):
            self.codes[i] += n
        return self


@dataclass(frozen=True)
class Bucket:
    """One webhook's counts over one minute or hour starting at ``start`` (Unix seconds)."""

    webhook_id: str
    username: str
    size: Size
    start: int
    counts: Counts


@dataclass(frozen=True)
class Point:
    start: datetime
    counts: Counts


def _epoch(at: datetime) -> int:
    return int(at.timestamp())


def _at(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def minutes_doc_id(webhook_id: str, hour: int) -> str:
    return f"{webhook_id}:{hour}"


def hours_doc_id(webhook_id: str, day: int) -> str:
    return f"{webhook_id}:{day}"


class StatsRepository:
    def __init__(self, db: Database) -> None:
        self._minutes = db[Collections.STATS_MINUTES]
        self._hours = db[Collections.STATS_HOURS]

    async def write(self, buckets: Iterable[Bucket]) -> int:
        """Upsert ``buckets`` (one update per document they fall in); returns documents written."""
        grouped: dict[tuple[Size, str, int], list[Bucket]] = defaultdict(list)
        for b in buckets:
            container = b.start // HOUR if b.size == "minute" else b.start // DAY
            grouped[(b.size, b.webhook_id, container)].append(b)

        async def one(size: Size, webhook_id: str, container: int, group: list[Bucket]) -> None:
            if size == "minute":
                collection, doc_id = self._minutes, minutes_doc_id(webhook_id, container)
                start, unit, prefix = container * HOUR, MINUTE, "m"
            else:
                collection, doc_id = self._hours, hours_doc_id(webhook_id, container)
                start, unit, prefix = container * DAY, HOUR, "h"
            update: dict[str, Any] = {
                "webhook_id": webhook_id,
                "username": group[0].username,
                "day": start // DAY,
                "start": _at(start),
            }
            for b in group:
                update[f"{prefix}.{(b.start - start) // unit}"] = b.counts.to_text()
            await collection.update_one({"_id": doc_id}, {"$set": update}, upsert=True)

        await gather_limited(one(*key, group) for key, group in grouped.items())
        return len(grouped)

    async def series(
        self, webhook_id: str, since: datetime, until: datetime, bucket: timedelta
    ) -> list[Point]:
        """Every bucket of ``bucket`` length from the one holding ``since`` to the one holding
        the instant before ``until``, zeros included. ``bucket``: a whole number of minutes
        dividing an hour (read from minute documents) or of hours dividing a day, or whole days
        (read from hour documents)."""
        step = int(bucket.total_seconds())
        first, last = _epoch(since) // step * step, (_epoch(until) - 1) // step * step
        points = {start: Counts() for start in range(first, last + 1, step)}
        if step < HOUR:
            ids = [minutes_doc_id(webhook_id, h) for h in range(first // HOUR, last // HOUR + 1)]
            collection, unit, prefix = self._minutes, MINUTE, "m"
        else:
            ids = [hours_doc_id(webhook_id, d) for d in range(first // DAY, last // DAY + 1)]
            collection, unit, prefix = self._hours, HOUR, "h"
        docs = await gather_limited(collection.find_one({"_id": i}) for i in ids)
        for doc in docs:
            if doc is not None:
                _fold(points, doc, prefix, unit, step)
        return [Point(_at(start), counts) for start, counts in points.items()]

    async def owner_hours(
        self, username: str, since: datetime, until: datetime
    ) -> dict[str, list[Point]]:
        """Hourly points of every webhook of ``username`` with activity between ``since`` and
        ``until`` (one equality query per day), zeros included; webhooks without any are absent."""
        first, last = _epoch(since) // HOUR * HOUR, (_epoch(until) - 1) // HOUR * HOUR
        found = await gather_limited(
            self._hours.find({"username": username, "day": day}).to_list(None)
            for day in range(first // DAY, last // DAY + 1)
        )
        series: dict[str, dict[int, Counts]] = {}
        for docs in found:
            for doc in docs:
                points = series.setdefault(
                    doc["webhook_id"], {s: Counts() for s in range(first, last + 1, HOUR)}
                )
                _fold(points, doc, "h", HOUR, HOUR)
        return {
            webhook_id: [Point(_at(s), c) for s, c in points.items()]
            for webhook_id, points in series.items()
        }

    async def owner_days(self, username: str) -> list[int]:
        """The UTC days (Unix seconds // ``DAY``) on which ``username`` has stats, oldest first
        (one equality query on the hour documents, the days ``delete_owner_days`` goes by)."""
        found = self._hours.find({"username": username}, {"day": 1})
        return sorted({doc["day"] async for doc in found})

    async def delete_owner_days(self, username: str, before: datetime) -> int:
        """Delete the stats of ``username`` on the UTC days ending at or before ``before`` (a day
        is kept until all of it is older); returns the days deleted."""
        cutoff = _epoch(before) // DAY
        days = {
            doc["day"]
            async for doc in self._hours.find({"username": username}, {"day": 1})
            if doc["day"] < cutoff
        }
        for day in sorted(days):
            await self._minutes.delete_many({"username": username, "day": day})
            await self._hours.delete_many({"username": username, "day": day})
        return len(days)

    async def delete_webhook(self, webhook_id: str, username: str) -> None:
        """Forget a deleted webhook's stats (one equality query per day it has)."""
        days = {
            doc["day"]
            async for doc in self._hours.find({"username": username}, {"day": 1, "webhook_id": 1})
            if doc["webhook_id"] == webhook_id
        }
        for day in sorted(days):
            await self._minutes.delete_many({"webhook_id": webhook_id, "day": day})
            await self._hours.delete_many({"webhook_id": webhook_id, "day": day})


def _fold(
    points: dict[int, Counts], doc: Mapping[str, Any], prefix: str, unit: int, step: int
) -> None:
    """Add the entries of one stored document into ``points`` (bucket start -> counts)."""
    base = _epoch(doc["start"])
    for offset, entry in doc.get(prefix, {}).items():
        at = base + int(offset) * unit
        target = points.get(at // step * step)
        if target is not None:
            target.add_text(entry)
