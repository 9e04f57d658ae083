"""The event repository: recording events and their statuses, reading one event, deleting."""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence, Set
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pymongo import ReturnDocument, UpdateOne

from hookbay_common.clock import epoch_ms
from hookbay_common.db.documents import gather_limited
from hookbay_common.db.events.bulk import Statement, _bulk_write, _insert_or_upsert
from hookbay_common.db.events.caches import BLOCK_CACHE, HEAD_CACHE, LOCATE_CACHE, _keep
from hookbay_common.db.events.counting import EventCounts
from hookbay_common.db.events.deliveries import (
    DELIVERIES_FIELD,
    _same,
    decode_deliveries,
    encode_deliveries,
    merged,
)
from hookbay_common.db.events.layout import (
    PAGE_SIZE,
    ExpiredPage,
    _status_if_later,
    event_body_document,
    event_from_documents,
    event_head_document,
    latest_attempts,
)
from hookbay_common.db.events.listing import EventListing
from hookbay_common.db.events.summaries import PendingSummaries, _heal_at
from hookbay_common.models import Attempt, Delivery, Event, EventStatus, event_status_of

if TYPE_CHECKING:
    from hookbay_common.db.events.attempts import AttemptRepository

_DELIVER_FIELDS = (DELIVERIES_FIELD, "status", "webhook_id", "page", "created_at")
"""What ``_deliver`` reads of a head (and remembers of the heads it wrote)."""
_DELIVER_PROJECTION = dict.fromkeys(_DELIVER_FIELDS, 1)


