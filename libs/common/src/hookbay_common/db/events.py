"""The ``events``, ``event_bodies``, ``event_pages``, ``event_counters`` and ``attempts``
collections.

Layout (docs/data-model.md has the full picture and the reasons, measured):

- ``events`` holds event *heads*: every field of an event but its request headers and body,
  plus its position ``seq`` (a per-webhook number given when the event is first recorded)
  and ``page`` (``seq // PAGE_SIZE``), its body size and its latest attempt's outcome.
- ``event_bodies`` holds the request headers and body, keyed by the event id, with the
  event's ``webhook_id`` and ``page``.
- ``event_pages`` holds one summary per (webhook, page): how many events it holds by status
  and the first and last ``created_at``; recounted from the heads whenever a write touches
  the page, so it is exact and a write repeated after a crash leaves it right.
- ``event_counters`` holds each webhook's next ``seq`` and lowest live page.

Every hot query is then an equality match on a few fields that selects at most a page of
small documents: ``{webhook_id, page}`` (a list page, a recount, an export step, a retention
step), ``{_id}``, ``{request_id}``, ``{username}`` on the page summaries (counts, overview).
That is what FerretDB v1 on PostgreSQL can serve from an index (docs/ferretdb-backends.md:
it pushes only equality down and sorts in Go), and what MongoDB serves from the declared
compound indexes; no query sorts or scans more than a page.

Writes are idempotent: a record consumed twice keeps the position, status and counts it had.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import zlib
from collections import OrderedDict
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pymongo import ReturnDocument, UpdateOne
from pymongo.errors import BulkWriteError

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.documents import (
    LOOKUP_CONCURRENCY,
    body_from_document,
    body_to_document,
    gather_limited,
    headers_from_document,
    headers_to_document,
)
from hookbay_common.models import Attempt, Event, EventHead, EventRow, EventStatus

PAGE_SIZE: Final = 100
"""Events per page. A page is what one list query decodes (FerretDB decodes every matching
document in Go): 100 heads of ~0.4 KB are read in a few milliseconds."""
BOOK_PAGES: Final = 100
"""Pages per book: an ``event_books`` document holds the counts of 100 pages (10,000 events), so
counting a webhook of a million events reads 100 small documents, not 10,000 page summaries."""
MAX_PAGES_PER_LIST: Final = 40
"""Pages one list call reads at most: a filter matching few events (say 1 failure in 10,000)
answers a short page with a cursor instead of walking the whole webhook in one request."""
MAX_BOOKS_PER_LIST: Final = 10
"""Books one status-filtered list call consults to skip the pages without that status (1,000
pages, 100,000 events), then a cursor."""
MAX_SEARCH_PAGES: Final = 10
"""Pages one search call reads (heads and bodies): 1,000 events, then a cursor to go on."""
LOCATE_CACHE: Final = 100_000
"""Event ids whose (webhook, page) the repository remembers from its own writes, so the
attempts that follow an event need no lookup."""
BOOK_START_CACHE: Final = 50_000
"""Settled books (``_settled``) whose start the repository remembers for date ranges: 8 bytes
and a key each, so a date range reads the one book it lands in instead of binary-searching."""
RECENT_KEEP: Final = 10
"""Newest event ids each webhook's counter keeps, for the owner's overview."""

_STATUSES: Final = tuple(EventStatus)
_STATUS_INDEX: Final = {s.value: i for i, s in enumerate(_STATUSES)}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_BODY_FIELDS: Final = ("request_headers", "request_body", "request_body_encoding")
_POSITION_FIELDS: Final = ("seq", "page")
_HEAD_ONLY_FIELDS: Final = (
    *_POSITION_FIELDS,
    "status_key",
    "body_size",
    "last_status_code",
    "last_latency_ms",
    "next_retry_at",
    "last_error",
    "last_attempt_number",
)
_HEAD_PROJECTION: Final = {name: 0 for name in (*_BODY_FIELDS, "status_key")}


@dataclass(frozen=True, order=True)
class EventCursor:
    """A position in a webhook's newest-first order: just below the event (``page``,
    ``created_at``, ``event_id``), or the top of ``page`` when ``created_at`` is ``None``."""

    page: int
    created_at: datetime | None = None
    event_id: str | None = None

    def above(self, head: EventHead, page: int) -> bool:
        """Whether ``head`` (on ``page``) comes before this position, newest first."""
        if page != self.page:
            return page > self.page
        if self.created_at is None or self.event_id is None:
            return False
        return (head.created_at, head.id) >= (self.created_at, self.event_id)


@dataclass(frozen=True)
class HeadPage:
    """A slice of a list: the heads, and where the next slice starts (``None``: the end)."""

    heads: list[EventRow]
    after: EventCursor | None


@dataclass
class PageSummary:
    """One ``event_pages`` document."""

    webhook_id: str
    username: str
    page: int
    first_at: datetime
    last_at: datetime
    counts: dict[EventStatus, int] = field(default_factory=dict)
    rejected: int = 0
    """Of the failed: rejected by their signature (never forwarded)."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class ExpiredPage:
    """Events of one page created before a cut-off: the whole page (``event_ids`` ``None``)
    or the listed ids."""

    webhook_id: str
    page: int
    count: int
    event_ids: list[str] | None


@dataclass
class _Tally:
    """Counts of one page per status, per minute of ``created_at``, and its time bounds: a
    page's summary, or what a batch's writes changed in it (counts may then be negative)."""

    counts: list[int] = field(default_factory=lambda: [0] * len(_STATUSES))
    rejected: int = 0
    minutes: dict[str, list[int]] = field(default_factory=dict)
    first_at: datetime | None = None
    last_at: datetime | None = None

    def add(self, status: str, created_at: datetime, n: int = 1) -> None:
        index = _STATUS_INDEX[status]
        self.counts[index] += n
        self.minutes.setdefault(minute_key(created_at), [0] * len(_STATUSES))[index] += n
        if n > 0:
            self.first_at = min(self.first_at or created_at, created_at)
            self.last_at = max(self.last_at or created_at, created_at)

    @classmethod
    def of_summary(cls, doc: dict[str, Any]) -> _Tally:
        return cls(
            counts=[doc[s.value] for s in _STATUSES], rejected=doc["rejected"],
            minutes=dict(_decode_minutes(doc["minutes"])), first_at=doc["first_at"],
            last_at=doc["last_at"],
        )  # fmt: skip

    def plus(self, other: _Tally) -> _Tally:
        minutes = dict(self.minutes)
        for minute, added in other.minutes.items():
            kept = minutes.get(minute, [0] * len(_STATUSES))
            minutes[minute] = [a + b for a, b in zip(kept, added, strict=True)]
        bounds = [t for t in (self.first_at, self.last_at, other.first_at, other.last_at) if t]
        return _Tally(
            counts=[a + b for a, b in zip(self.counts, other.counts, strict=True)],
            rejected=self.rejected + other.rejected, minutes=minutes,
            first_at=min(bounds, default=None), last_at=max(bounds, default=None),
        )  # fmt: skip

    @property
    def valid(self) -> bool:
        """No count below zero (else a tally was added to a summary that did not hold it)."""
        return min(self.counts) >= 0 and all(n >= 0 for t in self.minutes.values() for n in t)

    def summary(self, webhook_id: str, username: str, page: int) -> dict[str, Any]:
        """The ``event_pages`` document."""
        return {
            "webhook_id": webhook_id, "username": username, "page": page,
            "first_at": self.first_at, "last_at": self.last_at, "total": sum(self.counts),
            "rejected": self.rejected,
            **{s.value: n for s, n in zip(_STATUSES, self.counts, strict=True)},
            "minutes": _encode_minutes({m: t for m, t in self.minutes.items() if any(t)}),
        }  # fmt: skip


