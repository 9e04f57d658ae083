"""``hookbay-admin retention run [--dry-run] [--json]``: the retention job from the command line.

The same run as ``python -m hookbay_retention`` (lock, batches, metrics when configured). With a
terminal on stderr a progress bar (owners done, events and attempts deleted) shows there; without
one the job's JSON log lines go to stderr instead. The result goes to stdout: a table of the
owners with deletions, or with ``--json`` the whole report. When another run holds the lock the
command prints one line naming the holder and when its lease ends, and exits 0.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from hookbay_common.cli import CliState, json_option, pass_state, table

# Only click at import time: `hookbay-admin --help` loads this module (see hookbay_common.cli).
if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from hookbay_common.errors import LockHeld
    from hookbay_retention.service import OwnerReport, RetentionObserver, RetentionReport


@click.group()
def retention() -> None:
    """Delete events, attempts and stats past their owner's plan retention."""


@retention.command("run")
@click.option(
    "--dry-run", is_flag=True, help="Report per owner what would be deleted; delete nothing."
)
@json_option
@pass_state
def run_command(state: CliState, dry_run: bool) -> None:
    """Run retention now: every owner's events older than the plan keeps, with their attempts,
    and the days of stats entirely older."""
    import asyncio

    from hookbay_common.errors import LockHeld
    from hookbay_common.plans import load_plans
    from hookbay_retention.metrics import export, registry_for
    from hookbay_retention.service import run_once
    from hookbay_retention.settings import RetentionSettings

    settings = state.settings_of(RetentionSettings)
    plans = load_plans(settings.plans_file)
    interactive = sys.stderr.isatty()
    try:
        with _logs(settings.log_level, json_lines=not interactive), _bar(interactive) as bar:
            report = asyncio.run(run_once(settings, plans, dry_run=dry_run, observer=bar))
    except LockHeld as exc:
        _skipped(state, exc)
        return
    state.emit(report.to_dict(), human=lambda console: _summary(console, report))
    if not dry_run:  # after the report: what was deleted is deleted even if this fails
        export(
            registry_for(report), textfile=settings.retention_metrics_file,
            pushgateway=settings.retention_pushgateway_url,
        )  # fmt: skip


def _skipped(state: CliState, exc: LockHeld) -> None:
    from hookbay_common.clock import isoformat

    if state.json:
        state.emit(
            {"status": "skipped", "message": exc.message, "holder": exc.holder,
             "lease_until": isoformat(exc.lease_until)},
            human=lambda _: None,
        )  # fmt: skip
    else:
        click.echo(f"hookbay-admin: {exc.message}; nothing done", err=True)


def _summary(console: Console, report: RetentionReport) -> None:
    from hookbay_common.clock import isoformat

    verb = "would delete" if report.dry_run else "deleted"
    rows = [
        (
            o.username, o.plan, isoformat(o.cutoff) if o.cutoff else None, o.events, o.attempts,
            o.stats_days, o.held,
        )
        for o in report.owners
        if o.events or o.attempts or o.stats_days or o.held
    ]  # fmt: skip
    if rows:
        headers = ("USERNAME", "PLAN", "CUT-OFF", "EVENTS", "ATTEMPTS", "STATS DAYS", "HELD")
        table(console, headers, rows)
    console.print(
        f"{verb} {report.events} events and {report.attempts} attempts of {len(rows)} owners"
        f" ({len(report.owners)} checked), {report.stats_days} days of stats,"
        f" {report.held} held deliveries, {report.sessions} expired sessions"
        f" in {report.duration:.1f} s"
    )


@contextlib.contextmanager
def _logs(level: str, *, json_lines: bool) -> Iterator[None]:
    """JSON log lines on stderr, or none at all (a progress bar owns the terminal); the
    process's logging configuration is restored afterwards (tests run commands in-process)."""
    import structlog

    from hookbay_common.logs import configure_logging

    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, root_level = root.handlers[:], root.level
    if json_lines:
        configure_logging(level, service="retention", log_format="json")
    else:
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
            logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        )
    try:
        yield
    finally:
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(root_level)


class _Bar:
    """Owners done out of all, with the events and attempts deleted so far."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task = progress.add_task("retention", total=None, events=0, attempts=0)
        self._events = 0
        self._attempts = 0

    def started(self, owners: int) -> None:
        self._progress.update(self._task, total=owners)

    def batch_done(self, events: int, attempts: int) -> None:
        self._events += events
        self._attempts += attempts
        self._progress.update(self._task, events=self._events, attempts=self._attempts)

    def owner_done(self, owner: OwnerReport) -> None:
        self._progress.advance(self._task)


@contextlib.contextmanager
def _bar(enabled: bool) -> Iterator[RetentionObserver | None]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("retention"), BarColumn(), MofNCompleteColumn(), TextColumn("owners"),
        TextColumn("{task.fields[events]} events, {task.fields[attempts]} attempts"),
        TimeElapsedColumn(), console=Console(stderr=True), transient=False,
    )  # fmt: skip
    with progress:
        yield _Bar(progress)
