"""Upgrades of the events' layout, run by ``hookbay-admin migrate``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pymongo import ReturnDocument, UpdateOne

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.documents import gather_limited
from hookbay_common.db.events.books import _book_entry, book_id, book_of
from hookbay_common.db.events.bulk import _bulk_write
from hookbay_common.db.events.layout import (
    _BODY_FIELDS,
    PAGE_SIZE,
    event_body_document,
    event_from_documents,
)
from hookbay_common.db.events.repository import EventRepository

LAYOUT_VERSION: Final = 4
"""1: an event was one document (head, headers and body); 2: heads, bodies and page summaries;
3: books (``event_books``) over the page summaries, and per-minute counts in new summaries;
4: every head has its ``change_page`` (where live streams find it)."""
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
    if version < 3:
        await _write_books(db)
    await _write_change_pages(db)
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
            {"_id": book_id(doc["webhook_id"], book_of(doc["page"]))},
            {"$set": _book_entry(doc)},
            upsert=True,
        )


async def _write_change_pages(db: Database) -> None:
    """Layout 3 → 4: a head recorded before heads carried ``change_page`` gets its own page
    there, so a stream resuming from before the upgrade finds it (one update per page of a
    summary; idempotent: only heads without one)."""
    events = db[Collections.EVENTS]
    async for doc in db[Collections.EVENT_PAGES].find({}, {"webhook_id": 1, "page": 1}):
        await events.update_many(
            {
                "webhook_id": doc["webhook_id"],
                "page": doc["page"],
                "change_page": {"$exists": False},
            },
            {"$set": {"change_page": doc["page"]}},
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
