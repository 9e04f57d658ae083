"""Bodies of ``/alert-channels``. ``secret`` and ``routing_key`` are write-only; a Slack URL
(its path is the credential) reads with its path masked."""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from hookbay_common.models import AlertChannel, AlertChannelType
from hookbay_common.netguard import MAX_URL_LENGTH
from hookbay_dashboard.schemas import Timestamp

SECRET_MASK: Final = "********"  # noqa: S105 - what a stored secret reads as
MAX_EMAIL: Final = 254


class AlertChannelCreate(BaseModel):
    """The fields of its ``type``, and only those: ``webhook``: ``url``, ``secret``;
    ``slack``: ``url``; ``pagerduty``: ``routing_key``, ``events_url`` (optional);
    ``email``: ``to``."""

    model_config = ConfigDict(extra="forbid")

    type: AlertChannelType
    url: str | None = Field(
        default=None, min_length=1, max_length=MAX_URL_LENGTH,
        description="webhook, slack: where notifications are POSTed (the SSRF rules apply).",
    )  # fmt: skip
    secret: str | None = Field(
        default=None, max_length=200,
        description="webhook: a Standard Webhooks secret, whsec_ + base64 of 24 to 64 bytes; "
        "write-only.",
    )  # fmt: skip
    routing_key: str | None = Field(
        default=None, min_length=1, max_length=128,
        description="pagerduty: the Events API v2 integration key; write-only.",
    )  # fmt: skip
    events_url: str | None = Field(
        default=None, min_length=1, max_length=MAX_URL_LENGTH,
        description="pagerduty: the Events API v2 endpoint (default "
        "https://events.pagerduty.com/v2/enqueue).",
    )  # fmt: skip
    to: str | None = Field(
        default=None, min_length=3, max_length=MAX_EMAIL,
        description="email: the address notifications go to.",
    )  # fmt: skip


class AlertChannelRead(BaseModel):
    id: str
    type: AlertChannelType
    url: str | None = Field(description="A Slack URL reads with its path masked.")
    secret: str | None = Field(description=f"Reads as {SECRET_MASK!r} when set.")
    routing_key: str | None = Field(description=f"Reads as {SECRET_MASK!r} when set.")
    events_url: str | None
    to: str | None
    created_at: Timestamp
    last_sent_at: Timestamp | None
    last_error: str | None = Field(description="Why the latest notification failed.")
    failing_since: Timestamp | None = Field(
        description="Notifications have failed since; null: the last one went out."
    )

    @classmethod
    def of(cls, channel: AlertChannel) -> AlertChannelRead:
        c = channel
        url = c.url.get_secret_value() if c.url is not None else None
        if url is not None and c.type is AlertChannelType.SLACK:
            split = urlsplit(url)
            url = f"{split.scheme}://{split.netloc}/{SECRET_MASK}"
        return cls(
            id=c.id, type=c.type, url=url,
            secret=SECRET_MASK if c.secret is not None else None,
            routing_key=SECRET_MASK if c.routing_key is not None else None,
            events_url=c.events_url, to=c.to, created_at=c.created_at,
            last_sent_at=c.last_sent_at, last_error=c.last_error, failing_since=c.failing_since,
        )  # fmt: skip

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


class AlertChannelTestResult(BaseModel):
    sent: bool
    error: str | None = Field(description="Why it was not sent (a status, an error's kind).")
