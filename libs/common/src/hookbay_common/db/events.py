"""The ``events`` and ``attempts`` collections.

Writes are idempotent upserts keyed by the record id, so a message consumed twice changes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pymongo import ReplaceOne, UpdateOne
from pymongo.errors import BulkWriteError

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.documents import (
    body_from_document,
    body_to_document,
    headers_from_document,
    headers_to_document,
)
from hookbay_common.models import Attempt, Event, EventHead, EventStatus


@dataclass(frozen=True)
class EventCursor:
    """Position after an event in the newest-first order: (created_at, id) of the last one seen."""

    created_at: datetime
    event_id: str


_HEAD_PROJECTION: Final = {
    "request_body": 0,
    "request_body_encoding": 0,
    "request_headers": 0,
    "status_key": 0,
}


def _head_from_document(doc: dict[str, Any]) -> EventHead:
    doc = dict(doc)
    doc["id"] = doc.pop("_id")
    return EventHead.model_validate(doc)


def event_to_document(event: Event) -> dict[str, Any]:
    doc = event.model_dump(mode="python", exclude={"id", "body", "request_headers"})
    doc.update(body_to_document("request_body", event.body))
    doc.update(_id=event.id, request_headers=headers_to_document(event.request_headers))
    return doc


def event_from_document(doc: dict[str, Any]) -> Event:
    doc = dict(doc)
    doc.pop("status_key", None)
    doc["id"] = doc.pop("_id")
    doc["request_headers"] = headers_from_document(doc["request_headers"])
    doc["body"] = body_from_document(doc, "request_body")
    return Event.model_validate(doc)


def _event_upsert(event: Event) -> tuple[dict[str, Any], dict[str, Any]]:
    """Filter and update storing ``event``. The captured fields are written every time (they
    never change, so a repeat is a no-op); the status only on insert, so a status already set
    from the attempts is kept."""
    doc = event_to_document(event)
    del doc["status"]
    return {"_id": doc.pop("_id")}, {
        "$set": doc,
        "$setOnInsert": {"status": event.initial_status.value},
    }


def _status_updates(attempt: Attempt) -> list[UpdateOne]:
    """Set the event's status from ``attempt`` unless a later attempt already set it.

    Two statements that never fail: make sure a document exists (a stub when the attempt is
    recorded before its event; the event's own upsert fills in the rest), then set the status
    only if this attempt is later than the one that set it. No duplicate-key answers: FerretDB
    v1 stops a bulk write at its first error, and a lock-ordering bug in its PostgreSQL backend
    can wedge the server when many one-statement writes queue for connections."""
    return [
        UpdateOne({"_id": attempt.event_id}, {"$setOnInsert": {"status_key": ""}}, upsert=True),
        UpdateOne(*_status_if_later(attempt)),
    ]


def _status_if_later(attempt: Attempt) -> tuple[dict[str, Any], dict[str, Any]]:
    """Filter and update setting the status when the stored one came from an earlier attempt."""
    key = attempt.status_key
    later = {"$or": [{"status_key": {"$lt": key}}, {"status_key": {"$exists": False}}]}
    return {"_id": attempt.event_id, **later}, {
        "$set": {"status": attempt.outcome.value, "status_key": key}
    }


BULK_CHUNK: Final = 16
"""Statements per write command. FerretDB v1.24 keeps one PostgreSQL connection per statement that
matched a document until the whole command ends (``msg_update.go``), so one command with about
50 matching statements exhausts its pool and hangs the server (docs/ferretdb-backends.md)."""


async def _bulk_write(collection: Any, operations: Sequence[Any]) -> None:
    """``operations`` in order, as consecutive commands of at most ``BULK_CHUNK`` statements."""
    for start in range(0, len(operations), BULK_CHUNK):
        await collection.bulk_write(operations[start : start + BULK_CHUNK], ordered=True)


async def _insert_or_upsert(
    collection: Any, docs: Sequence[dict[str, Any]], upserts: Sequence[Any]
) -> None:
    """Store ``docs``: inserted in chunks, which needs no lookup (on FerretDB v1 a write that
    filters, even by ``_id``, scans the collection). A chunk that meets a stored document (a
    record consumed again, an event's status stub) is written again as ``upserts[i]``, one by
    one: FerretDB v1 stops an unordered insert at its first error, and the upserts are
    idempotent."""
    for start in range(0, len(docs), BULK_CHUNK):
        try:
            await collection.insert_many(docs[start : start + BULK_CHUNK], ordered=False)
        except BulkWriteError:
            for op in upserts[start : start + BULK_CHUNK]:
                await collection.bulk_write([op])


class EventRepository:
    def __init__(self, db: Database) -> None:
        self._events = db[Collections.EVENTS]

    async def upsert(self, event: Event) -> None:
        """Store ``event``; idempotent. A stored event's status is kept."""
        await self._events.update_one(*_event_upsert(event), upsert=True)

    async def upsert_many(self, events: list[Event]) -> None:
        docs = [{**event_to_document(e), "status": e.initial_status.value} for e in events]
        upserts = [UpdateOne(*_event_upsert(e), upsert=True) for e in events]
        await _insert_or_upsert(self._events, docs, upserts)

    async def apply_attempts(self, attempts: list[Attempt]) -> None:
        """Move each attempt's event to the status the attempt implies, unless a later attempt
        (``Attempt.status_key``) already decided it; idempotent and order-independent.

        One conditional update per event (its latest attempt here); only a chunk where some
        event was not recorded yet, or had a later status, runs the two-statement form that
        also inserts status stubs."""
        latest: dict[str, Attempt] = {}
        for attempt in attempts:
            known = latest.get(attempt.event_id)
            if known is None or attempt.status_key > known.status_key:
                latest[attempt.event_id] = attempt
        chosen = list(latest.values())
        for start in range(0, len(chosen), BULK_CHUNK):
            chunk = chosen[start : start + BULK_CHUNK]
            updates = [UpdateOne(*_status_if_later(a)) for a in chunk]
            result = await self._events.bulk_write(updates, ordered=True)
            if result.matched_count < len(chunk):
                await _bulk_write(self._events, [op for a in chunk for op in _status_updates(a)])

    async def get(self, event_id: str) -> Event | None:
        """The event, or ``None`` also while only its status stub is stored."""
        doc = await self._events.find_one({"_id": event_id, "request_id": {"$exists": True}})
        return event_from_document(doc) if doc else None

    async def get_by_request_id(self, request_id: str) -> Event | None:
        doc = await self._events.find_one({"request_id": request_id})
        return event_from_document(doc) if doc else None

    async def set_status(self, event_id: str, status: EventStatus) -> None:
        await self._events.update_one({"_id": event_id}, {"$set": {"status": status.value}})

    async def recent_for_webhook(
        self, webhook_id: str, since: datetime, limit: int = 100
    ) -> list[EventHead]:
        """Events of the webhook with ``created_at >= since``, oldest first (``created_at``, then
        id), at most ``limit``, without bodies and headers (a live tail polls this). Status
        stubs never match: they carry no ``webhook_id``."""
        query = {"webhook_id": webhook_id, "created_at": {"$gte": since}}
        cursor = (
            self._events.find(query, _HEAD_PROJECTION)
            .sort([("created_at", 1), ("_id", 1)])
            .limit(limit)
        )
        return [_head_from_document(doc) async for doc in cursor]

    async def heads_for_webhook(
        self,
        webhook_id: str,
        *,
        status: EventStatus | None = None,
        limit: int = 50,
        after: EventCursor | None = None,
        request_id: str | None = None,
    ) -> list[EventHead]:
        """Newest first (``created_at``, then id, descending), without bodies and headers;
        ``after`` continues strictly below the last event of the previous page, so events that
        arrive meanwhile (above it) neither shift nor repeat the rest. ``request_id`` narrows
        to that one request. Status stubs never match: they carry no ``webhook_id``."""
        query: dict[str, Any] = {"webhook_id": webhook_id}
        if status is not None:
            query["status"] = status.value
        if request_id is not None:
            query["request_id"] = request_id
        if after is not None:
            # the outer bound keeps a page one index range on real MongoDB whatever the planner
            # makes of the $or (webhook_created / webhook_status_created serve both)
            query["created_at"] = {"$lte": after.created_at}
            query["$or"] = [
                {"created_at": {"$lt": after.created_at}},
                {"created_at": after.created_at, "_id": {"$lt": after.event_id}},
            ]
        cursor = (
            self._events.find(query, _HEAD_PROJECTION)
            .sort([("created_at", -1), ("_id", -1)])
            .limit(limit)
        )
        return [_head_from_document(doc) async for doc in cursor]

    async def recent_heads_for_owner(self, username: str, limit: int = 10) -> list[EventHead]:
        """The owner's newest events across all their webhooks, without bodies and headers."""
        cursor = (
            self._events.find({"username": username}, _HEAD_PROJECTION)
            .sort([("created_at", -1), ("_id", -1)])
            .limit(limit)
        )
        return [_head_from_document(doc) async for doc in cursor]

    async def count_for_webhook(self, webhook_id: str, status: EventStatus | None = None) -> int:
        query: dict[str, Any] = {"webhook_id": webhook_id}
        if status is not None:
            query["status"] = status.value
        return await self._events.count_documents(query)

    async def stream_for_webhook(
        self, webhook_id: str, status: EventStatus | None = None, *, batch_size: int = 500
    ) -> AsyncGenerator[Event, None]:
        """Every event of the webhook, oldest first (``created_at``, then id), read through one
        database cursor ``batch_size`` documents at a time: memory stays constant whatever the
        count. The cursor is closed when the iteration ends or is abandoned (``aclose``)."""
        query: dict[str, Any] = {"webhook_id": webhook_id}
        if status is not None:
            query["status"] = status.value
        cursor = (
            self._events.find(query).sort([("created_at", 1), ("_id", 1)]).batch_size(batch_size)
        )
        try:
            async for doc in cursor:
                yield event_from_document(doc)
        finally:
            await cursor.close()

    async def counts_since(
        self, username: str, since: datetime
    ) -> dict[str, dict[EventStatus, int]]:
        """Per webhook id, the owner's events with ``created_at >= since`` by status; a status
        without events is absent. One ``$match`` + ``$group`` (FerretDB v1 runs both)."""
        pipeline: list[dict[str, Any]] = [
            {"$match": {"username": username, "created_at": {"$gte": since}}},
            {
                "$group": {
                    "_id": {"webhook_id": "$webhook_id", "status": "$status"},
                    "n": {"$sum": 1},
                }
            },
        ]
        counts: dict[str, dict[EventStatus, int]] = {}
        async for row in await self._events.aggregate(pipeline):
            key = row["_id"]
            counts.setdefault(key["webhook_id"], {})[EventStatus(key["status"])] = row["n"]
        return counts

    async def last_created_at(self, webhook_id: str) -> datetime | None:
        """When the webhook's newest event arrived. A sorted find with limit 1, which MongoDB
        answers from the ``webhook_created`` index (FerretDB v1 has no ``$max`` accumulator)."""
        cursor = (
            self._events.find({"webhook_id": webhook_id}, {"created_at": 1})
            .sort([("created_at", -1), ("_id", -1)])
            .limit(1)
        )
        async for doc in cursor:
            created_at: datetime = doc["created_at"]
            return created_at
        return None

    async def expired_id_batches(
        self, username: str, before: datetime, batch_size: int
    ) -> AsyncGenerator[list[str], None]:
        """Ids of ``username``'s events created before ``before`` (``created_at < before``),
        ``batch_size`` at a time, read through one database cursor (only ``_id`` travels):
        memory holds one batch. No order is promised (MongoDB reads the ``owner_created`` index,
        so oldest first). The caller may delete each batch before asking for the next: deleted
        events are behind the cursor. Status stubs never match (they carry no ``username``).
        The cursor is closed when the iteration ends or is abandoned (``aclose``).

        One cursor rather than one limited ``find`` per batch: FerretDB v1 applies a limit only
        after fetching every match, so each such ``find`` would read all the owner's remaining
        expired events again."""
        query = {"username": username, "created_at": {"$lt": before}}
        cursor = self._events.find(query, {"_id": 1}).batch_size(batch_size)
        batch: list[str] = []
        try:
            async for doc in cursor:
                batch.append(doc["_id"])
                if len(batch) >= batch_size:
                    yield batch
                    batch = []
            if batch:
                yield batch
        finally:
            await cursor.close()

    async def delete_owner_events(self, username: str, event_ids: Sequence[str]) -> int:
        """Delete ``username``'s events among ``event_ids``; how many existed. One ``delete``
        statement (on FerretDB v1 a statement per id would each scan the collection and hold a
        connection); idempotent. The owner narrows nothing on MongoDB (``_id`` does) but is the
        one condition FerretDB v1 pushes down to PostgreSQL: only the owner's documents are
        decoded and matched against the ids, not the whole collection."""
        query = {"username": username, "_id": {"$in": list(event_ids)}}
        result = await self._events.delete_many(query)
        return result.deleted_count


def attempt_to_document(attempt: Attempt) -> dict[str, Any]:
    doc = attempt.model_dump(mode="python", exclude={"id", "response_headers", "response_body"})
    doc.update(body_to_document("response_body", attempt.response_body))
    doc.update(_id=attempt.id, response_headers=headers_to_document(attempt.response_headers))
    return doc


def attempt_from_document(doc: dict[str, Any]) -> Attempt:
    doc = dict(doc)
    doc["id"] = doc.pop("_id")
    doc["response_headers"] = headers_from_document(doc["response_headers"])
    doc["response_body"] = body_from_document(doc, "response_body")
    return Attempt.model_validate(doc)


class AttemptRepository:
    def __init__(self, db: Database) -> None:
        self._attempts = db[Collections.ATTEMPTS]

    async def upsert(self, attempt: Attempt) -> None:
        await self.upsert_many([attempt])

    async def upsert_many(self, attempts: list[Attempt]) -> None:
        operations = [
            ReplaceOne({"_id": doc["_id"]}, doc, upsert=True)
            for doc in map(attempt_to_document, attempts)
        ]
        docs = [attempt_to_document(a) for a in attempts]
        await _insert_or_upsert(self._attempts, docs, operations)

    async def list_for_event(self, event_id: str) -> list[Attempt]:
        cursor = self._attempts.find({"event_id": event_id}).sort([("started_at", 1), ("_id", 1)])
        return [attempt_from_document(doc) async for doc in cursor]

    async def delete_owner_attempts(self, username: str, event_ids: Sequence[str]) -> int:
        """Delete every attempt of ``username``'s events ``event_ids``; how many. One ``delete``
        statement (MongoDB reads the ``event_started`` index; ``username`` is what FerretDB v1
        pushes down, as in ``EventRepository.delete_owner_events``); idempotent. An attempt
        carries its event's owner (the forwarder copies it)."""
        query = {"username": username, "event_id": {"$in": list(event_ids)}}
        result = await self._attempts.delete_many(query)
        return result.deleted_count

    async def count_owner_attempts(self, username: str, event_ids: Sequence[str]) -> int:
        query = {"username": username, "event_id": {"$in": list(event_ids)}}
        return await self._attempts.count_documents(query)
