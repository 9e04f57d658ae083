"""Prometheus metrics of the forwarder and the recorder (one registry per process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hookbay_common.metrics import LATENCY_BUCKETS, name, new_registry

_ATTEMPT_BUCKETS = (*LATENCY_BUCKETS, 15.0, 30.0)


class ConsumerMetrics:
    """What every consumer process reports: lag per partition and records buffered."""

    def __init__(self) -> None:
        self.registry = new_registry()
        self.lag = Gauge(
            name("consumer_lag"), "Records not yet handled and committed, per partition.",
            ["consumer", "topic", "partition"], registry=self.registry,
        )  # fmt: skip
        self.buffered = Gauge(
            name("consumer_buffered"), "Records read and not yet handled.", ["consumer"],
            registry=self.registry,
        )  # fmt: skip
        self.handler_retries = Counter(
            name("consumer_handler_retries"),
            "Work retried after a retriable Kafka error (broker, leader or coordinator away).",
            ["consumer", "error"], registry=self.registry,
        )  # fmt: skip
        self.since_commit = Gauge(
            name("consumer_seconds_since_commit"),
            "Seconds since offsets were last committed, or the consumer last owed no commit.",
            ["consumer"], registry=self.registry,
        )  # fmt: skip


class ForwarderMetrics(ConsumerMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.attempts = Counter(
            name("forwarder_attempts"), "Delivery attempts by outcome.", ["outcome"], registry=r
        )
        """outcome: success (2xx), retry (a retry is scheduled), failed (the chain ends failed)."""
        self.attempt_latency = Histogram(
            name("forwarder_attempt_duration_seconds"), "Time from sending to the answer.",
            buckets=_ATTEMPT_BUCKETS, registry=r,
        )  # fmt: skip
        self.retries_waiting = Gauge(
            name("forwarder_retries_waiting"), "Retries written to a delay tier, not yet run.",
            registry=r,
        )  # fmt: skip
        self.dead_lettered = Counter(
            name("forwarder_dead_lettered"), "Messages written to the dead-letter topic.",
            ["reason"], registry=r,
        )  # fmt: skip


class RecorderMetrics(ConsumerMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.recorded = Counter(
            name("recorder_records"), "Records written to MongoDB.", ["kind"], registry=r
        )
        self.write_latency = Histogram(
            name("recorder_write_duration_seconds"), "Time to write one batch to MongoDB.",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.summary_latency = Histogram(
            name("recorder_summary_duration_seconds"),
            "Time to write the page summaries the batches since the last commit changed.",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.unreadable = Counter(
            name("recorder_unreadable"), "Records skipped because they could not be read.",
            ["topic"], registry=r,
        )  # fmt: skip


class LaneMetrics:
    """The delivery lanes' figures, added to a process's registry.

    No series is labelled by destination, owner or event: a destination label is one series per
    owner's destination, an unbounded set across tenants. The series are aggregates over every
    lane of the process (the oldest held age is the worst lane's, what an alert needs); per
    destination figures are in ``Lanes.snapshot`` for the API to show."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.deliveries = Counter(
            name("lanes_deliveries"), "Attempts started by the delivery lanes, by outcome.",
            ["outcome"], registry=r,
        )  # fmt: skip
        """outcome: what the deliver function returned (success, retry, failed, transform_failed)."""
        self.held = Gauge(
            name("lanes_held_deliveries"),
            "Delivery tasks in the hold store of the destinations this process owns.", registry=r,
        )  # fmt: skip
        self.holding = Gauge(
            name("lanes_destinations_holding"), "Destinations whose lane holds tasks.", registry=r
        )
        self.oldest_held_age = Gauge(
            name("lanes_oldest_held_age_seconds"),
            "Age of the oldest held task over every destination (0: none held).", registry=r,
        )  # fmt: skip
        self.rate_limited = Counter(
            name("lanes_rate_limited_waits"),
            "Times a lane's next attempt waited for its destination's rate limit.", registry=r,
        )  # fmt: skip
        self.rate_limited_seconds = Counter(
            name("lanes_rate_limited_wait_seconds"),
            "Seconds lanes' next attempts were set to wait for their rate limit.", registry=r,
        )  # fmt: skip
        self.buffered = Gauge(
            name("lanes_buffered"), "Delivery tasks in memory, waiting or running.", registry=r
        )


class BreakerMetrics:
    """The destinations' circuit breakers (``gateway.breaker``), added to a process's
    registry; labelled by transition only (no destination or owner: unbounded)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.transitions = Counter(
            name("breaker_transitions"),
            "Breaker transitions by kind (opened, probing, reopened, closed, disabled).",
            ["kind"], registry=registry,
        )  # fmt: skip


class RoutingViewMetrics:
    """The routing view (``hookbay_forwarder.routing.view``), added to a process's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.changes_applied = Counter(
            name("forwarder_routing_view_changes_applied"),
            "Configuration change-log records applied to this process's routing view.",
            registry=r,
        )  # fmt: skip
        self.lag = Gauge(
            name("forwarder_routing_view_changelog_lag"),
            "Change-log records not yet read by this process.", registry=r,
        )  # fmt: skip
        self.unreadable = Counter(
            name("forwarder_routing_view_unreadable_changes"),
            "Change-log records this version could not read (skipped).", registry=r,
        )  # fmt: skip
        self.read_throughs = Counter(
            name("forwarder_routing_view_read_throughs"),
            "Lookups of webhooks or destinations missing from the view, read from MongoDB: "
            "found or absent.", ["result"], registry=r,
        )  # fmt: skip
        self.reconcile_repairs = Counter(
            name("forwarder_routing_view_reconcile_repairs"),
            "View entries the periodic reconciliation found wrong and repaired (lost "
            "publications).", registry=r,
        )  # fmt: skip


class TransformMetrics:
    """Routes' transformations run by the lanes (``gateway.transform``), added to a process's
    registry; no transformation, owner or destination label (unbounded)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.calls = Counter(
            name("forwarder_transformations"),
            "Transformations of routed deliveries by outcome: ok, failed (the delivery is "
            "transform_failed), suspended (not run).", ["outcome"], registry=r,
        )  # fmt: skip
        self.duration = Histogram(
            name("forwarder_transformation_duration_seconds"),
            "Wall time of one transformation call, the wait for a sandbox worker included.",
            buckets=_ATTEMPT_BUCKETS, registry=r,
        )  # fmt: skip
        self.suspended = Gauge(
            name("forwarder_transformations_suspended"),
            "Transformations this process holds suspended.", registry=r,
        )  # fmt: skip


class DedupeMetrics:
    """Routes' deduplication claims (``routing.dedupe``), added to a process's registry; no
    route, owner or key label (unbounded)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.claims = Counter(
            name("forwarder_dedupe_claims"),
            "Deduplication claims of routed events by outcome: first, repeat (the same event "
            "again), duplicate (not delivered), unavailable (Redis away: delivered), "
            "unconfigured (no Redis: delivered).", ["outcome"], registry=registry,
        )  # fmt: skip
