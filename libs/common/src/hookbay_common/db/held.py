"""The hold store: deliveries a destination cannot take now (paused, disabled, or a backlog
spilled out of memory), kept durably in arrival order until its lane drains them.

Two collections:

- ``held_deliveries``: one document per held task, ``_id`` ``"<destination>/<seq>"``, with
  ``destination``, ``seq`` (dense, from 0, in the order tasks were held), ``page``
  (``seq // HELD_PAGE_SIZE``), ``held_at`` and the encoded task (``task``, the wire bytes; this
  module never decodes it). Unique ``(destination, seq)``; reads are equality matches on
  ``(destination, page)`` (a page of ids, then each task by ``_id``): the only shapes FerretDB v1
  serves from an index, and a bounded amount of memory whatever the tasks weigh.
- ``held_lanes``: one document per destination that ever held, ``_id`` the destination, with
  ``next`` (the next seq to give), ``head`` (every seq below it is handled; the drain resumes
  there) and ``held`` (``next > head``: what ``holding()`` lists after a restart).

Writes are meant to come from one writer per process (``Lanes`` serialises them), and this
repository serialises its own writes too: concurrent bulk commands wedge FerretDB v1. A seq is
taken by inserting its document (inserts are atomic on every supported store): two writers that
raced for a seq (a rebalance overlap, or ``next`` not written before a crash) collide on the unique
index and the loser moves on to the next free seq, so ``seq`` stays dense and ordered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from bson import Binary
from pymongo.errors import BulkWriteError, PyMongoError

from hookbay_common.db.client import Collections, Database

HELD_PAGE_SIZE: Final = 100
"""Tasks per page: what one id read of the drain decodes."""
INSERT_CHUNK: Final = 16
"""Documents per insert command (the bulk size the store is known to take without deadlocks)."""
INSERT_CHUNK_BYTES: Final = 8 * 1024 * 1024
"""And at most this many task bytes per command (a task can weigh up to 6 MiB)."""
_DUPLICATE_KEY: Final = 11000


class HoldStoreError(Exception):
    """The store did not answer or refused a write: try again later (nothing is lost: the
    tasks are still in Kafka, uncommitted, or still in the store)."""


@dataclass(frozen=True, slots=True)
class HeldTask:
    seq: int
    held_at: datetime
    task: bytes


@dataclass(frozen=True, slots=True)
class HoldState:
    """What a destination holds: ``count`` tasks from ``head`` (an upper bound while the drain's
    progress is not yet written), the oldest held at ``oldest_held_at`` (``None``: none held)."""

    head: int
    next: int
    oldest_held_at: datetime | None

    @property
    def count(self) -> int:
        return self.next - self.head


def _held_id(destination: str, seq: int) -> str:
    return f"{destination}/{seq}"


class HoldRepository:
    def __init__(self, db: Database) -> None:
        self._held = db[Collections.HELD_DELIVERIES]
        self._lanes = db[Collections.HELD_LANES]
        self._destinations = db[Collections.DESTINATIONS]
        self._next: dict[str, int] = {}
        self._write = asyncio.Lock()

    async def append(self, destination: str, tasks: Sequence[bytes], *, held_at: datetime) -> int:
        """Hold ``tasks`` after everything ``destination`` holds, in this order; return the seq of
        the first. Once it returns they are durable. A call that raised may have held a prefix
        of them: the caller holds them all again (a task can then be held, so delivered, twice:
        at-least-once)."""
        async with self._write:
            try:
                return await self._append(destination, tasks, held_at)
            except PyMongoError as exc:
                self._next.pop(destination, None)  # read it again: a prefix may be in
                raise HoldStoreError(str(exc)) from exc

    async def _append(self, destination: str, tasks: Sequence[bytes], held_at: datetime) -> int:
        seq = await self._next_seq(destination)
        first: int | None = None
        pending = list(tasks)
        while pending:
            chunk = _chunk(pending)
            docs = [_document(destination, seq + i, held_at, task) for i, task in enumerate(chunk)]
            try:
                await self._held.insert_many(docs, ordered=True)
                inserted = len(docs)
            except BulkWriteError as exc:
                inserted = _inserted_before_duplicate(exc)
                if first is None and inserted:
                    first = seq
                seq += inserted + 1  # that seq is someone else's: try the next one
                pending = pending[inserted:]
                continue
            if first is None:
                first = seq
            seq += inserted
            pending = pending[inserted:]
        self._next[destination] = seq
        await self._lanes.update_one(
            {"_id": destination},
            {"$max": {"next": seq}, "$set": {"held": True}, "$setOnInsert": {"head": 0}},
            upsert=True,
        )
        return first if first is not None else seq

    async def _next_seq(self, destination: str) -> int:
        if destination not in self._next:
            doc = await self._lanes.find_one({"_id": destination})
            self._next[destination] = int(doc["next"]) if doc else 0
        return self._next[destination]

    async def read(self, destination: str, *, after: int, limit: int) -> list[HeldTask]:
        """Up to ``limit`` held tasks with a seq above ``after``, lowest first."""
        try:
            lane = await self._lanes.find_one({"_id": destination})
            if lane is None or limit <= 0:
                return []
            high = int(lane["next"])
            seqs = await self._seqs(destination, after, high, limit)
            found = []
            for seq in seqs:
                doc = await self._held.find_one({"_id": _held_id(destination, seq)})
                if doc is not None:
                    found.append(HeldTask(seq, doc["held_at"], bytes(doc["task"])))
            return found
        except PyMongoError as exc:
            raise HoldStoreError(str(exc)) from exc

    async def _seqs(self, destination: str, after: int, high: int, limit: int) -> list[int]:
        seqs: list[int] = []
        page = max(0, after + 1) // HELD_PAGE_SIZE
        while len(seqs) < limit and page * HELD_PAGE_SIZE < high:
            cursor = self._held.find({"destination": destination, "page": page}, {"seq": 1})
            on_page = sorted([int(doc["seq"]) async for doc in cursor])
            seqs += [s for s in on_page if s > after][: limit - len(seqs)]
            page += 1
        return seqs

    async def advance(self, destination: str, head: int) -> None:
        """Every task of ``destination`` below seq ``head`` is handled: forget them (whole pages
        are deleted; the rest of a page is skipped by the drain until its page is done)."""
        async with self._write:
            try:
                before = await self._lanes.find_one_and_update(
                    {"_id": destination}, {"$max": {"head": head}}
                )
                if before is None:
                    return
                old, high = int(before.get("head", 0)), int(before["next"])
                if head > old and head >= high:  # empty: the last page too
                    await self._lanes.update_one(
                        {"_id": destination, "next": high}, {"$set": {"held": False}}
                    )
                    last = (head - 1) // HELD_PAGE_SIZE
                else:
                    last = head // HELD_PAGE_SIZE - 1
                for page in range(old // HELD_PAGE_SIZE, last + 1):
                    await self._held.delete_many({"destination": destination, "page": page})
            except PyMongoError as exc:
                raise HoldStoreError(str(exc)) from exc

    async def expire(self, destination: str, before: datetime, *, dry: bool = False) -> int:
        """Delete (or, ``dry``, count) the tasks ``destination`` has held since before
        ``before`` (retention: their events are older than their owner's plan keeps); how many.
        Tasks are held in time order, so it goes page by page from the lane's head and stops at
        the first page holding a later task. The drain skips the seqs they leave, and its head
        moves past them as past delivered ones; when every task held expired, the head moves
        to the end here (never backwards: the lane's own advances are ``$max`` too)."""
        try:
            lane = await self._lanes.find_one({"_id": destination})
            if lane is None:
                return 0
            head, high = int(lane.get("head", 0)), int(lane["next"])
            expired, later = 0, False
            async with aclosing(self._held_times(destination, head, high)) as pages:
                async for on_page, times in pages:
                    old = sum(1 for at in times if at < before)
                    expired += old
                    later = old < len(times)
                    if old and not dry:
                        async with self._write:
                            await self._held.delete_many({**on_page, "held_at": {"$lt": before}})
                    if later:
                        break
            if expired and not later and not dry:
                async with self._write:
                    await self._lanes.update_one({"_id": destination}, {"$max": {"head": high}})
                    await self._lanes.update_one(
                        {"_id": destination, "next": high}, {"$set": {"held": False}}
                    )
            return expired
        except PyMongoError as exc:
            raise HoldStoreError(str(exc)) from exc

    async def expire_owner(self, username: str, before: datetime, *, dry: bool = False) -> int:
        """``expire`` for every destination of ``username``; how many tasks in all."""
        destinations = self._destinations.find({"username": username}, {"_id": 1})
        return sum([await self.expire(doc["_id"], before, dry=dry) async for doc in destinations])

    async def state(self, destination: str) -> HoldState:
        try:
            lane = await self._lanes.find_one({"_id": destination})
            if lane is None:
                return HoldState(0, 0, None)
            head, high = int(lane.get("head", 0)), int(lane["next"])
            oldest = None
            if high > head:
                doc = await self._held.find_one({"_id": _held_id(destination, head)})
                oldest = doc["held_at"] if doc else await self._oldest(destination, head, high)
            return HoldState(head, high, oldest)
        except PyMongoError as exc:
            raise HoldStoreError(str(exc)) from exc

    async def _oldest(self, destination: str, head: int, high: int) -> datetime | None:
        """The earliest ``held_at`` from ``head`` on when the head's task is gone (expired by
        retention, or being advanced past): the first page from the head holding any."""
        async with aclosing(self._held_times(destination, head, high)) as pages:
            async for _, times in pages:
                if times:
                    return min(times)
        return None

    async def _held_times(
        self, destination: str, head: int, high: int
    ) -> AsyncGenerator[tuple[dict[str, Any], list[datetime]], None]:
        """Page by page from the one holding ``head`` to the one holding ``high - 1``: the
        page's filter and the ``held_at`` of its tasks from ``head`` on (one equality read)."""
        for page in range(head // HELD_PAGE_SIZE, (high - 1) // HELD_PAGE_SIZE + 1):
            on_page = {"destination": destination, "page": page}
            found = self._held.find(on_page, {"seq": 1, "held_at": 1})
            yield on_page, [doc["held_at"] async for doc in found if int(doc["seq"]) >= head]

    async def drop(self, destination: str) -> None:
        """Forget everything ``destination`` holds (the destination or its owner was deleted)."""
        async with self._write:
            try:
                await self._held.delete_many({"destination": destination})
                await self._lanes.delete_one({"_id": destination})
                self._next.pop(destination, None)
            except PyMongoError as exc:
                raise HoldStoreError(str(exc)) from exc

    async def holding(self) -> list[str]:
        """Every destination holding tasks (to drain after a restart)."""
        try:
            return [doc["_id"] async for doc in self._lanes.find({"held": True}, {"_id": 1})]
        except PyMongoError as exc:
            raise HoldStoreError(str(exc)) from exc


def _document(destination: str, seq: int, held_at: datetime, task: bytes) -> dict[str, Any]:
    return {
        "_id": _held_id(destination, seq),
        "destination": destination,
        "seq": seq,
        "page": seq // HELD_PAGE_SIZE,
        "held_at": held_at,
        "task": Binary(task),
    }


def _chunk(tasks: list[bytes]) -> list[bytes]:
    size, end = 0, 0
    for end, task in enumerate(tasks[:INSERT_CHUNK], start=1):
        size += len(task)
        if size > INSERT_CHUNK_BYTES and end > 1:
            return tasks[: end - 1]
    return tasks[:end]


def _inserted_before_duplicate(exc: BulkWriteError) -> int:
    errors = exc.details.get("writeErrors") or []
    if not errors or errors[0].get("code") != _DUPLICATE_KEY:
        raise exc
    return int(errors[0]["index"])
