"""``python -m hookbay_retention [--dry-run]``: one retention run, the Kubernetes CronJob's command.

Logs are JSON lines on stderr (``retention_batch_deleted`` per batch, ``retention_owner`` per
owner with deletions, ``retention_finished`` with the totals); readable lines instead on a
terminal, or as ``HOOKBAY_LOG_FORMAT`` says (``hookbay_common.logs``). A dry run prints its
report, per owner, as one JSON document on stdout and deletes nothing.

Exit status:
- 0: the run finished, and its metrics were written/pushed when configured; or another run
  holds the lock (after ``HOOKBAY_RETENTION_LOCK_WAIT``): nothing done, one ``retention_skipped``
  line naming the holder and when its lease ends. Not a failure: that run does the work, and a
  holder that never finishes shows as ``hookbay_retention_last_success_timestamp_seconds``
  going stale.
- 1: the run failed (database unreachable, lock taken over after a stall, metrics not
  exported, SIGTERM/SIGINT). What it deleted stays deleted; the next run does the rest.
- 2: invalid configuration (settings, plans file) or usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from pydantic import ValidationError
from pymongo.errors import PyMongoError

from hookbay_common.clock import isoformat
from hookbay_common.errors import ConfigurationError, HookbayError, LockHeld
from hookbay_common.logs import InvalidLogFormat, configure_logging, get_logger
from hookbay_common.plans import PlanBook, load_plans
from hookbay_common.process import report_loop_errors, stop_on_signals
from hookbay_retention.metrics import export, registry_for
from hookbay_retention.service import RetentionReport, run_once
from hookbay_retention.settings import RetentionSettings

log = get_logger("hookbay.retention")


async def _run(settings: RetentionSettings, plans: PlanBook, *, dry_run: bool) -> int:
    report_loop_errors()
    work = asyncio.create_task(run_once(settings, plans, dry_run=dry_run))
    # cancelled between two awaits: the lock is released on the way out (``run``'s finally)
    with stop_on_signals(work.cancel):
        return await _finish(work, settings, dry_run=dry_run)


async def _finish(
    work: asyncio.Task[RetentionReport], settings: RetentionSettings, *, dry_run: bool
) -> int:
    try:
        report = await work
    except asyncio.CancelledError:
        log.warning("retention_interrupted")
        return 1
    except LockHeld as exc:
        log.warning(
            "retention_skipped", message=exc.message, holder=exc.holder,
            lease_until=isoformat(exc.lease_until),
        )  # fmt: skip
        return 0
    except (HookbayError, PyMongoError) as exc:
        log.error("retention_failed", error_type=type(exc).__name__, error=str(exc)[:300])
        return 1
    if dry_run:
        print(json.dumps(report.to_dict()))  # noqa: T201
        return 0
    try:
        await asyncio.to_thread(
            export, registry_for(report), textfile=settings.retention_metrics_file,
            pushgateway=settings.retention_pushgateway_url,
        )  # fmt: skip
    except OSError as exc:
        log.error("retention_metrics_failed", error_type=type(exc).__name__, error=str(exc))
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hookbay_retention",
        description="Delete events and attempts past their owner's plan retention.",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="report per owner what would be deleted"
    )
    args = parser.parse_args(argv)
    try:
        settings = RetentionSettings()  # type: ignore[call-arg]  # secret_key from the environment
        configure_logging(settings.log_level, service="retention")
    except (ValidationError, InvalidLogFormat) as exc:
        print(f"hookbay-retention: invalid configuration: {exc}", file=sys.stderr)  # noqa: T201
        sys.exit(2)
    try:
        plans = load_plans(settings.plans_file)
    except ConfigurationError as exc:
        log.error("retention_invalid_configuration", error=exc.message)
        sys.exit(2)
    sys.exit(asyncio.run(_run(settings, plans, dry_run=args.dry_run)))


if __name__ == "__main__":
    main()
