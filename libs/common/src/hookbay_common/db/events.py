"""The ``events`` and ``attempts`` collections.

Writes are idempotent upserts keyed by the record id, so a message consumed twice changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.documents import (
    body_from_document,
    body_to_document,
    headers_from_document,
    headers_to_document,
)
from hookbay_common.models import Attempt, Event, EventStatus


@dataclass(frozen=True)
class EventCursor:
    """Position after an event in the newest-first order: (created_at, id) of the last one seen."""

    created_at: datetime
    event_id: str


def event_to_document(event: Event) -> dict[str, Any]:
    doc = event.model_dump(mode="python", exclude={"id", "body", "request_headers"})
    doc.update(body_to_document("request_body", event.body))
    doc.update(_id=event.id, request_headers=headers_to_document(event.request_headers))
    return doc


def event_from_document(doc: dict[str, Any]) -> Event:
    doc = dict(doc)
    doc["id"] = doc.pop("_id")
    doc["request_headers"] = headers_from_document(doc["request_headers"])
    doc["body"] = body_from_document(doc, "request_body")
    return Event.model_validate(doc)


class EventRepository:
    def __init__(self, db: Database) -> None:
        self._events = db[Collections.EVENTS]

    async def upsert(self, event: Event) -> None:
        """Insert ``event`` unless it is already stored; a stored event's status is kept."""
        doc = event_to_document(event)
        await self._events.update_one({"_id": doc.pop("_id")}, {"$setOnInsert": doc}, upsert=True)

    async def get(self, event_id: str) -> Event | None:
        doc = await self._events.find_one({"_id": event_id})
        return event_from_document(doc) if doc else None

    async def get_by_request_id(self, request_id: str) -> Event | None:
        doc = await self._events.find_one({"request_id": request_id})
        return event_from_document(doc) if doc else None

    async def set_status(self, event_id: str, status: EventStatus) -> None:
        await self._events.update_one({"_id": event_id}, {"$set": {"status": status.value}})

    async def list_for_webhook(
        self,
        webhook_id: str,
        *,
        status: EventStatus | None = None,
        limit: int = 50,
        after: EventCursor | None = None,
    ) -> list[Event]:
        """Newest first; ``after`` continues below the last event of the previous page."""
        query: dict[str, Any] = {"webhook_id": webhook_id}
        if status is not None:
            query["status"] = status.value
        if after is not None:
            query["$or"] = [
                {"created_at": {"$lt": after.created_at}},
                {"created_at": after.created_at, "_id": {"$lt": after.event_id}},
            ]
        cursor = self._events.find(query).sort([("created_at", -1), ("_id", -1)]).limit(limit)
        return [event_from_document(doc) async for doc in cursor]


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
        doc = attempt_to_document(attempt)
        await self._attempts.replace_one({"_id": doc["_id"]}, doc, upsert=True)

    async def list_for_event(self, event_id: str) -> list[Attempt]:
        cursor = self._attempts.find({"event_id": event_id}).sort([("started_at", 1), ("_id", 1)])
        return [attempt_from_document(doc) async for doc in cursor]
