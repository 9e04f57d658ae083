"""``GET /webhooks/{name}/stats`` and what else reads or removes the stats (the overview is in
test_events.py), on the real stack. Stats are seeded through ``StatsRepository.write`` as the
stats processor writes them: each minute bucket, and its hour's bucket holding their sum."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from hookbay_common.cli import build
from hookbay_common.clock import isoformat, utcnow
from hookbay_common.db.client import Collections
from hookbay_common.db.stats import HOUR, MINUTE, Bucket, Counts
from hookbay_common.models import Webhook
from tests.support.dashboard import Dashboard, Owner
from tests.support.factories import create_webhook

T0 = datetime(2026, 11, 20, 9, 58, tzinfo=UTC)
COUNTERS = ("received", "rejected", "delivered", "failed", "retried", "replays", "attempts")


def counts(
    latencies: tuple[float, ...] = (), codes: tuple[int | None, ...] = (), **values: int
) -> Counts:
    made = Counts(**values)  # type: ignore[arg-type]
    for latency in latencies:
        made.observe_latency(latency)
    for code in codes:
        made.observe_code(code)
    return made


async def seed(dashboard: Dashboard, webhook: Webhook, minutes: dict[datetime, Counts]) -> None:
    """The minute buckets of ``minutes`` and their hours' buckets, as the processor writes."""
    hours: dict[int, Counts] = defaultdict(Counts)
    buckets = []
    for at, made in minutes.items():
        start = int(at.timestamp()) // MINUTE * MINUTE
        buckets.append(Bucket(webhook.id, webhook.username, "minute", start, made))
        hours[start // HOUR * HOUR].add(made)
    buckets += [Bucket(webhook.id, webhook.username, "hour", h, c) for h, c in hours.items()]
    await dashboard.runtime.stats.write(buckets)


MINUTES = {
    T0: counts(
        received=3,
        delivered=2,
        retried=1,
        attempts=3,
        latencies=(40, 120, 3000),
        codes=(200, 200, 503),
    ),
    T0 + timedelta(minutes=1): counts(rejected=1),
    T0 + timedelta(minutes=3): counts(failed=1, attempts=1, latencies=(12_000,), codes=(None,)),
    T0 + timedelta(minutes=7): counts(
        received=2, delivered=1, replays=1, attempts=1, latencies=(60,), codes=(200,)
    ),
}


async def hook_with_stats(
    dashboard: Dashboard,
    owner: Owner,
    name: str = "orders",
    minutes: dict[datetime, Counts] = MINUTES,
) -> Webhook:
    webhook = await dashboard.runtime.webhooks.create(
        create_webhook(username=owner.username, name=name)
    )
    await seed(dashboard, webhook, minutes)
    return webhook


async def get_stats(owner: Owner, name: str = "orders", **params: Any) -> dict[str, Any]:
    response = await owner.client.get(f"/api/v1/webhooks/{name}/stats", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def at(moment: datetime) -> str:
    return isoformat(moment)


def zero_point(start: datetime) -> dict[str, Any]:
    return {
        "start": at(start), **dict.fromkeys(COUNTERS, 0), "success_rate": None,
        "latency_mean_ms": None,
    }  # fmt: skip


class TestSeries:
    async def test_totals_and_minutes_are_what_was_written(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await hook_with_stats(dashboard, owner)

        body = await get_stats(
            owner, since=at(T0), until=at(T0 + timedelta(minutes=10)), bucket="1m"
        )

        assert body["webhook"] == "orders"
        assert (body["since"], body["until"]) == (at(T0), at(T0 + timedelta(minutes=10)))
        assert body["bucket"] == {"seconds": 60, "label": "1m"}
        series = body["series"]
        assert [p["start"] for p in series] == [at(T0 + timedelta(minutes=i)) for i in range(10)]
        assert series[0] == {
            "start": at(T0), "received": 3, "rejected": 0, "delivered": 2, "failed": 0,
            "retried": 1, "replays": 0, "attempts": 3, "success_rate": 1.0,
            "latency_mean_ms": pytest.approx(3160 / 3),
        }  # fmt: skip
        assert series[1]["rejected"] == 1
        assert (series[3]["failed"], series[3]["success_rate"]) == (1, 0.0)
        assert series[3]["latency_mean_ms"] == 12_000
        assert (series[7]["received"], series[7]["replays"]) == (2, 1)
        assert [series[i] for i in (2, 4, 5, 6, 8, 9)] == [
            zero_point(T0 + timedelta(minutes=i)) for i in (2, 4, 5, 6, 8, 9)
        ]
        assert body["totals"] == {
            "received": 5, "rejected": 1, "delivered": 3, "failed": 1, "retried": 1,
            "replays": 1, "attempts": 5, "success_rate": 0.75,
            "latency": {
                "count": 5, "mean_ms": 15_220 / 5, "p50_ms": 250.0, "p95_ms": 10_000.0,
                "p99_ms": 10_000.0,
                "histogram": [
                    {"le_ms": le, "count": n}
                    for le, n in zip(
                        [50, 100, 250, 500, 1000, 2500, 5000, 10_000, None],
                        [1, 1, 1, 0, 0, 0, 1, 0, 1], strict=True,
                    )
                ],
            },
            "codes": {"2xx": 3, "3xx": 0, "4xx": 0, "5xx": 1, "error": 1},
        }  # fmt: skip

    async def test_minutes_fold_into_five_minute_buckets(self, dashboard: Dashboard) -> None:
        """09:58 to 10:08 in 5-minute buckets: 09:55, 10:00 and 10:05, the span widened to whole
        buckets."""
        owner = await dashboard.owner()
        await hook_with_stats(dashboard, owner)
        minute = await get_stats(owner, since=at(T0), until=at(T0 + timedelta(minutes=10)))
        body = await get_stats(
            owner, since=at(T0), until=at(T0 + timedelta(minutes=10)), bucket="5m"
        )

        assert body["bucket"] == {"seconds": 300, "label": "5m"}
        start = datetime(2026, 11, 20, 9, 55, tzinfo=UTC)
        assert (body["since"], body["until"]) == (at(start), at(start + timedelta(minutes=15)))
        series = body["series"]
        assert [p["start"] for p in series] == [
            at(start + timedelta(minutes=5 * i)) for i in range(3)
        ]
        assert [[p[c] for c in COUNTERS] for p in series] == [
            [3, 1, 2, 0, 1, 0, 3], [0, 0, 0, 1, 0, 0, 1], [2, 0, 1, 0, 0, 1, 1],
        ]  # fmt: skip
        assert body["totals"] == minute["totals"]
        assert minute["bucket"]["label"] == "1m"  # a range's default: the smallest that fits

    async def test_hours_and_days_from_the_hour_buckets(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        late = datetime(2026, 11, 19, 23, 30, tzinfo=UTC)  # the day before T0
        await hook_with_stats(dashboard, owner, minutes={**MINUTES, late: counts(received=4)})

        hours = await get_stats(
            owner, since=at(late), until=at(T0 + timedelta(hours=2)), bucket="1h"
        )
        days = await get_stats(owner, since=at(late), until=at(T0), bucket="1d")
        ranged = await get_stats(owner, since=at(T0 - timedelta(days=3)), until=at(T0))

        assert hours["since"] == at(datetime(2026, 11, 19, 23, tzinfo=UTC))
        received = {p["start"]: p["received"] for p in hours["series"] if p["received"]}
        assert received == {
            at(datetime(2026, 11, 19, 23, tzinfo=UTC)): 4,
            at(datetime(2026, 11, 20, 9, tzinfo=UTC)): 3,
            at(datetime(2026, 11, 20, 10, tzinfo=UTC)): 2,
        }
        assert len(hours["series"]) == 13  # 23h to 11h (until 11:58)
        assert hours["totals"]["failed"] == 1
        assert [(p["start"], p["received"]) for p in days["series"]] == [
            (at(datetime(2026, 11, 19, tzinfo=UTC)), 4), (at(datetime(2026, 11, 20, tzinfo=UTC)), 5),
        ]  # fmt: skip
        assert days["bucket"] == {"seconds": 86_400, "label": "1d"}
        assert ranged["bucket"]["label"] == "1h"  # over 48 hours: no minute-sized default
        assert len(ranged["series"]) == 73

    async def test_owners_with_the_same_webhook_name_see_only_their_own(
        self, dashboard: Dashboard
    ) -> None:
        alice, bob = await dashboard.owner(), await dashboard.owner()
        await hook_with_stats(dashboard, alice)
        await hook_with_stats(dashboard, bob, minutes={T0: counts(received=40)})
        window = {"since": at(T0), "until": at(T0 + timedelta(minutes=10))}
        assert (await get_stats(alice, **window))["totals"]["received"] == 5
        assert (await get_stats(bob, **window))["totals"]["received"] == 40


class TestWindows:
    async def test_the_default_and_each_window_end_now(self, dashboard: Dashboard) -> None:
        """No parameter: the last 24 hours in hours. 1h: the current minute and the 59 before,
        7d: 168 hours; each holds what was written in it."""
        owner = await dashboard.owner()
        now = utcnow()
        await hook_with_stats(
            dashboard, owner,
            minutes={now: counts(received=2), now - timedelta(minutes=61): counts(received=3)},
        )  # fmt: skip

        default, hour, week = (
            await get_stats(owner),
            await get_stats(owner, window="1h"),
            await get_stats(owner, window="7d"),
        )
        after = utcnow()

        for body, label, seconds, points in (
            (default, "1h", HOUR, 24), (hour, "1m", MINUTE, 60), (week, "1h", HOUR, 168),
        ):  # fmt: skip
            assert body["bucket"] == {"seconds": seconds, "label": label}
            assert len(body["series"]) == points
            since = datetime.fromisoformat(body["since"])
            until = datetime.fromisoformat(body["until"])
            assert until - since == timedelta(seconds=seconds * points)
            assert since.timestamp() % seconds == 0
            assert now < until
            assert until - timedelta(seconds=seconds) <= after
        assert default["totals"]["received"] == week["totals"]["received"] == 5
        assert hour["totals"]["received"] == 2  # 61 minutes ago is outside the hour

    async def test_a_window_ending_at_until(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await hook_with_stats(dashboard, owner)
        body = await get_stats(owner, window="1h", until=at(T0 + timedelta(minutes=8)))
        assert body["since"] == at(T0 + timedelta(minutes=8) - timedelta(hours=1))
        assert body["until"] == at(T0 + timedelta(minutes=8))
        assert body["totals"]["received"] == 5
        coarse = await get_stats(owner, window="24h", bucket="3h", until=at(T0))
        assert (len(coarse["series"]), coarse["bucket"]["seconds"]) == (8, 3 * HOUR)


class TestRefusals:
    @pytest.mark.parametrize(
        ("params", "parameter"),
        [
            ({"window": "2h"}, "window"),
            ({"bucket": "2m"}, "bucket"),
            ({"since": "yesterday"}, "since"),
            ({"since": "2026-11-20T09:58:00"}, "since"),  # no offset
            ({"until": "2026-11-31T00:00:00Z"}, "until"),
            ({"since": at(T0), "until": at(T0)}, "until"),
            ({"since": at(T0 + timedelta(minutes=1)), "until": at(T0)}, "until"),
            ({"window": "24h", "since": at(T0)}, "window"),
            ({"since": at(T0 - timedelta(days=70)), "until": at(T0), "bucket": "1h"}, "bucket"),
            ({"since": at(T0 - timedelta(days=3)), "until": at(T0), "bucket": "1m"}, "bucket"),
            ({"window": "7d", "bucket": "30m"}, "bucket"),
            ({"since": at(T0 - timedelta(days=5 * 365)), "until": at(T0)}, "since"),
        ],
    )
    async def test_each_bad_parameter_is_422_json(
        self, dashboard: Dashboard, params: dict[str, str], parameter: str
    ) -> None:
        owner = await dashboard.owner()
        await hook_with_stats(dashboard, owner)
        response = await owner.client.get("/api/v1/webhooks/orders/stats", params=params)
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["error"] == "Invalid request"
        assert parameter in body["message"]
        assert [d["loc"] for d in body["detail"]] == [["query", parameter]]

    async def test_another_owners_or_an_unknown_webhook_is_404(self, dashboard: Dashboard) -> None:
        victim, intruder = await dashboard.owner(), await dashboard.owner()
        await hook_with_stats(dashboard, victim)
        for name in ("orders", "no-such-hook"):
            response = await intruder.client.get(f"/api/v1/webhooks/{name}/stats")
            assert response.status_code == 404
            assert response.json()["error"] == "Webhook not found"

    async def test_without_credentials_401(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await hook_with_stats(dashboard, owner)
        async with dashboard.client() as anonymous:
            response = await anonymous.get("/api/v1/webhooks/orders/stats")
        assert response.status_code == 401
        assert response.json()["error"] == "Not authenticated"

    async def test_a_session_reads_them_too(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await hook_with_stats(dashboard, owner)
        client, _ = await owner.login()
        response = await client.get("/api/v1/webhooks/orders/stats", params={"window": "7d"})
        assert response.status_code == 200


async def stored(dashboard: Dashboard, webhook: Webhook) -> int:
    """Minute and hour documents of ``webhook``."""
    db = dashboard.runtime.db
    query = {"webhook_id": webhook.id}
    return sum(
        [
            await db[Collections.STATS_MINUTES].count_documents(query),
            await db[Collections.STATS_HOURS].count_documents(query),
        ]
    )


class TestDeletion:
    async def test_deleting_a_webhook_deletes_its_stats(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        gone = await hook_with_stats(dashboard, owner, "gone")
        kept = await hook_with_stats(dashboard, owner, "kept")
        assert await stored(dashboard, gone) == 3  # 09h and 10h minutes, the day's hours

        assert (await owner.client.delete("/api/v1/webhooks/gone")).status_code == 204

        assert await stored(dashboard, gone) == 0
        assert await stored(dashboard, kept) == 3
        again = await dashboard.runtime.webhooks.create(
            create_webhook(username=owner.username, name="gone")
        )
        fresh = await get_stats(owner, "gone", since=at(T0), until=at(T0 + timedelta(hours=1)))
        assert fresh["totals"]["received"] == 0
        assert again.id != gone.id

    async def test_the_cli_deletes_them_too(
        self, dashboard: Dashboard, env: dict[str, str]
    ) -> None:
        owner = await dashboard.owner()
        gone = await hook_with_stats(dashboard, owner, "gone")
        result = await asyncio.to_thread(
            CliRunner().invoke, build(), ["webhook", "delete", owner.username, "gone"], env=env
        )
        assert result.exit_code == 0, result.output
        assert await stored(dashboard, gone) == 0

    async def test_deleting_a_user_deletes_their_stats(self, dashboard: Dashboard) -> None:
        admin, owner, other = (
            await dashboard.owner(admin=True),
            await dashboard.owner(),
            await dashboard.owner(),
        )
        first = await hook_with_stats(dashboard, owner, "first")
        second = await hook_with_stats(dashboard, owner, "second")
        others = await hook_with_stats(dashboard, other, "first")

        response = await admin.client.delete(f"/api/v1/admin/users/{owner.username}")

        assert response.status_code == 204
        assert (await stored(dashboard, first), await stored(dashboard, second)) == (0, 0)
        assert await stored(dashboard, others) == 3
