"""Kafka topic names and their configuration; the only place a topic name is written.

Every name lives under a namespace (``HOOKBAY_KAFKA_NAMESPACE``, default ``hookbay``), so the
default installation uses ``hookbay.events`` and several installations (or test workers) can
share one cluster without seeing each other's messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

MAX_MESSAGE_BYTES: Final = 6 * 1024 * 1024
"""Room for a 4.5 MB body plus the envelope; the broker's ``message.max.bytes`` matches."""
DEFAULT_NAMESPACE: Final = "hookbay"
NAMESPACE_PATTERN: Final = r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$"

DELAY_TIERS: Final = (10.0, 60.0, 600.0, 3600.0, 21600.0)
"""Delay tiers every installation has whatever its retry schedule (10 s, 1 min, 10 min, 1 h,
6 h: the default schedule's): a route's delay (up to 24 h) and a destination's own retry
schedule wait in them (``delay_tiers``, ``docs/decisions.md``)."""

_LARGE = {"max.message.bytes": str(MAX_MESSAGE_BYTES)}
_COMPACTED = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}


@dataclass(frozen=True)
class TopicSpec:
    name: str
    config: dict[str, str] = field(default_factory=dict)
    partitions: int | None = None
    """``None``: the installation's default (``HOOKBAY_KAFKA_PARTITIONS``)."""


def format_delay(seconds: float) -> str:
    """A delay as a topic-name-safe label: ``500ms``, ``10s``, ``1m``, ``6h``."""
    millis = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if millis and millis % size == 0:
            return f"{millis // size}{unit}"
    return f"{millis}ms"


def delay_tiers(retry_delays: Iterable[float]) -> tuple[float, ...]:
    """The delay tiers a routed delivery's wait may use, shortest first: one per distinct
    positive retry delay and every ``DELAY_TIERS`` entry, so there is always one for a route's
    delay."""
    return tuple(sorted({*retry_delays, *DELAY_TIERS} - {0.0}))


def fitting_tier(wait: float, tiers: Sequence[float]) -> float | None:
    """The longest of ``tiers`` (shortest first) not longer than ``wait``; ``None`` when every
    tier is longer. A wait longer than the longest tier takes several hops through it (the
    task consumer puts a task that is not due yet back into its fitting tier)."""
    fitting = None
    for tier in tiers:
        if tier > wait:
            break
        fitting = tier
    return fitting


@dataclass(frozen=True)
class Topics:
    """The topics of one installation."""

    namespace: str = DEFAULT_NAMESPACE

    @property
    def events(self) -> str:
        """Captured events, keyed by username so one owner's events keep their order."""
        return f"{self.namespace}.events"

    @property
    def attempts(self) -> str:
        """Delivery attempt records, keyed by event id (one event's attempts stay in order)."""
        return f"{self.namespace}.attempts"

    @property
    def events_dlq(self) -> str:
        """Events whose delivery failed for good (retries exhausted or a non-retryable answer)."""
        return f"{self.namespace}.events.dlq"

    @property
    def replays(self) -> str:
        """Replay requests (delivery tasks with trigger ``replay``), keyed by event id."""
        return f"{self.namespace}.replays"

    @property
    def deliveries(self) -> str:
        """Delivery tasks (``destination-task/1``) the router made and retries brought back,
        keyed by destination id: one destination's tasks in one partition, read by the consumer
        that holds its lane."""
        return f"{self.namespace}.deliveries"

    @property
    def config(self) -> str:
        """The configuration change log: the latest state of every user, webhook and
        destination, keyed ``user:{username}`` / ``webhook:{username}/{name}`` /
        ``destination:{username}/{name}``; compacted (see ``configlog``)."""
        return f"{self.namespace}.config"

    @property
    def stats_facts(self) -> str:
        """What each event and attempt adds to its webhook's stats, keyed by webhook id: the
        stats processor's repartition of events (keyed by owner) and attempts (by event id)."""
        return f"{self.namespace}.stats.facts"

    @property
    def stats_changelog(self) -> str:
        """The stats processor's open buckets (its faust table's changelog; compacted)."""
        return f"{self.namespace}.stats.buckets-changelog"

    def retry(self, delay: float) -> str:
        """The delay tier holding retries due ``delay`` seconds after they were scheduled."""
        return f"{self.namespace}.retry.{format_delay(delay)}"

    @property
    def task_pattern(self) -> str:
        """Every topic the task consumer reads: all retry tiers (also tiers of an earlier
        schedule that may still hold waiting retries) and the replays."""
        ns = re.escape(self.namespace)
        return rf"^{ns}\.(?:retry\.[0-9]+(?:ms|s|m|h)|replays)$"

    def specs(self, retry_delays: Iterable[float] = ()) -> list[TopicSpec]:
        """Every topic with its configuration, including one tier per distinct retry delay."""
        names = [self.events, self.attempts, self.events_dlq, self.replays, self.deliveries]
        names += sorted({self.retry(d) for d in retry_delays})
        return [TopicSpec(name, dict(_LARGE)) for name in names] + [
            self.config_spec(),
            TopicSpec(self.stats_facts),
            TopicSpec(self.stats_changelog, dict(_COMPACTED)),
        ]

    def config_spec(self) -> TopicSpec:
        """The change log: compacted (the latest record per key is kept forever), one partition
        (a few changes per minute; one partition keeps "caught up" a single offset)."""
        return TopicSpec(self.config, dict(_COMPACTED), partitions=1)
