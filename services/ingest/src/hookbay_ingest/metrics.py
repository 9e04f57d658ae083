"""Ingest's Prometheus metrics, one registry per app."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from hookbay_common.metrics import LATENCY_BUCKETS, SIZE_BUCKETS, name, new_registry


class IngestMetrics:
    def __init__(self) -> None:
        self.registry = new_registry()
        self.requests = Counter(
            name("ingest_requests_total"), "Requests to the receiving endpoint by status code.",
            ["code"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            name("ingest_request_duration_seconds"), "Time to answer a receiving request.",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.produce_latency = Histogram(
            name("ingest_produce_duration_seconds"), "Time until Kafka acknowledged an event.",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.rate_limited = Counter(
            name("ingest_rate_limited_total"), "Requests refused with 429.", registry=self.registry
        )
        self.body_size = Histogram(
            name("ingest_body_bytes"), "Size of accepted bodies.",
            buckets=SIZE_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.client_disconnects = Counter(
            name("ingest_client_disconnects_total"),
            "Requests whose client hung up before its body was read (nothing stored, no answer).",
            registry=self.registry,
        )
        self.invalid_http = Counter(
            name("ingest_invalid_http_total"),
            "Connections refused by the HTTP parser (malformed requests, oversized heads) "
            "before reaching the app, by answer status.",
            ["code"], registry=self.registry,
        )  # fmt: skip
