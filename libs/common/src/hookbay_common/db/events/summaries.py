"""Page summaries (``event_pages``): one per (webhook, page), with its counts by status and per
minute of ``created_at``, and its time bounds; and the tallies a batch's writes add to them."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from hookbay_common.db.events.layout import _STATUSES, PAGE_SIZE, RECENT_KEEP
from hookbay_common.models import EventStatus

_STATUS_INDEX: Final = {s.value: i for i, s in enumerate(_STATUSES)}


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
class PendingSummaries:
    """What the summaries still owe after writes: pages whose writes are all known
    (``tallies``, applied to the stored summary), pages to recount from their heads (``exact``:
    a write met a stored document, a page was completed, or a status update found its event
    already past it: a batch written again), and the newest event ids of each webhook seen
    (``recent``, for its counter's ``recent``).

    Written by ``EventRepository.summarise``; several batches may add to one (the recorder
    writes summaries once a second, not once a batch)."""

    tallies: dict[tuple[str, int], _Tally] = field(default_factory=dict)
    exact: set[tuple[str, int]] = field(default_factory=set)
    recent: dict[str, set[tuple[int, str]]] = field(default_factory=dict)

    def tally(self, webhook_id: str, page: int) -> _Tally:
        return self.tallies.setdefault((webhook_id, page), _Tally())

    def saw(self, webhook_id: str, created_ms: int, event_id: str) -> None:
        kept = self.recent.setdefault(webhook_id, set())
        kept.add((created_ms, event_id))
        if len(kept) > 2 * RECENT_KEEP:  # bounded: only the newest are ever written
            self.recent[webhook_id] = set(sorted(kept, reverse=True)[:RECENT_KEEP])

    def recount_all(self) -> None:
        """Turn every tally into a recount: after a failed write of the summaries, some may
        have been added already, and adding them again would count twice; a recount is exact
        whatever was written."""
        self.exact |= self.tallies.keys()
        self.tallies.clear()

    def __bool__(self) -> bool:
        return bool(self.tallies or self.exact or self.recent)


def _heal_at(webhook_id: str) -> int:
    """The position in a page at which the webhook's previous page is recounted."""
    return zlib.crc32(webhook_id.encode()) % PAGE_SIZE


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


def _summary(doc: dict[str, Any]) -> PageSummary:
    return PageSummary(
        webhook_id=doc["webhook_id"], username=doc["username"], page=doc["page"],
        first_at=doc["first_at"], last_at=doc["last_at"],
        counts={s: int(doc.get(s.value, 0)) for s in _STATUSES},
        rejected=int(doc.get("rejected", 0)),
    )  # fmt: skip
