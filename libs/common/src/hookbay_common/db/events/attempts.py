"""The ``attempts`` collection."""

from __future__ import annotations

from typing import Any

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.documents import (
    body_from_document,
    body_to_document,
    headers_from_document,
    headers_to_document,
)
from hookbay_common.db.events.bulk import Statement, _insert_or_upsert
from hookbay_common.db.events.layout import ExpiredPage
from hookbay_common.db.events.repository import EventRepository
from hookbay_common.models import Attempt


def attempt_to_document(attempt: Attempt, event_page: int | None = None) -> dict[str, Any]:
    doc = attempt.model_dump(mode="python", exclude={"id", "response_headers", "response_body"})
    doc.update(body_to_document("response_body", attempt.response_body))
    doc.update(_id=attempt.id, response_headers=headers_to_document(attempt.response_headers))
    for routing in ("delivery_id", "route", "destination", "transform"):  # as before, unset
        if doc[routing] is None:
            del doc[routing]
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
