"""The ``destinations`` collection: one document per owner's destination, unique by
(``username``, ``name``). Header values are sealed with ``SecretBox`` before they are stored;
headers are stored as ``{name, value}`` pairs (a header name may hold ``.``, which a document
key may not). Deleting a destination forgets its last errors (``destination_failures``)."""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr
from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from hookbay_common.clock import utcnow
from hookbay_common.db.client import Collections, Database
from hookbay_common.db.destination_failures import failures_key
from hookbay_common.db.documents import headers_from_document, headers_to_document
from hookbay_common.errors import DestinationAlreadyExists, DestinationNotFound
from hookbay_common.models import Destination
from hookbay_common.secrets_box import SecretBox


class DestinationRepository:
    def __init__(self, db: Database, box: SecretBox) -> None:
        self._destinations = db[Collections.DESTINATIONS]
        self._failures = db[Collections.DESTINATION_FAILURES]
        self._box = box

    def _sealed_headers(self, headers: dict[str, SecretStr]) -> list[dict[str, str]]:
        return headers_to_document(
            {name: self._box.seal(value.get_secret_value()) for name, value in headers.items()}
        )

    def _to_document(self, destination: Destination) -> dict[str, Any]:
        doc = destination.model_dump(mode="python", exclude={"id", "headers"})
        doc["_id"] = destination.id
        doc["headers"] = self._sealed_headers(destination.headers)
        doc["retry_schedule"] = (
            list(destination.retry_schedule) if destination.retry_schedule is not None else None
        )
        return doc

    def _from_document(self, doc: dict[str, Any]) -> Destination:
        doc = dict(doc)
        doc["id"] = doc.pop("_id")
        sealed = headers_from_document(doc.pop("headers", None) or [])
        doc["headers"] = {name: SecretStr(self._box.open(v)) for name, v in sealed.items()}
        return Destination.model_validate(doc)

    async def create(self, destination: Destination) -> Destination:
        """Insert ``destination``; ``DestinationAlreadyExists`` when its owner uses the name."""
        try:
            await self._destinations.insert_one(self._to_document(destination))
        except DuplicateKeyError:
            raise DestinationAlreadyExists(destination.username, destination.name) from None
        return destination

    async def get(self, username: str, name: str) -> Destination | None:
        doc = await self._destinations.find_one({"username": username, "name": name})
        return self._from_document(doc) if doc else None

    async def require(self, username: str, name: str) -> Destination:
        destination = await self.get(username, name)
        if destination is None:
            raise DestinationNotFound(username, name)
        return destination

    async def list_for_owner(self, username: str) -> list[Destination]:
        cursor = self._destinations.find({"username": username}).sort("name", 1)
        return [self._from_document(doc) async for doc in cursor]

    async def list_all(self) -> list[Destination]:
        return [self._from_document(doc) async for doc in self._destinations.find({})]

    async def update(self, username: str, name: str, changes: dict[str, Any]) -> Destination:
        """Set the named fields of ``Destination`` (``headers`` as plaintext ``SecretStr``
        values, sealed here), or single fields of its breaker by their dotted path
        (``breaker.state``: the stored value); ``updated_at`` moves to now."""
        fields = dict(changes)
        if "headers" in fields:
            fields["headers"] = self._sealed_headers(fields["headers"])
        if "rate_limit" in fields and fields["rate_limit"] is not None:
            fields["rate_limit"] = fields["rate_limit"].model_dump(mode="python")
        if "breaker" in fields:
            fields["breaker"] = fields["breaker"].model_dump(mode="python")
        if fields.get("retry_schedule") is not None:
            fields["retry_schedule"] = list(fields["retry_schedule"])
        fields["updated_at"] = utcnow()
        doc = await self._destinations.find_one_and_update(
            {"username": username, "name": name},
            {"$set": fields},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            raise DestinationNotFound(username, name)
        return self._from_document(doc)

    async def delete(self, username: str, name: str) -> None:
        result = await self._destinations.delete_one({"username": username, "name": name})
        if result.deleted_count == 0:
            raise DestinationNotFound(username, name)
        await self._failures.delete_one({"_id": failures_key(username, name)})
