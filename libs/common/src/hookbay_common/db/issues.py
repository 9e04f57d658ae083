"""The ``issues`` collection: one document per owner's problem, unique by (``username``,
``key``). Every query is an equality match on indexed fields (``username`` + ``key``,
``username`` + ``status``, ``_id``), the shapes FerretDB pushes down to its GIN indexes; an
owner's issues are few, so they are ordered here, not by the store."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from hookbay_common.db.client import Collections, Database
from hookbay_common.errors import IssueNotFound
from hookbay_common.models import Issue, IssueStatus


class IssueRepository:
    def __init__(self, db: Database) -> None:
        self._issues = db[Collections.ISSUES]

    @staticmethod
    def _to_document(issue: Issue) -> dict[str, Any]:
        doc = issue.model_dump(mode="python", exclude={"id"})
        doc["_id"] = issue.id
        return doc

    @staticmethod
    def _from_document(doc: dict[str, Any]) -> Issue:
        doc = dict(doc)
        doc["id"] = doc.pop("_id")
        return Issue.model_validate(doc)

    async def insert(self, issue: Issue) -> Issue | None:
        """Insert a new issue; ``None`` when its owner has one with its key already (another
        writer came first: the caller reads that one and updates it)."""
        try:
            await self._issues.insert_one(self._to_document(issue))
        except DuplicateKeyError:
            return None
        return issue

    async def by_key(self, username: str, key: str) -> Issue | None:
        doc = await self._issues.find_one({"username": username, "key": key})
        return self._from_document(doc) if doc else None

    async def get(self, username: str, issue_id: str) -> Issue | None:
        doc = await self._issues.find_one({"_id": issue_id})
        if doc is None or doc.get("username") != username:
            return None
        return self._from_document(doc)

    async def require(self, username: str, issue_id: str) -> Issue:
        issue = await self.get(username, issue_id)
        if issue is None:
            raise IssueNotFound(issue_id)
        return issue

    async def list_for_owner(self, username: str, status: IssueStatus | None = None) -> list[Issue]:
        """Newest occurrence first."""
        query: dict[str, Any] = {"username": username}
        if status is not None:
            query["status"] = status.value
        found = [self._from_document(doc) async for doc in self._issues.find(query)]
        return sorted(found, key=lambda i: (i.last_seen_at, i.id), reverse=True)

    async def change(
        self,
        issue: Issue,
        fields: dict[str, Any],
        *,
        occurrences: int = 0,
    ) -> Issue | None:
        """Set ``fields`` (and add ``occurrences`` to ``count``) if the issue is still in the
        status and at the count it was read with; ``None`` when another writer changed it
        first (the caller reads it again). Only one writer wins each transition, so only one
        notifies."""
        update: dict[str, Any] = {"$set": _stored(fields)}
        if occurrences:
            update["$inc"] = {"count": occurrences}
        doc = await self._issues.find_one_and_update(
            {"_id": issue.id, "status": issue.status.value, "count": issue.count},
            update,
            return_document=ReturnDocument.AFTER,
        )
        return self._from_document(doc) if doc else None

    async def delete_for_owner(self, username: str) -> None:
        await self._issues.delete_many({"username": username})


def _stored(fields: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.value if hasattr(v, "value") and not isinstance(v, datetime) else v
        for k, v in fields.items()
    }
