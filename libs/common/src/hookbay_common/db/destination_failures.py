"""The ``destination_failures`` collection: for each destination, the ids of its newest failed
attempts, so its page shows its last errors with a read of one document and of at most
``RECENT_FAILURES`` attempts by ``_id``, whatever the owner's history holds.

One document per destination, ``_id`` ``"<username>/<destination name>"`` (what an attempt
names; names never change), with ``username``, ``destination`` and ``recent``: JSON text of
``[[started_at, attempt id], …]``, newest first, at most ``RECENT_FAILURES`` (a small list as
text, as the stores' other small lists: FerretDB decodes strings far faster than arrays).
The recorder adds every batch's failed routed attempts (``note``); a write is conditional on the
text it read, tried again when another recorder wrote first (on FerretDB v1, whose updates read
then write, two writes at the very same moment can still lose one: the list shows the last
errors, give or take one under such a race). A batch noted twice changes nothing (ids are
merged). The document goes with its destination (``DestinationRepository.delete``); attempts
deleted since (retention, the owner's deletion) are simply not found.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pymongo.errors import DuplicateKeyError

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.documents import gather_limited
from hookbay_common.models import Attempt, AttemptTrigger

RECENT_FAILURES: Final = 5
"""Failed attempts kept per destination."""
_CACHED: Final = 10_000
"""Destinations whose last written list a repository remembers (saves a read per batch)."""
_RACES: Final = 5


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """One failed attempt of a destination: when, what answered (``status_code``, or the
    ``error`` when nothing did), and the event it carried."""

    attempt_id: str
    at: datetime
    event_id: str
    status_code: int | None
    error: str | None


def failures_key(username: str, destination: str) -> str:
    return f"{username}/{destination}"


def failed(attempt: Attempt) -> bool:
    """An attempt of a routed delivery (not a ``listen`` one) that got no 2xx."""
    if attempt.destination is None or attempt.delivery_id is None:
        return False
    if attempt.trigger is AttemptTrigger.LISTEN:
        return False
    return attempt.status_code is None or not 200 <= attempt.status_code < 300


def _merged(kept: str, fresh: Iterable[tuple[str, str]]) -> str:
    entries = {attempt_id: at for at, attempt_id in json.loads(kept or "[]")}
    entries.update((attempt_id, at) for at, attempt_id in fresh)
    newest = sorted(((at, i) for i, at in entries.items()), reverse=True)[:RECENT_FAILURES]
    return json.dumps([[at, i] for at, i in newest], separators=(",", ":"))


def _failed_attempt(doc: dict[str, Any]) -> FailedAttempt:
    return FailedAttempt(
        attempt_id=doc["_id"], at=doc["started_at"], event_id=doc["event_id"],
        status_code=doc.get("status_code"), error=doc.get("error"),
    )  # fmt: skip


def _stamp(at: datetime) -> str:
    """Sorts as the times do (every stored time is UTC)."""
    return at.isoformat(timespec="microseconds")


class DestinationFailureRepository:
    def __init__(self, db: Database) -> None:
        self._failures = db[Collections.DESTINATION_FAILURES]
        self._attempts = db[Collections.ATTEMPTS]
        self._kept: dict[str, str] = {}

    async def note(self, attempts: Iterable[Attempt]) -> None:
        """Add the failed routed attempts among ``attempts`` to their destinations' lists."""
        fresh: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for attempt in attempts:
            if failed(attempt) and attempt.destination is not None:
                entry = (_stamp(attempt.started_at), attempt.id)
                fresh.setdefault((attempt.username, attempt.destination), []).append(entry)
        for (username, destination), entries in fresh.items():
            await self._keep(username, destination, entries)

    async def _keep(self, username: str, destination: str, fresh: list[tuple[str, str]]) -> None:
        key = failures_key(username, destination)
        for _ in range(_RACES):
            if key not in self._kept:
                doc = await self._failures.find_one({"_id": key}, {"recent": 1})
                if doc is None:
                    if await self._insert(key, username, destination, _merged("", fresh)):
                        return
                    continue
                self._remember(key, str(doc["recent"]))
            kept = self._kept[key]
            recent = _merged(kept, fresh)
            if recent == kept:
                return
            written = await self._failures.update_one(
                {"_id": key, "recent": kept}, {"$set": {"recent": recent}}
            )
            if written.matched_count:
                self._remember(key, recent)
                return
            self._kept.pop(key, None)  # another writer came first: read it again

    async def _insert(self, key: str, username: str, destination: str, recent: str) -> bool:
        try:
            await self._failures.insert_one(
                {"_id": key, "username": username, "destination": destination, "recent": recent}
            )
        except DuplicateKeyError:
            return False
        self._remember(key, recent)
        return True

    def _remember(self, key: str, recent: str) -> None:
        self._kept.pop(key, None)
        self._kept[key] = recent
        if len(self._kept) > _CACHED:
            del self._kept[next(iter(self._kept))]

    async def recent(
        self, username: str, destination: str, *, since: datetime | None = None
    ) -> list[FailedAttempt]:
        """The destination's newest failed attempts, newest first, at most
        ``RECENT_FAILURES``; those started before ``since`` left out (an earlier destination
        of the same name)."""
        doc = await self._failures.find_one({"_id": failures_key(username, destination)})
        if doc is None:
            return []
        ids = [attempt_id for _, attempt_id in json.loads(doc["recent"])]
        fields = {"event_id": 1, "started_at": 1, "status_code": 1, "error": 1, "username": 1}
        # one find_one each: FerretDB filters an `$in` over the whole collection
        docs = await gather_limited(self._attempts.find_one({"_id": i}, fields) for i in ids)
        found = [_failed_attempt(d) for d in docs if d and d.get("username") == username]
        kept = [f for f in found if since is None or f.at >= since]
        return sorted(kept, key=lambda f: (f.at, f.attempt_id), reverse=True)
