"""Kafka topic names and their configuration; the only place a topic name is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

EVENTS: Final = "hookbay.events"
"""Captured events, keyed by username so one owner's events keep their order."""
ATTEMPTS: Final = "hookbay.attempts"
"""Delivery attempt records, keyed by event id."""
EVENTS_DLQ: Final = "hookbay.events.dlq"
"""Events whose retries are exhausted."""

MAX_MESSAGE_BYTES: Final = 6 * 1024 * 1024
"""Room for a 4.5 MB body plus the envelope; the broker's ``message.max.bytes`` matches."""


@dataclass(frozen=True)
class TopicSpec:
    name: str
    config: dict[str, str] = field(default_factory=dict)


TOPICS: Final = (
    TopicSpec(EVENTS, {"max.message.bytes": str(MAX_MESSAGE_BYTES)}),
    TopicSpec(ATTEMPTS, {"max.message.bytes": str(MAX_MESSAGE_BYTES)}),
    TopicSpec(EVENTS_DLQ, {"max.message.bytes": str(MAX_MESSAGE_BYTES)}),
)
