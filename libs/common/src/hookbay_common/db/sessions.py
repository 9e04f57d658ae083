"""The ``sessions`` collection: dashboard logins, keyed by the SHA-256 of the cookie value."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hookbay_common.db.client import Collections, Database
from hookbay_common.models import Session


def _from_document(doc: dict[str, Any]) -> Session:
    doc = dict(doc)
    doc["id"] = doc.pop("_id")
    return Session.model_validate(doc)


class SessionRepository:
    def __init__(self, db: Database) -> None:
        self._sessions = db[Collections.SESSIONS]

    async def create(self, session: Session) -> Session:
        await self._sessions.insert_one(
            {"_id": session.id, **session.model_dump(mode="python", exclude={"id"})}
        )
        return session

    async def get_active(self, session_id: str, now: datetime) -> Session | None:
        """The session unless it expired (an expired one is deleted on the way)."""
        doc = await self._sessions.find_one({"_id": session_id})
        if doc is None:
            return None
        session = _from_document(doc)
        if session.expires_at <= now:
            await self.delete(session_id)
            return None
        return session

    async def delete(self, session_id: str) -> None:
        await self._sessions.delete_one({"_id": session_id})

    async def delete_for_owner(self, username: str) -> None:
        """End every session of ``username`` (after a password change)."""
        await self._sessions.delete_many({"username": username})

    async def delete_expired(self, now: datetime) -> int:
        """Delete every session that expired by ``now`` (``expires_at <= now``, as
        ``get_active`` judges); how many. One statement; idempotent."""
        result = await self._sessions.delete_many({"expires_at": {"$lte": now}})
        return result.deleted_count

    async def count_expired(self, now: datetime) -> int:
        return await self._sessions.count_documents({"expires_at": {"$lte": now}})
