"""Dashboard API settings: the shared ones plus what only the owners' API needs."""

from __future__ import annotations

from pydantic import Field

from hookbay_common.settings import Settings


class DashboardSettings(Settings):
    dashboard_host: str = "0.0.0.0"
    dashboard_port: int = Field(default=8081, ge=1, le=65535)
    session_ttl: float = Field(default=12 * 3600, gt=0, le=30 * 86400)
    """Seconds a dashboard login lasts (absolute, not sliding)."""
    cookie_secure: bool = True
    """Mark the session cookie ``Secure`` (HTTPS only). ``make run`` turns it off for plain HTTP."""
    login_limit_per_user: int = Field(default=10, ge=1)
    """Login attempts per minute for one username, counted across replicas through Redis."""
    login_limit_per_address: int = Field(default=30, ge=1)
    """Login attempts per minute from one client address."""
    redis_key_prefix: str | None = None
    """Prefix of the dashboard's Redis keys (its login limits); unset: ``<kafka_namespace>:``,
    so installations sharing a Redis keep them apart (``redis_prefix``)."""
    events_page_max: int = Field(default=100, ge=1, le=1000)
    """The largest ``limit`` an event list accepts."""
    tail_poll_interval: float = Field(default=0.5, gt=0, le=10)
    """How often a live tail (SSE, ``hookbay-admin tail``) looks for new events."""
    tail_heartbeat: float = Field(default=15.0, gt=0, le=300)
    """Seconds an idle live stream waits before an ``event: heartbeat`` (clients that hear
    nothing for a few of these reconnect; proxies close connections idle for 60 s)."""
    replay_poll_interval: float = Field(default=5.0, gt=0, le=300)
    """How often each replica looks for bulk replay jobs to run or adopt."""
    replay_lease: float = Field(default=30.0, ge=1, le=3600)
    """Seconds a replica holds a bulk replay job without renewing; a job whose lease lapsed
    (its replica died) is adopted by the next replica that polls."""
    replay_page_size: int = Field(default=100, ge=1, le=1000)
    """Events a bulk replay publishes between two progress updates."""

    @property
    def redis_prefix(self) -> str:
        return self.redis_key_prefix or super().redis_prefix
