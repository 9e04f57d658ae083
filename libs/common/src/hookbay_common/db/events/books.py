"""Books (``event_books``): the summaries of 100 pages in one document, and the part of the
event repository that keeps summaries and books up to date and reads them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from hookbay_common.clock import epoch_ms, from_epoch_ms
from hookbay_common.db.documents import gather_limited
from hookbay_common.db.events.caches import (
    BOOK_START_CACHE,
    RECENT_CACHE,
    SUMMARY_CACHE,
    _keep,
)
from hookbay_common.db.events.layout import (
    _STATUSES,
    PAGE_SIZE,
    _newest,
    page_id,
)
from hookbay_common.db.events.pages import EventPages
from hookbay_common.db.events.summaries import PageSummary, PendingSummaries, _summary, _Tally

BOOK_PAGES: Final = 100
"""Pages per book: an ``event_books`` document holds the counts of 100 pages (10,000 events), so
counting a webhook of a million events reads 100 small documents, not 10,000 page summaries."""
_GUARD: Final = ("total", "rejected", "minutes", *(s.value for s in _STATUSES))
"""The fields of a remembered page summary its next write is conditional on: all its counts
(its time bounds follow from the minutes)."""


def book_of(page: int) -> int:
    """The book ``page`` is entered in."""
    return page // BOOK_PAGES


def _settled(book: int, low: int, top: int) -> bool:
    """Whether a book's pages can no longer change their bounds: a whole book or more below the
    top page's (its events all recorded; a recount finds the same times) and above the book
    the lowest live page is in (retention cuts pages from the bottom only)."""
    return low // BOOK_PAGES < book < top // BOOK_PAGES - 1


def book_id(webhook_id: str, book: int) -> str:
    return f"{webhook_id}:{book:06d}"


def _book_entry(summary: dict[str, Any]) -> dict[str, Any]:
    """A page's entry in its book (``$set`` fields): ``"pending,success,failed,rejected,
    first_at,last_at"``, the times in epoch milliseconds (BSON's own precision)."""
    page = summary["page"]
    numbers = [summary[s.value] for s in _STATUSES]
    numbers += [summary["rejected"], epoch_ms(summary["first_at"]), epoch_ms(summary["last_at"])]
    return {
        "webhook_id": summary["webhook_id"], "username": summary["username"],
        "book": page // BOOK_PAGES, f"pages.{page}": ",".join(map(str, numbers)),
    }  # fmt: skip


def _summary_of_entry(book: dict[str, Any], page: int, entry: str) -> PageSummary:
    *counts, rejected, first_ms, last_ms = (int(n) for n in entry.split(","))
    return PageSummary(
        webhook_id=book["webhook_id"], username=book["username"], page=page,
        first_at=from_epoch_ms(first_ms),
        last_at=from_epoch_ms(last_ms),
        counts=dict(zip(_STATUSES, counts, strict=True)), rejected=rejected,
    )  # fmt: skip


