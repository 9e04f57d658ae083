"""The ``webhooks`` collection; secrets (the webhook's ``secret`` and every secret of its
``verification``) are sealed with ``SecretBox`` before they are stored.

A webhook's routes live in its document, in order (``routes``, absent when it has none, so a
document without routes reads as it did before routes existed). A route's ``filter`` is stored
as JSON text: filter documents hold keys that start with ``$`` or contain ``.``, which stored
document keys may not."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import SecretStr
from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from hookbay_common.clock import utcnow
from hookbay_common.db.client import Collections, Database
from hookbay_common.errors import WebhookAlreadyExists, WebhookNotFound
from hookbay_common.models import Route, Webhook, WebhookVerification
from hookbay_common.models.gateway import route_document
from hookbay_common.secrets_box import SecretBox

_UNSET: Any = object()


class WebhookRepository:
    def __init__(self, db: Database, box: SecretBox) -> None:
        self._webhooks = db[Collections.WEBHOOKS]
        self._box = box

    def _to_document(self, webhook: Webhook) -> dict[str, Any]:
        doc = webhook.model_dump(mode="python", exclude={"id", "secret", "verification", "routes"})
        doc["_id"] = webhook.id
        doc["secret"] = self._seal(webhook.secret)
        doc["verification"] = self._seal_verification(webhook.verification)
        if webhook.routes:
            doc["routes"] = routes_to_document(webhook.routes)
        return doc

    def _seal(self, secret: SecretStr | None) -> str | None:
        return self._box.seal(secret.get_secret_value()) if secret else None

    def _seal_verification(self, verification: WebhookVerification | None) -> Any:
        return verification.to_document(self._box.seal) if verification else None

    def _from_document(self, doc: dict[str, Any]) -> Webhook:
        doc = dict(doc)
        doc["id"] = doc.pop("_id")
        sealed = doc.pop("secret", None)
        doc["secret"] = SecretStr(self._box.open(sealed)) if sealed else None
        verification = doc.pop("verification", None)
        doc["verification"] = (
            WebhookVerification.from_document(verification, self._box.open)
            if verification
            else None
        )
        doc["routes"] = routes_from_document(doc.pop("routes", None) or [])
        return Webhook.model_validate(doc)

    async def create(self, webhook: Webhook) -> Webhook:
        """Insert ``webhook``; ``WebhookAlreadyExists`` when its owner already uses the name."""
        try:
            await self._webhooks.insert_one(self._to_document(webhook))
        except DuplicateKeyError:
            raise WebhookAlreadyExists(webhook.username, webhook.name) from None
        return webhook

    async def get(self, username: str, name: str) -> Webhook | None:
        doc = await self._webhooks.find_one({"username": username, "name": name})
        return self._from_document(doc) if doc else None

    async def require(self, username: str, name: str) -> Webhook:
        webhook = await self.get(username, name)
        if webhook is None:
            raise WebhookNotFound(username, name)
        return webhook

    async def get_by_id(self, webhook_id: str) -> Webhook | None:
        doc = await self._webhooks.find_one({"_id": webhook_id})
        return self._from_document(doc) if doc else None

    async def list_for_owner(self, username: str) -> list[Webhook]:
        cursor = self._webhooks.find({"username": username}).sort("name", 1)
        return [self._from_document(doc) async for doc in cursor]

    async def changed_since(self, moment: datetime) -> list[Webhook]:
        cursor = self._webhooks.find({"updated_at": {"$gte": moment}})
        return [self._from_document(doc) async for doc in cursor]

    async def count(self) -> int:
        return await self._webhooks.count_documents({})

    async def ids(self) -> set[str]:
        """Every webhook's id (only ids travel: a cheap check for deletions)."""
        return {doc["_id"] async for doc in self._webhooks.find({}, {"_id": 1})}

    async def list_all(self) -> list[Webhook]:
        return [self._from_document(doc) async for doc in self._webhooks.find({})]

    async def update(
        self,
        username: str,
        name: str,
        *,
        secret: SecretStr | None = _UNSET,
        forward_url: str | None = _UNSET,
        active: bool | None = None,
        verification: WebhookVerification | None = _UNSET,
    ) -> Webhook:
        """Change the named fields; ``None`` for ``secret``/``forward_url``/``verification``
        removes them."""
        changes: dict[str, Any] = {"updated_at": utcnow()}
        if secret is not _UNSET:
            changes["secret"] = self._seal(secret)
        if verification is not _UNSET:
            changes["verification"] = self._seal_verification(verification)
        if forward_url is not _UNSET:
            changes["forward_url"] = forward_url
        if active is not None:
            changes["active"] = active
        doc = await self._webhooks.find_one_and_update(
            {"username": username, "name": name},
            {"$set": changes},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            raise WebhookNotFound(username, name)
        return self._from_document(doc)

    async def replace_routes(
        self, webhook: Webhook, routes: Sequence[Route], *, forward_url: str | None = _UNSET
    ) -> Webhook | None:
        """Store ``routes`` as the routes of ``webhook`` (and its ``forward_url`` when given)
        if the stored webhook is still the one read (its ``updated_at`` unchanged), moving
        ``updated_at`` forward; ``None`` when another write came first (read again and retry).
        ``WebhookNotFound`` when it is gone."""
        read_at = stored_moment(webhook.updated_at)
        moved = max(utcnow(), read_at + timedelta(milliseconds=1))
        change: dict[str, Any] = {"$set": {"updated_at": moved}}
        if forward_url is not _UNSET:
            change["$set"]["forward_url"] = forward_url
        if routes:
            change["$set"]["routes"] = routes_to_document(routes)
        else:
            change["$unset"] = {"routes": ""}
        doc = await self._webhooks.find_one_and_update(
            {"_id": webhook.id, "updated_at": read_at},
            change,
            return_document=ReturnDocument.AFTER,
        )
        if doc is not None:
            return self._from_document(doc)
        if await self._webhooks.find_one({"_id": webhook.id}, {"_id": 1}) is None:
            raise WebhookNotFound(webhook.username, webhook.name)
        return None

    async def delete(self, username: str, name: str) -> None:
        result = await self._webhooks.delete_one({"username": username, "name": name})
        if result.deleted_count == 0:
            raise WebhookNotFound(username, name)


def routes_to_document(routes: Sequence[Route]) -> list[dict[str, Any]]:
    docs = []
    for route in routes:
        doc = route_document(route)
        doc["filter"] = json.dumps(route.filter) if route.filter is not None else None
        docs.append(doc)
    return docs


def routes_from_document(docs: list[dict[str, Any]]) -> list[Route]:
    routes = []
    for doc in docs:
        doc = dict(doc)
        text = doc.get("filter")
        doc["filter"] = json.loads(text) if text is not None else None
        routes.append(Route.model_validate(doc))
    return routes


def stored_moment(moment: datetime) -> datetime:
    """``moment`` as the store keeps it: BSON dates hold whole milliseconds."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
