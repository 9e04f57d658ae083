"""The live tail: a webhook's recorded events and their status changes, resumable from any point
within retention.

Where changes are found: every head carries ``change_page``, the page its latest recording or
status change went to (``hookbay_common.db.events.layout``). Pages only grow, so a reader that
has read every change page below P and comes back finds everything recorded or changed since on
the pages from P up: an event recorded minutes late (it gets the top page when it is recorded,
whatever its ``created_at``) and a status changed by a retry or a replay an hour later (the
head moves to the then top page). A read is an equality match on (webhook, change page).

The cursor a stream hands out (the SSE ``id:``) is ``<page>.<epoch ms>``: the lowest change page
that may still hold something the client has not been sent, and when that was so. Resuming
from it re-sends what is on that page and above (clients de-duplicate by event id); a cursor
whose page retention has deleted, or older than the owner's retention, gets a ``gap`` item
first (what was lost is unknown, never skipped silently). The pages just below the top stay
"unsettled" for ``settle`` after the top moved on, because a write can land a little after its
page was allocated (the recorder allocates, then writes): they are re-read until then.

One feed per followed webhook and replica, shared by every tail open on it: a background task
reads the unsettled pages once per ``poll_interval`` and fans what changed out to each open
tail in memory; a tail resuming from below the feed's window first reads those pages itself.
The feed stops when its last tail closes. A tail that does not keep up (``QUEUE_LIMIT``
publications waiting) is ended; a client reconnects with its last id and loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge

from hookbay_common.clock import epoch_ms, from_epoch_ms, utcnow
from hookbay_common.db import EventRepository, WebhookRepository
from hookbay_common.ids import IdPrefix, has_prefix
from hookbay_common.logs import get_logger
from hookbay_common.models import EventHead, EventRow, EventStatus
from hookbay_dashboard.events.schemas import EventSummary

log = get_logger("hookbay.tail")

SETTLE: Final = timedelta(seconds=15)
"""How long a page below the top is still re-read: a recorder write lands within this of its
page's allocation (a batch's writes take milliseconds to a few seconds)."""
QUEUE_LIMIT: Final = 1_000
"""Publications (one per poll with changes) waiting for one tail before it is ended as too slow."""
SENT_KEEP: Final = 50_000
"""Event ids (with the status sent) one tail remembers to send each change once."""
BACKLOG_CHUNK: Final = 10
"""Change pages a resuming tail reads, then sends in recording order, at a time."""


class TailKind(StrEnum):
    EVENT = "event"
    """An event recorded at or after the tail's start, not sent by this tail before."""
    STATUS = "status"
    """A status change of an event sent before, or of one recorded before the tail's start."""
    GAP = "gap"
    """The resume point is gone (retention): changes after it may be missing."""
    HEARTBEAT = "heartbeat"
    """Nothing to send for a while: the connection is alive; carries the cursor."""


@dataclass(frozen=True)
class Cursor:
    """Where a tail resumes: everything on change pages below ``page`` was sent before ``at``."""

    page: int
    at: datetime

    def encode(self) -> str:
        return f"{self.page}.{epoch_ms(self.at)}"

    @classmethod
    def parse(cls, text: str) -> Cursor | None:
        page, dot, ms = text.partition(".")
        if not dot or not page.isdigit() or not ms.isdigit() or len(page) + len(ms) > 30:
            return None
        return cls(int(page), from_epoch_ms(int(ms)))


@dataclass(frozen=True)
class Gap:
    """``since``: the resume point's time; ``resumed_at``: the page the tail went on from."""

    since: datetime
    resumed_page: int


@dataclass(frozen=True)
class TailItem:
    kind: TailKind
    cursor: Cursor
    event: EventRow | None = None
    gap: Gap | None = None


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


Outcome = tuple[EventStatus, int | None, datetime | None]


def _outcome(event: EventRow) -> Outcome:
    return event.status, event.last_status_code, event.next_retry_at


Positioned = tuple[int, EventRow]
"""A head with its ``seq`` (recording order)."""


@dataclass(frozen=True)
class _Publication:
    changes: list[Positioned]
    low: int
    """The feed's lowest unsettled page when the changes were read: the cursor while they are
    being sent."""
    after: int
    """The feed's lowest unsettled page after this poll: the cursor once they are all sent."""


class _Tail:
    def __init__(self, start_page: int) -> None:
        self.queue: asyncio.Queue[_Publication | None] = asyncio.Queue(QUEUE_LIMIT)
        self.start_page = start_page
        self.sent: OrderedDict[str, Outcome] = OrderedDict()

    def put(self, item: _Publication | None) -> bool:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            return False
        return True

    def kind_of(self, row: EventRow) -> TailKind | None:
        """What sending ``row`` means to this tail (``None``: already sent as it is)."""
        outcome = _outcome(row)
        before = self.sent.get(row.id)
        if before == outcome:
            return None
        self.sent[row.id] = outcome
        self.sent.move_to_end(row.id)
        if len(self.sent) > SENT_KEEP:
            self.sent.popitem(last=False)
        if before is None and (row.page or 0) >= self.start_page:
            return TailKind.EVENT
        return TailKind.STATUS