@dataclass
class _Changes:
    """The summaries a batch's writes leave to update: pages whose writes are all known
    (``tallies``, applied to the stored summary) and pages to recount from their heads
    (``exact``: a write met a stored document, a page was completed, or a status update found
    its event already past it: a batch written again)."""

    tallies: dict[tuple[str, int], _Tally] = field(default_factory=dict)
    exact: set[tuple[str, int]] = field(default_factory=set)

    def tally(self, webhook_id: str, page: int) -> _Tally:
        return self.tallies.setdefault((webhook_id, page), _Tally())


def latest_attempts(attempts: Iterable[Attempt]) -> dict[str, Attempt]:
    """Per event id, the attempt that decides its status (``Attempt.status_key``)."""
    latest: dict[str, Attempt] = {}
    for attempt in attempts:
        known = latest.get(attempt.event_id)
        if known is None or attempt.status_key > known.status_key:
            latest[attempt.event_id] = attempt
    return latest


def page_id(webhook_id: str, page: int) -> str:
    return f"{webhook_id}:{page:010d}"


def _order(head: EventHead) -> tuple[datetime, str]:
    return head.created_at, head.id


def _row_from_document(doc: dict[str, Any]) -> EventRow:
    doc = {k: v for k, v in doc.items() if k not in _BODY_FIELDS and k not in ("status_key",)}
    doc.pop("seq", None)
    doc["id"] = doc.pop("_id")
    return EventRow.model_validate(doc)


def event_head_document(event: Event) -> dict[str, Any]:
    """The head of ``event`` as stored, without its position (given when first recorded)."""
    doc = event.model_dump(mode="python", exclude={"id", "body", "request_headers"})
    doc.update(_id=event.id, body_size=len(event.body))
    return doc


def event_body_document(event: Event) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "_id": event.id,
        "webhook_id": event.webhook_id,
        "username": event.username,
        "request_headers": headers_to_document(event.request_headers),
    }
    doc.update(body_to_document("request_body", event.body))
    return doc


def event_to_document(event: Event) -> dict[str, Any]:
    """The single-document layout of releases before the split (head and body together); what
    ``migrate_event_layout`` upgrades. Kept to write such data in the migration's tests."""
    doc = event.model_dump(mode="python", exclude={"id", "body", "request_headers"})
    doc.update(body_to_document("request_body", event.body))
    doc.update(_id=event.id, request_headers=headers_to_document(event.request_headers))
    return doc


def event_from_documents(head: dict[str, Any], body: dict[str, Any] | None) -> Event:
    """The event from its head and body documents; a head of the old layout carries its body."""
    doc = {k: v for k, v in head.items() if k not in _HEAD_ONLY_FIELDS}
    source = dict(body if body is not None and "request_body" not in head else head)
    doc["id"] = doc.pop("_id")
    doc["request_headers"] = headers_from_document(source["request_headers"])
    doc["body"] = body_from_document(source, "request_body")
    doc.pop("request_body", None)
    doc.pop("request_body_encoding", None)
    return Event.model_validate(doc)


def _status_if_later(attempt: Attempt) -> tuple[dict[str, Any], dict[str, Any]]:
    """Filter and update setting the status (and the latest attempt's outcome) when the stored
    status came from an earlier attempt."""
    key = attempt.status_key
    later = {"$or": [{"status_key": {"$lt": key}}, {"status_key": {"$exists": False}}]}
    return {"_id": attempt.event_id, **later}, {
        "$set": {
            "status": attempt.outcome.value,
            "status_key": key,
            "last_status_code": attempt.status_code,
            "last_latency_ms": attempt.latency_ms,
            "last_error": attempt.error,
            "next_retry_at": attempt.next_retry_at if attempt.will_retry else None,
            "last_attempt_number": attempt.number,
        }
    }


BULK_CHUNK: Final = 16
"""Statements per write command. FerretDB v1.24 keeps one PostgreSQL connection per statement that
matched a document until the whole command ends (``msg_update.go``), so one command with about
50 matching statements exhausts its pool and hangs the server (docs/ferretdb-backends.md)."""


async def _bulk_write(collection: Any, operations: Sequence[Any]) -> None:
    """``operations`` in order, as consecutive commands of at most ``BULK_CHUNK`` statements."""
    for start in range(0, len(operations), BULK_CHUNK):
        await collection.bulk_write(operations[start : start + BULK_CHUNK], ordered=True)


Statement = tuple[dict[str, Any], dict[str, Any], bool]
"""An update: filter, update, upsert."""


async def _insert_or_upsert(
    collection: Any, docs: Sequence[dict[str, Any]], upserts: Sequence[Sequence[Statement]]
) -> list[int]:
    """Store ``docs``: inserted in chunks, which needs no lookup. The documents of a chunk that
    met a stored document (a record consumed again, an event's status stub) are written again as
    ``upserts[i]`` (idempotent statements, in order), ``LOOKUP_CONCURRENCY`` documents at a time;
    only those: an unordered insert goes on past a duplicate on MongoDB and on FerretDB v1.24
    alike (measured), and when the answer's counts do not add up the whole chunk goes this way.
    The indexes of the documents that went that way.

    After a store outage the recorder reads attempts ahead of their events, so most events meet
    a stub: written one document at a time for the whole chunk, a 2,000-record batch took 17 s
    (the chaos suite's ``store-read-only`` scenario)."""
    slow: list[int] = []
    for start in range(0, len(docs), BULK_CHUNK):
        chunk = docs[start : start + BULK_CHUNK]
        try:
            await collection.insert_many(chunk, ordered=False)
        except BulkWriteError as exc:
            failed = sorted({start + int(e["index"]) for e in exc.details.get("writeErrors", [])})
            if exc.details.get("nInserted", -1) + len(failed) != len(chunk):
                failed = list(range(start, start + len(chunk)))  # cannot tell: all again
            # one command each: a refused one raises its own error (a duplicate request id)
            await gather_limited(_upsert(collection, upserts[index]) for index in failed)
            slow.extend(failed)
    return slow


