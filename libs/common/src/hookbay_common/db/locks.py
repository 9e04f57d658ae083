"""The ``locks`` collection: named leases, held by one holder at a time.

A lock is held by ``holder`` until ``lease_until``; the holder renews the lease while it works and
ends it when it is done. A holder that dies (``kill -9``) leaves its lease behind, and the lock is
free again once the lease lapsed. Lease times are the holders' own clocks, so the clocks of the
machines sharing a lock must agree to well within a lease.

Each taking of a lock is a new *generation*: an insert of ``{_id: "<name>:<generation>"}``, so of
two processes taking a free lock at once exactly one wins, by the unique ``_id``. Inserts are the
only write FerretDB v1 makes atomic: its conditional updates and ``findAndModify`` read the
matching documents and write them back in two steps, so two of them can both match one lapsed
lease (seen in the overlapping-runs test) — a lock built on them is not one there. The holder
renews by updating its own generation's document after checking that no newer generation exists;
a holder that stalled past its lease and was replaced learns so at its next renewal (``False``).
In the gap it may do one more unit of work alongside the new holder, so work under this lock must
stay idempotent (retention's is).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict
from pymongo import DESCENDING
from pymongo.errors import CollectionInvalid, DuplicateKeyError, OperationFailure

from hookbay_common.db.client import Collections, Database

_NAMESPACE_EXISTS = 48
KEEP_GENERATIONS: Final = 2
"""Documents kept per lock: the current generation and the one before (who held it last)."""


class Lease(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    generation: int
    holder: str
    lease_until: datetime
    acquired_at: datetime


def _from_document(doc: dict[str, Any]) -> Lease:
    return Lease.model_validate(doc)


def _document_id(name: str, generation: int) -> str:
    return f"{name}:{generation:012d}"


class LockRepository:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._locks = db[Collections.LOCKS]

    async def ensure_collection(self) -> None:
        """Create the collection unless it exists; idempotent, also when run concurrently.

        Up front, so the first ``acquire`` never creates it inside a write: FerretDB v1.24 can
        deadlock on a collection created while its connection pool is busy
        (docs/ferretdb-backends.md)."""
        if Collections.LOCKS in await self._db.list_collection_names():
            return
        try:
            await self._db.create_collection(Collections.LOCKS)
        except CollectionInvalid:
            pass  # created meanwhile by another process
        except OperationFailure as exc:
            if exc.code != _NAMESPACE_EXISTS:
                raise

    async def get(self, name: str) -> Lease | None:
        """The current (newest) generation of lock ``name``; ``None`` if never taken."""
        cursor = self._locks.find({"name": name}).sort("generation", DESCENDING).limit(1)
        docs = [doc async for doc in cursor]
        return _from_document(docs[0]) if docs else None

    async def acquire(
        self, name: str, holder: str, *, now: datetime, lease_until: datetime
    ) -> Lease | None:
        """Take lock ``name`` for ``holder`` until ``lease_until`` when it is free (never taken,
        or its lease ended before ``now``); ``None`` when someone holds it (``get`` says who)
        or took it at the same moment."""
        current = await self.get(name)
        if current is not None and current.lease_until >= now:
            return None
        generation = current.generation + 1 if current is not None else 1
        lease = Lease(
            name=name, generation=generation, holder=holder, lease_until=lease_until,
            acquired_at=now,
        )  # fmt: skip
        try:
            await self._locks.insert_one(
                {"_id": _document_id(name, generation), **lease.model_dump(mode="python")}
            )
        except DuplicateKeyError:
            return None
        if generation > KEEP_GENERATIONS:  # each taking retires the one that fell out
            retired = _document_id(name, generation - KEEP_GENERATIONS)
            await self._locks.delete_one({"_id": retired})
        return lease

    async def renew(self, name: str, holder: str, *, lease_until: datetime) -> bool:
        """Move ``holder``'s lease on ``name`` to ``lease_until``; ``False`` when ``holder`` no
        longer holds it (its lease lapsed and another holder took the lock)."""
        current = await self.get(name)
        if current is None or current.holder != holder:
            return False
        result = await self._locks.update_one(
            {"_id": _document_id(name, current.generation), "holder": holder},
            {"$set": {"lease_until": lease_until}},
        )
        return result.matched_count == 1

    async def release(self, name: str, holder: str, *, now: datetime) -> bool:
        """End ``holder``'s lease on ``name`` at ``now`` (the document stays, naming the last
        holder); ``False`` when ``holder`` did not hold it any more."""
        return await self.renew(name, holder, lease_until=now)
