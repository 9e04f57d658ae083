"""The retention job on the real Mongo-compatible server: cut-offs per plan, what is deleted and
what is not, plan changes, dry runs, the lock, sessions."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from hookbay_common.clock import utcnow
from hookbay_common.db import (
    AttemptRepository,
    DestinationRepository,
    EventRepository,
    HoldRepository,
    LockRepository,
    SessionRepository,
    StatsRepository,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.db.client import Collections, Database
from hookbay_common.db.stats import DAY, HOUR, Bucket, Counts
from hookbay_common.errors import LockHeld, LockLost
from hookbay_common.models import Session
from hookbay_common.plans import PlanBook, load_plans
from hookbay_common.secrets_box import SecretBox
from hookbay_retention.service import LOCK_NAME, OwnerReport, RetentionJob
from tests.support.factories import (
    TEST_SECRET_KEY,
    create_destination,
    create_user,
    create_webhook,
    unique_name,
)
from tests.support.retention import (
    create_owner,
    days_ago,
    orphaned_attempts,
    stored_ids,
)

PLANS_FILE = """
default: free
plans:
  free:    {rate_per_minute: 10,   retention_days: 30}
  starter: {rate_per_minute: 300,  retention_days: 90}
  pro:     {rate_per_minute: 1500, retention_days: null}
  team:    {rate_per_minute: 600,  retention_days: 7}
