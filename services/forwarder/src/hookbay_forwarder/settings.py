"""Forwarder and recorder settings: the shared ones plus what only delivery and recording need."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from hookbay_common.settings import Settings


class ForwarderSettings(Settings):
    forwarder_metrics_port: int = Field(default=9101, ge=0, le=65535)
    """``/healthz``, ``/readyz`` and ``/metrics`` of the forwarder (0: any free port)."""
    recorder_metrics_port: int = Field(default=9102, ge=0, le=65535)
    recorder_linger: float = Field(default=0.0, ge=0, le=2)
    """Seconds the recorder keeps reading after a batch's first records before it writes them:
    one write for more events, and an event's attempt in the same write as the event. Off by
    default: it trades accepted → visible time for store work (docs/operators/configuration.md)."""
    recorder_hold: float = Field(default=0.5, ge=0, le=5)
    """The recorder keeps a deliverable event back until its first attempt is read, at most
    until this many seconds after ingest accepted it, to store both in one write (the event with
    its status, not inserted then updated); 0: never (docs/operators/configuration.md)."""
    recorder_commit_interval: float = Field(default=1.0, gt=0, le=30)
    """Seconds between the recorder's commits while records keep coming: the page summaries
    (counts, the owner's newest events) are written once per commit, so they lag the events by
    up to this; more means less store work per event (docs/operators/configuration.md)."""
    stats_metrics_port: int = Field(default=9103, ge=0, le=65535)
    stats_grace: float = Field(default=3600.0, ge=0, le=86_400)
    """Seconds after its minute ends that a late event or attempt still counts in the stats
    (event time, measured against the newest time seen in its facts partition); later ones are
    dropped and counted in ``hookbay_stats_late_records_total``. Long, because catching up on a
    backlog reads partitions unevenly (``hookbay_forwarder.stats``)."""
    stats_data_dir: Path = Path("/tmp/hookbay-stats")  # noqa: S108 - a tmpfs in the images
    """faust's data directory (the stats table itself lives in memory and in its changelog)."""
    stats_flush_interval: float = Field(default=1.0, gt=0, le=60)
    """Seconds between writes of the changed stats buckets to MongoDB, and how long each agent
    gathers records into one batch (``hookbay_forwarder.stats.app.BATCH``)."""
    ops_host: str = "0.0.0.0"
    retry_jitter: float = Field(default=0.1, ge=0, le=1)
    """Each retry waits its scheduled delay plus up to this fraction more (spreads herds)."""
    max_buffered_events: int = Field(default=10_000, ge=1)
    """Events read but not yet delivered, per process; above it, reading pauses (back-pressure)."""
    max_buffered_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    max_connections: int = Field(default=1000, ge=1)
    """Open connections to destinations, all destinations together."""
    transform_workers: int = Field(default=2, ge=1, le=64)
    """Sandbox worker processes running routes' transformations (started by the first call;
    one owner holds at most half of them)."""
    dlq_limit_window: int = Field(default=1000, ge=1)
    """Dead-letter limit: how many recent final outcomes are looked at."""
    dlq_limit_ratio: float = Field(default=0.5, gt=0, le=1)
    """... the share of them dead-lettered that stops the forwarder ..."""
    dlq_limit_min_hosts: int = Field(default=20, ge=1)
    """... when the dead letters span at least this many destination hosts."""
    dlq_limit_invalid: int = Field(default=10, ge=1)
    """Stop after this many unreadable or crashing messages in a row."""
    kafka_session_timeout_ms: int = Field(default=10_000, ge=1000)
    shutdown_grace: float = Field(default=15.0, ge=0)
    """On SIGTERM, how long in-flight attempts may finish before they are handed back."""
