"""The live tail: a webhook's new events, and their status changes, as they are recorded.

One feed per followed webhook and replica, shared by every tail open on it: a background task
reads the webhook's newest pages once per ``poll_interval`` and fans what changed out to each
open tail in memory. Ten browser tabs (or fifty) following one webhook cost the database what
one does; the feed stops when its last tail closes. Why the database and not Kafka: a tail
shows what the event list shows (recorded events, with their status), the database is the one
place that sees every recorded event whichever replica serves the tail, and FerretDB v1 has no
change streams. A read of the newest pages is an equality match on (webhook, page):
``hookbay_common.db.events``.

What is "new": each read covers the events created in the last ``lookback``
(``TAIL_LOOKBACK``, 60 s) and emits, per tail, an event whose id it has not seen (``event``),
and an event seen before whose status changed since (``status``). The window exists because the
recorder writes an event a little after its ``created_at`` (Kafka lag, a recorder restart): an
event recorded up to ``lookback`` after it was received still appears; one recorded later is
missed by the tail (the event list has it). A status that changes after the event left the
window (a retry minutes later) is not pushed either. Memory holds one window per feed.

A tail that does not keep up (``QUEUE_LIMIT`` items waiting) is ended; a browser's
``EventSource`` reconnects with ``Last-Event-ID`` and resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge

from hookbay_common.clock import utcnow
from hookbay_common.db import EventRepository, WebhookRepository
from hookbay_common.ids import IdPrefix, has_prefix
from hookbay_common.logs import get_logger
from hookbay_common.models import EventHead, EventRow, EventStatus
from hookbay_dashboard.events.schemas import EventSummary

log = get_logger("hookbay.tail")

TAIL_LOOKBACK: Final = timedelta(seconds=60)
"""How long after its ``created_at`` a recorded event can still show up in a tail."""
QUEUE_LIMIT: Final = 10_000
"""Items waiting for one tail before it is ended as too slow."""


class TailKind(StrEnum):
    EVENT = "event"
    """An event the tail has not shown yet."""
    STATUS = "status"
    """An event shown before whose status changed."""


@dataclass(frozen=True)
class TailItem:
    kind: TailKind
    event: EventRow


def summarize(event: EventHead) -> EventSummary:
    """What a tail shows of an event: the same summary as an event list."""
    return EventSummary.of(event)


class TailMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.reads = Counter(
            "hookbay_dashboard_tail_reads",
            "Database reads of the live-tail feeds (one per followed webhook per poll).",
            registry=registry,
        )
        self.feeds = Gauge(
            "hookbay_dashboard_tail_feeds", "Webhooks followed by live tails.", registry=registry
        )
        self.tails = Gauge("hookbay_dashboard_tails", "Open live tails.", registry=registry)


class _Tail:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[TailItem | None] = asyncio.Queue(QUEUE_LIMIT)

    def put(self, item: TailItem | None) -> bool:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            return False
        return True


@dataclass
class _Feed:
    """One followed webhook: the window as last read, and the tails following it."""

    webhook_id: str
    window: dict[str, EventRow] = field(default_factory=dict)
    tails: set[_Tail] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class TailService:
    def __init__(
        self,
        webhooks: WebhookRepository,
        events: EventRepository,
        *,
        poll_interval: float,
        lookback: timedelta = TAIL_LOOKBACK,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._webhooks = webhooks
        self._events = events
        self._poll_interval = poll_interval
        self._lookback = lookback
        self._feeds: dict[str, _Feed] = {}
        self.metrics = TailMetrics(registry or CollectorRegistry())

    async def follow(
        self,
        username: str,
        webhook_name: str,
        *,
        last_event_id: str | None = None,
        stop: anyio.Event | None = None,
    ) -> AsyncIterator[TailItem]:
        """The webhook's events recorded from now on (and status changes of those it showed),
        in the order they are found (oldest first within one read); the iterator ends only
        when ``stop`` is set or the tail falls too far behind.

        Awaiting this checks the webhook (``WebhookNotFound``, also for another owner's) and
        takes the starting point, so an error comes before any streaming and an event recorded
        after the await returns is emitted. ``last_event_id`` (a resumed SSE stream) also
        emits the window's events whose id sorts after it (ids sort by arrival time)."""
        webhook = await self._webhooks.require(username, webhook_name)
        feed = self._feeds.get(webhook.id)
        if feed is None:
            feed = self._feeds[webhook.id] = _Feed(webhook.id)
            feed.task = asyncio.create_task(self._run(feed), name=f"tail-feed-{webhook.id}")
        await feed.ready.wait()
        tail = _Tail()
        if last_event_id is not None and has_prefix(last_event_id, IdPrefix.EVENT):
            backlog = sorted(
                (e for e in feed.window.values() if e.id > last_event_id),
                key=lambda e: (e.created_at, e.id),
            )
            for event in backlog:
                tail.put(TailItem(TailKind.EVENT, event))
        feed.tails.add(tail)
        self.metrics.tails.inc()
        return self._read(feed, tail, stop or anyio.Event())

    async def _read(self, feed: _Feed, tail: _Tail, stop: anyio.Event) -> AsyncIterator[TailItem]:
        try:
            while not stop.is_set():
                item = None
                with anyio.move_on_after(self._poll_interval):
                    item = await tail.queue.get()
                    if item is None:  # ended as too slow
                        return
                if item is not None:
                    yield item
        finally:
            feed.tails.discard(tail)
            self.metrics.tails.dec()

    async def _run(self, feed: _Feed) -> None:
        """Read the feed's window every ``poll_interval`` while tails follow it."""
        self.metrics.feeds.inc()
        try:
            feed.window = {e.id: e for e in await self._recent(feed.webhook_id)}
            feed.ready.set()
            idle = 0
            while idle < 2:  # ends one interval after its last tail closed
                await asyncio.sleep(self._poll_interval)
                idle = 0 if feed.tails else idle + 1
                if feed.tails:
                    self._publish(feed, await self._recent(feed.webhook_id))
        except Exception:  # a database error: the tails end, browsers reconnect
            log.exception("tail_feed_failed", webhook_id=feed.webhook_id)
        finally:
            self._feeds.pop(feed.webhook_id, None)
            feed.ready.set()
            for tail in list(feed.tails):
                tail.put(None)
            self.metrics.feeds.dec()

    def _publish(self, feed: _Feed, events: list[EventRow]) -> None:
        items = []
        for event in events:
            known = feed.window.get(event.id)
            if known is None:
                items.append(TailItem(TailKind.EVENT, event))
            elif _outcome(known) != _outcome(event):
                items.append(TailItem(TailKind.STATUS, event))
        feed.window = {e.id: e for e in events}
        for tail in list(feed.tails):
            if not all(tail.put(item) for item in items):
                log.warning("tail_too_slow", webhook_id=feed.webhook_id)
                feed.tails.discard(tail)
                with contextlib.suppress(asyncio.QueueFull):
                    tail.queue.get_nowait()  # room for the end marker
                tail.put(None)

    async def _recent(self, webhook_id: str) -> list[EventRow]:
        """Every event of the webhook created in the last ``lookback``, oldest first."""
        self.metrics.reads.inc()
        return await self._events.recent_for_webhook(webhook_id, utcnow() - self._lookback)

    async def close(self) -> None:
        """Stop every feed (server shutdown)."""
        tasks = [f.task for f in self._feeds.values() if f.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _outcome(event: EventRow) -> tuple[EventStatus, int | None, datetime | None]:
    return event.status, event.last_status_code, event.next_retry_at
