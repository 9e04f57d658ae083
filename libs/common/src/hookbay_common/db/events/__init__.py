"""The ``events``, ``event_bodies``, ``event_pages``, ``event_books``, ``event_counters`` and
``attempts`` collections.

Layout (docs/data-model.md has the full picture and the reasons, measured):

- ``events`` holds event *heads*: every field of an event but its request headers and body,
  plus its position ``seq`` (a per-webhook number given when the event is first recorded)
  and ``page`` (``seq // PAGE_SIZE``), its body size and its latest attempt's outcome.
- ``event_bodies`` holds the request headers and body, keyed by the event id, with the
  event's ``webhook_id`` and ``page``.
- ``event_pages`` holds one summary per (webhook, page): how many events it holds by status
  and the first and last ``created_at``; every write that touches the page adds its tally or
  recounts the page from its heads, so it is exact and a write repeated after a crash leaves
  it right.
- ``event_books`` holds the summaries of ``BOOK_PAGES`` pages in one document.
- ``event_counters`` holds each webhook's next ``seq`` and lowest live page.

Every hot query is then an equality match on a few fields that selects at most a page of
small documents: ``{webhook_id, page}`` (a list page, a recount, an export step, a retention
step), ``{_id}``, ``{request_id}``, ``{username}`` on the page summaries (counts, overview).
That is what FerretDB v1 on PostgreSQL can serve from an index (docs/ferretdb-backends.md:
it pushes only equality down and sorts in Go), and what MongoDB serves from the declared
compound indexes; no query sorts or scans more than a page.

Writes are idempotent: a record consumed twice keeps the position, status and counts it had.

Modules: ``layout`` (positions, head and body documents, cursors), ``summaries`` (page
summaries and the tallies a batch adds to them), ``books`` (books, and keeping summaries and
books up to date), ``caches``, ``bulk`` (FerretDB-sized write commands), ``pages`` (the
repository's collections and page reads), ``listing`` (lists, newest events, streams),
``counting`` (counts by status within dates), ``repository`` (``EventRepository``: writes,
one event, deletes), ``attempts`` (``AttemptRepository``), ``migrations`` (layout upgrades).
"""

from hookbay_common.db.events.attempts import (
    AttemptRepository,
    attempt_from_document,
    attempt_to_document,
)
from hookbay_common.db.events.books import BOOK_PAGES, book_id
from hookbay_common.db.events.bulk import BULK_CHUNK, Statement
from hookbay_common.db.events.caches import BOOK_START_CACHE, LOCATE_CACHE
from hookbay_common.db.events.layout import (
    PAGE_SIZE,
    RECENT_KEEP,
    EventCursor,
    ExpiredPage,
    HeadPage,
    event_body_document,
    event_from_documents,
    event_head_document,
    event_to_document,
    latest_attempts,
    page_id,
)
from hookbay_common.db.events.listing import (
    MAX_BOOKS_PER_LIST,
    MAX_PAGES_PER_LIST,
    MAX_SEARCH_PAGES,
)
from hookbay_common.db.events.migrations import (
    LAYOUT_VERSION,
    MIGRATION_CHUNK,
    migrate_event_layout,
)
from hookbay_common.db.events.repository import EventRepository, record_batch
from hookbay_common.db.events.summaries import PageSummary, PendingSummaries, minute_key

__all__ = [
    "BOOK_PAGES",
    "BOOK_START_CACHE",
    "BULK_CHUNK",
    "LAYOUT_VERSION",
    "LOCATE_CACHE",
    "MAX_BOOKS_PER_LIST",
    "MAX_PAGES_PER_LIST",
    "MAX_SEARCH_PAGES",
    "MIGRATION_CHUNK",
    "PAGE_SIZE",
    "RECENT_KEEP",
    "AttemptRepository",
    "EventCursor",
    "EventRepository",
    "ExpiredPage",
    "HeadPage",
    "PageSummary",
    "PendingSummaries",
    "Statement",
    "attempt_from_document",
    "attempt_to_document",
    "book_id",
    "event_body_document",
    "event_from_documents",
    "event_head_document",
    "event_to_document",
    "latest_attempts",
    "migrate_event_layout",
    "minute_key",
    "page_id",
    "record_batch",
]
