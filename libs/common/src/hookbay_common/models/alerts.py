"""Owner alerts: issues (a problem's lifecycle) and the channels that are told about them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import SecretStr

from hookbay_common.models.record import Record


class IssueType(StrEnum):
    DELIVERY = "delivery"
    """A destination failing: its breaker opened, or deliveries failed for good."""
    DISABLED = "disabled"
    """hookbay disabled a destination (410 Gone, or failing for too long)."""
    BACKLOG = "backlog"
    """A destination's oldest held delivery is older than the threshold."""
    TRANSFORMATION = "transformation"
    """A transformation failing."""


class IssueStatus(StrEnum):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    """Someone is on it: recurrences count silently."""
    RESOLVED = "resolved"
    IGNORED = "ignored"
    """Never notifies and never reopens until its owner resolves it."""


class Notified(StrEnum):
    """What the owner's channels were last told about an issue."""

    OPENED = "opened"
    REOPENED = "reopened"
    RESOLVED = "resolved"


class Issue(Record):
    """One problem of an owner's, one document per (``username``, ``key``): the same problem
    recurring updates or reopens it. ``key`` is ``<type>:<destination or transformation>``."""

    id: str
    username: str
    type: IssueType
    key: str
    status: IssueStatus = IssueStatus.OPEN
    destination: str | None = None
    transformation: str | None = None
    reason: str | None = None
    first_seen_at: datetime
    last_seen_at: datetime
    count: int = 1
    sample_event_id: str | None = None
    opened_at: datetime
    resolved_at: datetime | None = None
    notified: Notified | None = None
    notified_at: datetime | None = None


class AlertChannelType(StrEnum):
    WEBHOOK = "webhook"
    SLACK = "slack"
    PAGERDUTY = "pagerduty"
    EMAIL = "email"


class AlertChannel(Record):
    """Where an owner's issue notifications go. ``url`` (webhook, slack), ``secret`` (webhook:
    a Standard Webhooks ``whsec_`` secret), ``routing_key`` and ``events_url`` (pagerduty), ``to``
    (email). ``url``, ``secret`` and ``routing_key`` are plaintext in memory only (sealed at
    rest). ``last_error`` / ``failing_since``: the channel's notifications are failing."""

    id: str
    username: str
    type: AlertChannelType
    url: SecretStr | None = None
    secret: SecretStr | None = None
    routing_key: SecretStr | None = None
    events_url: str | None = None
    to: str | None = None
    created_at: datetime
    last_sent_at: datetime | None = None
    last_error: str | None = None
    failing_since: datetime | None = None
