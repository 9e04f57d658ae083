"""The retention job: delete the events (and their attempts) older than their owner's plan keeps,
and the owner's delivery stats of the days entirely older than that.

For each user, by username: the plan's ``retention_days`` from the plans file (a plan missing
from the file gets the default plan's, as ingest does; ``null`` keeps everything). The cut-off is
the run's start minus that many days; an event is deleted when ``created_at < cut-off``, so an
event exactly at the cut-off is kept. A plan change therefore takes effect at the next run.

Work goes page by page (``hookbay_common.db.events``: a page is up to 100 events of one
webhook in arrival order, with a summary of its first and last ``created_at``): a page entirely
older than the cut-off is deleted whole, by equality on (webhook, page); a page that straddles it
loses the ids of its older events. First the page's attempts are deleted, then the event bodies
and heads, then the page is recounted and the lock's lease renewed. Attempts first, so whatever
instant a run is killed at, no attempt outlives its event: a kill between the deletes leaves
events whose attempts are gone, and the next run deletes them. Every step is idempotent, so a
run resumes simply by running again, and two runs deleting the same page (one stalled past its
lease) stay correct; the lock only keeps them from doing the work twice. Memory holds the
owner's page summaries (one small document per 100 events). ``batch_size`` (below a page, 100)
splits a page into several steps, each followed by a lease renewal.

Stats (``hookbay_common.db.stats``) go by UTC day, after the owner's events: a day's minute and
hour buckets are deleted once the whole day is older than the cut-off (so they outlive the events
of that day by less than a day), each day by equality on (owner, day).

Deliveries held for the owner's paused or disabled destinations (``hookbay_common.db.held``)
go last: those held before the cut-off, whose events are older still (an event is held after
it arrives), page by page from each lane's head, by equality on (destination, page).

Running time grows with what is deleted, not with what is kept: every statement is an equality
match on indexed fields (on the embedded store too: deploy/local/ferretdb/indexes.sql).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Callable
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

from pymongo.errors import PyMongoError

from hookbay_common.clock import isoformat, utcnow
from hookbay_common.db import (
    AttemptRepository,
    EventRepository,
    HoldRepository,
    LockRepository,
    SessionRepository,
    StatsRepository,
    UserRepository,
)
from hookbay_common.db import client as db_client
from hookbay_common.db.client import Database
from hookbay_common.db.events import ExpiredPage
from hookbay_common.db.stats import DAY
from hookbay_common.errors import LockHeld, LockLost
from hookbay_common.logs import get_logger
from hookbay_common.plans import Plan, PlanBook
from hookbay_retention.settings import RetentionSettings

log = get_logger("hookbay.retention")

LOCK_NAME: Final = "retention"
LOCK_POLL: Final = 1.0
"""Seconds between two attempts to take a held lock while waiting for it."""


@dataclass(frozen=True)
class OwnerReport:
    """What a run deleted (a dry run: would delete) for one owner. ``plan`` is the user's;
    ``retention_days`` the one applied (the default plan's when ``plan`` is not in the file);
    ``cutoff`` is ``None`` when the plan keeps everything; ``stats_days`` counts the UTC days of
    stats deleted (would be)."""

    username: str
    plan: str
    retention_days: int | None
    cutoff: datetime | None
    events: int
    attempts: int
    stats_days: int = 0
    held: int = 0
    """Deliveries held (for a paused or disabled destination) since before the cut-off."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "username": self.username,
            "plan": self.plan,
            "retention_days": self.retention_days,
            "cutoff": isoformat(self.cutoff) if self.cutoff else None,
            "events": self.events,
            "attempts": self.attempts,
            "stats_days": self.stats_days,
            "held": self.held,
        }


@dataclass
class Timings:
    """Seconds spent per kind of step, summed over the run's batches."""

    batches: int = 0
    find: float = 0.0
    delete_attempts: float = 0.0
    delete_events: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "find_seconds": round(self.find, 3),
            "delete_attempts_seconds": round(self.delete_attempts, 3),
            "delete_events_seconds": round(self.delete_events, 3),
        }


@dataclass
class RetentionReport:
    """One run. ``started_at`` is the reference of every cut-off (the run's start unless given);
    ``sessions`` counts expired dashboard sessions deleted (would be)."""

    dry_run: bool
    started_at: datetime
    finished_at: datetime | None = None
    owners: list[OwnerReport] = field(default_factory=list)
    sessions: int = 0
    duration: float = 0.0
    """Seconds the run took (a monotonic clock), lock wait not included."""
    timings: Timings = field(default_factory=Timings)

    @property
    def events(self) -> int:
        return sum(o.events for o in self.owners)

    @property
    def attempts(self) -> int:
        return sum(o.attempts for o in self.owners)

    @property
    def stats_days(self) -> int:
        return sum(o.stats_days for o in self.owners)

    @property
    def held(self) -> int:
        return sum(o.held for o in self.owners)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "done",
            "dry_run": self.dry_run,
            "started_at": isoformat(self.started_at),
            "finished_at": isoformat(self.finished_at) if self.finished_at else None,
            "duration_seconds": round(self.duration, 3),
            "events": self.events,
            "attempts": self.attempts,
            "stats_days": self.stats_days,
            "held": self.held,
            "sessions": self.sessions,
            "timings": self.timings.to_dict(),
            "owners": [o.to_dict() for o in self.owners],
        }