"""

MakeJob = Callable[..., RetentionJob]


@pytest.fixture
def plans(tmp_path: Path) -> PlanBook:
    path = tmp_path / "plans.yaml"
    path.write_text(PLANS_FILE)
    return load_plans(path)


@pytest.fixture
def make_job(rdb: Database, plans: PlanBook) -> MakeJob:
    def make(**options: float) -> RetentionJob:
        return RetentionJob(
            UserRepository(rdb), EventRepository(rdb), AttemptRepository(rdb),
            SessionRepository(rdb), LockRepository(rdb), plans, stats=StatsRepository(rdb),
            holds=HoldRepository(rdb), **{"batch_size": 1000, "lease": 60.0, "lock_wait": 0.0, **options},  # type: ignore[arg-type]
        )  # fmt: skip

    return make


def around_cutoff(now: datetime, days: int) -> list[datetime]:
    """Expired: a year older, and 1 ms before the cut-off; kept: exactly at it, 1 ms after it."""
    return [
        days_ago(now, days + 365),
        days_ago(now, days, ms=-1),
        days_ago(now, days),
        days_ago(now, days, ms=1),
    ]


def by_owner(reports: list[OwnerReport]) -> dict[str, OwnerReport]:
    return {r.username: r for r in reports}


class TestCutoffs:
    async def test_boundary_for_each_plan(
        self, rdb: Database, make_job: MakeJob, plans: PlanBook
    ) -> None:
        """Free 30 d, starter 90 d, a custom plan of the file 7 d, a plan no longer in the file
        (the default's 30 d): the two older events go with their attempts, the event exactly at
        the cut-off and the newer one stay. Pro keeps a ten-year-old event."""
        now = utcnow()
        owners = {
            "free": await create_owner(rdb, "free", around_cutoff(now, 30), attempts_each=2),
            "starter": await create_owner(rdb, "starter", around_cutoff(now, 90)),
            "team": await create_owner(rdb, "team", around_cutoff(now, 7)),
            "legacy": await create_owner(rdb, "legacy", around_cutoff(now, 30)),
            "pro": await create_owner(rdb, "pro", [days_ago(now, 3650), days_ago(now, 1)]),
        }
        report = await make_job().run(now=now)

        kept: set[str] = set()
        kept_attempts: set[str] = set()
        for plan, owner in owners.items():
            stay = owner.ids() if plan == "pro" else {e.id for e in owner.events[2:]}
            kept |= stay
            kept_attempts |= owner.attempt_ids(stay)
        assert await stored_ids(rdb, Collections.EVENTS) == kept
        assert await stored_ids(rdb, Collections.ATTEMPTS) == kept_attempts

        reports = by_owner(report.owners)
        for plan, days in (("free", 30), ("starter", 90), ("team", 7), ("legacy", 30)):
            owner = owners[plan]
            assert reports[owner.username] == OwnerReport(
                owner.username, plan, days, now - timedelta(days=days), 2,
                4 if plan == "free" else 2,
            )  # fmt: skip
        assert reports[owners["pro"].username] == OwnerReport(
            owners["pro"].username, "pro", None, None, 0, 0
        )
        assert (report.events, report.attempts) == (8, 10)
        assert report.started_at == now

    async def test_nothing_else_is_touched(self, rdb: Database, make_job: MakeJob) -> None:
        """Users, webhooks, other owners' old events under a longer plan, and status stubs
        (an attempt recorded before its event) stay."""
        now = utcnow()
        free = await create_owner(rdb, "free", [days_ago(now, 40), days_ago(now, 10)])
        starter = await create_owner(rdb, "starter", [days_ago(now, 40)])
        await WebhookRepository(rdb, SecretBox(TEST_SECRET_KEY)).create(
            create_webhook(username=free.username)
        )
        await rdb[Collections.EVENTS].insert_one({"_id": "ev_stub", "status_key": ""})
        users = await stored_ids(rdb, Collections.USERS)
        webhooks = await stored_ids(rdb, Collections.WEBHOOKS)

        await make_job().run(now=now)

        assert await stored_ids(rdb, Collections.EVENTS) == {
            free.events[1].id, starter.events[0].id, "ev_stub",
        }  # fmt: skip
        assert await stored_ids(rdb, Collections.ATTEMPTS) == (
            free.attempt_ids({free.events[1].id}) | starter.attempt_ids()
        )
        assert await stored_ids(rdb, Collections.USERS) == users
        assert await stored_ids(rdb, Collections.WEBHOOKS) == webhooks

    async def test_many_batches_and_again(self, rdb: Database, make_job: MakeJob) -> None:
        """Batches of 7 over 40 expired events; a second run finds nothing (idempotent)."""
        now = utcnow()
        owner = await create_owner(
            rdb, "free", [days_ago(now, 31, ms=i) for i in range(40)] + [days_ago(now, 1)]
        )
        first = await make_job(batch_size=7).run(now=now)
        assert (first.events, first.attempts, first.timings.batches) == (40, 40, 6)
        assert await stored_ids(rdb, Collections.EVENTS) == {owner.events[-1].id}
        second = await make_job(batch_size=7).run(now=now)
        assert (second.events, second.attempts, second.timings.batches) == (0, 0, 0)


class TestPlanChange:
    async def test_takes_effect_at_the_next_run(self, rdb: Database, make_job: MakeJob) -> None:
        now = utcnow()
        owner = await create_owner(
            rdb, "starter", [days_ago(now, 120), days_ago(now, 60), days_ago(now, 20)]
        )
        users = UserRepository(rdb)
        old, middle, recent = (e.id for e in owner.events)

        await make_job().run(now=now)
        assert await stored_ids(rdb, Collections.EVENTS) == {middle, recent}

        await users.update(owner.username, plan="pro")  # upgrade: keeps more
        assert (await make_job().run(now=now)).events == 0
        assert await stored_ids(rdb, Collections.EVENTS) == {middle, recent}

        await users.update(owner.username, plan="free")  # downgrade: prunes more
        report = await make_job().run(now=now)
        assert (report.events, report.attempts) == (1, 1)
        assert await stored_ids(rdb, Collections.EVENTS) == {recent}
        assert await stored_ids(rdb, Collections.ATTEMPTS) == owner.attempt_ids({recent})
        assert old not in await stored_ids(rdb, Collections.EVENTS)


class TestDryRun:
    async def test_exact_counts_per_owner_and_nothing_deleted(
        self, rdb: Database, make_job: MakeJob
    ) -> None:
        """Exact per owner, with no lock taken: it works while another run holds the lock."""
        now = utcnow()
        free = await create_owner(rdb, "free", around_cutoff(now, 30), attempts_each=3)
        starter = await create_owner(rdb, "starter", [days_ago(now, 100)] * 5)
        pro = await create_owner(rdb, "pro", [days_ago(now, 1000)])
        await _hold(rdb, "other-host:1:abc", seconds=60)
        events = await stored_ids(rdb, Collections.EVENTS)
        attempts = await stored_ids(rdb, Collections.ATTEMPTS)

        report = await make_job(batch_size=2).dry_run(now=now)

        reports = by_owner(report.owners)
        assert (reports[free.username].events, reports[free.username].attempts) == (2, 6)
        assert reports[free.username].cutoff == now - timedelta(days=30)
        assert (reports[starter.username].events, reports[starter.username].attempts) == (5, 5)
        assert reports[pro.username] == OwnerReport(pro.username, "pro", None, None, 0, 0)
        assert report.dry_run
        assert (report.events, report.attempts) == (7, 11)
        assert await stored_ids(rdb, Collections.EVENTS) == events
        assert await stored_ids(rdb, Collections.ATTEMPTS) == attempts


async def _hold(db: Database, holder: str, *, seconds: float) -> datetime:
    """Take the retention lock as another run would; when its lease ends."""
    now = utcnow()
    until = now + timedelta(seconds=seconds)
    assert await LockRepository(db).acquire(LOCK_NAME, holder, now=now, lease_until=until)
    return until


class TestLock:
    async def test_held_lock_skips_at_once(self, rdb: Database, make_job: MakeJob) -> None:
        now = utcnow()
        owner = await create_owner(rdb, "free", [days_ago(now, 40)])
        until = await _hold(rdb, "other-host:1:abc", seconds=60)
        with pytest.raises(LockHeld) as raised:
            await make_job().run(now=now)
        assert raised.value.holder == "other-host:1:abc"
        assert raised.value.lease_until == until
        assert "other-host:1:abc" in raised.value.message
        assert await stored_ids(rdb, Collections.EVENTS) == owner.ids()

    async def test_waits_for_a_lease_to_lapse(self, rdb: Database, make_job: MakeJob) -> None:
        """A run killed with -9 leaves its lease; the next run that waits proceeds once it
        lapsed, and holds the lock itself while it works."""
        now = utcnow()
        await create_owner(rdb, "free", [days_ago(now, 40)])
        until = await _hold(rdb, "killed-host:9:dead", seconds=2)
        job = make_job(lock_wait=30)
        report = await job.run()
        assert report.events == 1
        assert report.started_at >= until
        lease = await LockRepository(rdb).get(LOCK_NAME)
        assert lease is not None
        assert lease.holder == job.holder
        assert lease.lease_until <= utcnow()  # released at the end

    async def test_waits_for_a_release(self, rdb: Database, make_job: MakeJob) -> None:
        now = utcnow()
        await create_owner(rdb, "free", [days_ago(now, 40)])
        await _hold(rdb, "other-host:1:abc", seconds=600)
        job = asyncio.create_task(make_job(lock_wait=30).run())
        released_at = utcnow()
        assert await LockRepository(rdb).release(LOCK_NAME, "other-host:1:abc", now=released_at)
        report = await job
        assert report.events == 1
        assert report.started_at >= released_at

    async def test_two_overlapping_runs(self, rdb: Database, make_job: MakeJob) -> None:
        """Started together without waiting: one does the work, the other stops with LockHeld
        naming it; started together with waiting: the second runs after the first and finds
        nothing left."""
        now = utcnow()
        owner = await create_owner(rdb, "free", [days_ago(now, 40, ms=i) for i in range(30)])
        first, second = make_job(batch_size=5), make_job(batch_size=5)
        results = await asyncio.gather(
            first.run(now=now), second.run(now=now), return_exceptions=True
        )
        done = [r for r in results if not isinstance(r, BaseException)]
        held = [r for r in results if isinstance(r, LockHeld)]
        assert len(done) == len(held) == 1, results
        assert done[0].events == 30
        assert held[0].holder in {first.holder, second.holder}
        assert await stored_ids(rdb, Collections.EVENTS) == set()

        more = await create_owner(rdb, "free", [days_ago(now, 40, ms=i) for i in range(30)])
        reports = await asyncio.gather(
            make_job(batch_size=5, lock_wait=60).run(now=now),
            make_job(batch_size=5, lock_wait=60).run(now=now),
        )
        assert sorted(r.events for r in reports) == [0, 30]
        assert await stored_ids(rdb, Collections.EVENTS) == set()
        assert owner.username != more.username

    async def test_a_run_whose_lease_was_taken_stops(self, rdb: Database, plans: PlanBook) -> None:
        """It stalled past its lease and another run took the lock: it stops at its next
        renewal, after a whole batch (attempts, then events), with no attempt orphaned."""
        now = utcnow()
        await create_owner(rdb, "free", [days_ago(now, 40, ms=i) for i in range(10)])

        class TakenOverAtFirstRenewal(LockRepository):
            async def renew(self, name: str, holder: str, *, lease_until: datetime) -> bool:
                if await LockRepository(rdb).release(name, holder, now=utcnow()):  # it lapses ...
                    await _hold(rdb, "intruder:2:beef", seconds=60)  # ... and is taken
                return await super().renew(name, holder, lease_until=lease_until)

        job = RetentionJob(
            UserRepository(rdb), EventRepository(rdb), AttemptRepository(rdb),
            SessionRepository(rdb), TakenOverAtFirstRenewal(rdb), plans,
            stats=StatsRepository(rdb), batch_size=3,
        )  # fmt: skip
        with pytest.raises(LockLost):
            await job.run(now=now)
        assert len(await stored_ids(rdb, Collections.EVENTS)) == 7
        assert await orphaned_attempts(rdb) == set()
        lease = await LockRepository(rdb).get(LOCK_NAME)
        assert lease is not None
        assert lease.holder == "intruder:2:beef"


class TestSessions:
    async def test_expired_sessions_are_deleted(self, rdb: Database, make_job: MakeJob) -> None:
        now = utcnow()
        user = create_user()
        await UserRepository(rdb).create(user)
        sessions = SessionRepository(rdb)
        for expires in (now - timedelta(hours=1), now, now + timedelta(hours=1)):
            await sessions.create(
                Session(
                    id=unique_name("s"), username=user.username, csrf_token="x",
                    created_at=now - timedelta(hours=12), expires_at=expires,
                )
            )  # fmt: skip
        assert (await make_job().dry_run(now=now)).sessions == 2
        assert (await make_job().run(now=now)).sessions == 2
        assert len(await stored_ids(rdb, Collections.SESSIONS)) == 1


async def stats_on_days(db: Database, username: str, days: list[int]) -> None:
    """A minute and an hour bucket of one webhook of ``username`` on each UTC day of ``days``
    (Unix days), in the day's last hour."""
    webhook_id = unique_name("wh_")
    last_hour = [day * DAY + 23 * HOUR for day in days]
    await StatsRepository(db).write(
        [Bucket(webhook_id, username, "minute", h + 60, Counts(received=2)) for h in last_hour]
        + [Bucket(webhook_id, username, "hour", h, Counts(received=2)) for h in last_hour]
    )


async def minute_days(db: Database, username: str) -> list[int]:
    found = db[Collections.STATS_MINUTES].find({"username": username}, {"day": 1})
    return sorted([doc["day"] async for doc in found])


class TestStats:
    async def test_days_entirely_older_than_the_cutoff_go(
        self, rdb: Database, make_job: MakeJob
    ) -> None:
        """Free (30 d): the days before the cut-off's day go, minute and hour buckets; the
        cut-off's own day (partly younger) and later stay. Starter (90 d) keeps 40-day-old
        stats; pro keeps ten-year-old ones; the owners' events are pruned as before."""
        now = utcnow()
        cut_day = int((now - timedelta(days=30)).timestamp()) // DAY
        today = int(now.timestamp()) // DAY
        free = await create_owner(rdb, "free", [days_ago(now, 40), days_ago(now, 1)])
        starter = await create_owner(rdb, "starter", [days_ago(now, 40)])
        pro = await create_owner(rdb, "pro", [days_ago(now, 3650)])
        await stats_on_days(rdb, free.username, [cut_day - 10, cut_day - 1, cut_day, today])
        await stats_on_days(rdb, starter.username, [today - 40, today])
        await stats_on_days(rdb, pro.username, [today - 3650])
        stats = StatsRepository(rdb)

        report = await make_job().run(now=now)

        reports = by_owner(report.owners)
        assert reports[free.username].stats_days == 2
        assert reports[free.username].events == 1
        assert await stats.owner_days(free.username) == [cut_day, today]
        assert await minute_days(rdb, free.username) == [cut_day, today]
        assert await stats.owner_days(starter.username) == [today - 40, today]
        assert await minute_days(rdb, pro.username) == [today - 3650]
        assert (reports[starter.username].stats_days, reports[pro.username].stats_days) == (0, 0)
        assert report.stats_days == 2
        assert report.to_dict()["stats_days"] == 2
        again = await make_job().run(now=now)
        assert again.stats_days == 0

    async def test_a_dry_run_counts_the_days_and_deletes_none(
        self, rdb: Database, make_job: MakeJob
    ) -> None:
        now = utcnow()
        today = int(now.timestamp()) // DAY
        free = await create_owner(rdb, "free", [days_ago(now, 1)])
        await stats_on_days(rdb, free.username, [today - 50, today - 45, today - 2])

        report = await make_job().dry_run(now=now)

        assert by_owner(report.owners)[free.username].stats_days == 2
        assert await StatsRepository(rdb).owner_days(free.username) == [
            today - 50, today - 45, today - 2,
        ]  # fmt: skip
        assert await minute_days(rdb, free.username) == [today - 50, today - 45, today - 2]


class TestHeld:
    async def test_deliveries_held_before_the_cutoff_go_per_owner_plan(
        self, rdb: Database, make_job: MakeJob
    ) -> None:
        """Free (30 d): held 40 days ago goes, held a day ago stays and is still drained;
        pro keeps everything; a dry run counts and deletes nothing."""
        now = utcnow()
        free = await create_owner(rdb, "free", [])
        pro = await create_owner(rdb, "pro", [])
        holds = HoldRepository(rdb)
        lanes = {}
        for owner in (free, pro):
            destination = create_destination(username=owner.username)
            await DestinationRepository(rdb, SecretBox(TEST_SECRET_KEY)).create(destination)
            await holds.append(destination.id, [b"old-1", b"old-2"], held_at=days_ago(now, 40))
            await holds.append(destination.id, [b"new"], held_at=days_ago(now, 1))
            lanes[owner.username] = destination.id

        dry = await make_job().dry_run(now=now)
        assert by_owner(dry.owners)[free.username].held == 2
        assert (await holds.state(lanes[free.username])).count == 3

        report = await make_job().run(now=now)

        assert (by_owner(report.owners)[free.username].held, report.held) == (2, 2)
        assert report.to_dict()["held"] == 2
        kept = await holds.read(lanes[free.username], after=-1, limit=10)
        assert [h.task for h in kept] == [b"new"]
        everything = await holds.read(lanes[pro.username], after=-1, limit=10)
        assert [h.task for h in everything] == [b"old-1", b"old-2", b"new"]
        assert (await make_job().run(now=now)).held == 0
