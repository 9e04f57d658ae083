"""The base of the event repository: its collections and caches, and the page reads every other
part builds on (a webhook's page range, one page's heads)."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from typing import Any

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.events.layout import _HEAD_PROJECTION, PAGE_SIZE, _order, _row_from_document
from hookbay_common.models import EventRow, EventStatus


class EventPages:
    """The collections and caches of the event repository, and its page reads."""

    def __init__(self, db: Database) -> None:
        self._events = db[Collections.EVENTS]
        self._bodies = db[Collections.EVENT_BODIES]
        self._pages = db[Collections.EVENT_PAGES]
        self._books = db[Collections.EVENT_BOOKS]
        self._counters = db[Collections.EVENT_COUNTERS]
        self._attempts = db[Collections.ATTEMPTS]
        self._located: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._book_starts: OrderedDict[tuple[str, int], datetime] = OrderedDict()
        self._recent: OrderedDict[str, str] = OrderedDict()
        self._blocks: OrderedDict[str, tuple[int, int]] = OrderedDict()
        """Positions reserved per webhook and not used yet: [next, end)."""
        self._heads: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """Event heads as this repository last wrote them (``_deliver``'s projection)."""
        self._summaries: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """Each webhook's newest page summary as this repository last wrote it."""

    def forget_writes(self) -> None:
        """Forget what this repository's own writes taught it about webhooks' counters (their
        reserved positions, their newest ids): when another writer may take over its webhooks
        (the recorder's partitions moved), its numbers must come from the counter again."""
        self._recent.clear()
        self._blocks.clear()
        self._heads.clear()
        self._summaries.clear()

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
