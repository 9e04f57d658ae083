"""Ingest settings: the shared ones plus what only the receiving endpoint needs."""

from __future__ import annotations

from pydantic import Field

from hookbay_common.settings import Settings


class IngestSettings(Settings):
    ingest_host: str = "0.0.0.0"
    ingest_port: int = Field(default=8080, ge=1, le=65535)
    produce_timeout: float = Field(default=5.0, gt=0, le=60)
    """Longest wait for Kafka's acknowledgement before answering 503."""
    view_refresh_interval: float = Field(default=0.5, gt=0, le=10)
    """How often the configuration view polls for changes (changes apply within 2 s)."""
