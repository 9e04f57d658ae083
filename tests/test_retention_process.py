"""``python -m hookbay_retention`` as a real process on the real database: killed with -9 in the
middle and run again, exit codes, the dry run's report, metrics handed to a Pushgateway."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hookbay_common.clock import isoformat, utcnow
from hookbay_common.db import LockRepository, StatsRepository
from hookbay_common.db.client import Collections, Database
from hookbay_common.db.stats import DAY, Bucket, Counts
from hookbay_retention.service import LOCK_NAME
from tests.support import retention as support
from tests.support.net import free_port
from tests.support.retention import (
    Pushgateway,
    create_owner,
    days_ago,
    orphaned_attempts,
    stored_ids,
)
from tests.support.waiting import until

RETENTION = [sys.executable, "-m", "hookbay_retention"]
# the retention tests' fixtures (their own database, a stand-in Pushgateway)
retention_url = support.retention_url
retention_db_session = support.retention_db_session
rdb = support.rdb
retention_env = support.retention_env
pushgateway = support.pushgateway


@dataclass
class Run:
    proc: asyncio.subprocess.Process
    log_path: Path

    def events(self) -> list[dict[str, Any]]:
        entries = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue
        return entries

    def named(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("event") == event]


@pytest.fixture
def start(retention_env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    started: list[Run] = []

    async def start(*args: str, **overrides: str) -> Run:
        log_path = tmp_path / f"retention-{len(started)}.log"
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                *RETENTION, *args, env={**os.environ, **retention_env, **overrides},
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            )  # fmt: skip
        run = Run(proc, log_path)
        started.append(run)
        return run

    yield start
    for run in started:
        if run.proc.returncode is None:
            run.proc.kill()


async def finished(run: Run, timeout: float = 120) -> tuple[int, bytes]:
    async with asyncio.timeout(timeout):
        stdout, _ = await run.proc.communicate()
    assert run.proc.returncode is not None
    return run.proc.returncode, stdout


class TestKilledMidway:
    async def test_kill_9_then_run_again_finishes(self, rdb: Database, start: Any) -> None:
        """Killed after its first batch: some expired events are gone, none of their attempts
        is orphaned, the lease is left behind. The next run (lease 2 s) waits for it to lapse,
        then deletes everything expired and nothing else."""
        now = utcnow()
        expired = await create_owner(rdb, "free", [days_ago(now, 31, ms=i) for i in range(600)])
        kept_new = await create_owner(rdb, "free", [days_ago(now, 29, ms=i) for i in range(20)])
        kept_pro = await create_owner(rdb, "pro", [days_ago(now, 365, ms=i) for i in range(20)])
        kept = kept_new.ids() | kept_pro.ids()
        kept_attempts = kept_new.attempt_ids() | kept_pro.attempt_ids()
        small = {"HOOKBAY_RETENTION_BATCH_SIZE": "10", "HOOKBAY_RETENTION_LEASE": "2"}

        first = await start(**small)
        await until(lambda: first.named("retention_batch_deleted"), 120, interval=0.01,
                    what="the first batch logged")  # fmt: skip
        first.proc.send_signal(signal.SIGKILL)
        status, _ = await finished(first)
        assert status == -signal.SIGKILL

        remaining = await stored_ids(rdb, Collections.EVENTS)
        assert kept < remaining
        assert len(remaining - kept) < len(expired.events)  # it did delete something ...
        assert remaining - kept  # ... and left work behind
        assert await orphaned_attempts(rdb) == set()
        lease = await LockRepository(rdb).get(LOCK_NAME)
        assert lease is not None
        assert lease.lease_until > lease.acquired_at  # left behind, never released

        second = await start(**small, HOOKBAY_RETENTION_LOCK_WAIT="60")
        status, _ = await finished(second)
        assert status == 0, second.log_path.read_text()
        assert await stored_ids(rdb, Collections.EVENTS) == kept
        assert await stored_ids(rdb, Collections.ATTEMPTS) == kept_attempts
        [done] = second.named("retention_finished")
        assert done["events"] == len(remaining - kept)
        assert second.named("retention_lock_acquired")


class TestInterrupted:
    async def test_sigterm_stops_and_releases_the_lock(self, rdb: Database, start: Any) -> None:
        """SIGTERM (a CronJob's pod deleted) cancels the run between two statements: exit 1,
        the lock released at once (no waiting for the lease), no attempt orphaned."""
        now = utcnow()
        await create_owner(rdb, "free", [days_ago(now, 31, ms=i) for i in range(300)])
        run = await start(HOOKBAY_RETENTION_BATCH_SIZE="1", HOOKBAY_RETENTION_LEASE="600")
        await until(lambda: run.named("retention_batch_deleted"), 120, interval=0.01,
                    what="the first batch logged")  # fmt: skip
        run.proc.send_signal(signal.SIGTERM)
        status, _ = await finished(run)
        assert status == 1, run.log_path.read_text()
        assert run.named("retention_interrupted")
        assert run.named("retention_lock_released")
        lease = await LockRepository(rdb).get(LOCK_NAME)
        assert lease is not None
        assert lease.lease_until <= utcnow()
        assert await orphaned_attempts(rdb) == set()


class TestExitCodes:
    async def test_done_with_metrics_pushed_and_written(
        self, rdb: Database, start: Any, pushgateway: Pushgateway, tmp_path: Path
    ) -> None:
        now = utcnow()
        owner = await create_owner(rdb, "starter", [days_ago(now, 91), days_ago(now, 89)])
        old_day = int(days_ago(now, 92).timestamp()) // DAY
        stats = StatsRepository(rdb)
        await stats.write(
            [Bucket(f"wh_{owner.username}", owner.username, "hour", old_day * DAY, Counts())]
        )
        textfile = tmp_path / "retention.prom"
        run = await start(
            HOOKBAY_RETENTION_PUSHGATEWAY_URL=pushgateway.url,
            HOOKBAY_RETENTION_METRICS_FILE=str(textfile),
        )
        status, stdout = await finished(run)
        assert status == 0, run.log_path.read_text()
        assert stdout == b""
        [pushed] = pushgateway.received
        assert pushed.path == "/metrics/job/hookbay_retention"
        assert b"hookbay_retention_deleted_events_total 1.0" in pushed.body
        assert "hookbay_retention_deleted_attempts_total 1.0" in textfile.read_text()
        assert "hookbay_retention_deleted_daily_stats_total 1.0" in textfile.read_text()
        assert await stats.owner_days(owner.username) == []
        assert all(e["service"] == "retention" for e in run.events())

    async def test_lock_held_exits_0_with_one_message(self, rdb: Database, start: Any) -> None:
        now = utcnow()
        owner = await create_owner(rdb, "free", [days_ago(now, 40)])
        lease_until = now + timedelta(minutes=5)
        await LockRepository(rdb).acquire(
            LOCK_NAME, "cron-host:7:cafe", now=now, lease_until=lease_until
        )
        run = await start()
        status, _ = await finished(run)
        assert status == 0
        [skipped] = run.named("retention_skipped")
        assert skipped["holder"] == "cron-host:7:cafe"
        assert skipped["lease_until"] == isoformat(lease_until)
        assert "cron-host:7:cafe" in skipped["message"]
        assert await stored_ids(rdb, Collections.EVENTS) == owner.ids()

    async def test_dry_run_prints_the_report(self, rdb: Database, start: Any) -> None:
        now = utcnow()
        owner = await create_owner(rdb, "free", [days_ago(now, 40)] * 2, attempts_each=3)
        run = await start("--dry-run")
        status, stdout = await finished(run)
        assert status == 0
        report = json.loads(stdout)
        [mine] = [o for o in report["owners"] if o["username"] == owner.username]
        assert (mine["events"], mine["attempts"]) == (2, 6)
        assert await stored_ids(rdb, Collections.EVENTS) == owner.ids()

    async def test_database_unreachable_exits_1(self, start: Any) -> None:
        run = await start(HOOKBAY_MONGO_URL=f"mongodb://127.0.0.1:{free_port()}/nothing")
        status, _ = await finished(run)
        assert status == 1
        [failed] = run.named("retention_failed")
        assert failed["error_type"] == "ServerSelectionTimeoutError"

    async def test_invalid_configuration_exits_2(self, start: Any, tmp_path: Path) -> None:
        run = await start(HOOKBAY_RETENTION_BATCH_SIZE="0")
        assert (await finished(run))[0] == 2
        broken = tmp_path / "plans.yaml"
        broken.write_text("default: gold\nplans: {free: {rate_per_minute: 1, retention_days: 1}}")
        run = await start(HOOKBAY_PLANS_FILE=str(broken))
        assert (await finished(run))[0] == 2
        [invalid] = run.named("retention_invalid_configuration")
        assert "gold" in invalid["error"]
