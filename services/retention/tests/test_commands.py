"""``hookbay-admin retention run``: click's runner (in a thread, since the command runs its own event
loop) for output and exit codes, the installed console script on a pseudo-terminal for the bar."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hookbay_common.cli import build
from hookbay_common.clock import isoformat, utcnow
from hookbay_common.db import LockRepository
from hookbay_common.db.client import Collections, Database
from hookbay_retention.service import LOCK_NAME
from tests.support.retention import create_owner, days_ago, stored_ids
from tests.support.terminal import HOOKBAY, run_with_terminal_stderr

Invoke = Callable[..., Awaitable[Result]]


@pytest.fixture
def hookbay(retention_env: dict[str, str]) -> Invoke:
    runner = CliRunner()

    async def invoke(*args: str, **overrides: str) -> Result:
        return await asyncio.to_thread(
            runner.invoke, build(), list(args), env={**retention_env, **overrides},
            catch_exceptions=False,
        )  # fmt: skip

    return invoke


def log_events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines()]


class TestRetentionRun:
    async def test_dry_run_json(self, hookbay: Invoke, rdb: Database) -> None:
        now = utcnow()
        free = await create_owner(rdb, "free", [days_ago(now, 31)] * 3, attempts_each=2)
        pro = await create_owner(rdb, "pro", [days_ago(now, 400)])
        events = await stored_ids(rdb, Collections.EVENTS)

        result = await hookbay("retention", "run", "--dry-run", "--json")

        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert (report["status"], report["dry_run"]) == ("done", True)
        assert (report["events"], report["attempts"]) == (3, 6)
        owners = {o["username"]: o for o in report["owners"]}
        assert owners[free.username]["events"] == 3
        assert owners[free.username]["attempts"] == 6
        assert owners[free.username]["plan"] == "free"
        assert owners[free.username]["retention_days"] == 30
        cutoff = owners[free.username]["cutoff"]
        assert cutoff == isoformat(
            utcnow().fromisoformat(report["started_at"]) - timedelta(days=30)
        )
        assert owners[pro.username] == {
            "username": pro.username, "plan": "pro", "retention_days": None, "cutoff": None,
            "events": 0, "attempts": 0, "stats_days": 0, "held": 0,
        }  # fmt: skip
        assert await stored_ids(rdb, Collections.EVENTS) == events
        # stderr is not a terminal: the job's JSON log lines
        assert [e["event"] for e in log_events(result.stderr)][-1] == "retention_finished"

    async def test_run_deletes_and_writes_metrics(
        self, hookbay: Invoke, rdb: Database, tmp_path: Path
    ) -> None:
        now = utcnow()
        free = await create_owner(rdb, "free", [days_ago(now, 31), days_ago(now, 1)])
        metrics = tmp_path / "retention.prom"

        result = await hookbay(
            "retention", "run", "--json", HOOKBAY_RETENTION_METRICS_FILE=str(metrics)
        )

        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["events"] == 1
        assert await stored_ids(rdb, Collections.EVENTS) == {free.events[1].id}
        assert "hookbay_retention_deleted_events_total 1.0" in metrics.read_text()
        events = [e["event"] for e in log_events(result.stderr)]
        assert "retention_batch_deleted" in events

    async def test_human_summary(self, hookbay: Invoke, rdb: Database) -> None:
        free = await create_owner(rdb, "free", [days_ago(utcnow(), 31)])
        result = await hookbay("retention", "run")
        assert result.exit_code == 0, result.output
        assert free.username in result.stdout
        assert "deleted 1 events and 1 attempts of 1 owners" in result.stdout

    async def test_lock_held_is_one_line_and_exit_0(self, hookbay: Invoke, rdb: Database) -> None:
        now = utcnow()
        owner = await create_owner(rdb, "free", [days_ago(now, 31)])
        until = now + timedelta(seconds=120)
        await LockRepository(rdb).acquire(
            LOCK_NAME, "cron-host:42:feed", now=now, lease_until=until
        )

        result = await hookbay("retention", "run")
        assert result.exit_code == 0, result.output
        assert result.stdout == ""
        line = [
            entry for entry in result.stderr.splitlines() if entry.startswith("hookbay-admin: ")
        ]
        assert line == [
            "hookbay-admin: another retention run holds the lock: cron-host:42:feed, "
            f"lease until {isoformat(until)}; nothing done"
        ]

        result = await hookbay("retention", "run", "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["status"] == "skipped"
        assert json.loads(result.stdout)["holder"] == "cron-host:42:feed"
        assert await stored_ids(rdb, Collections.EVENTS) == owner.ids()

    async def test_invalid_setting_is_one_line(self, hookbay: Invoke, rdb: Database) -> None:
        result = await hookbay("retention", "run", HOOKBAY_RETENTION_BATCH_SIZE="0")
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(
            "hookbay-admin: invalid settings: HOOKBAY_RETENTION_BATCH_SIZE"
        )

    async def test_progress_bar_on_a_terminal(
        self, retention_env: dict[str, str], rdb: Database
    ) -> None:
        now = utcnow()
        await create_owner(rdb, "free", [days_ago(now, 31)] * 4)
        await create_owner(rdb, "pro", [days_ago(now, 31)])
        code, stdout, screen = await run_with_terminal_stderr(
            HOOKBAY, "retention", "run", "--json", env=retention_env
        )
        assert code == 0, screen
        assert "retention" in screen
        assert "2/2 owners" in screen
        assert "4 events, 4 attempts" in screen
        assert '"event"' not in screen  # no log lines under the bar
        assert json.loads(stdout)["events"] == 4
