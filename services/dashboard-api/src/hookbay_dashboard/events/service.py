"""The event read side: a webhook's events page by page, one event in full, exports, counts
and the owner's overview. Another owner's webhook or event is reported exactly like a missing
one (``WebhookNotFound``, ``EventNotFound``)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Final

from hookbay_common.clock import utcnow
from hookbay_common.db import (
    AttemptRepository,
    EventCursor,
    EventRepository,
    StatsRepository,
    WebhookRepository,
)
from hookbay_common.db.documents import gather_limited
from hookbay_common.db.events import PageSummary
from hookbay_common.db.stats import HOUR, Counts, Point
from hookbay_common.errors import EventNotFound, InvalidRequest
from hookbay_common.ids import IdPrefix
from hookbay_common.models import Attempt, AttemptTrigger, Event, EventStatus, Webhook
from hookbay_dashboard.events.cursor import decode_cursor, encode_cursor
from hookbay_dashboard.events.schemas import (
    LISTEN_BODY_LIMIT,
    AttemptRead,
    EventCounts,
    EventDetail,
    EventPage,
    EventRead,
    EventSummary,
    ListenAttemptCreate,
    Overview,
    StatusFilter,
    WebhookOverview,
)
from hookbay_dashboard.stats.schemas import StatsCounters, StatsPoint
from hookbay_dashboard.stats.service import totals

OVERVIEW_HOURS: Final = 24
"""The overview's stats: the current UTC hour and the 23 before it."""
RECENT_EVENTS: Final = 10
EXPORT_CHUNK_BYTES: Final = 64 * 1024
"""An export is written in chunks of about this size (or one event, when it is larger)."""


class ExportStream:
    """A webhook's events as one JSON array (``[e1,e2,...]``, compact), produced while the
    database cursor is read: an async iterable of ``bytes`` chunks of about
    ``EXPORT_CHUNK_BYTES``, to be iterated once; one chunk is held at a time. The cursor
    closes when the iteration ends or is abandoned. ``exported`` counts the events in the
    chunks yielded so far (for progress bars)."""

    def __init__(
        self, webhook: Webhook, status: StatusFilter, events: AsyncGenerator[Event, None]
    ) -> None:
        self.webhook = webhook
        self.status = status
        self.exported = 0
        self._events = events

    @property
    def filename(self) -> str:
        return f"{self.webhook.name}-events-{self.status.value}.json"

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        buffer = bytearray(b"[")
        written = 0
        try:
            async for event in self._events:
                if written:
                    buffer += b","
                buffer += EventRead.of(event).model_dump_json().encode()
                written += 1
                if len(buffer) >= EXPORT_CHUNK_BYTES:
                    self.exported = written
                    yield bytes(buffer)
                    buffer.clear()
        finally:
            await self._events.aclose()
        buffer += b"]"
        self.exported = written
        yield bytes(buffer)


