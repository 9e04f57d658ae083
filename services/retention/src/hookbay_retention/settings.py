"""Retention job settings: the shared ones plus the job's batch size, lock and metrics outputs."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from hookbay_common.settings import Settings


class RetentionSettings(Settings):
    retention_batch_size: int = Field(default=1000, ge=1, le=10_000)
    """Expired events deleted per batch (their attempts first, then the events); memory holds
    one batch of ids."""
    retention_lease: float = Field(default=60.0, ge=1, le=3600)
    """Seconds a run holds the retention lock without renewing it (it renews after every batch).
    A run killed with ``kill -9`` blocks the next one for at most this long."""
    retention_lock_wait: float = Field(default=0.0, ge=0, le=86_400)
    """Seconds a run waits for the lock while another run holds it; 0: skip at once (exit 0
    with a message naming the holder)."""
    retention_metrics_file: Path | None = None
    """Where to write the run's metrics in the Prometheus text format (node_exporter's textfile
    collector directory, file name ending ``.prom``); written by atomic rename."""
    retention_pushgateway_url: str | None = None
    """Prometheus Pushgateway to push the run's metrics to (job ``hookbay_retention``)."""