class PageBooks(EventPages):
    """Keeping the page summaries and books up to date, and reading them (counts, bounds)."""

    async def recount(self, pages: Iterable[tuple[str, int]]) -> None:
        """Rewrite the summaries of ``pages`` (webhook id, page) from their heads."""
        await self.summarise(PendingSummaries(exact=set(pages)))

    async def summarise(self, pending: PendingSummaries) -> None:
        """Bring the summaries (and book entries) of the pages in ``pending`` up to date, and
        the newest ids its webhooks' counters keep: a tally is added to the stored summary
        (one small read and write instead of reading the page's heads), an ``exact`` page is
        recounted from its heads. Books go concurrently, the pages of one book one after the
        other: FerretDB v1 updates a document by reading and rewriting it, so two concurrent
        ``$set`` of entries of one book could lose one.

        Not idempotent for tallies: after a failure, ``pending.recount_all()`` before trying
        again."""
        books: dict[tuple[str, int], list[int]] = {}
        for webhook_id, page in sorted(pending.exact | pending.tallies.keys()):
            books.setdefault((webhook_id, page // BOOK_PAGES), []).append(page)

        async def one_book(webhook_id: str, pages: list[int]) -> None:
            for page in pages:
                exact = (webhook_id, page) in pending.exact
                if exact or not await self._add(
                    webhook_id, page, pending.tallies[webhook_id, page]
                ):
                    await self._recount(webhook_id, page)

        await gather_limited(one_book(w, ps) for (w, _), ps in books.items())
        await gather_limited(self._keep_recent(w, fresh) for w, fresh in pending.recent.items())

    async def _keep_recent(self, webhook_id: str, fresh: set[tuple[int, str]]) -> None:
        """Add ``fresh`` to the newest ids the webhook's counter keeps (the owner's overview);
        after the events are written, so the ids it keeps are of stored events."""
        kept = self._recent.get(webhook_id)
        if kept is None:
            doc = await self._counters.find_one({"_id": webhook_id}, {"recent": 1})
            kept = doc.get("recent", "") if doc is not None else ""
        newest = _newest(kept, fresh)
        await self._counters.update_one({"_id": webhook_id}, {"$set": {"recent": newest}})
        _keep(self._recent, webhook_id, newest, RECENT_CACHE)

    async def _add(self, webhook_id: str, page: int, tally: _Tally) -> bool:
        """Add ``tally`` to the page's stored summary; False when there is none, or the sum
        does not add up (then the page is recounted). The summary this repository wrote last
        is not read again (``SUMMARY_CACHE``): the write is then conditional on its counts
        (an equality FerretDB checks on the one document its ``_id`` finds), so a summary
        another writer changed meanwhile (a recorder taking over, retention's recount) is read
        and added to again."""
        key = page_id(webhook_id, page)
        doc = self._summaries.get(webhook_id)
        if doc is not None and doc["page"] != page:
            doc = None  # it remembers a newer page of the webhook
        while True:
            remembered = doc is not None
            if doc is None:
                doc = await self._pages.find_one({"_id": key})
            if doc is None or "minutes" not in doc:  # a new page, or one summarised before minutes
                return False
            total = _Tally.of_summary(doc).plus(tally)
            if not total.valid:
                return False
            guard = {k: doc[k] for k in _GUARD} if remembered else None
            if await self._write_summary(total.summary(webhook_id, doc["username"], page), guard):
                return True
            doc = None  # changed meanwhile: read it

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
            if self._summaries.get(webhook_id, {}).get("page") == page:
                del self._summaries[webhook_id]
            await self._pages.delete_one({"_id": key})
            await self._books.update_one(book, {"$unset": {f"pages.{page}": ""}})
            return
        counted = _Tally()
        for doc in docs:
            counted.add(doc["status"], doc["created_at"])
            counted.rejected += doc.get("rejected_reason") is not None
        await self._write_summary(counted.summary(webhook_id, docs[0]["username"], page))

    async def _write_summary(
        self, summary: dict[str, Any], guard: dict[str, Any] | None = None
    ) -> bool:
        """Write a page's summary, then its book entry; with ``guard``, only if the stored
        summary still has those fields (False, nothing written, when it has not)."""
        webhook_id, page = summary["webhook_id"], summary["page"]
        key = page_id(webhook_id, page)
        if guard is None:
            await self._pages.replace_one({"_id": key}, summary, upsert=True)
        elif not (await self._pages.replace_one({"_id": key, **guard}, summary)).matched_count:
            self._summaries.pop(webhook_id, None)  # what it remembered of the page is outdated
            return False
        kept = self._summaries.get(webhook_id)
        if kept is None or kept["page"] <= page:  # an older page's (a retry's status) is not kept
            _keep(self._summaries, webhook_id, summary, SUMMARY_CACHE)
        book = {"_id": book_id(summary["webhook_id"], summary["page"] // BOOK_PAGES)}
        await self._books.update_one(
            book, {"$set": _book_entry(summary)}, upsert=True
        )  # after the page: a book never counts what its page does not
        return True

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

    async def _book(self, webhook_id: str, book: int) -> dict[int, PageSummary]:
        """The summaries of the pages of one book, by page (none: the book is not written)."""
        doc = await self._books.find_one({"_id": book_id(webhook_id, book)})
        if doc is None:
            return {}
        return {int(p): _summary_of_entry(doc, int(p), e) for p, e in doc.get("pages", {}).items()}

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
