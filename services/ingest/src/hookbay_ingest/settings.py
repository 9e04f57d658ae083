"""Ingest settings: the shared ones plus what only the receiving endpoint needs."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from hookbay_common.settings import Settings
from hookbay_common.topics import MAX_MESSAGE_BYTES
from hookbay_common.wire import max_event_bytes
from hookbay_ingest.view import ViewSettings


class IngestSettings(Settings):
    ingest_host: str = "0.0.0.0"
    ingest_port: int = Field(default=8080, ge=1, le=65535)
    produce_timeout: float = Field(default=5.0, gt=0, le=60)
    """Longest wait for Kafka's acknowledgement before answering 503."""
    drain_delay: float = Field(default=0.0, ge=0, le=300)
    """Seconds between SIGTERM and the listener's close, serving meanwhile with ``/readyz`` 503
    (``draining``), so a load balancer that follows readiness stops sending first (the Helm
    chart sets 5): a connection accepted as the listener closes gets no answer at all."""
    view_reconcile_interval: float = Field(default=60.0, gt=0, le=3600)
    """Seconds between reconciliations of the configuration view with MongoDB (the repair of a
    lost change-log publication)."""
    view_negative_ttl: float = Field(default=1.0, ge=0, le=60)
    """Seconds an absent user/webhook is answered from the cache (unless the change log brings
    it first)."""
    view_read_through_rate: float = Field(default=20.0, gt=0, le=10_000)
    """MongoDB read-throughs per second per replica for names missing from the view."""
    view_read_through_burst: int = Field(default=40, ge=1, le=100_000)
    max_header_bytes: int = Field(default=64 * 1024, ge=4096, le=1024 * 1024)
    """Largest total of a request's header names and values (431 above it); 64 KiB like the
    common proxies' defaults (AWS ALB 64 KiB, Envoy 60 KiB)."""
    max_header_count: int = Field(default=100, ge=16, le=1000)
    """Most header fields in one request (431 above it); 100 like Apache's and Envoy's default."""

    @model_validator(mode="after")
    def _event_fits_kafka(self) -> Self:
        """Every request under the limits must fit one Kafka record: a 503 for a request that
        can never be queued would have its sender retry forever."""
        needed = max_event_bytes(
            body_bytes=self.max_body_bytes,
            header_bytes=self.max_header_bytes,
            header_count=self.max_header_count,
        )
        if needed > MAX_MESSAGE_BYTES:
            raise ValueError(
                f"HOOKBAY_MAX_BODY_BYTES ({self.max_body_bytes}) with HOOKBAY_MAX_HEADER_BYTES "
                f"({self.max_header_bytes}) and HOOKBAY_MAX_HEADER_COUNT "
                f"({self.max_header_count}) allow events of up to {needed} bytes, more than the "
                f"{MAX_MESSAGE_BYTES} bytes a Kafka record may hold; lower one of them"
            )
        return self

    def view_settings(self) -> ViewSettings:
        return ViewSettings(
            reconcile_interval=self.view_reconcile_interval,
            negative_ttl=self.view_negative_ttl,
            read_through_rate=self.view_read_through_rate,
            read_through_burst=self.view_read_through_burst,
        )
