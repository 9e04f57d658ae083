"""Stats buckets against the real Mongo-wire server: the shapes the stats processor writes and
the dashboard reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from hookbay_common.db import Collections, Database, StatsRepository
from hookbay_common.db.stats import DAY, HOUR, Bucket, Counts
from hookbay_common.ids import IdPrefix, new_id

T0 = datetime(2026, 11, 23, 22, 58, tzinfo=UTC)  # two minutes before a day boundary
E0 = int(T0.timestamp())


def counts(**values: int) -> Counts:
    return Counts(**values)  # type: ignore[arg-type]


@pytest.fixture
async def stats(db: Database) -> StatsRepository:
    return StatsRepository(db)


class TestCounts:
    def test_latency_and_codes_fall_in_their_bins(self) -> None:
        c = Counts()
        for latency in (10, 50, 51, 9_000, 60_000):
            c.observe_latency(latency)
        for code in (200, 204, 302, 404, 503, None, 102, 700):
            c.observe_code(code)
        assert c.latency_histogram == [2, 1, 0, 0, 0, 0, 0, 1, 1]
        assert c.latency_count == 5
        assert c.latency_sum_ms == 69_111
        assert c.codes == [2, 1, 1, 1, 3]
        assert c.latency_quantile_ms(0.5) == 100.0
        assert c.latency_quantile_ms(0.99) == 10_000.0

    def test_the_stored_text_round_trips_and_drops_trailing_zeros(self) -> None:
        c = counts(received=3, delivered=2, failed=1, attempts=3)
        c.observe_latency(12.25)
        c.observe_latency(400)
        assert c.to_text() == "3,0,2,1,0,0,3,2,412.25,1,0,0,1"
        assert Counts().add_text(c.to_text()) == c
        c.observe_code(None)
        assert c.to_text().endswith(",0,0,0,0,1")
        assert Counts().add_text(c.to_text()).add_text(c.to_text()) == Counts().add(c).add(c)
        assert Counts().to_text() == ""
        assert Counts().add_text("") == Counts()

    def test_add_and_rates(self) -> None:
        total = counts(delivered=3).add(counts(delivered=1, failed=1, received=4))
        assert total == counts(delivered=4, failed=1, received=4)
        assert total.success_rate == 0.8
        assert Counts().success_rate is None
        assert Counts().latency_mean_ms is None


class TestStatsRepository:
    async def test_minute_series_across_an_hour_and_a_day_boundary(
        self, stats: StatsRepository
    ) -> None:
        wh = new_id(IdPrefix.WEBHOOK)
        written = await stats.write(
            [
                Bucket(wh, "alice", "minute", E0, counts(received=1)),
                Bucket(wh, "alice", "minute", E0 + 60, counts(received=2)),
                Bucket(wh, "alice", "minute", E0 + 120, counts(received=4, rejected=1)),
                Bucket(wh, "alice", "hour", E0 // HOUR * HOUR, counts(received=3)),
                Bucket(wh, "alice", "hour", E0 // HOUR * HOUR + HOUR, counts(received=4)),
            ]
        )
        assert written == 3  # minute documents of 22h and 23h, one hour document (one day)
        points = await stats.series(wh, T0, T0 + timedelta(minutes=4), timedelta(minutes=1))
        assert [p.start for p in points] == [T0 + timedelta(minutes=i) for i in range(4)]
        assert [p.counts.received for p in points] == [1, 2, 4, 0]
        assert points[2].counts.rejected == 1
        coarse = await stats.series(wh, T0, T0 + timedelta(minutes=4), timedelta(minutes=5))
        assert [(p.start.minute, p.counts.received) for p in coarse] == [(55, 3), (0, 4)]
        hours = await stats.series(
            wh, T0 - timedelta(hours=2), T0 + timedelta(hours=2), timedelta(hours=1)
        )
        assert [p.counts.received for p in hours] == [0, 0, 3, 4, 0]  # 20h to 0h

    async def test_writing_a_bucket_again_replaces_it(self, stats: StatsRepository) -> None:
        wh = new_id(IdPrefix.WEBHOOK)
        await stats.write([Bucket(wh, "alice", "minute", E0, counts(received=1))])
        await stats.write([Bucket(wh, "alice", "minute", E0, counts(received=5))])
        await stats.write([Bucket(wh, "alice", "minute", E0, counts(received=5))])
        (point,) = await stats.series(wh, T0, T0 + timedelta(minutes=1), timedelta(minutes=1))
        assert point.counts == counts(received=5)

    async def test_owner_hours_and_isolation(self, stats: StatsRepository) -> None:
        owner, other = f"o{uuid4().hex[:10]}", f"o{uuid4().hex[:10]}"
        a, b, c = new_id(IdPrefix.WEBHOOK), new_id(IdPrefix.WEBHOOK), new_id(IdPrefix.WEBHOOK)
        hour = E0 // HOUR * HOUR
        await stats.write(
            [
                Bucket(a, owner, "hour", hour, counts(delivered=2)),
                Bucket(b, owner, "hour", hour + HOUR, counts(failed=1)),
                Bucket(c, other, "hour", hour, counts(delivered=9)),
            ]
        )
        series = await stats.owner_hours(owner, T0 - timedelta(hours=1), T0 + timedelta(hours=2))
        assert set(series) == {a, b}
        assert [p.counts.delivered for p in series[a]] == [0, 2, 0, 0]  # 21h to 0h
        assert [p.counts.failed for p in series[b]] == [0, 0, 1, 0]

    async def test_retention_deletes_whole_days_of_one_owner(
        self, stats: StatsRepository, db: Database
    ) -> None:
        owner, other = f"o{uuid4().hex[:10]}", f"o{uuid4().hex[:10]}"
        wh, wh2 = new_id(IdPrefix.WEBHOOK), new_id(IdPrefix.WEBHOOK)
        day = E0 // DAY * DAY
        old, kept = day - 3 * DAY, day
        await stats.write(
            [
                Bucket(wh, owner, "minute", old + 60, counts(received=1)),
                Bucket(wh, owner, "hour", old, counts(received=1)),
                Bucket(wh, owner, "minute", kept + 60, counts(received=1)),
                Bucket(wh, owner, "hour", kept, counts(received=1)),
                Bucket(wh2, other, "hour", old, counts(received=1)),
            ]
        )
        deleted = await stats.delete_owner_days(owner, datetime.fromtimestamp(day, UTC))
        assert deleted == 1
        left = await db[Collections.STATS_HOURS].find({"username": owner}).to_list(None)
        assert [d["day"] for d in left] == [kept // DAY]
        assert await db[Collections.STATS_MINUTES].count_documents({"webhook_id": wh}) == 1
        assert await db[Collections.STATS_HOURS].count_documents({"username": other}) == 1

    async def test_a_deleted_webhook_loses_its_stats(
        self, stats: StatsRepository, db: Database
    ) -> None:
        owner = f"o{uuid4().hex[:10]}"
        gone, kept = new_id(IdPrefix.WEBHOOK), new_id(IdPrefix.WEBHOOK)
        await stats.write(
            [
                Bucket(gone, owner, "minute", E0, counts(received=1)),
                Bucket(gone, owner, "hour", E0 // HOUR * HOUR, counts(received=1)),
                Bucket(kept, owner, "hour", E0 // HOUR * HOUR, counts(received=1)),
            ]
        )
        await stats.delete_webhook(gone, owner)
        assert await db[Collections.STATS_MINUTES].count_documents({"webhook_id": gone}) == 0
        assert await db[Collections.STATS_HOURS].count_documents({"webhook_id": gone}) == 0
        assert await db[Collections.STATS_HOURS].count_documents({"webhook_id": kept}) == 1
