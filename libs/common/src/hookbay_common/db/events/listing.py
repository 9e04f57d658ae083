"""Reading events in order: list pages with their filters and cursors, the newest events, and
streams of whole events (export, bulk replay)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Final

from hookbay_common.db.documents import LOOKUP_CONCURRENCY, gather_limited
from hookbay_common.db.events.books import PageBooks, book_of
from hookbay_common.db.events.layout import (
    _HEAD_PROJECTION,
    RECENT_KEEP,
    EventCursor,
    HeadPage,
    _after,
    _contains,
    _decode_recent,
    _event_of,
    _order,
    _row_from_document,
    _within,
)
from hookbay_common.db.events.summaries import PageSummary
from hookbay_common.models import Event, EventRow, EventStatus

MAX_PAGES_PER_LIST: Final = 40
"""Pages one list call reads at most: a filter matching few events (say 1 failure in 10,000)
answers a short page with a cursor instead of walking the whole webhook in one request."""
MAX_BOOKS_PER_LIST: Final = 10
"""Books one status-filtered list call consults to skip the pages without that status (1,000
pages, 100,000 events), then a cursor."""
MAX_SEARCH_PAGES: Final = 10
"""Pages one search call reads (heads and bodies): 1,000 events, then a cursor to go on."""


class EventListing(PageBooks):
    """Events in order, a page at a time: what lists, the overview, export and replay read."""

    async def heads_for_webhook(
        self,
        webhook_id: str,
        *,
        status: EventStatus | None = None,
        limit: int = 50,
        after: EventCursor | None = None,
        request_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        contains: str | None = None,
    ) -> HeadPage:
        """Newest first (page, then ``created_at``, then id, descending; pages follow arrival
        order, so this is arrival order), without bodies and headers, at most ``limit``.
        ``after`` continues strictly below a position, so events arriving meanwhile (above
        it) neither shift nor repeat the rest. ``since`` (inclusive) / ``until`` (exclusive)
        bound ``created_at``. ``request_id`` narrows to that one request. ``contains`` keeps
        the events with that text in a header (``name: value``) or the body, ignoring ASCII
        case (``_contains``).

        Reads one page at a time, at most ``MAX_PAGES_PER_LIST`` pages (``MAX_SEARCH_PAGES``
        with ``contains``, whose pages also read the bodies): a filter that matches little may
        answer fewer than ``limit`` heads with a position to go on from."""
        if request_id is not None:
            doc = await self._events.find_one({"request_id": request_id}, _HEAD_PROJECTION)
            if doc is None or doc.get("webhook_id") != webhook_id:
                return HeadPage([], None)
            row = _row_from_document(doc)
            keep = status is None or row.status is status
            return HeadPage([row] if keep and _within(row, since, until) else [], None)
        bounds = await self.top_page(webhook_id)
        if bounds is None:
            return HeadPage([], None)
        low, top = bounds
        page = min(top, after.page) if after is not None else top
        books: dict[int, dict[int, PageSummary]] = {}  # read once per call
        if until is not None and after is None:
            page = await self._last_page_before(webhook_id, until, low, page, books)
        found: list[EventRow] = []
        pages: list[int] = []  # the page of each found row
        read = 0
        budget = MAX_PAGES_PER_LIST if contains is None else MAX_SEARCH_PAGES
        while page >= low:
            if read == budget:
                return HeadPage(found, EventCursor(page))
            if status is not None:  # a page whose book counts none of the status is skipped
                book = book_of(page)
                if book not in books:
                    if len(books) == MAX_BOOKS_PER_LIST:
                        return HeadPage(found, EventCursor(page))
                    books[book] = await self._book(webhook_id, book)
                known = books[book].get(page)
                if known is not None and known.counts[status] == 0:
                    page -= 1
                    continue
            read += 1
            if since is not None or until is not None:  # the page's bounds, from its book
                book = book_of(page)
                if book not in books:
                    books[book] = await self._book(webhook_id, book)
                summary = books[book].get(page)
                if summary is not None and since is not None and summary.last_at < since:
                    break
                # all of it after the range (the slack page of ``_last_page_before``); not the
                # top page, whose summary may not count its newest events yet
                after_range = (
                    until is not None and summary is not None and summary.first_at >= until
                )
                if after_range and page < top:
                    page -= 1
                    continue
            rows = await self.page_heads(webhook_id, page, status)
            if contains is not None and rows:
                matching = await self._matching(webhook_id, page, contains)
                rows = [r for r in rows if r.id in matching]
            for row in reversed(rows):
                if after is not None and after.above(row, page):
                    continue
                if not _within(row, since, until):
                    continue
                if len(found) == limit:  # one more exists: the list goes on below the last
                    last = found[-1]
                    return HeadPage(found, EventCursor(pages[-1], last.created_at, last.id))
                found.append(row)
                pages.append(page)
            page -= 1
        return HeadPage(found, None)

    async def _matching(self, webhook_id: str, page: int, text: str) -> set[str]:
        """Ids of the page's events with ``text`` in a header or the body (``_contains``)."""
        needle = text.lower().encode()
        return {
            doc["_id"]
            async for doc in self._bodies.find({"webhook_id": webhook_id, "page": page})
            if _contains(doc, needle)
        }

    async def changed_heads(self, webhook_id: str, change_page: int) -> list[tuple[int, EventRow]]:
        """The heads whose latest recording or status change is on ``change_page``
        (``hookbay_common.db.events.layout``), each with its position ``seq``, in recording
        order (``seq``: the order the recorder took them from Kafka)."""
        query = {"webhook_id": webhook_id, "change_page": change_page}
        found = [
            (int(doc.get("seq", 0)), _row_from_document(doc))
            async for doc in self._events.find(query, _HEAD_PROJECTION)
        ]
        found.sort(key=lambda pair: (pair[0], pair[1].created_at, pair[1].id))
        return found

    async def recent_heads(self, username: str, summaries: list[PageSummary]) -> list[EventRow]:
        """The owner's ``RECENT_KEEP`` newest events: from the newest ids each webhook's counter
        keeps (one query, then one look-up per event), or, when some of those are gone
        (retention, a crash between the counter and the write) or were never kept (events
        recorded before the counters kept them), from the pages of ``summaries``."""
        kept: list[tuple[int, str]] = []
        async for doc in self._counters.find({"username": username}, {"recent": 1}):
            kept += _decode_recent(doc.get("recent", ""))
        kept.sort(reverse=True)
        wanted = [event_id for _, event_id in kept[:RECENT_KEEP]]
        docs = await gather_limited(
            self._events.find_one({"_id": i}, _HEAD_PROJECTION) for i in wanted
        )
        rows = [_row_from_document(d) for d in docs if d is not None and "page" in d]
        if len(rows) >= min(RECENT_KEEP, sum(s.total for s in summaries)):
            return sorted(rows, key=_order, reverse=True)
        return await self.recent_heads_from(summaries, RECENT_KEEP)

    async def recent_heads_from(self, summaries: list[PageSummary], limit: int) -> list[EventRow]:
        """The ``limit`` newest events on the pages of ``summaries``: pages are read a few at
        a time (in parallel), the ones with the newest events first, until no page left can
        hold a newer event than the ``limit``-th found."""
        pages = sorted(summaries, key=lambda s: s.last_at, reverse=True)
        found: list[EventRow] = []
        step = LOOKUP_CONCURRENCY // 2
        for start in range(0, len(pages), step):
            batch = pages[start : start + step]
            if len(found) >= limit:
                batch = [p for p in batch if p.last_at >= found[limit - 1].created_at]
                if not batch:
                    break
            for rows in await asyncio.gather(
                *(self.page_heads(p.webhook_id, p.page) for p in batch)
            ):
                found += rows
            found.sort(key=_order, reverse=True)
        return found[:limit]

    async def newest_events(self, webhook_id: str, limit: int) -> list[Event]:
        """The webhook's ``limit`` newest events with their bodies, newest first (arrival
        order, as lists show it); reads whole pages from the top, at most
        ``MAX_PAGES_PER_LIST``."""
        bounds = await self.top_page(webhook_id)
        if bounds is None:
            return []
        low, top = bounds
        found: list[Event] = []
        page = top
        while page >= low and len(found) < limit and top - page < MAX_PAGES_PER_LIST:
            events = [event for event, _ in await self._page_events(webhook_id, page, None)]
            events.sort(key=lambda e: (e.created_at, e.id), reverse=True)
            found += events[: limit - len(found)]
            page -= 1
        return found

    async def stream_for_webhook(
        self,
        webhook_id: str,
        status: EventStatus | None = None,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        start: EventCursor | None = None,
    ) -> AsyncGenerator[tuple[Event, EventCursor], None]:
        """Every event of the webhook (``status`` only, ``created_at`` in [since, until)),
        oldest first (arrival order), each with its position, one page at a time (the next
        page is read while this one is consumed): memory holds two pages whatever the count.
        ``start`` resumes after a position."""
        bounds = await self.top_page(webhook_id)
        if bounds is None:
            return
        low, top = bounds
        page = max(low, start.page) if start is not None else low
        if since is not None and start is None:  # skip what is older: a binary search
            page = max(low, await self._last_page_before(webhook_id, since, low, top) - 2)
        ahead = asyncio.create_task(self._page_events(webhook_id, page, status))
        try:
            while page <= top:
                found = await ahead
                if page < top:
                    ahead = asyncio.create_task(self._page_events(webhook_id, page + 1, status))
                for event, position in found:
                    if not _within(event, since, until):
                        continue
                    if start is not None and page == start.page and not _after(event, start):
                        continue
                    yield event, position
                if until is not None and found and min(e.created_at for e, _ in found) >= until:
                    break  # pages follow arrival: the rest is later still
                page += 1
        finally:
            if not ahead.done():
                ahead.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ahead

    async def _page_events(
        self, webhook_id: str, page: int, status: EventStatus | None
    ) -> list[tuple[Event, EventCursor]]:
        """The events of one page (``status`` only) with their bodies, oldest first."""
        rows = await self.page_heads(webhook_id, page, status)
        if not rows:
            return []
        bodies = {}
        async for doc in self._bodies.find({"webhook_id": webhook_id, "page": page}):
            bodies[doc["_id"]] = doc
        return [
            (_event_of(row, bodies[row.id]), EventCursor(page, row.created_at, row.id))
            for row in rows
            if row.id in bodies  # a body deleted meanwhile (retention): the event goes too
        ]
