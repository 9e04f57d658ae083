"""The run's metrics for Prometheus, which cannot scrape a job that lives for seconds.

Each run puts its figures in a registry of its own and, when it succeeded, hands them over once
at the end: to a Pushgateway (a Kubernetes CronJob: Prometheus scrapes the gateway, which keeps
the last push of job ``hookbay_retention``) and/or to a file for node_exporter's textfile
collector (a job run by cron on a node), replaced by an atomic rename so the collector never
reads half a file. The values describe the last successful run: the ``_total`` counters count
what that run deleted. Alert on ``time() - hookbay_retention_last_success_timestamp_seconds``
growing past the schedule: a failed, skipped or stuck run never moves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, push_to_gateway, write_to_textfile

from hookbay_common.metrics import name, new_registry
from hookbay_retention.service import RetentionReport

JOB: Final = "hookbay_retention"
PUSH_TIMEOUT: Final = 10.0


def registry_for(report: RetentionReport) -> CollectorRegistry:
    """A registry holding ``report``'s figures (a successful, not dry, run)."""
    registry = new_registry(process=False)
    Counter(
        name("retention_deleted_events"), "Events deleted by the last successful run.",
        registry=registry,
    ).inc(report.events)  # fmt: skip
    Counter(
        name("retention_deleted_attempts"), "Attempts deleted by the last successful run.",
        registry=registry,
    ).inc(report.attempts)  # fmt: skip
    Counter(
        name("retention_deleted_daily_stats"),
        "Days of an owner's delivery stats deleted by the last successful run.",
        registry=registry,
    ).inc(report.stats_days)  # fmt: skip
    Gauge(
        name("retention_duration_seconds"), "How long the last successful run took.",
        registry=registry,
    ).set(report.duration)  # fmt: skip
    finished = report.finished_at or report.started_at
    Gauge(
        name("retention_last_success_timestamp_seconds"),
        "When the last successful run ended (Unix time).", registry=registry,
    ).set(finished.timestamp())  # fmt: skip
    return registry


def export(registry: CollectorRegistry, *, textfile: Path | None, pushgateway: str | None) -> None:
    """Write and/or push ``registry``; ``OSError`` (``URLError`` included) when either fails."""
    if textfile is not None:
        write_to_textfile(str(textfile), registry)
    if pushgateway is not None:
        push_to_gateway(pushgateway, job=JOB, registry=registry, timeout=PUSH_TIMEOUT)