class EventService:
    def __init__(
        self,
        events: EventRepository,
        attempts: AttemptRepository,
        webhooks: WebhookRepository,
        *,
        cursor_key: bytes,
        stats: StatsRepository | None = None,
    ) -> None:
        self._events = events
        self._attempts = attempts
        self._webhooks = webhooks
        self._cursor_key = cursor_key
        self._stats = stats

    async def page(
        self,
        username: str,
        webhook_name: str,
        *,
        status: StatusFilter = StatusFilter.ALL,
        limit: int = 50,
        cursor: str | None = None,
        request_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        q: str | None = None,
    ) -> EventPage:
        """Up to ``limit`` of the webhook's events, newest first, and the cursor of the next
        (older) page when there may be one. Events arriving between pages land above the
        cursor, so the pages of the original events neither repeat nor skip one. A page may
        hold fewer than ``limit`` events and still a cursor (a filter matching few events: one
        request reads a bounded part of the webhook). ``request_id`` looks up that one request
        instead (0 or 1 item, no next page; ``cursor`` is then ignored). ``InvalidCursor`` for
        a cursor this list did not issue (other webhook or filter)."""
        if limit < 1:
            raise InvalidRequest(f"limit must be at least 1, not {limit}")
        _check_range(since, until)
        webhook = await self._webhooks.require(username, webhook_name)
        if request_id is not None:
            found = await self._events.heads_for_webhook(
                webhook.id, status=status.status, limit=1, request_id=request_id,
                since=since, until=until,
            )  # fmt: skip
            return EventPage(items=[EventSummary.of(h) for h in found.heads], next_cursor=None)
        after = None
        # a cursor is bound to its filter: the status, and the search (by a digest of it)
        bound = status.value if q is None else f"{status.value}:{_digest(q)}"
        if cursor is not None:
            after = decode_cursor(self._cursor_key, cursor, webhook.id, bound)
        found = await self._events.heads_for_webhook(
            webhook.id, status=status.status, limit=limit, after=after, since=since, until=until,
            contains=q,
        )  # fmt: skip
        next_cursor = None
        if found.after is not None:
            next_cursor = encode_cursor(self._cursor_key, webhook.id, bound, found.after)
        return EventPage(items=[EventSummary.of(h) for h in found.heads], next_cursor=next_cursor)

    async def counts(
        self,
        username: str,
        webhook_name: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> EventCounts:
        """The webhook's events per status, ``created_at`` in [since, until)."""
        _check_range(since, until)
        webhook = await self._webhooks.require(username, webhook_name)
        return _counts(await self._events.counts(webhook.id, since=since, until=until))

    async def detail(self, username: str, event_id: str) -> EventDetail:
        """The event with every attempt, oldest first, and its deliveries."""
        found = await self._events.get_with_deliveries(event_id)
        if found is None or found[0].username != username:
            raise EventNotFound(event_id)
        event, deliveries = found
        attempts = await self._attempts.list_for_event(event.id)
        return EventDetail.with_attempts(event, attempts, deliveries)

    async def record_listen_attempt(
        self, username: str, event_id: str, answer: ListenAttemptCreate
    ) -> AttemptRead:
        """Record a local answer of ``hookbay listen`` as an attempt (trigger ``listen``) of the
        owner's event: idempotent per (session, number); the event's status stays as it is
        (the attempt goes to the store directly, never through the recorder's status rules)."""
        event = await self._owned_event(username, event_id)
        try:
            body = base64.b64decode(answer.response_body, validate=True)
        except ValueError:  # binascii.Error, or a character beyond ASCII
            raise InvalidRequest("response_body is not base64") from None
        key = f"{event.id}:{answer.session_id}:{answer.number}"
        attempt = Attempt(
            id=f"{IdPrefix.ATTEMPT}_{_digest(key)}{_digest(key[::-1])[:10]}",
            event_id=event.id, username=username, webhook_id=event.webhook_id,
            chain_id=f"{IdPrefix.CHAIN}_{_digest(answer.session_id)}{_digest(key)[:10]}",
            number=answer.number, trigger=AttemptTrigger.LISTEN, url=answer.url,
            started_at=answer.started_at, status_code=answer.status_code,
            response_headers=answer.response_headers,
            response_body=body[:LISTEN_BODY_LIMIT],
            response_body_truncated=len(body) > LISTEN_BODY_LIMIT,
            latency_ms=answer.latency_ms, error=answer.error,
        )  # fmt: skip
        await self._attempts.upsert(attempt)
        return AttemptRead.of(attempt)

    async def open_export(
        self,
        username: str,
        webhook_name: str,
        status: StatusFilter,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> ExportStream:
        """Check the webhook (``WebhookNotFound`` here, before any byte is sent), then return
        the stream of its events matching ``status`` (and ``created_at`` in [since, until)),
        oldest first, each shaped like ``EventRead`` — the detail without attempts: attempts
        per event would make an export one query per event."""
        _check_range(since, until)
        webhook = await self._webhooks.require(username, webhook_name)
        positioned = self._events.stream_for_webhook(
            webhook.id, status.status, since=since, until=until
        )
        return ExportStream(webhook, status, _events_only(positioned))

    async def count(self, username: str, webhook_name: str, status: StatusFilter) -> int:
        """How many events an export with ``status`` holds right now."""
        webhook = await self._webhooks.require(username, webhook_name)
        return await self._events.count_for_webhook(webhook.id, status.status)

    async def overview(self, username: str) -> Overview:
        """Per webhook (by name): its stats over the current UTC hour and the 23 before it,
        totals and one point per hour (from the stats processor's hour buckets: one query per
        UTC day, whatever the number of events), its events of those hours still pending, and
        when its newest event arrived; plus the owner's newest events across webhooks (from
        each webhook's books of pages back to the window's start)."""
        if self._stats is None:
            raise RuntimeError("EventService was built without stats")
        now = utcnow()
        first = (int(now.timestamp()) // HOUR - (OVERVIEW_HOURS - 1)) * HOUR
        since = datetime.fromtimestamp(first, UTC)
        webhooks = await self._webhooks.list_for_owner(username)
        hourly, summaries = await asyncio.gather(
            self._stats.owner_hours(username, since, since + timedelta(hours=OVERVIEW_HOURS)),
            self._events.newest_summaries(username, since),
        )
        pending = await self._pending_since(summaries, since)
        quiet = [Point(since + timedelta(hours=h), Counts()) for h in range(OVERVIEW_HOURS)]
        newest = {s.webhook_id: s.last_at for s in sorted(summaries, key=lambda s: s.last_at)}
        rows = [
            _webhook_overview(w, hourly.get(w.id, quiet), newest.get(w.id), pending.get(w.id, 0))
            for w in webhooks
        ]
        recent = (await self._events.recent_heads(username, summaries))[:RECENT_EVENTS]
        return Overview(
            webhooks=rows, stats_since=since, recent_events=[EventSummary.of(h) for h in recent]
        )

    async def _pending_since(self, summaries: list[PageSummary], since: datetime) -> dict[str, int]:
        """Per webhook id, its events created since ``since`` still pending. Pending comes from
        the event store, not the stats: the stats count deliveries when they end (by the hour
        they end in, replays included), so no difference of stats counters is the number of
        events still waiting. So the overview reads each webhook's books (100 pages each) back
        to ``since`` instead of its newest book only — one or two books per webhook unless it
        takes more than 10,000 events a day — and counts them here: a page inside the window
        from its book entry, a page ``since`` cuts from its per-minute counts (``since`` is on
        a whole hour) only when its book entry counts pending events (a page 24 hours back
        rarely has any: one read per webhook saved, measured at 1M in docs/benchmarks.md)."""
        by_webhook: dict[str, list[PageSummary]] = {}
        for summary in summaries:
            by_webhook.setdefault(summary.webhook_id, []).append(summary)
        found = await gather_limited(
            self._events.counts_from(pages, since, only=EventStatus.PENDING)
            for pages in by_webhook.values()
        )
        return {
            webhook_id: counts[EventStatus.PENDING]
            for webhook_id, counts in zip(by_webhook, found, strict=True)
        }

    async def _owned_event(self, username: str, event_id: str) -> Event:
        event = await self._events.get(event_id)
        if event is None or event.username != username:
            raise EventNotFound(event_id)
        return event


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check_range(since: datetime | None, until: datetime | None) -> None:
    if since is not None and until is not None and since >= until:
        raise InvalidRequest("since must be earlier than until")


async def _events_only(
    positioned: AsyncGenerator[tuple[Event, EventCursor], None],
) -> AsyncGenerator[Event, None]:
    try:
        async for event, _ in positioned:
            yield event
    finally:
        await positioned.aclose()


def _counts(by_status: dict[EventStatus, int]) -> EventCounts:
    success = by_status.get(EventStatus.SUCCESS, 0)
    failed = by_status.get(EventStatus.FAILED, 0)
    pending = by_status.get(EventStatus.PENDING, 0)
    return EventCounts(
        success=success, failed=failed, pending=pending, total=success + failed + pending
    )


def _webhook_overview(
    webhook: Webhook, points: list[Point], last: datetime | None, pending: int
) -> WebhookOverview:
    total = totals(points)
    return WebhookOverview(
        name=webhook.name,
        active=webhook.active,
        pending_24h=pending,
        counts_24h=EventCounts(
            success=total.delivered,
            failed=total.failed + total.rejected,
            pending=pending,
            total=total.received + total.rejected,
        ),
        success_rate_24h=total.success_rate,
        last_event_at=last,
        stats_24h=StatsCounters.of(total),
        hourly_24h=[StatsPoint.of_point(p) for p in points],
    )
