"""The live tail: a webhook's new events as they are recorded, found by polling the database.

Why polling: FerretDB v1 has no change streams, and a replica's own memory would only see what
passes through that replica, while events arrive through ingest and the recorder and a tail may
be served by any dashboard replica behind the load balancer. The database is the one place that
sees every event, so every replica asks it.

How "new" is decided: each poll reads the webhook's events created in the last ``lookback``
(``TAIL_LOOKBACK``, 60 s) and emits those whose id it has not emitted or skipped before. The
window exists because the recorder writes an event a little after its ``created_at`` (Kafka lag,
a recorder restart): an event recorded up to ``lookback`` after it was received still appears;
one recorded later than that is missed by the tail (it is still in the event list). Ids leave
the tail's memory as their events leave the window, so the memory stays bounded by the events
of one window. Each event is emitted once, as it was when first seen (usually ``pending``): a
later status change is not sent again (the event list and detail show it).

Cost on FerretDB v1.24: every poll is a filtered query, which scans the whole events collection
(docs/ferretdb-backends.md); each open tail adds one such query per ``poll_interval``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import datetime, timedelta
from typing import Final

import anyio

from hookbay_common.clock import utcnow
from hookbay_common.db import EventRepository, WebhookRepository
from hookbay_common.ids import IdPrefix, has_prefix
from hookbay_common.models import EventHead
from hookbay_dashboard.events.schemas import EventSummary

TAIL_LOOKBACK: Final = timedelta(seconds=60)
"""How long after its ``created_at`` a recorded event can still show up in a tail."""
TAIL_BATCH: Final = 100
"""Events per query; a busier window is read in several queries."""


def summarize(event: EventHead) -> EventSummary:
    """What a tail shows of an event: the same summary as an event list."""
    return EventSummary.of(event)


class _Seen:
    """Ids already emitted (or present when the tail started), with their ``created_at``."""

    def __init__(self) -> None:
        self._ids: dict[str, datetime] = {}

    def add(self, events: Iterable[EventHead]) -> None:
        self._ids.update((e.id, e.created_at) for e in events)

    def fresh(self, events: Iterable[EventHead]) -> list[EventHead]:
        """The events not seen before, in the given order, now remembered as seen."""
        new = [e for e in events if e.id not in self._ids]
        self.add(new)
        return new

    def forget_before(self, since: datetime) -> None:
        """Drop ids older than the window; the window's query never returns them again."""
        self._ids = {i: created for i, created in self._ids.items() if created >= since}


class TailService:
    def __init__(
        self,
        webhooks: WebhookRepository,
        events: EventRepository,
        *,
        poll_interval: float,
        lookback: timedelta = TAIL_LOOKBACK,
        batch: int = TAIL_BATCH,
    ) -> None:
        self._webhooks = webhooks
        self._events = events
        self._poll_interval = poll_interval
        self._lookback = lookback
        self._batch = batch

    async def follow(
        self,
        username: str,
        webhook_name: str,
        *,
        last_event_id: str | None = None,
        stop: anyio.Event | None = None,
    ) -> AsyncIterator[EventHead]:
        """The webhook's events recorded from now on, each once, in the order they are found
        (oldest first within one poll); the iterator never ends by itself.

        Awaiting this checks the webhook (``WebhookNotFound``, also for another owner's) and
        takes the starting point, so an error comes before any streaming and an event recorded
        after the await returns is emitted. ``last_event_id`` (a resumed SSE stream) also
        emits the window's events whose id sorts after it (ids sort by arrival time); one
        recorded late with an earlier id, while the client was away, is not re-sent. Once
        ``stop`` is set the iterator ends, at the latest after the poll under way."""
        webhook = await self._webhooks.require(username, webhook_name)
        seen = _Seen()
        present = await self._window(webhook.id)
        backlog = []
        if last_event_id is not None and has_prefix(last_event_id, IdPrefix.EVENT):
            backlog = [e for e in present if e.id > last_event_id]
        seen.add(present)
        return self._poll(webhook.id, seen, backlog, stop or anyio.Event())

    async def _poll(
        self, webhook_id: str, seen: _Seen, backlog: list[EventHead], stop: anyio.Event
    ) -> AsyncIterator[EventHead]:
        for event in backlog:
            yield event
        while True:
            with anyio.move_on_after(self._poll_interval):
                await stop.wait()
            if stop.is_set():
                return
            since = utcnow() - self._lookback
            events = await self._recent(webhook_id, since)
            seen.forget_before(since)
            for event in seen.fresh(events):
                yield event

    async def _window(self, webhook_id: str) -> list[EventHead]:
        return await self._recent(webhook_id, utcnow() - self._lookback)

    async def _recent(self, webhook_id: str, since: datetime) -> list[EventHead]:
        """Every event of the webhook created at or after ``since``, oldest first, each once.
        Read in batches: one query's limit would otherwise cut off a busy window's newest."""
        found: dict[str, EventHead] = {}
        limit = self._batch
        while True:
            batch = await self._events.recent_for_webhook(webhook_id, since, limit=limit)
            found.update((e.id, e) for e in batch)
            if len(batch) < limit:
                return list(found.values())
            last = batch[-1].created_at
            # The next batch starts at the last one's millisecond (its events come back and are
            # deduplicated). A batch all in one millisecond cannot move on that way: read that
            # millisecond again with a larger limit.
            if last > since:
                since = last
            else:
                limit *= 2
