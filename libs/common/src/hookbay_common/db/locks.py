"""The ``locks`` collection: named leases, one document per lock (``_id`` is the name).

A lock is held by ``holder`` until ``lease_until``; the holder renews the lease while it works and
ends it when it is done. A holder that dies (``kill -9``) leaves its lease behind, and the lock is
free again once the lease lapsed. Lease times are the holders' own clocks, so the clocks of the
machines sharing a lock must agree to well within a lease.

Taking, renewing and ending a lease are each one atomic single-document write, so two processes
never both hold a lock: at most one ``findAndModify`` matches an expired lease, and of two that
both find no document, one inserts it and the other gets a duplicate key error, which means
"held" here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from pymongo import ReturnDocument
from pymongo.errors import CollectionInvalid, DuplicateKeyError, OperationFailure

from hookbay_common.db.client import Collections, Database

_NAMESPACE_EXISTS = 48


class Lease(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    holder: str
    lease_until: datetime
    acquired_at: datetime


def _from_document(doc: dict[str, Any]) -> Lease:
    return Lease.model_validate({**doc, "name": doc["_id"]})


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

    async def acquire(
        self, name: str, holder: str, *, now: datetime, lease_until: datetime
    ) -> Lease | None:
        """Take lock ``name`` for ``holder`` until ``lease_until`` when it is free (never taken,
        or its lease ended before ``now``); ``None`` when someone holds it (``get`` says who).

        One ``findAndModify`` with upsert: it updates a lapsed lease, or inserts the document
        when there is none; when a live lease exists the upsert's insert collides with it, and
        that duplicate key error is the answer "held"."""
        try:
            doc = await self._locks.find_one_and_update(
                {"_id": name, "lease_until": {"$lt": now}},
                {"$set": {"holder": holder, "lease_until": lease_until, "acquired_at": now}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        except DuplicateKeyError:
            return None
        return _from_document(doc) if doc else None

    async def get(self, name: str) -> Lease | None:
        doc = await self._locks.find_one({"_id": name})
        return _from_document(doc) if doc else None

    async def renew(self, name: str, holder: str, *, lease_until: datetime) -> bool:
        """Move ``holder``'s lease on ``name`` to ``lease_until``; ``False`` when ``holder`` no
        longer holds it (its lease lapsed and another holder took the lock)."""
        result = await self._locks.update_one(
            {"_id": name, "holder": holder}, {"$set": {"lease_until": lease_until}}
        )
        return result.matched_count == 1

    async def release(self, name: str, holder: str, *, now: datetime) -> bool:
        """End ``holder``'s lease on ``name`` at ``now`` (the document stays, naming the last
        holder); ``False`` when ``holder`` did not hold it any more."""
        return await self.renew(name, holder, lease_until=now)
