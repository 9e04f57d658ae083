"""Telling the owner: every transition of an issue to every alert channel of its owner, once.

``notify`` returns at once; the sending happens in background tasks, one per channel, so a
slow or failing channel delays nothing but its own notifications. A failed send marks the
channel (``last_error``, ``failing_since``) and is retried after each delay of ``backoff``;
after the last it is given up (logged, counted). A success clears the mark. A channel's
failure never opens an issue (no issue about the alerting itself, no loop). Retries live in
the process: a restart forgets the ones waiting (the issue itself is durable)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final

import httpx
from prometheus_client import CollectorRegistry, Counter

from hookbay_common.alerts.messages import Notification
from hookbay_common.alerts.senders import ChannelError, Senders, SmtpSettings
from hookbay_common.clock import utcnow
from hookbay_common.db.alert_channels import AlertChannelRepository
from hookbay_common.logs import get_logger
from hookbay_common.metrics import name
from hookbay_common.models import AlertChannel
from hookbay_common.settings import Settings

log = get_logger("hookbay.alerts")

DEFAULT_BACKOFF: Final = (10.0, 60.0, 300.0, 1800.0, 3600.0)
"""Waits before the second, third, ... try of one notification on one channel."""


class AlertMetrics:
    """Notifications by channel type and outcome; no owner or channel label (unbounded)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.notifications = Counter(
            name("alert_notifications"),
            "Issue notifications tried, by channel type and outcome (sent, failed, abandoned).",
            ["channel_type", "outcome"], registry=registry,
        )  # fmt: skip


class Notifier:
    def __init__(
        self,
        channels: AlertChannelRepository,
        senders: Senders,
        *,
        backoff: Sequence[float] = DEFAULT_BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        now: Callable[[], datetime] = utcnow,
        metrics: AlertMetrics | None = None,
    ) -> None:
        self._channels = channels
        self._senders = senders
        self._backoff = tuple(backoff)
        self._sleep = sleep
        self._now = now
        self._metrics = metrics
        self._tasks: set[asyncio.Task[None]] = set()

    def notify(self, username: str, notification: Notification) -> None:
        """Send ``notification`` to every channel of ``username``'s, in the background."""
        self._spawn(self._dispatch(username, notification))

    async def test(self, channel: AlertChannel, notification: Notification) -> str | None:
        """Send once, now; the error (``None``: sent). Marks the channel as any send does."""
        try:
            await self._senders.send(channel, notification)
        except ChannelError as exc:
            await self._mark_failed(channel, str(exc))
            return str(exc)
        await self._mark_sent(channel)
        return None

    async def idle(self) -> None:
        """Wait until nothing is being sent or waiting to be retried (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, username: str, notification: Notification) -> None:
        try:
            channels = await self._channels.list_for_owner(username)
        except Exception:  # the store away: the issue is recorded, the notice is lost
            log.exception("alert_channels_unreadable", issue=notification.issue.id)
            return
        for channel in channels:
            self._spawn(self._deliver(channel, notification))

    async def _deliver(self, channel: AlertChannel, notification: Notification) -> None:
        for attempt in range(len(self._backoff) + 1):
            try:
                await self._senders.send(channel, notification)
            except ChannelError as exc:
                self._count(channel, "failed")
                await self._mark_failed(channel, str(exc))
                log.warning(
                    "alert_channel_failed", channel=channel.id, channel_type=channel.type.value,
                    issue=notification.issue.id, attempt=attempt + 1, error=str(exc),
                )  # fmt: skip
                if attempt < len(self._backoff):
                    await self._sleep(self._backoff[attempt])
                continue
            self._count(channel, "sent")
            await self._mark_sent(channel)
            return
        self._count(channel, "abandoned")
        log.error(
            "alert_notification_abandoned", channel=channel.id, issue=notification.issue.id,
            notification=notification.id,
        )  # fmt: skip

    def _count(self, channel: AlertChannel, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.notifications.labels(channel.type.value, outcome).inc()

    async def _mark_failed(self, channel: AlertChannel, error: str) -> None:
        try:
            await self._channels.mark_failed(channel.id, error, self._now())
        except Exception:
            log.exception("alert_channel_unmarked", channel=channel.id)

    async def _mark_sent(self, channel: AlertChannel) -> None:
        try:
            await self._channels.mark_sent(channel.id, self._now())
        except Exception:
            log.exception("alert_channel_unmarked", channel=channel.id)


def create_notifier(
    channels: AlertChannelRepository,
    settings: Settings,
    http: httpx.AsyncClient,
    registry: CollectorRegistry | None,
    *,
    backoff: Sequence[float] | None = None,
) -> Notifier:
    """The notifier of the owners' alert channels over ``http`` (closed by the caller), with
    the installation's SMTP server for email channels; every process that tells owners of
    their issues builds it here (the dashboard, its commands, the forwarder)."""
    smtp = SmtpSettings(settings.smtp_url, settings.smtp_from) if settings.smtp_url else None
    senders = Senders(http, smtp=smtp)
    metrics = AlertMetrics(registry) if registry is not None else None
    if backoff is None:
        return Notifier(channels, senders, metrics=metrics)
    return Notifier(channels, senders, metrics=metrics, backoff=backoff)