class RetentionObserver(Protocol):
    """Follows a run as it goes (the CLI's progress bar)."""

    def started(self, owners: int) -> None: ...

    def batch_done(self, events: int, attempts: int) -> None: ...

    def owner_done(self, owner: OwnerReport) -> None: ...


class _Unobserved:
    def started(self, owners: int) -> None:
        return None

    def batch_done(self, events: int, attempts: int) -> None:
        return None

    def owner_done(self, owner: OwnerReport) -> None:
        return None


class RetentionJob:
    """Runs retention over every owner (see the module's docstring for the contract).

    ``run`` takes the ``retention`` lock first: when another run holds it, it waits up to
    ``lock_wait`` seconds, then raises ``LockHeld`` naming the holder and the end of its lease.
    The lease (``lease`` seconds) is renewed after every batch, and after an owner once a quarter
    of it has passed, and ended when the run ends, failed or not. A run whose lease was taken
    over (it stalled for longer than ``lease``) raises ``LockLost`` at its next renewal.
    ``dry_run`` deletes nothing and takes no lock."""

    def __init__(
        self,
        users: UserRepository,
        events: EventRepository,
        attempts: AttemptRepository,
        sessions: SessionRepository,
        locks: LockRepository,
        plans: PlanBook,
        *,
        stats: StatsRepository,
        holds: HoldRepository | None = None,
        batch_size: int = 1000,
        lease: float = 60.0,
        lock_wait: float = 0.0,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._users = users
        self._events = events
        self._attempts = attempts
        self._sessions = sessions
        self._stats = stats
        self._holds = holds
        self._locks = locks
        self._plans = plans
        self._batch_size = batch_size
        self._lease = lease
        self._lock_wait = lock_wait
        self._clock = clock
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._renewed_at = 0.0
        self.report: RetentionReport | None = None
        """The current run's report while it runs (what it did so far), then the last run's."""

    async def run(
        self, *, now: datetime | None = None, observer: RetentionObserver | None = None
    ) -> RetentionReport:
        """Delete what is expired as of ``now`` (default: once the lock is taken)."""
        await self._acquire()
        try:
            return await self._sweep(now or self._clock(), observer or _Unobserved(), dry=False)
        finally:
            # a failed release leaves the lease to lapse by itself
            with suppress(PyMongoError):
                await self._locks.release(LOCK_NAME, self.holder, now=self._clock())
                log.info("retention_lock_released", holder=self.holder)

    async def dry_run(
        self, *, now: datetime | None = None, observer: RetentionObserver | None = None
    ) -> RetentionReport:
        """What ``run`` would delete as of ``now``, per owner, exactly; deletes nothing."""
        return await self._sweep(now or self._clock(), observer or _Unobserved(), dry=True)

    async def _sweep(
        self, now: datetime, observer: RetentionObserver, *, dry: bool
    ) -> RetentionReport:
        now = now.replace(microsecond=now.microsecond // 1000 * 1000)  # stored precision
        begun = time.monotonic()
        report = self.report = RetentionReport(dry_run=dry, started_at=now)
        owners = await self._users.plans()
        log.info("retention_started", dry_run=dry, owners=len(owners), batch_size=self._batch_size)
        observer.started(len(owners))
        for username, plan_name in owners:
            owner = await self._owner(username, plan_name, now, report.timings, observer, dry=dry)
            report.owners.append(owner)
            observer.owner_done(owner)
            if not dry:
                await self._renew(force=False)
        if dry:
            report.sessions = await self._sessions.count_expired(now)
        else:
            report.sessions = await self._sessions.delete_expired(now)
        report.finished_at = self._clock()
        report.duration = time.monotonic() - begun
        log.info(
            "retention_finished", dry_run=dry, events=report.events, attempts=report.attempts,
            stats_days=report.stats_days, held=report.held, sessions=report.sessions, duration_seconds=round(report.duration, 3),
            **report.timings.to_dict(),
        )  # fmt: skip
        return report

    def _plan(self, name: str) -> Plan:
        if name in self._plans:
            return self._plans.get(name)
        return self._plans.get(self._plans.default)  # plan removed from the file: the default's

    async def _owner(
        self,
        username: str,
        plan_name: str,
        now: datetime,
        timings: Timings,
        observer: RetentionObserver,
        *,
        dry: bool,
    ) -> OwnerReport:
        days = self._plan(plan_name).retention_days
        if days is None:
            return OwnerReport(username, plan_name, None, None, 0, 0)
        cutoff = now - timedelta(days=days)
        events = attempts = 0
        pages = self._events.expired_pages(username, cutoff, self._batch_size)
        async with aclosing(pages):
            while True:
                started = time.perf_counter()
                expired = await anext(pages, None)
                timings.find += time.perf_counter() - started
                if expired is None:
                    break
                deleted_events, deleted_attempts = await self._batch(expired, timings, dry=dry)
                events += deleted_events
                attempts += deleted_attempts
                observer.batch_done(deleted_events, deleted_attempts)
                if not dry:
                    log.info(
                        "retention_batch_deleted", username=username, events=deleted_events,
                        attempts=deleted_attempts, batch=timings.batches,
                    )  # fmt: skip
                    await self._renew(force=True)
        stats_days = await self._stats_days(username, cutoff, dry=dry)
        held = 0
        if self._holds is not None:
            held = await self._holds.expire_owner(username, cutoff, dry=dry)
        owner = OwnerReport(username, plan_name, days, cutoff, events, attempts, stats_days, held)
        if events or attempts or stats_days or held or dry:
            log.info("retention_owner", dry_run=dry, **owner.to_dict())
        return owner

    async def _stats_days(self, username: str, cutoff: datetime, *, dry: bool) -> int:
        """The owner's days of stats entirely older than ``cutoff``: deleted, or counted."""
        if not dry:
            return await self._stats.delete_owner_days(username, cutoff)
        first_kept = int(cutoff.timestamp()) // DAY
        return sum(day < first_kept for day in await self._stats.owner_days(username))

    async def _batch(self, expired: ExpiredPage, timings: Timings, *, dry: bool) -> tuple[int, int]:
        """(events, attempts) deleted, or that would be, for one page."""
        if dry:
            attempts = await self._attempts.count_page(expired)
            timings.batches += 1
            return expired.count, attempts
        started = time.perf_counter()
        # attempts first: see the module docstring
        attempts = await self._attempts.delete_page(expired)
        middle = time.perf_counter()
        timings.delete_attempts += middle - started
        events = await self._events.delete_page(expired)
        timings.delete_events += time.perf_counter() - middle
        timings.batches += 1
        return events, attempts

    async def _acquire(self) -> None:
        await self._locks.ensure_collection()
        deadline = time.monotonic() + self._lock_wait
        waiting = False
        while True:
            now = self._clock()
            taken = await self._locks.acquire(
                LOCK_NAME, self.holder, now=now, lease_until=now + timedelta(seconds=self._lease)
            )
            if taken is not None:
                self._renewed_at = time.monotonic()
                log.info("retention_lock_acquired", holder=self.holder, lease_seconds=self._lease)
                return
            current = await self._locks.get(LOCK_NAME)
            if current is None or current.lease_until < now:
                continue  # released or lapsed between the two reads: try again at once
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LockHeld(LOCK_NAME, current.holder, current.lease_until)
            if not waiting:
                waiting = True
                log.info(
                    "retention_lock_waiting", holder=current.holder,
                    lease_until=isoformat(current.lease_until), wait_seconds=self._lock_wait,
                )  # fmt: skip
            await asyncio.sleep(min(LOCK_POLL, remaining))

    async def _renew(self, *, force: bool) -> None:
        if not force and time.monotonic() - self._renewed_at < self._lease / 4:
            return
        lease_until = self._clock() + timedelta(seconds=self._lease)
        if not await self._locks.renew(LOCK_NAME, self.holder, lease_until=lease_until):
            raise LockLost(LOCK_NAME, self.holder)
        self._renewed_at = time.monotonic()


def build_job(db: Database, plans: PlanBook, settings: RetentionSettings) -> RetentionJob:
    return RetentionJob(
        UserRepository(db), EventRepository(db), AttemptRepository(db), SessionRepository(db),
        LockRepository(db), plans, stats=StatsRepository(db), holds=HoldRepository(db),
        batch_size=settings.retention_batch_size,
        lease=settings.retention_lease, lock_wait=settings.retention_lock_wait,
    )  # fmt: skip


async def run_once(
    settings: RetentionSettings,
    plans: PlanBook,
    *,
    dry_run: bool,
    observer: RetentionObserver | None = None,
) -> RetentionReport:
    """One run (or dry run) on a client of its own, after the idempotent index migration (the
    ``owner_created`` index serves the job on MongoDB). ``LockHeld`` when another run holds
    the lock for longer than ``retention_lock_wait``."""
    mongo = db_client.connect(settings.mongo_url)
    try:
        db = db_client.database(mongo)
        await db_client.migrate(db)
        job = build_job(db, plans, settings)
        if dry_run:
            return await job.dry_run(observer=observer)
        return await job.run(observer=observer)
    finally:
        await mongo.close()