async def _upsert(collection: Any, statements: Sequence[Statement]) -> None:
    for query, update, upsert in statements:
        await collection.update_one(query, update, upsert=upsert)


class EventRepository:
    def __init__(self, db: Database) -> None:
        self._events = db[Collections.EVENTS]
        self._bodies = db[Collections.EVENT_BODIES]
        self._pages = db[Collections.EVENT_PAGES]
        self._books = db[Collections.EVENT_BOOKS]
        self._counters = db[Collections.EVENT_COUNTERS]
        self._attempts = db[Collections.ATTEMPTS]
        self._located: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._book_starts: OrderedDict[tuple[str, int], datetime] = OrderedDict()

    # ------------------------------------------------------------------ writing

    async def upsert(self, event: Event) -> None:
        """Store ``event``; idempotent. A stored event keeps its status and position."""
        await self.upsert_many([event])

    async def upsert_many(
        self, events: list[Event], outcomes: Mapping[str, Attempt] | None = None
    ) -> set[str]:
        """Store ``events`` (idempotent): new ones get the next positions of their webhook,
        in the order given; a stored one keeps its position, status and outcome. Then recount
        their pages.

        ``outcomes`` (``latest_attempts`` of the same batch) lets a new event be stored with the
        status its latest attempt gives it, saving the status update: the ids of the events so
        stored are returned, for ``apply_attempts(settled=...)``."""
        changes = _Changes()
        settled = await self._store(events, outcomes or {}, changes)
        await self._summarise(changes)
        return settled

    async def _store(
        self, events: list[Event], outcomes: Mapping[str, Attempt], changes: _Changes
    ) -> set[str]:
        """``upsert_many`` without the summaries, whose changes go to ``changes``."""
        if not events:
            return set()
        seqs = await self._allocate(events)
        heads: list[dict[str, Any]] = []
        bodies: list[dict[str, Any]] = []
        head_upserts: list[list[Statement]] = []
        body_upserts: list[list[Statement]] = []
        for event, seq in zip(events, seqs, strict=True):
            position: dict[str, Any] = {"seq": seq, "page": seq // PAGE_SIZE}
            head = event_head_document(event)
            body = event_body_document(event)
            settled = (
                _status_if_later(outcomes[event.id])[1]["$set"] if event.id in outcomes else {}
            )
            heads.append({**head, **position, "status": event.initial_status.value, **settled})
            bodies.append({**body, "page": position["page"]})
            del head["_id"], body["_id"]
            head_status = head.pop("status")
            head_upserts.append([
                ({"_id": event.id}, {"$set": head, "$setOnInsert": {"status": head_status}}, True),
                # a status stub (attempt recorded first) has no position yet
                ({"_id": event.id, "page": {"$exists": False}}, {"$set": position}, False),
            ])  # fmt: skip
            on_insert: dict[str, Any] = {"page": position["page"]}
            body_upserts.append(
                [({"_id": event.id}, {"$set": body, "$setOnInsert": on_insert}, True)]
            )
        # bodies first: a head (what lists show) never exists without its body; a body that
        # was stored before (a batch written again) keeps its page
        slow_bodies = set(await _insert_or_upsert(self._bodies, bodies, body_upserts))
        slow = await _insert_or_upsert(self._events, heads, head_upserts)
        late = set(slow)
        for index, (event, head) in enumerate(zip(events, heads, strict=True)):
            place = (event.webhook_id, head["page"])
            if index in late:  # met a stored document: its page is recounted
                changes.exact.add(place)
            else:
                tally = changes.tally(*place)
                tally.add(head["status"], event.created_at)
                tally.rejected += event.rejected_reason is not None
            if head["seq"] >= PAGE_SIZE and head["seq"] % PAGE_SIZE == _heal_at(event.webhook_id):
                # the previous page is complete: recount it once, which heals any drift of its
                # counts; at a position of its own per webhook, so webhooks of one rate do not
                # all recount in the same batch (measured: 20 at once made a 1.7 s p99)
                changes.exact.add((event.webhook_id, head["page"] - 1))

        async def settle(index: int) -> None:  # after a crash: the head's page wins
            event = events[index]
            doc = await self._events.find_one({"_id": event.id}, {"page": 1})
            if doc is None or "page" not in doc:
                return
            page = doc["page"]
            changes.exact.add((event.webhook_id, page))
            seqs[index] = page * PAGE_SIZE
            await self._bodies.update_one({"_id": event.id}, {"$set": {"page": page}})
            # attempts recorded before their event learn its page now
            await self._attempts.update_many(
                {"event_id": event.id, "event_page": {"$exists": False}},
                {"$set": {"event_page": page}},
            )

        await gather_limited(settle(index) for index in sorted(slow_bodies | late))
        for event, seq in zip(events, seqs, strict=True):
            self._remember(event.id, event.webhook_id, seq // PAGE_SIZE)
        return {e.id for i, e in enumerate(events) if i not in late and e.id in outcomes}

    async def _allocate(self, events: Sequence[Event]) -> list[int]:
        """The next ``seq`` of each event's webhook, in order: one ``$inc`` per webhook. A batch
        written again after a crash wastes its numbers (its events keep their first ones), which
        only leaves a page short; two writers at once may get the same numbers on FerretDB (see
        ``top_page``), which only makes a page longer: order within a page is by
        ``created_at``, so nothing is lost or misordered either way."""
        wanted: dict[str, int] = {}
        owner: dict[str, str] = {}
        for event in events:
            wanted[event.webhook_id] = wanted.get(event.webhook_id, 0) + 1
            owner[event.webhook_id] = event.username
        ends: dict[str, int] = {}

        async def take(webhook_id: str, count: int) -> None:
            doc = await self._counters.find_one_and_update(
                {"_id": webhook_id},
                {"$inc": {"seq": count}, "$set": {"username": owner[webhook_id]}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
            assert doc is not None  # an upsert returning the document after
            ends[webhook_id] = int(doc["seq"]) - count
            newest = _newest(
                doc.get("recent", ""), (e for e in events if e.webhook_id == webhook_id)
            )
            # heal a lost update (see ``top_page``): the counter ends at least past these numbers
            await self._counters.update_one(
                {"_id": webhook_id}, {"$max": {"seq": int(doc["seq"])}, "$set": {"recent": newest}}
            )

        await gather_limited(take(w, n) for w, n in wanted.items())  # one counter each
        seqs = []
        for event in events:
            seqs.append(ends[event.webhook_id])
            ends[event.webhook_id] += 1
        return seqs

    def _remember(self, event_id: str, webhook_id: str, page: int) -> None:
        # one string per webhook
        _keep(self._located, event_id, (sys.intern(webhook_id), page), LOCATE_CACHE)

    async def locate(self, event_ids: Iterable[str]) -> dict[str, tuple[str, int]]:
        """(webhook id, page) of each recorded event among ``event_ids``; one without a
        position yet (not recorded, or only its status stub) is absent."""
        found: dict[str, tuple[str, int]] = {}
        missing = []
        for event_id in dict.fromkeys(event_ids):
            if event_id in self._located:
                found[event_id] = self._located[event_id]
            else:
                missing.append(event_id)
        docs = await gather_limited(
            self._events.find_one({"_id": i}, {"webhook_id": 1, "page": 1}) for i in missing
        )
        for doc in docs:
            if doc is not None and "page" in doc and "webhook_id" in doc:
                found[doc["_id"]] = (doc["webhook_id"], doc["page"])
                self._remember(doc["_id"], doc["webhook_id"], doc["page"])
        return found

    async def apply_attempts(
        self,
        attempts: list[Attempt],
        located: dict[str, tuple[str, int]] | None = None,
        *,
        settled: Set[str] = frozenset(),
    ) -> None:
        """Move each attempt's event to the status the attempt implies, unless a later attempt
        (``Attempt.status_key``) already decided it; idempotent and order-independent. Then
        recount the pages of those events. ``settled``: events stored with their latest
        attempt's status already (``upsert_many``), left alone.

        One conditional update per event (its latest attempt here); an event not recorded yet
        gets a status stub that its own write completes."""
        changes = _Changes()
        await self._apply(attempts, located, settled, changes)
        await self._summarise(changes)

    async def _apply(
        self,
        attempts: list[Attempt],
        located: dict[str, tuple[str, int]] | None,
        settled: Set[str],
        changes: _Changes,
    ) -> None:
        """``apply_attempts`` without the summaries, whose changes go to ``changes``."""
        latest = {i: a for i, a in latest_attempts(attempts).items() if i not in settled}
        if not latest:
            return
        if located is None:
            located = await self.locate(latest)

        async def update(attempt: Attempt) -> None:
            # no projection: FerretDB v1's findAndModify has none (a head is small anyway)
            before = await self._events.find_one_and_update(
                *_status_if_later(attempt), return_document=ReturnDocument.BEFORE
            )
            if before is not None and "page" in before:  # the status it had, the one it has
                tally = changes.tally(before["webhook_id"], before["page"])
                tally.add(before["status"], before["created_at"], -1)
                tally.add(attempt.outcome.value, before["created_at"])
            elif attempt.event_id in located:  # already past this attempt: written before
                changes.exact.add(located[attempt.event_id])

        # one command per event, several at once: on FerretDB each update is a look-up and a
        # write, and a bulk command's statements run one after the other (and must stay few)
        await gather_limited(update(a) for a in latest.values())
        absent = [a for a in latest.values() if a.event_id not in located]
        if absent:  # a status stub for each, then the status, now that a document exists
            stubs = [
                UpdateOne({"_id": a.event_id}, {"$setOnInsert": {"status_key": ""}}, upsert=True)
                for a in absent
            ]
            await _bulk_write(self._events, stubs)
            await _bulk_write(self._events, [UpdateOne(*_status_if_later(a)) for a in absent])

    async def set_status(self, event_id: str, status: EventStatus) -> None:
        await self._events.update_one({"_id": event_id}, {"$set": {"status": status.value}})
        await self.recount(set((await self.locate([event_id])).values()))

    async def recount(self, pages: Iterable[tuple[str, int]]) -> None:
        """Rewrite the summaries of ``pages`` (webhook id, page) from their heads."""
        await self._summarise(_Changes(exact=set(pages)))

    async def _summarise(self, changes: _Changes) -> None:
        """Bring the summaries (and book entries) of the pages in ``changes`` up to date: a
        tally is added to the stored summary (one small read and write instead of reading the
        page's heads), an ``exact`` page is recounted from its heads. Books go concurrently,
        the pages of one book one after the other: FerretDB v1 updates a document by reading
        and rewriting it, so two concurrent ``$set`` of entries of one book could lose one."""
        books: dict[tuple[str, int], list[int]] = {}
        for webhook_id, page in sorted(changes.exact | changes.tallies.keys()):
            books.setdefault((webhook_id, page // BOOK_PAGES), []).append(page)

        async def one_book(webhook_id: str, pages: list[int]) -> None:
            for page in pages:
                exact = (webhook_id, page) in changes.exact
                if exact or not await self._add(
                    webhook_id, page, changes.tallies[webhook_id, page]
                ):
                    await self._recount(webhook_id, page)

        await gather_limited(one_book(w, ps) for (w, _), ps in books.items())

    async def _add(self, webhook_id: str, page: int, tally: _Tally) -> bool:
        """Add ``tally`` to the page's stored summary; False when there is none, or the sum
        does not add up (then the page is recounted)."""
        key = page_id(webhook_id, page)
        doc = await self._pages.find_one({"_id": key})
        if doc is None or "minutes" not in doc:  # a new page, or one summarised before minutes
            return False
        total = _Tally.of_summary(doc).plus(tally)
        if not total.valid:
            return False
        await self._write_summary(key, total.summary(webhook_id, doc["username"], page))
        return True

    async def _recount(self, webhook_id: str, page: int) -> None:
        docs = [
            doc
            async for doc in self._events.find(
                {"webhook_id": webhook_id, "page": page},
                {"status": 1, "created_at": 1, "username": 1, "rejected_reason": 1},
            )
        ]
        key = page_id(webhook_id, page)
        book = {"_id": book_id(webhook_id, page // BOOK_PAGES)}
        if not docs:
            await self._pages.delete_one({"_id": key})
            await self._books.update_one(book, {"$unset": {f"pages.{page}": ""}})
            return
        counted = _Tally()
        for doc in docs:
            counted.add(doc["status"], doc["created_at"])
            counted.rejected += doc.get("rejected_reason") is not None
        await self._write_summary(key, counted.summary(webhook_id, docs[0]["username"], page))

    async def _write_summary(self, key: str, summary: dict[str, Any]) -> None:
        await self._pages.replace_one({"_id": key}, summary, upsert=True)
        book = {"_id": book_id(summary["webhook_id"], summary["page"] // BOOK_PAGES)}
        await self._books.update_one(
            book, {"$set": _book_entry(summary)}, upsert=True
        )  # after the page: a book never counts what its page does not

    # ------------------------------------------------------------------ reading one event

    async def get(self, event_id: str) -> Event | None:
        """The event, or ``None`` also while only its status stub is stored."""
        head = await self._events.find_one({"_id": event_id})
        return await self._complete(head)

    async def get_by_request_id(self, request_id: str) -> Event | None:
        return await self._complete(await self._events.find_one({"request_id": request_id}))

    async def _complete(self, head: dict[str, Any] | None) -> Event | None:
        if head is None or "request_id" not in head:
            return None
        body = None if "request_body" in head else await self._bodies.find_one({"_id": head["_id"]})
        if body is None and "request_body" not in head:
            return None  # a head of layout 2 without its body: deleted meanwhile
        return event_from_documents(head, body)

    # ------------------------------------------------------------------ pages

    async def top_page(self, webhook_id: str) -> tuple[int, int] | None:
        """(lowest, highest) page the webhook may have events on; ``None``: none recorded."""
        doc = await self._counters.find_one({"_id": webhook_id})
        if doc is None or (int(doc.get("seq", 0)) == 0 and int(doc.get("below", 0)) == 0):
            return None
        top = (int(doc.get("seq", 0)) - 1) // PAGE_SIZE
        # The counter may lag behind the pages in use: FerretDB v1 runs ``$inc`` as a read and a
        # write, so two writers at once (a recorder and its killed predecessor's last command)
        # can both take the same numbers and leave the lower end. ``_allocate`` heals it; until
        # then, the pages just above are looked for (usually one empty answer).
        while await self._events.find_one({"webhook_id": webhook_id, "page": top + 1}, {"_id": 1}):
            top += 1
        # layout-1 events moved by ``migrate_event_layout`` sit on pages below 0
        return int(doc.get("low", 0)), top

    async def page_heads(
        self, webhook_id: str, page: int, status: EventStatus | None = None
    ) -> list[EventRow]:
        """The heads of one page (``status`` only), oldest first."""
        query: dict[str, Any] = {"webhook_id": webhook_id, "page": page}
        if status is not None:
            query["status"] = status.value
        rows = [_row_from_document(doc) async for doc in self._events.find(query, _HEAD_PROJECTION)]
        rows.sort(key=_order)
        return rows

    async def summaries(
        self, *, webhook_id: str | None = None, username: str | None = None
    ) -> list[PageSummary]:
        """The page summaries of one webhook or of every webhook of an owner, by page: read
        from the books (one document per 100 pages), without the per-minute counts."""
        query: dict[str, Any] = (
            {"webhook_id": webhook_id} if webhook_id is not None else {"username": username}
        )
        found = [
            _summary_of_entry(doc, int(page), entry)
            async for doc in self._books.find(query)
            for page, entry in doc.get("pages", {}).items()
        ]
        found.sort(key=lambda s: (s.webhook_id, s.page))
        return found

    async def newest_summaries(self, username: str, since: datetime) -> list[PageSummary]:
        """The page summaries of each webhook of ``username`` from its newest page down to the
        first that begins before ``since`` (at least the newest page): each webhook's books
        from its newest down (its counter gives the newest page), so an owner's overview reads
        the books of its window, not all of them (a webhook of a million events over a week:
        2 of 100 books for a day)."""
        counters = [
            doc async for doc in self._counters.find({"username": username}, {"seq": 1, "low": 1})
        ]  # fmt: skip
        found: list[PageSummary] = []
        for pages in await gather_limited(self._books_since(c, since) for c in counters):
            found += pages
        found.sort(key=lambda s: (s.webhook_id, s.page))
        return found

    async def _books_since(self, counter: dict[str, Any], since: datetime) -> list[PageSummary]:
        webhook_id = counter["_id"]
        low = int(counter.get("low", 0))
        # one book above the counter's: it may lag behind the pages in use (``top_page``)
        book = (int(counter.get("seq", 0)) - 1) // PAGE_SIZE // BOOK_PAGES + 1
        found: list[PageSummary] = []
        while book >= low // BOOK_PAGES:
            pages = await self._book(webhook_id, book)
            found += pages.values()
            if pages and min(s.first_at for s in pages.values()) < since:
                break
            book -= 1
        return found

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
                book = page // BOOK_PAGES
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
                book = page // BOOK_PAGES
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

    async def _book(self, webhook_id: str, book: int) -> dict[int, PageSummary]:
        """The summaries of the pages of one book, by page (none: the book is not written)."""
        doc = await self._books.find_one({"_id": book_id(webhook_id, book)})
        if doc is None:
            return {}
        return {int(p): _summary_of_entry(doc, int(p), e) for p, e in doc.get("pages", {}).items()}

    async def _matching(self, webhook_id: str, page: int, text: str) -> set[str]:
        """Ids of the page's events with ``text`` in a header or the body (``_contains``)."""
        needle = text.lower().encode()
        return {
            doc["_id"]
            async for doc in self._bodies.find({"webhook_id": webhook_id, "page": page})
            if _contains(doc, needle)
        }

    async def _summary(self, webhook_id: str, page: int) -> PageSummary | None:
        doc = await self._pages.find_one({"_id": page_id(webhook_id, page)})
        return _summary(doc) if doc else None

    async def _last_page_before(
        self, webhook_id: str, until: datetime, low: int, top: int,
        books: dict[int, dict[int, PageSummary]] | None = None,
    ) -> int:  # fmt: skip
        """The highest page whose first event is older than ``until``: a binary search over
        the books (each holds its 100 pages' bounds: 4 reads for a webhook of a million
        events), then over the pages of the book found (pages follow arrival order, so
        ``first_at`` grows with the page). A settled book's start comes from memory once read
        (``_settled``), so a repeated range reads only the book it lands in. ``books``: the
        books read, kept for the caller (the walk that follows starts in the last book read)."""
        books = {} if books is None else books
        lo, hi = low // BOOK_PAGES, top // BOOK_PAGES
        found = low
        remembered = None  # the highest book known, from memory only, to begin before ``until``
        while lo <= hi:
            mid = (lo + hi) // 2
            start = self._book_starts.get((webhook_id, mid)) if _settled(mid, low, top) else None
            if start is not None:
                if start < until:
                    remembered, lo = mid, mid + 1
                else:
                    hi = mid - 1
                continue
            if mid not in books:
                books[mid] = await self._book(webhook_id, mid)
            pages = {p: s for p, s in books[mid].items() if low <= p <= top}
            if _settled(mid, low, top) and len(pages) == BOOK_PAGES:
                start = min(s.first_at for s in pages.values())
                _keep(self._book_starts, (webhook_id, mid), start, BOOK_START_CACHE)
            earlier = [p for p, s in pages.items() if s.first_at < until]
            if earlier or not pages:  # a book without pages: empty pages, kept in the walk
                found = max(
                    found, max(earlier) if earlier else min(top, (mid + 1) * BOOK_PAGES - 1)
                )
                lo = mid + 1
            else:
                hi = mid - 1
        if remembered is not None and remembered * BOOK_PAGES > found:  # read the one it is in
            if remembered not in books:
                books[remembered] = await self._book(webhook_id, remembered)
            earlier = [p for p, s in books[remembered].items() if s.first_at < until]
            found = max(earlier, default=found)
        return min(top, found + 1)  # one page of slack: arrival and created_at order may differ

    async def recent_for_webhook(
        self, webhook_id: str, since: datetime, limit: int | None = None
    ) -> list[EventRow]:
        """Events of the webhook with ``created_at >= since``, oldest first (``created_at``, then
        id), at most ``limit`` (the oldest), without bodies and headers; read from the top
        pages down."""
        bounds = await self.top_page(webhook_id)
        if bounds is None:
            return []
        low, page = bounds
        found: list[EventRow] = []
        while page >= low:
            rows = await self.page_heads(webhook_id, page)
            found += [r for r in rows if r.created_at >= since]
            if rows and rows[0].created_at < since:
                break
            page -= 1
        found.sort(key=_order)
        return found[:limit]

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

    async def counts(
        self,
        webhook_id: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[EventStatus, int]:
        """The webhook's events by status (``created_at`` in [since, until)): from the page
        summaries, counting the heads only of pages that straddle a bound."""
        return await self.counts_from(await self.summaries(webhook_id=webhook_id), since, until)

    async def counts_from(
        self,
        summaries: Iterable[PageSummary],
        since: datetime | None = None,
        until: datetime | None = None,
        only: EventStatus | None = None,
    ) -> dict[EventStatus, int]:
        """Events by status in [since, until) on the pages of ``summaries``: a page inside the
        bounds from its summary, one a bound cuts from its heads (read in parallel). With
        ``only``, that status is the one asked for: a cut page whose summary counts none of it
        is not read (the overview's pending: the page 24 h back has rarely any)."""
        counts = dict.fromkeys(_STATUSES, 0)
        cut = []
        for summary in summaries:
            if (since is not None and summary.last_at < since) or (
                until is not None and summary.first_at >= until
            ):
                continue
            if only is not None and summary.counts[only] == 0:
                continue
            inside = (since is None or summary.first_at >= since) and (
                until is None or summary.last_at < until
            )
            if inside:
                for status, n in summary.counts.items():
                    counts[status] += n
            else:
                cut.append(summary)
        pages = await gather_limited(self._page_counts(c, since, until) for c in cut)
        for page_counts in pages:
            for status, n in page_counts.items():
                counts[status] += n
        return counts

    async def _page_counts(
        self, summary: PageSummary, since: datetime | None, until: datetime | None
    ) -> dict[EventStatus, int]:
        """Events by status in [since, until) on one page a bound cuts: from the per-minute
        counts of its summary when the bounds fall on whole minutes, else from its heads."""
        counts = dict.fromkeys(_STATUSES, 0)
        if _on_minute(since) and _on_minute(until):
            doc = await self._pages.find_one({"_id": page_id(summary.webhook_id, summary.page)})
            if doc is not None and "minutes" in doc:
                low = minute_key(since) if since is not None else ""
                high = minute_key(until) if until is not None else None
                for key, tally in _decode_minutes(doc["minutes"]):
                    if key >= low and (high is None or key < high):
                        for status, n in zip(_STATUSES, tally, strict=True):
                            counts[status] += n
                return counts
        for created_at, status in await self._page_statuses(summary.webhook_id, summary.page):
            if (since is None or created_at >= since) and (until is None or created_at < until):
                counts[status] += 1
        return counts

    async def _page_statuses(
        self, webhook_id: str, page: int
    ) -> list[tuple[datetime, EventStatus]]:
        """(created_at, status) of each event of a page: what counting needs, nothing more."""
        query = {"webhook_id": webhook_id, "page": page}
        return [
            (doc["created_at"], EventStatus(doc["status"]))
            async for doc in self._events.find(query, {"created_at": 1, "status": 1})
        ]

    async def count_replayable(self, webhook_id: str, before: datetime) -> int:
        """Failed events of the webhook created before ``before`` that were forwarded (not
        rejected by their signature): what a bulk replay started then would publish."""
        total = 0
        for summary in await self.summaries(webhook_id=webhook_id):
            if summary.first_at >= before:
                continue
            if summary.last_at < before:
                total += summary.counts[EventStatus.FAILED] - summary.rejected
                continue
            for row in await self.page_heads(summary.webhook_id, summary.page, EventStatus.FAILED):
                total += row.rejected_reason is None and row.created_at < before
        return total

    async def count_for_webhook(self, webhook_id: str, status: EventStatus | None = None) -> int:
        counts = await self.counts(webhook_id)
        return sum(counts.values()) if status is None else counts[status]

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

    # ------------------------------------------------------------------ deleting

    async def expired_pages(
        self, username: str, before: datetime, batch_size: int = PAGE_SIZE
    ) -> AsyncGenerator[ExpiredPage, None]:
        """``username``'s events created before ``before``, page by page: a page entirely
        older whole, a page that straddles the cut-off (or holds more than ``batch_size``) by
        the ids of its older events, ``batch_size`` at a time."""
        for summary in await self.summaries(username=username):
            if summary.first_at >= before:
                continue
            if summary.last_at < before and summary.total <= batch_size:
                yield ExpiredPage(summary.webhook_id, summary.page, summary.total, None)
                continue
            rows = await self.page_heads(summary.webhook_id, summary.page)
            ids = [r.id for r in rows if r.created_at < before]
            for start in range(0, len(ids), batch_size):
                chunk = ids[start : start + batch_size]
                yield ExpiredPage(summary.webhook_id, summary.page, len(chunk), chunk)

    async def delete_page(self, expired: ExpiredPage) -> int:
        """Delete the events of ``expired`` (heads and bodies) and recount the page; how many
        heads existed. The owner's attempts go first (``AttemptRepository.delete_page``)."""
        query: dict[str, Any] = {"webhook_id": expired.webhook_id, "page": expired.page}
        if expired.event_ids is not None:
            query["_id"] = {"$in": expired.event_ids}
        await self._bodies.delete_many(query)
        result = await self._events.delete_many(query)
        await self.recount([(expired.webhook_id, expired.page)])
        if expired.event_ids is None:
            await self._counters.update_one(
                {"_id": expired.webhook_id}, {"$max": {"low": expired.page + 1}}
            )
        return result.deleted_count

    async def purge_owner(self, username: str) -> int:
        """Delete every event of ``username`` with its body, page summaries and counters."""
        await self._bodies.delete_many({"username": username})
        result = await self._events.delete_many({"username": username})
        await self._pages.delete_many({"username": username})
        await self._books.delete_many({"username": username})
        await self._counters.delete_many({"username": username})
        return result.deleted_count


def _keep(cache: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """Put ``key`` in a least-recently-written cache of at most ``limit`` entries."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)


def _settled(book: int, low: int, top: int) -> bool:
    """Whether a book's pages can no longer change their bounds: a whole book or more below the
    top page's (its events all recorded; a recount finds the same times) and above the book
    the lowest live page is in (retention cuts pages from the bottom only)."""
    return low // BOOK_PAGES < book < top // BOOK_PAGES - 1


def _heal_at(webhook_id: str) -> int:
    """The position in a page at which the webhook's previous page is recounted."""
    return zlib.crc32(webhook_id.encode()) % PAGE_SIZE


def book_id(webhook_id: str, book: int) -> str:
    return f"{webhook_id}:{book:06d}"


def minute_key(at: datetime) -> str:
    """The minute of ``at`` (UTC) as a sortable key of a page summary's ``minutes``."""
    return at.astimezone(UTC).strftime("%Y%m%d%H%M")


def _on_minute(at: datetime | None) -> bool:
    return at is None or (at.second == 0 and at.microsecond == 0)


# Per-minute counts and book entries are stored as strings, not as sub-documents: FerretDB v1
# decodes a document's every field through its schema, and a summary with 100 minutes as a map
# took 3.0 ms to read, as a string 0.7 ms; a full book 5.5 ms as maps, 1.3 ms as strings.


def _encode_minutes(minutes: dict[str, list[int]]) -> str:
    """``{"202611240105": [pending, success, failed]}`` → ``"202611240105:1,0,2;..."``."""
    return ";".join(f"{key}:{','.join(map(str, tally))}" for key, tally in sorted(minutes.items()))


def _decode_minutes(text: str) -> Iterable[tuple[str, list[int]]]:
    for item in text.split(";") if text else ():
        key, _, tally = item.partition(":")
        yield key, [int(n) for n in tally.split(",")]


def _newest(kept: str, events: Iterable[Event]) -> str:
    """``kept`` (``"<created_at ms>:<id>;..."``) with ``events`` added: the ``RECENT_KEEP``
    newest, newest first."""
    merged = set(_decode_recent(kept)) | {(_epoch_ms(e.created_at), e.id) for e in events}
    return ";".join(f"{ms}:{i}" for ms, i in sorted(merged, reverse=True)[:RECENT_KEEP])


def _decode_recent(text: str) -> list[tuple[int, str]]:
    found = []
    for item in text.split(";") if text else ():
        ms, _, event_id = item.partition(":")
        found.append((int(ms), event_id))
    return found


def _epoch_ms(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(milliseconds=1)


def _book_entry(summary: dict[str, Any]) -> dict[str, Any]:
    """A page's entry in its book (``$set`` fields): ``"pending,success,failed,rejected,
    first_at,last_at"``, the times in epoch milliseconds (BSON's own precision)."""
    page = summary["page"]
    numbers = [summary[s.value] for s in _STATUSES]
    numbers += [summary["rejected"], _epoch_ms(summary["first_at"]), _epoch_ms(summary["last_at"])]
    return {
        "webhook_id": summary["webhook_id"], "username": summary["username"],
        "book": page // BOOK_PAGES, f"pages.{page}": ",".join(map(str, numbers)),
    }  # fmt: skip


def _summary_of_entry(book: dict[str, Any], page: int, entry: str) -> PageSummary:
    *counts, rejected, first_ms, last_ms = (int(n) for n in entry.split(","))
    return PageSummary(
        webhook_id=book["webhook_id"], username=book["username"], page=page,
        first_at=_EPOCH + timedelta(milliseconds=first_ms),
        last_at=_EPOCH + timedelta(milliseconds=last_ms),
        counts=dict(zip(_STATUSES, counts, strict=True)), rejected=rejected,
    )  # fmt: skip


def _summary(doc: dict[str, Any]) -> PageSummary:
    return PageSummary(
        webhook_id=doc["webhook_id"], username=doc["username"], page=doc["page"],
        first_at=doc["first_at"], last_at=doc["last_at"],
        counts={s: int(doc.get(s.value, 0)) for s in _STATUSES},
        rejected=int(doc.get("rejected", 0)),
    )  # fmt: skip


def _contains(body_doc: dict[str, Any], needle: bytes) -> bool:
    """Whether ``needle`` (lower case, UTF-8) is in a header as ``name: value`` or in the body's
    bytes (a binary body too), ignoring ASCII case."""
    for entry in body_doc.get("request_headers", []):
        if needle in f"{entry['name']}: {entry['value']}".lower().encode():
            return True
    return needle in body_from_document(body_doc, "request_body").lower()


def _within(row: EventHead, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or row.created_at >= since) and (until is None or row.created_at < until)


def _after(row: EventHead, position: EventCursor) -> bool:
    if position.created_at is None or position.event_id is None:
        return True
    return (row.created_at, row.id) > (position.created_at, position.event_id)


def _event_of(row: EventRow, body: dict[str, Any]) -> Event:
    head = row.model_dump(include=set(EventHead.model_fields))
    doc = dict(body)
    return Event(
        **head,
        request_headers=headers_from_document(doc["request_headers"]),
        body=body_from_document(doc, "request_body"),
    )


async def record_batch(
    events: EventRepository,
    attempts: AttemptRepository,
    new_events: list[Event],
    new_attempts: list[Attempt],
) -> None:
    """Store one recorder batch: the events first (they get their pages, which the attempts
    then carry; an attempt whose event is not recorded yet gets it later), an event whose
    latest attempt is in the batch (the usual case) straight with its status; then the
    attempts, then the other status changes. Idempotent: a batch written again changes nothing."""
    changes = _Changes()
    settled = await events._store(new_events, latest_attempts(new_attempts), changes)
    located = await events.locate(a.event_id for a in new_attempts)
    await attempts.upsert_many(new_attempts, located)
    await events._apply(new_attempts, located, settled, changes)
    await events._summarise(changes)  # once per page, however many writes touched it


def attempt_to_document(attempt: Attempt, event_page: int | None = None) -> dict[str, Any]:
    doc = attempt.model_dump(mode="python", exclude={"id", "response_headers", "response_body"})
    doc.update(body_to_document("response_body", attempt.response_body))
    doc.update(_id=attempt.id, response_headers=headers_to_document(attempt.response_headers))
    if event_page is not None:
        doc["event_page"] = event_page
    return doc


def attempt_from_document(doc: dict[str, Any]) -> Attempt:
    doc = dict(doc)
    doc.pop("event_page", None)
    doc["id"] = doc.pop("_id")
    doc["response_headers"] = headers_from_document(doc["response_headers"])
    doc["response_body"] = body_from_document(doc, "response_body")
    return Attempt.model_validate(doc)


class AttemptRepository:
    """Attempts carry their event's ``webhook_id`` and, once the event is recorded, its page
    (``event_page``): retention deletes them page by page with the events."""

    def __init__(self, db: Database) -> None:
        self._attempts = db[Collections.ATTEMPTS]
        self._events = EventRepository(db)

    async def upsert(self, attempt: Attempt) -> None:
        await self.upsert_many([attempt])

    async def upsert_many(
        self, attempts: list[Attempt], located: dict[str, tuple[str, int]] | None = None
    ) -> None:
        """Store ``attempts`` (idempotent). ``located`` (from ``EventRepository.locate``) gives
        their events' pages; looked up here when not given."""
        if not attempts:
            return
        if located is None:
            located = await self._events.locate(a.event_id for a in attempts)
        docs = [
            attempt_to_document(a, located[a.event_id][1] if a.event_id in located else None)
            for a in attempts
        ]
        upserts: list[list[Statement]] = []
        for doc in docs:
            fields = {k: v for k, v in doc.items() if k not in ("_id", "event_page")}
            update: dict[str, Any] = {"$set": fields}
            if "event_page" in doc:
                update["$setOnInsert"] = {"event_page": doc["event_page"]}
            upserts.append([({"_id": doc["_id"]}, update, True)])
        await _insert_or_upsert(self._attempts, docs, upserts)

    async def list_for_event(self, event_id: str) -> list[Attempt]:
        docs = [doc async for doc in self._attempts.find({"event_id": event_id})]
        docs.sort(key=lambda d: (d["started_at"], d["_id"]))
        return [attempt_from_document(doc) for doc in docs]

    def _page_query(self, expired: ExpiredPage) -> dict[str, Any]:
        query: dict[str, Any] = {"webhook_id": expired.webhook_id, "event_page": expired.page}
        if expired.event_ids is not None:
            query["event_id"] = {"$in": expired.event_ids}
        return query

    async def delete_page(self, expired: ExpiredPage) -> int:
        """Delete the attempts of the events of ``expired``; how many."""
        return (await self._attempts.delete_many(self._page_query(expired))).deleted_count

    async def count_page(self, expired: ExpiredPage) -> int:
        return await self._attempts.count_documents(self._page_query(expired))

    async def purge_owner(self, username: str) -> int:
        return (await self._attempts.delete_many({"username": username})).deleted_count


LAYOUT_VERSION: Final = 3
"""1: an event was one document (head, headers and body); 2: heads, bodies and page summaries;
3: books (``event_books``) over the page summaries, and per-minute counts in new summaries."""
MIGRATION_CHUNK: Final = 100


async def migrate_event_layout(db: Database) -> int:
    """Upgrade events stored in layout 1 to layout 2, in place; how many. Idempotent and
    resumable: a run that stops half-way leaves every event readable (an event of layout 1
    is still read whole by ``get``), and the next run moves the rest.

    Layout-1 events get positions *below* every position given so far (negative ``seq``), in
    ``created_at`` order per webhook: they are older than anything recorded since the upgrade.
    Their attempts learn their pages; the pages are counted; a marker in ``migrations`` makes
    later runs skip the scan (on FerretDB v1 the search for layout-1 documents reads the
    whole collection)."""
    marker = db[Collections.MIGRATIONS]
    done = await marker.find_one({"_id": "event_layout"})
    version = 0 if done is None else int(done.get("version", 0))
    if version >= LAYOUT_VERSION:
        return 0
    moved = await _move_layout_1(db) if version < 2 else 0
    await _write_books(db)
    await marker.replace_one(
        {"_id": "event_layout"}, {"version": LAYOUT_VERSION, "moved": moved}, upsert=True
    )
    return moved


async def _write_books(db: Database) -> None:
    """Layout 2 → 3: enter every page summary in its book (idempotent: ``$set`` per page).
    Summaries written before keep no per-minute counts; a bound that cuts such a page is
    counted from its heads, as before."""
    books = db[Collections.EVENT_BOOKS]
    async for doc in db[Collections.EVENT_PAGES].find({}):
        await books.update_one(
            {"_id": book_id(doc["webhook_id"], doc["page"] // BOOK_PAGES)},
            {"$set": _book_entry(doc)},
            upsert=True,
        )


async def _move_layout_1(db: Database) -> int:
    """Layout 1 → 2 (see ``migrate_event_layout``); how many events moved."""
    events, attempts = db[Collections.EVENTS], db[Collections.ATTEMPTS]
    repository = EventRepository(db)
    by_webhook: dict[str, list[str]] = {}
    async for doc in events.find({"request_body": {"$exists": True}}, {"webhook_id": 1}):
        if "webhook_id" in doc:  # a status stub has none
            by_webhook.setdefault(doc["webhook_id"], []).append(doc["_id"])
    moved = 0
    for webhook_id, ids in by_webhook.items():
        docs = await gather_limited(events.find_one({"_id": i}) for i in ids)
        old = sorted((d for d in docs if d and "request_body" in d), key=_doc_order)
        if not old:
            continue
        counter = await db[Collections.EVENT_COUNTERS].find_one_and_update(
            {"_id": webhook_id},
            {"$inc": {"below": len(old)}, "$set": {"username": old[0]["username"]}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        assert counter is not None  # an upsert returning the document after
        first_seq = -int(counter["below"])
        pages: set[tuple[str, int]] = set()
        for offset in range(0, len(old), MIGRATION_CHUNK):
            chunk = old[offset : offset + MIGRATION_CHUNK]
            bodies, heads = [], []
            for index, doc in enumerate(chunk, start=first_seq + offset):
                page = index // PAGE_SIZE
                pages.add((webhook_id, page))
                event = event_from_documents(doc, None)
                body = {**event_body_document(event), "page": page}
                del body["_id"]
                bodies.append(UpdateOne({"_id": event.id}, {"$set": body}, upsert=True))
                heads.append(
                    UpdateOne(
                        {"_id": event.id},
                        {
                            "$set": {"seq": index, "page": page, "body_size": len(event.body)},
                            "$unset": dict.fromkeys(_BODY_FIELDS, ""),
                        },
                    )
                )
                await attempts.update_many({"event_id": event.id}, {"$set": {"event_page": page}})
            await _bulk_write(db[Collections.EVENT_BODIES], bodies)  # body first: never lost
            await _bulk_write(events, heads)
            moved += len(chunk)
        await db[Collections.EVENT_COUNTERS].update_one(
            {"_id": webhook_id}, {"$min": {"low": first_seq // PAGE_SIZE}}
        )
        await repository.recount(pages)
    return moved


def _doc_order(doc: dict[str, Any]) -> tuple[datetime, str]:
    return doc["created_at"], doc["_id"]