class EventRepository(EventListing, EventCounts):
    """Events, their bodies, positions, page summaries and books (``hookbay_common.db.events``).

    Writing, reading one event and deleting are here; lists and streams come from
    ``EventListing``, counts from ``EventCounts``, summaries and books from ``PageBooks``."""

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
        changes = PendingSummaries()
        settled, _ = await self._store(events, outcomes or {}, {}, changes)
        await self.summarise(changes)
        return settled

    async def record_batch(
        self,
        attempts: AttemptRepository,
        new_events: list[Event],
        new_attempts: list[Attempt],
        pending: PendingSummaries | None = None,
        new_deliveries: Sequence[Delivery] = (),
    ) -> None:
        """Store one recorder batch: the events first (they get their pages, which the attempts
        then carry; an attempt whose event is not recorded yet gets it later), an event whose
        latest attempt is in the batch (the usual case) straight with its status; then the
        attempts (through ``attempts``), then the other status changes; then the deliveries
        (``new_deliveries`` and what the attempts of routed deliveries say, ``_deliver``).
        Idempotent: a batch written again changes nothing.

        The summaries it changes are written before it returns, or, with ``pending``, added to
        it for the caller's ``summarise`` (several batches, one write per page)."""
        changes = PendingSummaries() if pending is None else pending
        # attempts of routed deliveries move their delivery; the others their event
        plain = [a for a in new_attempts if a.delivery_id is None]
        routed = [d for a in new_attempts if a.delivery_id is not None if (d := a.as_delivery())]
        fresh: dict[str, list[Delivery]] = {}
        for record in [*new_deliveries, *routed]:
            fresh.setdefault(record.event_id, []).append(record)
        settled, folded = await self._store(new_events, latest_attempts(plain), fresh, changes)
        located = await self.locate(a.event_id for a in new_attempts)
        await attempts.upsert_many(new_attempts, located)
        await self._apply(plain, located, settled, changes)
        later = {event_id: records for event_id, records in fresh.items() if event_id not in folded}
        if later:
            await self._deliver(later, changes)
        if pending is None:
            await self.summarise(changes)  # once per page, however many writes touched it

    async def _store(
        self,
        events: list[Event],
        outcomes: Mapping[str, Attempt],
        deliveries: Mapping[str, Sequence[Delivery]],
        changes: PendingSummaries,
    ) -> tuple[set[str], set[str]]:
        """``upsert_many`` without the summaries, whose changes go to ``changes``; a new event
        with records in ``deliveries`` (by event id) is inserted with them and the status they
        give, saving ``_deliver``'s read and write. The ids of the events stored with their
        latest attempt's status, and of those stored with their deliveries."""
        if not events:
            return set(), set()
        seqs = await self._allocate(events)
        heads: list[dict[str, Any]] = []
        bodies: list[dict[str, Any]] = []
        head_upserts: list[list[Statement]] = []
        body_upserts: list[list[Statement]] = []
        for event, seq in zip(events, seqs, strict=True):
            page = seq // PAGE_SIZE
            position: dict[str, Any] = {"seq": seq, "page": page, "change_page": page}
            head = event_head_document(event)
            body = event_body_document(event)
            settled = (
                _status_if_later(outcomes[event.id], page)[1]["$set"]
                if event.id in outcomes
                else {}
            )
            if event.id in deliveries:  # routed in this batch: its deliveries give its status
                after = merged({}, deliveries[event.id])
                settled = {
                    DELIVERIES_FIELD: encode_deliveries(after),
                    "status": event_status_of(after.values()).value,
                }
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
            changes.saw(event.webhook_id, epoch_ms(event.created_at), event.id)
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
        for index, (event, head) in enumerate(zip(events, heads, strict=True)):
            if index not in late:  # as inserted: what a delivery record after it merges into
                self._remember_head(event.id, head)
        inserted = [e.id for i, e in enumerate(events) if i not in late]
        return {i for i in inserted if i in outcomes}, {i for i in inserted if i in deliveries}

    async def _allocate(self, events: Sequence[Event]) -> list[int]:
        """The next ``seq`` of each event's webhook, in order. Numbers are reserved up to the
        end of the page the last one needed falls on, and handed out from memory until they run
        out: one ``$inc`` per webhook and page, not per batch. The counter is then at the end
        of the current page, so ``top_page`` stays the page in use.

        Numbers reserved and not used (the process stopped, its partitions moved) are wasted,
        which only leaves a page short; two writers at once may get the same numbers on
        FerretDB (see ``top_page``), which only makes a page longer: order within a page is by
        ``created_at``, so nothing is lost or misordered either way."""
        wanted: dict[str, int] = {}
        owner: dict[str, str] = {}
        for event in events:
            wanted[event.webhook_id] = wanted.get(event.webhook_id, 0) + 1
            owner[event.webhook_id] = event.username
        given: dict[str, list[int]] = {}

        async def take(webhook_id: str, count: int) -> None:
            start, end = self._blocks.get(webhook_id, (0, 0))
            numbers = list(range(start, min(end, start + count)))  # the reserved ones first
            if len(numbers) < count:
                start, end = await self._reserve(
                    webhook_id, owner[webhook_id], count - len(numbers)
                )
                numbers += range(start, start + count - len(numbers))
            given[webhook_id] = numbers
            _keep(self._blocks, webhook_id, (numbers[-1] + 1, end), BLOCK_CACHE)

        await gather_limited(take(w, n) for w, n in wanted.items())  # one counter each
        handed = {webhook_id: iter(numbers) for webhook_id, numbers in given.items()}
        return [next(handed[event.webhook_id]) for event in events]

    async def _reserve(self, webhook_id: str, username: str, count: int) -> tuple[int, int]:
        """Reserve ``count`` numbers and the rest of the page the last falls on: [start, end)."""
        doc = await self._counters.find_one_and_update(
            {"_id": webhook_id},
            {"$inc": {"seq": count}, "$set": {"username": username}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        assert doc is not None  # an upsert returning the document after
        taken = int(doc["seq"])
        end = -(-taken // PAGE_SIZE) * PAGE_SIZE
        # the rest of the page; and heal a lost update (see ``top_page``): the counter ends at
        # least past these numbers
        await self._counters.update_one({"_id": webhook_id}, {"$max": {"seq": end}})
        return taken - count, end

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
        changes = PendingSummaries()
        await self._apply(attempts, located, settled, changes)
        await self.summarise(changes)

    async def _apply(
        self,
        attempts: list[Attempt],
        located: dict[str, tuple[str, int]] | None,
        settled: Set[str],
        changes: PendingSummaries,
    ) -> None:
        """``apply_attempts`` without the summaries, whose changes go to ``changes``."""
        latest = {i: a for i, a in latest_attempts(attempts).items() if i not in settled}
        if not latest:
            return
        if located is None:
            located = await self.locate(latest)
        tops = await self._top_pages({a.webhook_id for a in latest.values()})

        async def update(attempt: Attempt) -> None:
            # no projection: FerretDB v1's findAndModify has none (a head is small anyway)
            before = await self._events.find_one_and_update(
                *_status_if_later(attempt, tops[attempt.webhook_id]),
                return_document=ReturnDocument.BEFORE,
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
            await _bulk_write(
                self._events,
                [UpdateOne(*_status_if_later(a, tops[a.webhook_id])) for a in absent],
            )

    async def _deliver(
        self, by_event: Mapping[str, Sequence[Delivery]], changes: PendingSummaries
    ) -> None:
        """Merge the records of ``by_event`` (by event id) into their events' deliveries (``deliveries.merged``: monotonic,
        order-independent, idempotent) and move each event to the status its deliveries give
        (``event_status_of``), tallying the move in ``changes``.

        One read and, when something changed, one write of the head per event, eight events at
        a time; no read when this repository wrote the head last (``HEAD_CACHE``), the write
        then also conditional on the status it wrote. The write is conditional on the
        deliveries read (an equality FerretDB pushes down), so a concurrent writer (two
        recorders during a partition hand-over) makes it read and merge again rather than lose
        a record (atomic on MongoDB; FerretDB v1 checks the condition and then writes, so two
        writes at the very same moment can still lose one). An event not recorded yet gets a
        status stub that its own write completes (as for attempts)."""
        tops = await self._top_pages({records[0].webhook_id for records in by_event.values()})
        await gather_limited(
            self._deliver_one(fresh, tops[fresh[0].webhook_id], changes)
            for fresh in by_event.values()
        )

    async def _deliver_one(
        self, fresh: Sequence[Delivery], top: int, changes: PendingSummaries
    ) -> None:
        event_id = fresh[0].event_id
        # the head as this repository last wrote it, if it remembers: the write's condition
        # (its deliveries and status) tells whether it is still so; if not, read it
        head: dict[str, Any] | None = self._heads.pop(event_id, None)
        remembered = head is not None
        while True:
            if head is None:
                head = await self._events.find_one({"_id": event_id}, _DELIVER_PROJECTION)
                remembered = False
            if head is None:
                stub = {"$setOnInsert": {"status_key": ""}}
                await self._events.update_one({"_id": event_id}, stub, upsert=True)
                continue
            stored = decode_deliveries(head)
            after = merged(stored, fresh)
            if _same(stored, after):
                if remembered:
                    self._remember_head(event_id, head)
                return  # nothing new: a batch read again
            status = event_status_of(after.values()).value
            text = head.get(DELIVERIES_FIELD)
            guard = {"_id": event_id, DELIVERIES_FIELD: text if text else {"$exists": False}}
            if remembered:
                guard["status"] = head["status"]
            written = encode_deliveries(after)
            update = {"$set": {DELIVERIES_FIELD: written, "status": status, "change_page": top}}
            if (await self._events.update_one(guard, update)).matched_count:
                break
            head = None  # changed meanwhile: read it
        if "page" not in head:  # a status stub: its event's own write counts it
            return
        self._remember_head(event_id, {**head, DELIVERIES_FIELD: written, "status": status})
        if head.get("status") != status:  # recorded: its page's counts move
            tally = changes.tally(head["webhook_id"], head["page"])
            tally.add(head["status"], head["created_at"], -1)
            tally.add(status, head["created_at"])

    def _remember_head(self, event_id: str, head: Mapping[str, Any]) -> None:
        remembered = {k: head[k] for k in _DELIVER_FIELDS if k in head}
        _keep(self._heads, event_id, {"_id": event_id, **remembered}, HEAD_CACHE)

    async def _top_pages(self, webhook_ids: Iterable[str]) -> dict[str, int]:
        """Each webhook's top page as its counter gives it (0 before any event): where a status
        change made now is found by live streams (``change_page``). A webhook this repository
        reserved positions for has its counter at the end of their page: known without a read."""
        tops = {i: (self._blocks[i][1] - 1) // PAGE_SIZE for i in webhook_ids if i in self._blocks}
        ids = sorted(set(webhook_ids) - tops.keys())
        docs = await gather_limited(self._counters.find_one({"_id": i}, {"seq": 1}) for i in ids)
        for i, d in zip(ids, docs, strict=True):
            tops[i] = max(0, int(d.get("seq", 0)) - 1) // PAGE_SIZE if d else 0
        return tops

    async def set_status(self, event_id: str, status: EventStatus) -> None:
        await self._events.update_one({"_id": event_id}, {"$set": {"status": status.value}})
        await self.recount(set((await self.locate([event_id])).values()))

    # ------------------------------------------------------------------ reading one event

    async def get(self, event_id: str) -> Event | None:
        """The event, or ``None`` also while only its status stub is stored."""
        head = await self._events.find_one({"_id": event_id})
        return await self._complete(head)

    async def get_with_deliveries(self, event_id: str) -> tuple[Event, list[Delivery]] | None:
        """The event and its deliveries (by id: in the event's routes' order when the router
        emitted them together); ``None`` as ``get``."""
        head = await self._events.find_one({"_id": event_id})
        event = await self._complete(head)
        if event is None or head is None:
            return None
        return event, sorted(decode_deliveries(head).values(), key=lambda d: d.id)

    async def get_by_request_id(self, request_id: str) -> Event | None:
        return await self._complete(await self._events.find_one({"request_id": request_id}))

    async def _complete(self, head: dict[str, Any] | None) -> Event | None:
        if head is None or "request_id" not in head:
            return None
        body = None if "request_body" in head else await self._bodies.find_one({"_id": head["_id"]})
        if body is None and "request_body" not in head:
            return None  # a head of layout 2 without its body: deleted meanwhile
        return event_from_documents(head, body)

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


async def record_batch(
    events: EventRepository,
    attempts: AttemptRepository,
    new_events: list[Event],
    new_attempts: list[Attempt],
    pending: PendingSummaries | None = None,
    new_deliveries: Sequence[Delivery] = (),
) -> None:
    """``events.record_batch(attempts, new_events, new_attempts, pending, new_deliveries)``:
    one recorder batch."""
    await events.record_batch(attempts, new_events, new_attempts, pending, new_deliveries)