@dataclass
class _Feed:
    """One followed webhook: the unsettled change pages as last read, and the tails following."""

    webhook_id: str
    low: int = 0
    top: int = 0
    pages: dict[int, list[Positioned]] = field(default_factory=dict)
    below_top_since: dict[int, float] = field(default_factory=dict)
    known: dict[str, Outcome] = field(default_factory=dict)
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
        heartbeat: float = 15.0,
        settle: timedelta = SETTLE,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._webhooks = webhooks
        self._events = events
        self._poll_interval = poll_interval
        self._heartbeat = heartbeat
        self._settle = settle.total_seconds()
        self._feeds: dict[str, _Feed] = {}
        self.metrics = TailMetrics(registry or CollectorRegistry())

    async def follow(
        self,
        username: str,
        webhook_name: str,
        *,
        last_event_id: str | None = None,
        retention: timedelta | None = None,
        stop: anyio.Event | None = None,
        hello: bool = False,
    ) -> AsyncIterator[TailItem]:
        """The webhook's events recorded from now on and their status changes (and changes
        of events shown before the start), oldest first within one read; the iterator ends
        only when ``stop`` is set or the tail falls too far behind. Idle for ``heartbeat``
        seconds, it yields a ``HEARTBEAT``.

        ``last_event_id``: a cursor this service handed out (``Cursor.encode``), of any age:
        everything recorded or changed since is sent (some of it maybe again), after a
        ``GAP`` when retention removed pages since (the page is below the webhook's lowest,
        or the cursor is older than ``retention``). An event id (a client of an earlier
        release) resumes from that event's page.

        Awaiting this checks the webhook (``WebhookNotFound``, also for another owner's) and
        takes the starting point, so an error comes before any streaming. ``hello``: a
        ``HEARTBEAT`` comes first, so a client holds a cursor from the start."""
        webhook = await self._webhooks.require(username, webhook_name)
        resume = await self._resume_point(webhook.id, last_event_id)
        feed = self._feeds.get(webhook.id)
        if feed is None:
            feed = self._feeds[webhook.id] = _Feed(webhook.id)
            feed.task = asyncio.create_task(self._run(feed), name=f"tail-feed-{webhook.id}")
        await feed.ready.wait()
        tail = _Tail(start_page=feed.low if resume is None else resume.page)
        backlog: tuple[Cursor, int] | None = None
        if resume is None:  # from now: what the window holds is not new to this tail
            for rows in feed.pages.values():
                for _, row in rows:
                    tail.kind_of(row)
        else:
            backlog = (resume, feed.low)
            # the window's rows at or above the resume page come first, as a publication
            snapshot = [
                r for p, rows in sorted(feed.pages.items()) if p >= resume.page for r in rows
            ]
            tail.put(_Publication(_in_order(snapshot), feed.low, feed.low))
        first = Cursor(feed.low if resume is None else resume.page, utcnow())
        feed.tails.add(tail)
        self.metrics.tails.inc()
        return self._read(feed, tail, first, backlog, retention, stop or anyio.Event(), hello)

    async def _resume_point(self, webhook_id: str, last_event_id: str | None) -> Cursor | None:
        if last_event_id is None:
            return None
        cursor = Cursor.parse(last_event_id)
        if cursor is not None:
            return cursor
        if has_prefix(last_event_id, IdPrefix.EVENT):
            located = (await self._events.locate([last_event_id])).get(last_event_id)
            if located is not None and located[0] == webhook_id:
                return Cursor(located[1], utcnow())
        return None  # unknown: from now, as a new tail

    async def _read(
        self,
        feed: _Feed,
        tail: _Tail,
        cursor: Cursor,
        backlog: tuple[Cursor, int] | None,
        retention: timedelta | None,
        stop: anyio.Event,
        hello: bool,
    ) -> AsyncIterator[TailItem]:
        """``cursor``: where the tail started (taken with its first publications)."""
        try:
            if hello:
                yield TailItem(TailKind.HEARTBEAT, cursor)
            if backlog is not None:
                async for item in self._backlog(feed.webhook_id, tail, *backlog, retention):
                    cursor = item.cursor
                    yield item
            idle_since = time.monotonic()
            while not stop.is_set():
                publication = None
                with anyio.move_on_after(self._poll_interval):
                    publication = await tail.queue.get()
                    if publication is None:  # ended as too slow
                        return
                if publication is not None:
                    cursor = Cursor(publication.low, utcnow())
                    for _, row in publication.changes:
                        kind = tail.kind_of(row)
                        if kind is not None:
                            idle_since = time.monotonic()
                            yield TailItem(kind, cursor, row)
                    cursor = Cursor(publication.after, utcnow())
                if time.monotonic() - idle_since >= self._heartbeat:
                    idle_since = time.monotonic()
                    if tail.queue.empty():  # nothing unsent below the feed's window
                        cursor = Cursor(max(cursor.page, feed.low), utcnow())
                    yield TailItem(TailKind.HEARTBEAT, Cursor(cursor.page, utcnow()))
        finally:
            feed.tails.discard(tail)
            self.metrics.tails.dec()

    async def _backlog(
        self,
        webhook_id: str,
        tail: _Tail,
        resume: Cursor,
        until: int,
        retention: timedelta | None,
    ) -> AsyncIterator[TailItem]:
        """The change pages from ``resume`` up to (not including) the feed's window ``until``,
        read ``BACKLOG_CHUNK`` at a time; a ``GAP`` first when the resume point is gone."""
        bounds = await self._events.top_page(webhook_id)
        lowest = bounds[0] if bounds is not None else 0
        page = resume.page
        expired = retention is not None and resume.at < utcnow() - retention
        if page < lowest or expired:
            page = max(page, lowest)
            yield TailItem(TailKind.GAP, Cursor(page, utcnow()), gap=Gap(resume.at, page))
        while page < until:
            chunk = range(page, min(until, page + BACKLOG_CHUNK))
            read = await asyncio.gather(*(self._events.changed_heads(webhook_id, p) for p in chunk))
            cursor = Cursor(page, utcnow())
            for _, row in _in_order(r for rows in read for r in rows):
                kind = tail.kind_of(row)
                if kind is not None:
                    yield TailItem(kind, cursor, row)
            page = chunk.stop

    async def _run(self, feed: _Feed) -> None:
        """Read the feed's unsettled pages every ``poll_interval`` while tails follow it."""
        self.metrics.feeds.inc()
        try:
            bounds = await self._events.top_page(feed.webhook_id)
            feed.low = feed.top = bounds[1] if bounds is not None else 0
            await self._poll(feed, publish=False)
            feed.ready.set()
            idle = 0
            while idle < 2:  # ends one interval after its last tail closed
                await asyncio.sleep(self._poll_interval)
                idle = 0 if feed.tails else idle + 1
                if feed.tails:
                    await self._poll(feed, publish=True)
        except Exception:  # a database error: the tails end, clients reconnect and resume
            log.exception("tail_feed_failed", webhook_id=feed.webhook_id)
        finally:
            self._feeds.pop(feed.webhook_id, None)
            feed.ready.set()
            for tail in list(feed.tails):
                tail.put(None)
            self.metrics.feeds.dec()

    async def _poll(self, feed: _Feed, *, publish: bool) -> None:
        """Re-read the unsettled pages (the top's included), publish what changed, settle."""
        self.metrics.reads.inc()
        bounds = await self._events.top_page(feed.webhook_id)
        feed.top = max(feed.top, bounds[1] if bounds is not None else 0)
        pages = range(feed.low, feed.top + 1)
        read = await asyncio.gather(
            *(self._events.changed_heads(feed.webhook_id, p) for p in pages)
        )
        feed.pages = dict(zip(pages, read, strict=True))
        known = {row.id: _outcome(row) for rows in read for _, row in rows}
        changes = [p for rows in read for p in rows if feed.known.get(p[1].id) != known[p[1].id]]
        feed.known = known
        low = feed.low
        now = time.monotonic()
        for page in pages:
            if page < feed.top:
                feed.below_top_since.setdefault(page, now)
        while feed.low < feed.top and now - feed.below_top_since[feed.low] >= self._settle:
            settled = feed.pages.pop(feed.low, [])
            for _, row in settled:
                feed.known.pop(row.id, None)
            del feed.below_top_since[feed.low]
            feed.low += 1
        if publish and changes:
            self._publish(feed, _Publication(_in_order(changes), low, feed.low))

    def _publish(self, feed: _Feed, publication: _Publication) -> None:
        for tail in list(feed.tails):
            if not tail.put(publication):
                log.warning("tail_too_slow", webhook_id=feed.webhook_id)
                feed.tails.discard(tail)
                with contextlib.suppress(asyncio.QueueEmpty):
                    tail.queue.get_nowait()  # room for the end marker
                tail.put(None)

    async def close(self) -> None:
        """Stop every feed (server shutdown)."""
        tasks = [f.task for f in self._feeds.values() if f.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _in_order(rows: Iterable[Positioned]) -> list[Positioned]:
    """Recording order: ``seq`` (the order the recorder took the events from Kafka), then
    ``created_at`` and id (two writers at once can give one number twice)."""
    return sorted(rows, key=lambda p: (p[0], p[1].created_at, p[1].id))
