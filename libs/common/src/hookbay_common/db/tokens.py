"""The ``api_tokens`` collection: personal API tokens, stored as SHA-256 digests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from hookbay_common.clock import utcnow
from hookbay_common.db.client import Collections, Database
from hookbay_common.errors import TokenNotFound
from hookbay_common.models import ApiToken
from hookbay_common.secrets_box import hash_api_token


def _from_document(doc: dict[str, Any]) -> ApiToken:
    doc = dict(doc)
    doc["id"] = doc.pop("_id")
    return ApiToken.model_validate(doc)


TOUCH_EVERY: Final = timedelta(minutes=1)
"""How stale an API token's ``last_used_at`` may be."""


class TokenRepository:
    def __init__(self, db: Database) -> None:
        self._tokens = db[Collections.API_TOKENS]

    async def create(self, token: ApiToken) -> ApiToken:
        doc = token.model_dump(mode="python", exclude={"id"})
        await self._tokens.insert_one({"_id": token.id, **doc})
        return token

    async def find_by_token(self, token: str) -> ApiToken | None:
        """The token record matching a presented token, and mark it used: ``last_used_at``
        moves at most once per ``TOUCH_EVERY``, so a client polling the API costs a read per
        request, not a write (on the embedded store an update is a look-up plus a rewrite of
        the document and all its index entries)."""
        doc = await self._tokens.find_one({"token_hash": hash_api_token(token)})
        if doc is None:
            return None
        now = utcnow()
        last = doc.get("last_used_at")
        if last is None or now - last >= TOUCH_EVERY:
            await self._tokens.update_one(
                {"_id": doc["_id"]}, {"$set": {"last_used_at": now}}
            )  # fmt: skip
            doc["last_used_at"] = now
        return _from_document(doc)

    async def list_for_owner(self, username: str) -> list[ApiToken]:
        cursor = self._tokens.find({"username": username}).sort("created_at", 1)
        return [_from_document(doc) async for doc in cursor]

    async def delete_for_owner(self, username: str) -> int:
        result = await self._tokens.delete_many({"username": username})
        return result.deleted_count

    async def delete(self, username: str, token_id: str) -> None:
        result = await self._tokens.delete_one({"_id": token_id, "username": username})
        if result.deleted_count == 0:
            raise TokenNotFound(token_id)
