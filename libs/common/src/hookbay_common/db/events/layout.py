"""The paged layout of events: positions, the head and body documents, cursors.

An event is stored as a *head* in ``events`` (every field but its request headers and body, plus
its position ``seq`` and ``page``, its body size and its latest attempt's outcome) and a body in
``event_bodies``; ``event_counters`` gives each webhook's positions and keeps its newest ids.

``change_page`` on a head is the page where live streams find its latest change: the page it
was recorded on, then, each time its status changes, its webhook's top page at that moment.
Pages only grow, so a stream that has read up to page P finds every later recording and status
change on the pages from P up (``EventListing.changed_heads``): a resume point of any age.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from hookbay_common.db.documents import (
    body_from_document,
    body_to_document,
    headers_from_document,
    headers_to_document,
)
from hookbay_common.models import Attempt, Event, EventHead, EventRow, EventStatus

PAGE_SIZE: Final = 100
"""Events per page. A page is what one list query decodes (FerretDB decodes every matching
document in Go): 100 heads of ~0.4 KB are read in a few milliseconds."""

RECENT_KEEP: Final = 10
"""Newest event ids each webhook's counter keeps, for the owner's overview."""

_STATUSES: Final = tuple(EventStatus)

_BODY_FIELDS: Final = ("request_headers", "request_body", "request_body_encoding")
_POSITION_FIELDS: Final = ("seq", "page", "change_page")
_HEAD_ONLY_FIELDS: Final = (
    *_POSITION_FIELDS,
    "status_key",
    "body_size",
    "last_status_code",
    "last_latency_ms",
    "next_retry_at",
    "last_error",
    "last_attempt_number",
    "deliveries",
)
_HEAD_PROJECTION: Final = {name: 0 for name in (*_BODY_FIELDS, "status_key", "deliveries")}


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


@dataclass(frozen=True)
class ExpiredPage:
    """Events of one page created before a cut-off: the whole page (``event_ids`` ``None``)
    or the listed ids."""

    webhook_id: str
    page: int
    count: int
    event_ids: list[str] | None


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
    doc = {
        k: v
        for k, v in doc.items()
        if k not in _BODY_FIELDS and k not in ("status_key", "deliveries")
    }
    doc.pop("seq", None)
    doc.pop("change_page", None)
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


def _status_if_later(attempt: Attempt, change_page: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Filter and update setting the status (and the latest attempt's outcome) when the stored
    status came from an earlier attempt; ``change_page``: the webhook's top page now, where
    live streams find the change (``change_page`` of the module docstring)."""
    key = attempt.status_key
    later = {"$or": [{"status_key": {"$lt": key}}, {"status_key": {"$exists": False}}]}
    # an event with deliveries takes its status from them (``EventRepository._deliver``)
    plain = {"deliveries": {"$exists": False}}
    return {"_id": attempt.event_id, **later, **plain}, {
        "$set": {
            "status": attempt.outcome.value,
            "status_key": key,
            "last_status_code": attempt.status_code,
            "last_latency_ms": attempt.latency_ms,
            "last_error": attempt.error,
            "next_retry_at": attempt.next_retry_at if attempt.will_retry else None,
            "last_attempt_number": attempt.number,
            "change_page": change_page,
        }
    }


def _newest(kept: str, fresh: Iterable[tuple[int, str]]) -> str:
    """``kept`` (``"<created_at ms>:<id>;..."``) with ``fresh`` ((created_at ms, id) pairs)
    added: the ``RECENT_KEEP`` newest, newest first."""
    merged = set(_decode_recent(kept)) | set(fresh)
    return ";".join(f"{ms}:{i}" for ms, i in sorted(merged, reverse=True)[:RECENT_KEEP])


def _decode_recent(text: str) -> list[tuple[int, str]]:
    found = []
    for item in text.split(";") if text else ():
        ms, _, event_id = item.partition(":")
        found.append((int(ms), event_id))
    return found


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
