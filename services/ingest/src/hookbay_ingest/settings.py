"""Ingest settings: the shared ones plus what only the receiving endpoint needs."""

from __future__ import annotations

from pydantic import Field

from hookbay_common.settings import Settings
from hookbay_ingest.view import ViewSettings


class IngestSettings(Settings):
    ingest_host: str = "0.0.0.0"
    ingest_port: int = Field(default=8080, ge=1, le=65535)
    produce_timeout: float = Field(default=5.0, gt=0, le=60)
    """Longest wait for Kafka's acknowledgement before answering 503."""
    view_reconcile_interval: float = Field(default=60.0, gt=0, le=3600)
    """Seconds between reconciliations of the configuration view with MongoDB (the repair of a
    lost change-log publication)."""
    view_negative_ttl: float = Field(default=1.0, ge=0, le=60)
    """Seconds an absent user/webhook is answered from the cache (unless the change log brings
    it first)."""
    view_read_through_rate: float = Field(default=20.0, gt=0, le=10_000)
    """MongoDB read-throughs per second per replica for names missing from the view."""
    view_read_through_burst: int = Field(default=40, ge=1, le=100_000)

    def view_settings(self) -> ViewSettings:
        return ViewSettings(
            reconcile_interval=self.view_reconcile_interval,
            negative_ttl=self.view_negative_ttl,
            read_through_rate=self.view_read_through_rate,
            read_through_burst=self.view_read_through_burst,
        )
