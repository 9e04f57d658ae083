"""Ingest's Prometheus metrics, one registry per app."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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
        self.in_flight = Gauge(
            name("ingest_requests_in_flight"),
            "Receiving requests being answered: their head read, their answer not yet sent.",
            registry=self.registry,
        )
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
        self.view = ViewMetrics(self.registry)


class ViewMetrics:
    """The configuration view (``hookbay_ingest.view``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.changes_applied = Counter(
            name("ingest_config_changes_applied_total"),
            "Configuration change-log records applied to this replica's view.", registry=registry,
        )  # fmt: skip
        self.lag = Gauge(
            name("ingest_config_changelog_lag"),
            "Change-log records not yet read by this replica.", registry=registry,
        )  # fmt: skip
        self.age = Gauge(
            name("ingest_config_view_age_seconds"),
            "Seconds since this replica's view was last known current (change log read to its "
            "end, or a reconciliation).", registry=registry,
        )  # fmt: skip
        self.read_throughs = Counter(
            name("ingest_config_read_throughs_total"),
            "Lookups of names missing from the view: found / absent in MongoDB, or refused "
            "(over the per-replica read-through bound; answered as absent without a query).",
            ["result"], registry=registry,
        )  # fmt: skip
        self.negative_hits = Counter(
            name("ingest_config_negative_hits_total"),
            "Lookups answered as absent from the cached negative answer.", registry=registry,
        )  # fmt: skip
        self.reconcile_repairs = Counter(
            name("ingest_config_reconcile_repairs_total"),
            "View entries the periodic reconciliation found wrong and repaired (lost "
            "publications).", registry=registry,
        )  # fmt: skip
        self.unreadable = Counter(
            name("ingest_config_unreadable_changes_total"),
            "Change-log records this version could not read (skipped).", registry=registry,
        )  # fmt: skip
