"""The ``transformations`` collection: one document per owner's transformation, unique by
(``username``, ``name``). Env values are sealed with ``SecretBox`` before they are stored, as a
destination's header values are, and stored as ``{name, value}`` pairs."""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr
from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from hookbay_common.clock import utcnow
from hookbay_common.db.client import Collections, Database
from hookbay_common.db.documents import headers_from_document, headers_to_document
from hookbay_common.errors import TransformationAlreadyExists, TransformationNotFound
from hookbay_common.models import Transformation
from hookbay_common.secrets_box import SecretBox


class TransformationRepository:
    def __init__(self, db: Database, box: SecretBox) -> None:
        self._transformations = db[Collections.TRANSFORMATIONS]
        self._box = box

    def _sealed_env(self, env: dict[str, SecretStr]) -> list[dict[str, str]]:
        return headers_to_document(
            {name: self._box.seal(value.get_secret_value()) for name, value in env.items()}
        )

    def _to_document(self, transformation: Transformation) -> dict[str, Any]:
        doc = transformation.model_dump(mode="python", exclude={"id", "env"})
        doc["_id"] = transformation.id
        doc["env"] = self._sealed_env(transformation.env)
        return doc

    def _from_document(self, doc: dict[str, Any]) -> Transformation:
        doc = dict(doc)
        doc["id"] = doc.pop("_id")
        sealed = headers_from_document(doc.pop("env", None) or [])
        doc["env"] = {name: SecretStr(self._box.open(v)) for name, v in sealed.items()}
        return Transformation.model_validate(doc)

    async def create(self, transformation: Transformation) -> Transformation:
        """Insert ``transformation``; ``TransformationAlreadyExists`` when its owner uses the
        name."""
        try:
            await self._transformations.insert_one(self._to_document(transformation))
        except DuplicateKeyError:
            raise TransformationAlreadyExists(
                transformation.username, transformation.name
            ) from None
        return transformation

    async def get(self, username: str, name: str) -> Transformation | None:
        doc = await self._transformations.find_one({"username": username, "name": name})
        return self._from_document(doc) if doc else None

    async def require(self, username: str, name: str) -> Transformation:
        transformation = await self.get(username, name)
        if transformation is None:
            raise TransformationNotFound(username, name)
        return transformation

    async def list_for_owner(self, username: str) -> list[Transformation]:
        cursor = self._transformations.find({"username": username}).sort("name", 1)
        return [self._from_document(doc) async for doc in cursor]

    async def list_all(self) -> list[Transformation]:
        return [self._from_document(doc) async for doc in self._transformations.find({})]

    async def update(
        self,
        username: str,
        name: str,
        *,
        code: str | None = None,
        env: dict[str, SecretStr] | None = None,
    ) -> Transformation:
        """Set ``code`` and / or ``env`` (plaintext ``SecretStr`` values, sealed here) and move
        ``version`` up by one in the same write, so two changes at once both count;
        ``updated_at`` moves to now."""
        fields: dict[str, Any] = {"updated_at": utcnow()}
        if code is not None:
            fields["code"] = code
        if env is not None:
            fields["env"] = self._sealed_env(env)
        doc = await self._transformations.find_one_and_update(
            {"username": username, "name": name},
            {"$set": fields, "$inc": {"version": 1}},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            raise TransformationNotFound(username, name)
        return self._from_document(doc)

    async def delete(self, username: str, name: str) -> None:
        result = await self._transformations.delete_one({"username": username, "name": name})
        if result.deleted_count == 0:
            raise TransformationNotFound(username, name)
