"""The ``users`` collection; ``_id`` is the username."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from hookbay_common.clock import utcnow
from hookbay_common.db.client import Collections, Database
from hookbay_common.errors import UserAlreadyExists, UserNotFound
from hookbay_common.models import Role, User


def _to_document(user: User) -> dict[str, Any]:
    return {"_id": user.username, **user.model_dump(mode="python")}


def _from_document(doc: dict[str, Any]) -> User:
    doc = dict(doc)
    doc.pop("_id")
    return User.model_validate(doc)


class UserRepository:
    def __init__(self, db: Database) -> None:
        self._users = db[Collections.USERS]

    async def create(self, user: User) -> User:
        """Insert ``user``; ``UserAlreadyExists`` when the username is taken."""
        try:
            await self._users.insert_one(_to_document(user))
        except DuplicateKeyError:
            raise UserAlreadyExists(user.username) from None
        return user

    async def get(self, username: str) -> User | None:
        doc = await self._users.find_one({"_id": username})
        return _from_document(doc) if doc else None

    async def require(self, username: str) -> User:
        user = await self.get(username)
        if user is None:
            raise UserNotFound(username)
        return user

    async def list_all(self) -> list[User]:
        return [_from_document(doc) async for doc in self._users.find({}).sort("_id", 1)]

    async def update(
        self,
        username: str,
        *,
        plan: str | None = None,
        role: Role | None = None,
        password_hash: str | None = None,
    ) -> User:
        changes: dict[str, Any] = {"updated_at": utcnow()}
        if plan is not None:
            changes["plan"] = plan
        if role is not None:
            changes["role"] = role.value
        if password_hash is not None:
            changes["password_hash"] = password_hash
        doc = await self._users.find_one_and_update(
            {"_id": username}, {"$set": changes}, return_document=ReturnDocument.AFTER
        )
        if doc is None:
            raise UserNotFound(username)
        return _from_document(doc)

    async def delete(self, username: str) -> None:
        result = await self._users.delete_one({"_id": username})
        if result.deleted_count == 0:
            raise UserNotFound(username)

    async def count(self) -> int:
        return await self._users.count_documents({})

    async def ids(self) -> set[str]:
        """Every username (only ids travel: a cheap check for deletions)."""
        return {doc["_id"] async for doc in self._users.find({}, {"_id": 1})}

    async def changed_since(self, moment: datetime) -> list[User]:
        cursor = self._users.find({"updated_at": {"$gte": moment}})
        return [_from_document(doc) async for doc in cursor]

    async def plans(self) -> list[tuple[str, str]]:
        """(username, plan) of every user, by username; only those two fields travel."""
        cursor = self._users.find({}, {"_id": 1, "plan": 1}).sort("_id", 1)
        return [(doc["_id"], doc["plan"]) async for doc in cursor]
